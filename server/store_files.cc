// Reading and writing the MANIFEST and server-<id>.regions files (server/store_files.h): protobuf text format,
// version 1, and the unversioned "key value" lines of earlier data directories.
#include "server/store_files.h"

#include <fmt/format.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <initializer_list>
#include <map>
#include <sstream>

namespace cell::server {

namespace {

// Keeps the text-format parser's first complaint for the error we return (instead of protobuf's log on stderr).
class FirstParseError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (text_.empty()) text_ = fmt::format("line {}, column {}: {}", line + 1, column + 1, message);
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// The files' first format was "key value" lines; text format puts a ':' after every scalar field's name, so a file
// without one is in the old format.
bool IsUnversionedLines(std::string_view text) { return text.find(':') == std::string_view::npos; }

// Parses the unversioned "key value" lines (values unsigned integers) that name every one of `keys`.
StatusOr<std::map<std::string, uint64_t>> ParseUnversionedLines(std::string_view text, const std::string& path,
                                                                std::initializer_list<const char*> keys) {
  std::map<std::string, uint64_t> out;
  std::istringstream in{std::string(text)};
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) out[key] = value;
  for (const char* k : keys) {
    if (!out.contains(k)) return Status::Corruption(fmt::format("{} has no {}: '{}'", path, k, text));
  }
  return out;
}

// Parses text format into a Message with a `version` field, refusing a version other than kStoreFilesVersion.
template <typename Message>
StatusOr<Message> ParseVersionedText(std::string_view text, const std::string& path) {
  const std::string input(text);
  Message message;
  // First for the version alone, leniently: a later version's fields are unknown here, and the version is what
  // the reader must be told about.
  google::protobuf::TextFormat::Parser lenient;
  lenient.AllowUnknownField(true);
  FirstParseError ignored;
  lenient.RecordErrorsTo(&ignored);
  if (lenient.ParseFromString(input, &message) && message.version() != kStoreFilesVersion) {
    return Status::FailedPrecondition(
        fmt::format("{} is in version {} of its format, which this server does not read (it reads version {}, and "
                    "the unversioned lines before it): written by another release of Cell?",
                    path, message.version(), kStoreFilesVersion));
  }
  message.Clear();
  google::protobuf::TextFormat::Parser strict;
  FirstParseError error;
  strict.RecordErrorsTo(&error);
  if (!strict.ParseFromString(input, &message)) {
    return Status::Corruption(
        fmt::format("{} is not a valid {} ({}): '{}'", path, Message::descriptor()->name(), error.text(), text));
  }
  return message;
}

std::string PrintText(const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(message, &text);  // fails only for a message missing required fields
  return text;
}

}  // namespace

std::string ManifestPath(const std::string& log_dir) { return log_dir + "/MANIFEST"; }

std::string FormatManifest(const disk::Manifest& manifest) {
  disk::Manifest versioned = manifest;
  versioned.set_version(kStoreFilesVersion);
  return PrintText(versioned);
}

StatusOr<disk::Manifest> ParseManifest(std::string_view text, const std::string& path) {
  disk::Manifest manifest;
  if (IsUnversionedLines(text)) {
    CELL_ASSIGN_OR_RETURN(const auto lines, ParseUnversionedLines(text, path,
                                                                  {"node_region", "extent_region", "meganode_bytes",
                                                                   "meganodes", "extent_region_bytes", "root"}));
    manifest.set_node_region(static_cast<uint32_t>(lines.at("node_region")));
    manifest.set_extent_region(static_cast<uint32_t>(lines.at("extent_region")));
    manifest.set_meganode_bytes(lines.at("meganode_bytes"));
    manifest.set_meganodes(static_cast<uint32_t>(lines.at("meganodes")));
    manifest.set_extent_region_bytes(lines.at("extent_region_bytes"));
    manifest.set_root(lines.at("root") != 0);
    return manifest;
  }
  CELL_ASSIGN_OR_RETURN(manifest, ParseVersionedText<disk::Manifest>(text, path));
  // proto3 cannot tell a field left out from a zero; none of these can be zero.
  const std::pair<const char*, uint64_t> required[] = {{"node_region", manifest.node_region()},
                                                       {"extent_region", manifest.extent_region()},
                                                       {"meganode_bytes", manifest.meganode_bytes()},
                                                       {"meganodes", manifest.meganodes()},
                                                       {"extent_region_bytes", manifest.extent_region_bytes()}};
  for (const auto& [name, value] : required) {
    if (value == 0) return Status::Corruption(fmt::format("{} has no {}: '{}'", path, name, text));
  }
  return manifest;
}

bool SameShape(const disk::Manifest& a, const disk::Manifest& b) {
  return a.node_region() == b.node_region() && a.extent_region() == b.extent_region() &&
         a.meganode_bytes() == b.meganode_bytes() && a.meganodes() == b.meganodes() &&
         a.extent_region_bytes() == b.extent_region_bytes() && a.root() == b.root();
}

std::string RegionsFilePath(const std::string& data_dir, uint64_t server_id) {
  return fmt::format("{}/server-{}.regions", data_dir, server_id);
}

std::string FormatRecordedRegions(uint32_t node_region, uint32_t extent_region) {
  disk::RecordedRegions regions;
  regions.set_version(kStoreFilesVersion);
  regions.set_node_region(node_region);
  regions.set_extent_region(extent_region);
  return PrintText(regions);
}

StatusOr<disk::RecordedRegions> ParseRecordedRegions(std::string_view text, const std::string& path) {
  disk::RecordedRegions regions;
  if (IsUnversionedLines(text)) {  // "node N\nextent M\n"
    CELL_ASSIGN_OR_RETURN(const auto lines, ParseUnversionedLines(text, path, {"node", "extent"}));
    regions.set_node_region(static_cast<uint32_t>(lines.at("node")));
    regions.set_extent_region(static_cast<uint32_t>(lines.at("extent")));
  } else {
    CELL_ASSIGN_OR_RETURN(regions, ParseVersionedText<disk::RecordedRegions>(text, path));
  }
  if (regions.node_region() == 0 || regions.extent_region() == 0) {
    return Status::Corruption(fmt::format("{} does not name two regions: '{}'", path, text));
  }
  return regions;
}

}  // namespace cell::server
