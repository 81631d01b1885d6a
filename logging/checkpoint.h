// Region checkpoints: an image of a region's bytes that holds every log record at or below its lsn, so that
// recovery loads it and replays only the records after it, and the log files before it can be removed.
//
// The image may be fuzzy (copied while writes go on): the server logs each write after making it, and takes the
// checkpoint's lsn before it starts copying, so every write the copy may have missed or torn has a record above
// that lsn, and replaying them over the image makes it exact.
//
// File: checkpoint-<lsn, 16 hex digits>.img in the region's log directory, little-endian:
//   header   "CELLCKP1" | lsn: u64 | size: u64 | chunk: u32 | crc: u32 (masked CRC32C of the 28 bytes before it)
//   chunks   ceil(size / chunk) x (bytes[min(chunk, what is left)] | crc: u32, masked CRC32C of those bytes)
//   trailer  "CELLEND1" | crc: u32 (masked CRC32C of the header's crc and the chunks' crcs, in order)
// It is written as .tmp, synced, renamed and its directory synced: after a crash the name holds the whole image or
// does not exist. The two newest checkpoints are kept, with the log back to the older one, so that recovery falls
// back to the older when the newer is damaged.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cell/status.h"
#include "logging/env.h"
#include "logging/region_log.h"

namespace cell::logging {

// Copies n bytes of the region at offset into out.
using RegionReadFn = std::function<Status(uint64_t offset, size_t n, char* out)>;
// Stores bytes into the region at offset.
using RegionWriteFn = std::function<Status(uint64_t offset, std::string_view bytes)>;

std::string CheckpointPath(const std::string& dir, uint64_t lsn);
// The lsns of the complete checkpoints in dir (not .tmp leftovers), oldest first.
StatusOr<std::vector<uint64_t>> ListCheckpoints(const std::string& dir, Env* env = Env::Posix());
// Writes the checkpoint of a region of `size` bytes at `lsn`, reading it with `read` a chunk at a time.
// `before_rename`, if given, runs after the copy and before the checkpoint takes its name (TakeCheckpoint flushes
// the log there); its error abandons the checkpoint.
Status WriteCheckpoint(const std::string& dir, uint64_t lsn, uint64_t size, const RegionReadFn& read,
                       Env* env = Env::Posix(), uint32_t chunk = 1u << 20,
                       const std::function<Status()>& before_rename = nullptr);
// Loads checkpoint `lsn` of a region of `size` bytes through `write`, a chunk at a time, each checked before it is
// written. Corruption (saying where) if any part fails its check or the sizes differ; chunks before the damage may
// have been written.
Status LoadCheckpoint(const std::string& dir, uint64_t lsn, uint64_t size, const RegionWriteFn& write,
                      Env* env = Env::Posix());

// Takes a checkpoint of a live region: its lsn is what `log` has appended now (so every write made before is at or
// below it), the image is copied with `read`, then all but the two newest checkpoints are removed, and the log
// files that the older kept one holds. The log is flushed after the copy and before the checkpoint takes its name:
// every write the copy may hold was reported to the log before it was made (btree/write_sink.h), so a checkpoint
// never holds a write the durable log lacks. Returns the checkpoint's lsn.
StatusOr<uint64_t> TakeCheckpoint(const std::string& dir, RegionLog* log, uint64_t size, const RegionReadFn& read,
                                  Env* env = Env::Posix());

// What RecoverRegion did.
struct RegionRecovery {
  uint64_t checkpoint_lsn = 0;  // the checkpoint loaded (0: none; the region was rebuilt from the log alone)
  ReplayReport replay;          // the log after it
  std::vector<std::string> problems;  // checkpoints that failed their checks and were passed over
  uint64_t next_lsn() const { return std::max(checkpoint_lsn, replay.last_lsn) + 1; }
};

// Rebuilds a region of `size` bytes: loads the newest checkpoint that passes its checks (through `write`; one that
// fails them is renamed aside to .bad; with none, the region is zeroed through `write`), then replays the log's later records through `apply`, cutting off a
// torn or damaged tail (RegionLog::Recover). Corruption, with what was found, if the checkpoints and logs left
// cannot rebuild it (records missing between the checkpoint and the log).
StatusOr<RegionRecovery> RecoverRegion(const std::string& dir, uint64_t size, const RegionWriteFn& write,
                                       const std::function<Status(uint64_t lsn, const LogRecord&)>& apply,
                                       Env* env = Env::Posix());

}  // namespace cell::logging
