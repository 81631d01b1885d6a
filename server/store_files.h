// The small files a store keeps in its data directory beside its logs (docs/DESIGN.md, "Durability"):
//   <log dir>/MANIFEST                the shape of a node region's regions (disk::Manifest);
//   <data_dir>/server-<id>.regions    the node and extent regions a server made (disk::RecordedRegions).
// Both are written as protobuf text format (server/proto/manifest.proto), version 1, so that an operator can read
// them. Reading accepts version 1, and the "key value" lines that servers wrote before the files had versions (every
// data directory made until then holds them); a version this code does not know, or a file it cannot parse, is
// refused with an error naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cell/status.h"
#include "server/proto/manifest.pb.h"

namespace cell::server {

// The version these files are written in, and the only one (besides the unversioned lines before it) read.
inline constexpr uint32_t kStoreFilesVersion = 1;

// <log dir>/MANIFEST.
std::string ManifestPath(const std::string& log_dir);
// The MANIFEST's text (version kStoreFilesVersion).
std::string FormatManifest(const disk::Manifest& manifest);
// Reads a MANIFEST's text (either format); `path` names the file in errors.
StatusOr<disk::Manifest> ParseManifest(std::string_view text, const std::string& path);
// Whether two manifests describe regions of the same shape (every field but the version).
bool SameShape(const disk::Manifest& a, const disk::Manifest& b);

// <data_dir>/server-<id>.regions.
std::string RegionsFilePath(const std::string& data_dir, uint64_t server_id);
// The regions file's text (version kStoreFilesVersion).
std::string FormatRecordedRegions(uint32_t node_region, uint32_t extent_region);
// Reads a regions file's text (either format; both regions nonzero); `path` names the file in errors.
StatusOr<disk::RecordedRegions> ParseRecordedRegions(std::string_view text, const std::string& path);

}  // namespace cell::server
