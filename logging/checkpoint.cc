// Region checkpoints (see checkpoint.h).
#include "logging/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "common/diagnostics.h"
#include "common/little_endian.h"
#include "logging/crc32c.h"

namespace cell::logging {
namespace {

constexpr std::string_view kHeaderMagic = "CELLCKP2";
constexpr std::string_view kTrailerMagic = "CELLEND2";
constexpr size_t kHeaderFixed = 8 + 8 + 4 + 4;  // before the region list
constexpr size_t kRegionEntry = 4 + 8;
constexpr uint32_t kMaxRegions = 1024;
constexpr size_t kTrailerSize = 8 + 4;
constexpr std::string_view kPrefix = "checkpoint-";
constexpr std::string_view kSuffix = ".img";

// Reads exactly n bytes (Corruption if the file ends first).
Status ReadExactly(SequentialFile* file, const std::string& path, uint64_t offset, size_t n, std::string* out) {
  out->resize(n);
  CELL_ASSIGN_OR_RETURN(const size_t got, file->Read(n, out->data()));
  if (got != n) {
    return Status::Corruption(
        fmt::format("checkpoint {} ends at offset {}, inside what should be {} bytes", path, offset + got, n));
  }
  return Status::OK();
}

}  // namespace

std::string CheckpointPath(const std::string& dir, uint64_t lsn) {
  return fmt::format("{}/{}{:016x}{}", dir, kPrefix, lsn, kSuffix);
}

StatusOr<std::vector<uint64_t>> ListCheckpoints(const std::string& dir, Env* env) {
  std::vector<uint64_t> lsns;
  if (!env->FileExists(dir)) return lsns;
  CELL_ASSIGN_OR_RETURN(const std::vector<std::string> names, env->GetChildren(dir));
  for (const std::string& name : names) {
    if (name.size() != kPrefix.size() + 16 + kSuffix.size() || !name.starts_with(kPrefix) || !name.ends_with(kSuffix)) {
      continue;
    }
    const std::string digits = name.substr(kPrefix.size(), 16);
    char* end = nullptr;
    const uint64_t lsn = std::strtoull(digits.c_str(), &end, 16);
    if (end == digits.c_str() + digits.size()) lsns.push_back(lsn);
  }
  std::sort(lsns.begin(), lsns.end());
  return lsns;
}

namespace {
bool AllZero(const char* p, size_t n) {
  static const char kZeros[4096] = {};
  for (size_t at = 0; at < n; at += sizeof(kZeros)) {
    const size_t len = std::min(sizeof(kZeros), n - at);
    if (std::memcmp(p + at, kZeros, len) != 0) return false;
  }
  return true;
}
}  // namespace

Status WriteCheckpoint(const std::string& dir, uint64_t lsn, const std::vector<CheckpointRegion>& regions, Env* env,
                       uint32_t chunk, const std::function<Status()>& before_rename) {
  if (chunk == 0) return Status::InvalidArgument("checkpoint chunks must be at least 1 byte");
  if (regions.empty() || regions.size() > kMaxRegions) {
    return Status::InvalidArgument(
        fmt::format("a checkpoint holds 1 to {} regions, not {}", kMaxRegions, regions.size()));
  }
  const std::string path = CheckpointPath(dir, lsn), tmp = path + ".tmp";
  CELL_RETURN_IF_ERROR(env->CreateDirs(dir));
  CELL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(tmp));
  std::string header(kHeaderMagic);
  PutFixed64(&header, lsn);
  PutFixed32(&header, chunk);
  PutFixed32(&header, static_cast<uint32_t>(regions.size()));
  for (const CheckpointRegion& r : regions) {
    PutFixed32(&header, r.id);
    PutFixed64(&header, r.size);
  }
  const uint32_t header_crc = crc32c::Mask(crc32c::Value(header));
  PutFixed32(&header, header_crc);
  CELL_RETURN_IF_ERROR(file->Append(header));
  std::string crcs;  // every crc so far, for the trailer's
  PutFixed32(&crcs, header_crc);
  std::string buffer;
  for (const CheckpointRegion& r : regions) {
    for (uint64_t offset = 0; offset < r.size; offset += chunk) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, r.size - offset));
      uint32_t stored = 0;
      if (!r.hole || !r.hole(offset, n)) {
        buffer.resize(4 + n);
        CELL_RETURN_IF_ERROR(r.read(offset, n, buffer.data() + 4));
        stored = AllZero(buffer.data() + 4, n) ? 0 : static_cast<uint32_t>(n);
      }
      buffer.resize(4 + stored);
      EncodeFixed32(buffer.data(), stored);
      const uint32_t crc = crc32c::Mask(crc32c::Value(buffer));
      PutFixed32(&buffer, crc);
      PutFixed32(&crcs, crc);
      CELL_RETURN_IF_ERROR(file->Append(buffer));
    }
  }
  std::string trailer(kTrailerMagic);
  PutFixed32(&trailer, crc32c::Mask(crc32c::Value(crcs)));
  CELL_RETURN_IF_ERROR(file->Append(trailer));
  CELL_RETURN_IF_ERROR(file->Sync());
  CELL_RETURN_IF_ERROR(file->Close());
  if (before_rename) CELL_RETURN_IF_ERROR(before_rename());
  CELL_RETURN_IF_ERROR(env->RenameFile(tmp, path));
  return env->SyncDir(dir);
}

Status LoadCheckpoint(const std::string& dir, uint64_t lsn, const std::vector<CheckpointRegion>& regions, bool zero,
                      Env* env) {
  const std::string path = CheckpointPath(dir, lsn);
  CELL_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, env->NewSequentialFile(path));
  std::string header;
  CELL_RETURN_IF_ERROR(ReadExactly(file.get(), path, 0, kHeaderFixed, &header));
  if (header.substr(0, 8) != kHeaderMagic) {
    return Status::Corruption(fmt::format("checkpoint {}: not a checkpoint (its header's magic is wrong)", path));
  }
  const uint64_t file_lsn = DecodeFixed64(header.data() + 8);
  const uint32_t chunk = DecodeFixed32(header.data() + 16), count = DecodeFixed32(header.data() + 20);
  if (count == 0 || count > kMaxRegions) {
    return Status::Corruption(fmt::format("checkpoint {}: its header counts {} regions", path, count));
  }
  std::string list;
  CELL_RETURN_IF_ERROR(ReadExactly(file.get(), path, kHeaderFixed, count * kRegionEntry + 4, &list));
  header += list;
  const size_t header_size = header.size();
  const uint32_t header_crc = DecodeFixed32(header.data() + header_size - 4);
  if (crc32c::Unmask(header_crc) != crc32c::Value(std::string_view(header).substr(0, header_size - 4))) {
    return Status::Corruption(fmt::format("checkpoint {}: its header fails its check", path));
  }
  std::string expected, found;
  for (const CheckpointRegion& r : regions) expected += fmt::format(" {}:{}B", r.id, r.size);
  for (uint32_t i = 0; i < count; ++i) {
    found += fmt::format(" {}:{}B", DecodeFixed32(header.data() + kHeaderFixed + i * kRegionEntry),
                         DecodeFixed64(header.data() + kHeaderFixed + i * kRegionEntry + 4));
  }
  if (file_lsn != lsn || chunk == 0 || expected != found) {
    return Status::Corruption(
        fmt::format("checkpoint {} holds lsn {} of regions{} in {}-byte chunks; lsn {} of regions{} was expected", path,
                    file_lsn, found, chunk, lsn, expected));
  }
  std::string crcs;
  PutFixed32(&crcs, header_crc);
  std::string buffer;
  const std::string zeros(zero ? 0 : chunk, '\0');
  uint64_t at = header_size;
  for (const CheckpointRegion& r : regions) {
    for (uint64_t offset = 0; offset < r.size; offset += chunk) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, r.size - offset));
      CELL_RETURN_IF_ERROR(ReadExactly(file.get(), path, at, 4, &buffer));
      const uint32_t stored = DecodeFixed32(buffer.data());
      if (stored != 0 && stored != n) {
        return Status::Corruption(
            fmt::format("checkpoint {}: the chunk of region {} offset {} (file offset {}) "
                        "says it holds {} bytes, not 0 or {}",
                        path, r.id, offset, at, stored, n));
      }
      std::string rest;
      CELL_RETURN_IF_ERROR(ReadExactly(file.get(), path, at + 4, stored + 4, &rest));
      buffer.append(rest, 0, stored);
      const uint32_t crc = DecodeFixed32(rest.data() + stored);
      if (crc32c::Unmask(crc) != crc32c::Value(buffer)) {
        return Status::Corruption(
            fmt::format("checkpoint {}: the chunk of region {} offset {} (file offset {}) fails "
                        "its check",
                        path, r.id, offset, at));
      }
      if (stored != 0) {
        CELL_RETURN_IF_ERROR(r.write(offset, std::string_view(buffer).substr(4)));
      } else if (!zero) {
        CELL_RETURN_IF_ERROR(r.write(offset, std::string_view(zeros).substr(0, n)));
      }
      PutFixed32(&crcs, crc);
      at += 4 + stored + 4;
    }
  }
  std::string trailer;
  CELL_RETURN_IF_ERROR(ReadExactly(file.get(), path, at, kTrailerSize, &trailer));
  if (trailer.substr(0, 8) != kTrailerMagic ||
      crc32c::Unmask(DecodeFixed32(trailer.data() + 8)) != crc32c::Value(crcs)) {
    return Status::Corruption(fmt::format("checkpoint {}: its trailer fails its check", path));
  }
  char extra;
  CELL_ASSIGN_OR_RETURN(const size_t more, file->Read(1, &extra));
  if (more != 0) return Status::Corruption(fmt::format("checkpoint {}: bytes after its trailer", path));
  return Status::OK();
}

StatusOr<uint64_t> TakeCheckpoint(const std::string& dir, RegionLog* log, const std::vector<CheckpointRegion>& regions,
                                  Env* env) {
  const uint64_t lsn = log->appended_lsn();
  // The log is made durable through everything appended by the end of the copy before the checkpoint takes its
  // name: the copy may hold those writes, and a log ending below the checkpoint after a power loss would also
  // leave a gap before the next record appended (numbered after the checkpoint).
  CELL_RETURN_IF_ERROR(WriteCheckpoint(dir, lsn, regions, env, 1u << 20, [log] { return log->Flush(); }));
  CELL_ASSIGN_OR_RETURN(const std::vector<uint64_t> kept, ListCheckpoints(dir, env));
  for (size_t i = 0; i + 2 < kept.size(); ++i) CELL_RETURN_IF_ERROR(env->RemoveFile(CheckpointPath(dir, kept[i])));
  // The log is kept back to the older of the two: if the newer fails its checks, the older and the log rebuild it.
  const uint64_t oldest_kept = kept.size() >= 2 ? kept[kept.size() - 2] : kept.back();
  CELL_RETURN_IF_ERROR(RegionLog::RemoveFilesBefore(dir, oldest_kept, env));
  return lsn;
}

StatusOr<Recovery> Recover(const std::string& dir, const std::vector<CheckpointRegion>& regions,
                           const std::function<Status(uint64_t, const LogRecord&)>& apply, Env* env, RecoverMode mode) {
  Recovery out;
  const bool repair = mode == RecoverMode::kRepair;
  if (repair && env->FileExists(dir)) {
    // A checkpoint a crash interrupted never took its name: its .tmp is garbage (as big as the regions).
    CELL_ASSIGN_OR_RETURN(const std::vector<std::string> names, env->GetChildren(dir));
    for (const std::string& name : names) {
      if (name.starts_with(kPrefix) && name.ends_with(std::string(kSuffix) + ".tmp")) {
        CELL_RETURN_IF_ERROR(env->RemoveFile(dir + "/" + name));
      }
    }
  }
  CELL_ASSIGN_OR_RETURN(const std::vector<uint64_t> checkpoints, ListCheckpoints(dir, env));
  bool loaded = false, zero = true;
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend() && !loaded; ++it) {
    if (Status s = LoadCheckpoint(dir, *it, regions, zero, env); s.ok()) {
      out.checkpoint_lsn = *it;
      loaded = true;
    } else if (s.IsCorruption()) {
      // Set aside (kept for inspection, no longer counted among the two newest), so that pruning keeps a good one.
      diag::Error("log {}: {}; {}trying an older checkpoint", dir, s.ToString(), repair ? "set aside as .bad, " : "");
      out.problems.push_back(s.message());
      zero = false;  // the failed load may have written some chunks
      if (repair) CELL_RETURN_IF_ERROR(env->RenameFile(CheckpointPath(dir, *it), CheckpointPath(dir, *it) + ".bad"));
    } else {
      return s;  // could not be read (an I/O error): nothing is known to be damaged
    }
  }
  if (!loaded && !zero) {
    // From zeros, as the regions began (a load that failed part way may have written some chunks).
    for (const CheckpointRegion& r : regions) {
      const std::string zeros(std::min<uint64_t>(r.size, 1u << 20), '\0');
      for (uint64_t offset = 0; offset < r.size; offset += zeros.size()) {
        CELL_RETURN_IF_ERROR(
            r.write(offset, std::string_view(zeros).substr(0, std::min<uint64_t>(zeros.size(), r.size - offset))));
      }
    }
  }
  auto replay = RegionLog::Recover(dir, out.checkpoint_lsn, apply, env, mode);
  if (!replay.ok()) {
    if (out.problems.empty()) return replay.status();
    return Status::FromCode(
        replay.status().code(),
        fmt::format("{} (checkpoints set aside: {})", replay.status().message(), fmt::join(out.problems, "; ")));
  }
  out.replay = *replay;
  return out;
}

}  // namespace cell::logging
