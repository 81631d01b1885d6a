// Checkpoints: one file holding an image of every region a log covers (a server's node and extent regions share
// one log, so that the order of their writes is the log's), at one lsn: it holds every log record at or below that
// lsn, so recovery loads it and replays only the records after it, and the log files before it can be removed.
//
// The image may be fuzzy (copied while writes go on): the server reports each write to the log before it makes it
// (btree/write_sink.h), and the checkpoint's lsn is taken before the copy starts, so every write the copy may have
// missed or torn has a record above that lsn, and replaying them over the image makes it exact.
//
// File: checkpoint-<lsn, 16 hex digits>.img in the log's directory, little-endian:
//   header   "CELLCKP2" | lsn: u64 | chunk: u32 | count: u32 | count x (region: u32, size: u64)
//            | crc: u32 (masked CRC32C of the header's bytes before it)
//   chunks   for each region in order, ceil(size / chunk) chunks of min(chunk, what is left) bytes, each stored as
//            stored: u32 (0: the chunk is all zeros and its bytes are left out; else its length) | bytes[stored]
//            | crc: u32 (masked CRC32C of `stored` and the bytes)
//   trailer  "CELLEND2" | crc: u32 (masked CRC32C of the header's crc and the chunks' crcs, in order)
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

// A region a checkpoint holds: its id and size, and how to read it (for a checkpoint) or write it (recovery).
struct CheckpointRegion {
  uint32_t id = 0;
  uint64_t size = 0;
  RegionReadFn read;
  RegionWriteFn write;
  // Optional: whether n bytes at offset were never written (zeros). Such a chunk is stored as zeros without being
  // read, so a checkpoint of a large, mostly unused region costs what is used, not the region's size.
  std::function<bool(uint64_t offset, size_t n)> hole;
};

std::string CheckpointPath(const std::string& dir, uint64_t lsn);
// The lsns of the complete checkpoints in dir (not .tmp leftovers), oldest first.
StatusOr<std::vector<uint64_t>> ListCheckpoints(const std::string& dir, Env* env = Env::Posix());
// Writes the checkpoint of `regions` at `lsn`, reading each with its `read` a chunk at a time. `before_rename`, if
// given, runs after the copy and before the checkpoint takes its name (TakeCheckpoint flushes the log there); its
// error abandons the checkpoint.
Status WriteCheckpoint(const std::string& dir, uint64_t lsn, const std::vector<CheckpointRegion>& regions,
                       Env* env = Env::Posix(), uint32_t chunk = 1u << 20,
                       const std::function<Status()>& before_rename = nullptr);
// Loads checkpoint `lsn` into `regions` (the same ids and sizes, in the same order) through their `write`, a chunk at
// a time, each checked before it is written. With `zero`, the regions hold only zeros now and all-zero chunks are
// not written (untouched memory stays uncommitted). Corruption (saying where) if any part fails its check or the
// regions differ; chunks before the damage may have been written.
Status LoadCheckpoint(const std::string& dir, uint64_t lsn, const std::vector<CheckpointRegion>& regions, bool zero,
                      Env* env = Env::Posix());

// Takes a checkpoint of live regions: its lsn is what `log` has appended now (so every write made before is at or
// below it), the images are copied with `read`, then all but the two newest checkpoints are removed, and the log
// files that the older kept one holds. The log is flushed after the copy and before the checkpoint takes its name:
// every write the copy may hold was reported to the log before it was made (btree/write_sink.h), so a checkpoint
// never holds a write the durable log lacks. Returns the checkpoint's lsn.
StatusOr<uint64_t> TakeCheckpoint(const std::string& dir, RegionLog* log, const std::vector<CheckpointRegion>& regions,
                                  Env* env = Env::Posix());

// What Recover did.
struct Recovery {
  uint64_t checkpoint_lsn = 0;        // the checkpoint loaded (0: none; the regions were rebuilt from the log alone)
  ReplayReport replay;                // the log after it
  std::vector<std::string> problems;  // checkpoints that failed their checks and were passed over
  uint64_t next_lsn() const { return std::max(checkpoint_lsn, replay.last_lsn) + 1; }
};

// Rebuilds `regions`, which hold only zeros on entry: removes what interrupted checkpoints left (.tmp), loads the
// newest checkpoint that passes its checks (one that
// fails them is renamed aside to .bad, and the regions are zeroed again before the next is tried), then replays the
// log's later records through `apply`, cutting off a torn or damaged tail (RegionLog::Recover). Corruption, with what
// was found, if the checkpoints and logs left cannot rebuild them (records missing between the checkpoint and the
// log). Under RecoverMode::kReadOnly the same, but no file is removed, renamed or cut.
StatusOr<Recovery> Recover(const std::string& dir, const std::vector<CheckpointRegion>& regions,
                           const std::function<Status(uint64_t lsn, const LogRecord&)>& apply, Env* env = Env::Posix(),
                           RecoverMode mode = RecoverMode::kRepair);

}  // namespace cell::logging
