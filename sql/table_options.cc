// Parsing the module arguments of a Cell table (sql/table_options.h).
#include "sql/table_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "cell/tuple.h"

namespace cell::sql {

namespace {

constexpr const char* kOptions = "cluster, schema, key_file, prefix, index, search";

std::string Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// A value without its quotes ('a''b' -> a'b), or bare. InvalidArgument for an unterminated quote.
StatusOr<std::string> Unquote(const std::string& option, const std::string& raw) {
  if (raw.empty() || (raw[0] != '\'' && raw[0] != '"')) return raw;
  const char q = raw[0];
  std::string out;
  for (size_t i = 1; i < raw.size(); ++i) {
    if (raw[i] != q) {
      out += raw[i];
    } else if (i + 1 < raw.size() && raw[i + 1] == q) {
      out += q;
      ++i;
    } else if (i + 1 == raw.size()) {
      return out;
    } else {
      break;
    }
  }
  return Status::InvalidArgument(fmt::format("option {}: the value {} is not one quoted string", option, raw));
}

Status AddIndex(const std::string& value, TableOptions* options) {
  const int column = options->schema.Find(value);
  if (column < 0) {
    return Status::InvalidArgument(fmt::format("index='{}' names no column of the schema", value));
  }
  if (column == options->schema.primary_key) {
    return Status::InvalidArgument(fmt::format("index='{}': {} is the PRIMARY KEY, which needs no index", value,
                                               options->schema.columns[column].name));
  }
  if (std::find(options->indexes.begin(), options->indexes.end(), column) != options->indexes.end()) {
    return Status::InvalidArgument(fmt::format("index='{}' is given twice", value));
  }
  options->indexes.push_back(column);
  return Status::OK();
}

}  // namespace

StatusOr<TableOptions> ParseTableOptions(const std::string& table_name, const std::vector<std::string>& args) {
  TableOptions options;
  std::set<std::string> seen;
  std::vector<std::string> indexes;
  bool have_schema = false;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    std::string name = Trim(std::string_view(arg).substr(0, eq == std::string::npos ? arg.size() : eq));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    if (eq == std::string::npos) {
      return Status::InvalidArgument(
          fmt::format("'{}' is not an option=value pair (options: {})", Trim(arg), kOptions));
    }
    CELL_ASSIGN_OR_RETURN(std::string value, Unquote(name, Trim(std::string_view(arg).substr(eq + 1))));
    if (name != "index" && !seen.insert(name).second) {
      return Status::InvalidArgument(fmt::format("option {} is given twice", name));
    }
    if (name == "cluster") {
      options.cluster = value;
    } else if (name == "key_file") {
      options.key_file = value;
    } else if (name == "prefix") {
      options.prefix = value;
    } else if (name == "index") {
      indexes.push_back(value);
    } else if (name == "search") {
      if (value != "adaptive" && value != "server" && value != "client" && value != "dex" &&
          value.rfind("fixed:", 0) != 0) {
        return Status::InvalidArgument(fmt::format(
            "search '{}' is not one of adaptive, server, client, dex, fixed:<fraction searched on the server>", value));
      }
      options.search = value;
    } else if (name == "schema") {
      CELL_ASSIGN_OR_RETURN(options.schema, ParseSchema(value));
      have_schema = true;
    } else {
      return Status::InvalidArgument(fmt::format("unknown option '{}' (options: {})", name, kOptions));
    }
  }
  if (options.cluster.empty()) {
    return Status::InvalidArgument("no cluster: add cluster='zk://host:2181/cell/name' (or 'tcp://host:port')");
  }
  if (!have_schema) return Status::InvalidArgument("no schema: add schema='id INTEGER PRIMARY KEY, name TEXT, ...'");
  if (options.prefix.empty()) options.prefix = table_name;
  if (const size_t packed = Pack(Tuple().AddText(options.prefix)).size(); packed > kMaxPrefixBytes) {
    return Status::InvalidArgument(
        fmt::format("prefix is {} bytes as a tuple; at most {} (keys are at most 255 bytes)", packed, kMaxPrefixBytes));
  }
  for (const std::string& index : indexes) CELL_RETURN_IF_ERROR(AddIndex(index, &options));
  return options;
}

}  // namespace cell::sql
