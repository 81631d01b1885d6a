// Region checkpoints (see checkpoint.h).
#include "logging/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "logging/crc32c.h"

namespace cell::logging {
namespace {

constexpr std::string_view kHeaderMagic = "CELLCKP1";
constexpr std::string_view kTrailerMagic = "CELLEND1";
constexpr size_t kHeaderSize = 8 + 8 + 8 + 4 + 4;
constexpr size_t kTrailerSize = 8 + 4;
constexpr std::string_view kPrefix = "checkpoint-";
constexpr std::string_view kSuffix = ".img";

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
template <typename T>
T Get(std::string_view bytes, size_t at) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
  return v;
}

// Reads exactly n bytes (Corruption if the file ends first).
Status ReadExactly(SequentialFile* file, const std::string& path, uint64_t offset, size_t n, std::string* out) {
  out->resize(n);
  CELL_ASSIGN_OR_RETURN(const size_t got, file->Read(n, out->data()));
  if (got != n) {
    return Status::Corruption(fmt::format("checkpoint {} ends at offset {}, inside what should be {} bytes", path,
                                          offset + got, n));
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
    if (name.size() != kPrefix.size() + 16 + kSuffix.size() || !name.starts_with(kPrefix) ||
        !name.ends_with(kSuffix)) {
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

Status WriteCheckpoint(const std::string& dir, uint64_t lsn, uint64_t size, const RegionReadFn& read, Env* env,
                       uint32_t chunk, const std::function<Status()>& before_rename) {
  if (chunk == 0) return Status::InvalidArgument("checkpoint chunks must be at least 1 byte");
  const std::string path = CheckpointPath(dir, lsn), tmp = path + ".tmp";
  CELL_RETURN_IF_ERROR(env->CreateDirs(dir));
  CELL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(tmp));
  std::string header(kHeaderMagic);
  PutU64(&header, lsn);
  PutU64(&header, size);
  PutU32(&header, chunk);
  const uint32_t header_crc = crc32c::Mask(crc32c::Value(header));
  PutU32(&header, header_crc);
  CELL_RETURN_IF_ERROR(file->Append(header));
  std::string crcs;  // every crc so far, for the trailer's
  PutU32(&crcs, header_crc);
  std::string buffer;
  for (uint64_t offset = 0; offset < size; offset += chunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, size - offset));
    buffer.resize(n);
    CELL_RETURN_IF_ERROR(read(offset, n, buffer.data()));
    const uint32_t crc = crc32c::Mask(crc32c::Value(buffer));
    PutU32(&buffer, crc);
    PutU32(&crcs, crc);
    CELL_RETURN_IF_ERROR(file->Append(buffer));
  }
  std::string trailer(kTrailerMagic);
  PutU32(&trailer, crc32c::Mask(crc32c::Value(crcs)));
  CELL_RETURN_IF_ERROR(file->Append(trailer));
  CELL_RETURN_IF_ERROR(file->Sync());
  CELL_RETURN_IF_ERROR(file->Close());
  if (before_rename) CELL_RETURN_IF_ERROR(before_rename());
  CELL_RETURN_IF_ERROR(env->RenameFile(tmp, path));
  return env->SyncDir(dir);
}

Status LoadCheckpoint(const std::string& dir, uint64_t lsn, uint64_t size, const RegionWriteFn& write, Env* env) {
  const std::string path = CheckpointPath(dir, lsn);
  CELL_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, env->NewSequentialFile(path));
  std::string header;
  CELL_RETURN_IF_ERROR(ReadExactly(file.get(), path, 0, kHeaderSize, &header));
  const uint32_t header_crc = Get<uint32_t>(header, kHeaderSize - 4);
  if (header.substr(0, 8) != kHeaderMagic ||
      crc32c::Unmask(header_crc) != crc32c::Value(std::string_view(header).substr(0, kHeaderSize - 4))) {
    return Status::Corruption(fmt::format("checkpoint {}: its header fails its check", path));
  }
  const uint64_t file_lsn = Get<uint64_t>(header, 8), file_size = Get<uint64_t>(header, 16);
  const uint32_t chunk = Get<uint32_t>(header, 24);
  if (file_lsn != lsn || file_size != size || chunk == 0) {
    return Status::Corruption(fmt::format(
        "checkpoint {} holds lsn {} of a {}-byte region in {}-byte chunks; lsn {} of a {}-byte region was expected",
        path, file_lsn, file_size, chunk, lsn, size));
  }
  std::string crcs;
  PutU32(&crcs, header_crc);
  std::string buffer;
  uint64_t at = kHeaderSize;
  for (uint64_t offset = 0; offset < size; offset += chunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, size - offset));
    CELL_RETURN_IF_ERROR(ReadExactly(file.get(), path, at, n + 4, &buffer));
    const uint32_t crc = Get<uint32_t>(buffer, n);
    const std::string_view bytes = std::string_view(buffer).substr(0, n);
    if (crc32c::Unmask(crc) != crc32c::Value(bytes)) {
      return Status::Corruption(fmt::format("checkpoint {}: the chunk of region offset {} (file offset {}) fails its "
                                            "check",
                                            path, offset, at));
    }
    CELL_RETURN_IF_ERROR(write(offset, bytes));
    PutU32(&crcs, crc);
    at += n + 4;
  }
  std::string trailer;
  CELL_RETURN_IF_ERROR(ReadExactly(file.get(), path, at, kTrailerSize, &trailer));
  if (trailer.substr(0, 8) != kTrailerMagic ||
      crc32c::Unmask(Get<uint32_t>(trailer, 8)) != crc32c::Value(crcs)) {
    return Status::Corruption(fmt::format("checkpoint {}: its trailer fails its check", path));
  }
  char extra;
  CELL_ASSIGN_OR_RETURN(const size_t more, file->Read(1, &extra));
  if (more != 0) return Status::Corruption(fmt::format("checkpoint {}: bytes after its trailer", path));
  return Status::OK();
}

StatusOr<uint64_t> TakeCheckpoint(const std::string& dir, RegionLog* log, uint64_t size, const RegionReadFn& read,
                                  Env* env) {
  const uint64_t lsn = log->appended_lsn();
  // The log is made durable through everything appended by the end of the copy before the checkpoint takes its
  // name: the copy may hold those writes, and a log ending below the checkpoint after a power loss would also
  // leave a gap before the next record appended (numbered after the checkpoint).
  CELL_RETURN_IF_ERROR(WriteCheckpoint(dir, lsn, size, read, env, 1u << 20, [log] { return log->Flush(); }));
  CELL_ASSIGN_OR_RETURN(const std::vector<uint64_t> kept, ListCheckpoints(dir, env));
  for (size_t i = 0; i + 2 < kept.size(); ++i) CELL_RETURN_IF_ERROR(env->RemoveFile(CheckpointPath(dir, kept[i])));
  // The log is kept back to the older of the two: if the newer fails its checks, the older and the log rebuild it.
  const uint64_t oldest_kept = kept.size() >= 2 ? kept[kept.size() - 2] : kept.back();
  CELL_RETURN_IF_ERROR(RegionLog::RemoveFilesBefore(dir, oldest_kept, env));
  return lsn;
}

StatusOr<RegionRecovery> RecoverRegion(const std::string& dir, uint64_t size, const RegionWriteFn& write,
                                       const std::function<Status(uint64_t, const LogRecord&)>& apply, Env* env) {
  RegionRecovery out;
  CELL_ASSIGN_OR_RETURN(const std::vector<uint64_t> checkpoints, ListCheckpoints(dir, env));
  bool loaded = false;
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend() && !loaded; ++it) {
    if (Status s = LoadCheckpoint(dir, *it, size, write, env); s.ok()) {
      out.checkpoint_lsn = *it;
      loaded = true;
    } else if (s.IsCorruption()) {
      // Set aside (kept for inspection, no longer counted among the two newest), so that pruning keeps a good one.
      LogError("region {}: {}; set aside as .bad, trying an older checkpoint", dir, s.ToString());
      out.problems.push_back(s.message());
      CELL_RETURN_IF_ERROR(env->RenameFile(CheckpointPath(dir, *it), CheckpointPath(dir, *it) + ".bad"));
    } else {
      return s;  // could not be read (an I/O error): nothing is known to be damaged
    }
  }
  if (!loaded) {
    // From zeros, as the region began (a load that failed part way may have written some chunks).
    const std::string zeros(std::min<uint64_t>(size, 1u << 20), '\0');
    for (uint64_t offset = 0; offset < size; offset += zeros.size()) {
      CELL_RETURN_IF_ERROR(write(offset, std::string_view(zeros).substr(0, std::min<uint64_t>(zeros.size(), size - offset))));
    }
  }
  auto replay = RegionLog::Recover(dir, out.checkpoint_lsn, apply, env);
  if (!replay.ok()) {
    if (out.problems.empty()) return replay.status();
    return Status::FromCode(replay.status().code(),
                            fmt::format("{} (checkpoints set aside: {})", replay.status().message(),
                                        fmt::join(out.problems, "; ")));
  }
  out.replay = *replay;
  return out;
}

}  // namespace cell::logging
