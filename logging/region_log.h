// The write-ahead log of a group of regions (a server's node and extent regions share one, so that the order of
// their writes is the log's order: a leaf is never durable before the record it points to): the changes to the
// regions' bytes, appended in order, made durable by group commit, and replayed after a crash. logging/ knows regions
// and bytes; what the bytes mean is the server's business.
//
// Files: a directory per log holding log files named by the lsn of their first record (16 hex digits, .log). A
// log is only appended to; each Open starts a new file, and so does a file that reaches max_file_bytes. Once a
// checkpoint holds every record of a file, the file is removed (RemoveFilesBefore). Records use the framing of
// log_format.h; each record is
//
//   lsn: u64 | kind: u8 | body                                   (little-endian)
//     kind 1, bytes:        count: u32, then count x (region: u32, offset: u64, length: u32, bytes[length])
//     kind 2, split begin:  split: u64, length: u32, info[length]   (what the split is, for recovery's report)
//     kind 3, split end:    split: u64
//
// lsn numbers the log's records from 1 without gaps; a checkpoint says which lsn it includes, and replay skips
// the records at or below it.
//
// Durability (RegionLogOptions::durability):
//   kSync   Append returns once its record is on disk (fdatasync). Concurrent appends share one fdatasync: the
//           first waiter syncs everything appended so far, and the others wait for it (group commit).
//   kAsync  Append returns once its record is in the operating system's page cache; a background thread syncs
//           every async_flush_interval. A record is on disk within async_flush_interval plus one fdatasync after
//           Append returns (docs/DESIGN.md; measured in bench). A killed process loses nothing (the page cache
//           survives it); a power loss can lose what was not synced yet.
// A failed write or sync fails the log for good: every later Append returns the error, since after a failed
// fdatasync the file's state is unknown (Linux may have dropped the dirty pages), and no write may be acknowledged
// on top of a lost one. The server must stop taking writes for the region and recover it.
#pragma once

#include <absl/functional/any_invocable.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cell/status.h"
#include "logging/env.h"
#include "logging/log_reader.h"
#include "logging/log_writer.h"

namespace cell::logging {

enum class Durability { kSync, kAsync };
// "sync" or "async"; InvalidArgument otherwise.
StatusOr<Durability> ParseDurability(std::string_view name);

struct RegionLogOptions {
  Durability durability = Durability::kSync;
  std::chrono::milliseconds async_flush_interval{10};
  uint64_t max_file_bytes = 64ull << 20;  // a new file once the current one is this long
  Env* env = Env::Posix();
};

// One record: a change of the region's bytes, or a split's start or end.
struct LogRecord {
  enum class Kind : uint8_t { kBytes = 1, kSplitBegin = 2, kSplitEnd = 3 };
  struct Range {
    uint64_t offset = 0;
    std::string bytes;
    uint32_t region = 0;
  };
  Kind kind = Kind::kBytes;
  std::vector<Range> ranges;  // kBytes: the bytes written, at their offsets in the region
  uint64_t split = 0;         // kSplitBegin, kSplitEnd: the split's id
  std::string info;           // kSplitBegin: the server's description of it

  // The body after lsn (see the format above); Decode is Corruption for bytes that do not parse.
  std::string Encode(uint64_t lsn) const;
  static StatusOr<LogRecord> Decode(std::string_view record, uint64_t* lsn);
};

// What replay found.
struct ReplayReport {
  uint64_t records = 0;   // records passed to the callback
  uint64_t last_lsn = 0;  // the last lsn read (replayed or skipped); 0 if none
  log::Reader::End end = log::Reader::End::kClean;
  std::string damage;  // empty if the log ended cleanly; otherwise where, what, and what was dropped
};

// What recovery may do to the files it reads. kRepair: cut off damage, remove what interrupted checkpoints left and
// set damaged checkpoints aside, as the log's own server does before it appends. kReadOnly: change nothing, only
// stop at the damage; for a survivor taking over a log that its old owner, paused rather than dead, may still be
// appending to (the survivor goes on in a log directory of its own, server/store_service.h).
enum class RecoverMode { kRepair, kReadOnly };

class RegionLog {
 public:
  // Replays the logs in `dir` in order: calls `apply` for each record whose lsn is above `after_lsn` (Corruption if
  // the files left begin after after_lsn + 1: records are missing), and stops at
  // the first damage, or at the first record `apply` refuses (its error is returned). Under kRepair the damage is
  // then cut off (the damaged file truncated to its last whole record, later files removed), so that appends after
  // it are read next time; the report says what was dropped. A missing directory is an empty log.
  static StatusOr<ReplayReport> Recover(const std::string& dir, uint64_t after_lsn,
                                        const std::function<Status(uint64_t lsn, const LogRecord&)>& apply,
                                        Env* env = Env::Posix(), RecoverMode mode = RecoverMode::kRepair);

  // Starts appending to `dir` (created if missing) in a new file, numbering records from `next_lsn` (one past the
  // last one Recover read, or past the checkpoint's). FailedPrecondition if the log holds later records.
  // (Recover first: appends after unrecovered damage would never be read.)
  static StatusOr<std::unique_ptr<RegionLog>> Open(const std::string& dir, uint64_t next_lsn,
                                                   const RegionLogOptions& options = {});
  ~RegionLog();

  // Appends `record` and returns its lsn, without waiting for it to be durable (see Commit). Thread-safe.
  StatusOr<uint64_t> Add(const LogRecord& record);
  // Returns once the record `lsn` (and every one before it) is as durable as the options ask: on disk under sync,
  // at once under async. A request adds its records, then commits the last before it is acknowledged, so that
  // records added together share one fdatasync.
  Status Commit(uint64_t lsn);
  // The asynchronous Commit: calls `done` once record `lsn` (and every one before it) is as durable as the options
  // ask: at once under async or if it is already; otherwise on the log's committer thread, right after the fdatasync
  // that covers it, which every record waiting then shares. With the log's error if it failed. A server's worker
  // registers its reply here and goes on to the next request, so one fdatasync covers every request that arrived
  // during the one before (with a blocking Commit, at most one per worker).
  using DurableFn = absl::AnyInvocable<void(const Status&) &&>;
  void WhenDurable(uint64_t lsn, DurableFn done);
  // Add, then Commit.
  StatusOr<uint64_t> Append(const LogRecord& record);
  // Makes every record appended so far durable.
  Status Flush();

  // The first lsns of the log files in dir, in order (each file's name).
  static StatusOr<std::vector<uint64_t>> Files(const std::string& dir, Env* env = Env::Posix());
  static std::string FilePath(const std::string& dir, uint64_t first_lsn);
  // Removes the files whose records are all at or below `lsn` (a checkpoint holds them); never the last file.
  static Status RemoveFilesBefore(const std::string& dir, uint64_t lsn, Env* env = Env::Posix());

  uint64_t appended_lsn() const;
  uint64_t durable_lsn() const;     // every record up to this one is on disk
  uint64_t syncs() const;           // fdatasyncs done (group commit shares them)
  uint64_t appended_bytes() const;  // bytes of records appended since Open

 private:
  RegionLog(std::string dir, uint64_t next_lsn, const RegionLogOptions& options);
  Status OpenFile(uint64_t first_lsn);                                // under mu_
  Status SyncUpTo(uint64_t lsn, std::unique_lock<std::mutex>& lock);  // waits until lsn is durable
  Status Fail(const Status& s);                                       // under mu_
  void FlushLoop();
  void CommitLoop();  // sync: runs WhenDurable's callbacks as fdatasyncs cover them

  const std::string dir_;
  const RegionLogOptions options_;
  mutable std::mutex mu_;
  std::condition_variable synced_cv_;
  std::condition_variable stop_cv_;
  std::unique_ptr<WritableFile> file_;
  std::unique_ptr<log::Writer> writer_;
  uint64_t next_lsn_;
  uint64_t appended_lsn_ = 0, durable_lsn_ = 0;
  bool syncing_ = false, stopping_ = false;
  Status failed_;
  uint64_t syncs_ = 0;
  uint64_t appended_bytes_ = 0;
  std::vector<std::pair<uint64_t, DurableFn>> waiters_;  // WhenDurable's, under sync
  std::condition_variable waiters_cv_;
  std::thread flusher_;    // async
  std::thread committer_;  // sync
};

}  // namespace cell::logging
