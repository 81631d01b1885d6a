// The region log: record encoding, group commit, replay and cutting off damage (see region_log.h).
#include "logging/region_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/diagnostics.h"
#include "common/little_endian.h"

namespace cell::logging {
namespace {

std::string FileName(uint64_t first_lsn) { return fmt::format("{:016x}.log", first_lsn); }

}  // namespace

StatusOr<std::vector<uint64_t>> RegionLog::Files(const std::string& dir, Env* env) {
  std::vector<uint64_t> numbers;
  if (!env->FileExists(dir)) return numbers;
  CELL_ASSIGN_OR_RETURN(const std::vector<std::string> names, env->GetChildren(dir));
  for (const std::string& name : names) {
    if (name.size() != 20 || name.substr(16) != ".log") continue;
    const std::string digits = name.substr(0, 16);
    char* end = nullptr;
    const uint64_t n = std::strtoull(digits.c_str(), &end, 16);
    if (end == digits.c_str() + digits.size()) numbers.push_back(n);
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

std::string RegionLog::FilePath(const std::string& dir, uint64_t first_lsn) { return dir + "/" + FileName(first_lsn); }

Status RegionLog::RemoveFilesBefore(const std::string& dir, uint64_t lsn, Env* env) {
  CELL_ASSIGN_OR_RETURN(const std::vector<uint64_t> files, Files(dir, env));
  bool removed = false;
  for (size_t i = 0; i + 1 < files.size() && files[i + 1] <= lsn + 1; ++i) {  // file i ends before file i+1 begins
    CELL_RETURN_IF_ERROR(env->RemoveFile(FilePath(dir, files[i])));
    removed = true;
  }
  return removed ? env->SyncDir(dir) : Status::OK();
}

StatusOr<Durability> ParseDurability(std::string_view name) {
  if (name == "sync") return Durability::kSync;
  if (name == "async") return Durability::kAsync;
  return Status::InvalidArgument(fmt::format(
      "durability '{}' is not one of sync (a write is acknowledged once on disk) or async (acknowledged at once, on "
      "disk within the flush interval)",
      name));
}

std::string LogRecord::Encode(uint64_t lsn) const {
  std::string out;
  size_t size = 8 + 1 + 4 + info.size() + 8;
  for (const Range& r : ranges) size += 16 + r.bytes.size();
  out.reserve(size);
  PutFixed64(&out, lsn);
  out.push_back(static_cast<char>(kind));
  switch (kind) {
    case Kind::kBytes:
      PutFixed32(&out, static_cast<uint32_t>(ranges.size()));
      for (const Range& r : ranges) {
        PutFixed32(&out, r.region);
        PutFixed64(&out, r.offset);
        PutFixed32(&out, static_cast<uint32_t>(r.bytes.size()));
        out.append(r.bytes);
      }
      break;
    case Kind::kSplitBegin:
      PutFixed64(&out, split);
      PutFixed32(&out, static_cast<uint32_t>(info.size()));
      out.append(info);
      break;
    case Kind::kSplitEnd:
      PutFixed64(&out, split);
      break;
  }
  return out;
}

StatusOr<LogRecord> LogRecord::Decode(std::string_view record, uint64_t* lsn) {
  LittleEndianReader c(record);
  LogRecord r;
  uint8_t kind = 0;
  const auto bad = [&](std::string_view what) {
    return Status::Corruption(fmt::format("log record of {} bytes: {}", record.size(), what));
  };
  if (!c.ReadFixed64(lsn) || !c.ReadU8(&kind)) return bad("shorter than its header");
  switch (kind) {
    case static_cast<uint8_t>(Kind::kBytes): {
      r.kind = Kind::kBytes;
      uint32_t count = 0;
      if (!c.ReadFixed32(&count)) return bad("no range count");
      if (count > c.rest().size() / 16) return bad(fmt::format("{} ranges cannot fit", count));
      r.ranges.resize(count);
      for (Range& range : r.ranges) {
        uint32_t length = 0;
        if (!c.ReadFixed32(&range.region) || !c.ReadFixed64(&range.offset) || !c.ReadFixed32(&length) ||
            !c.ReadBytes(length, &range.bytes)) {
          return bad("a range runs past its end");
        }
      }
      break;
    }
    case static_cast<uint8_t>(Kind::kSplitBegin): {
      r.kind = Kind::kSplitBegin;
      uint32_t length = 0;
      if (!c.ReadFixed64(&r.split) || !c.ReadFixed32(&length) || !c.ReadBytes(length, &r.info))
        return bad("a short split start");
      break;
    }
    case static_cast<uint8_t>(Kind::kSplitEnd):
      r.kind = Kind::kSplitEnd;
      if (!c.ReadFixed64(&r.split)) return bad("a short split end");
      break;
    default:
      return bad(fmt::format("unknown kind {}", kind));
  }
  if (!c.rest().empty()) return bad(fmt::format("{} bytes after its end", c.rest().size()));
  return r;
}

StatusOr<ReplayReport> RegionLog::Recover(const std::string& dir, uint64_t after_lsn,
                                          const std::function<Status(uint64_t, const LogRecord&)>& apply, Env* env,
                                          RecoverMode mode) {
  ReplayReport report;
  CELL_ASSIGN_OR_RETURN(const std::vector<uint64_t> files, Files(dir, env));
  if (!files.empty() && files.front() > after_lsn + 1) {
    return Status::Corruption(fmt::format(
        "region log {} begins at record {}, but records from {} on are needed (after the checkpoint's); a log file "
        "or a newer checkpoint is missing, and the region cannot be rebuilt from what is left",
        dir, files.front(), after_lsn + 1));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string path = FilePath(dir, files[i]);
    CELL_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, env->NewSequentialFile(path));
    log::Reader reader(file.get());
    std::string bytes;
    std::string damage;
    uint64_t valid_length = 0;
    while (reader.ReadRecord(&bytes)) {
      uint64_t lsn = 0;
      auto record = LogRecord::Decode(bytes, &lsn);
      if (!record.ok()) {
        damage = fmt::format("{}: record after offset {}: {}", path, reader.valid_length(), record.status().message());
        break;
      }
      // Records follow one another without gaps, except where a checkpoint holds the records skipped.
      if (lsn > after_lsn + 1 && lsn != std::max(report.last_lsn, after_lsn) + 1) {
        damage = fmt::format("{}: record {} follows record {} (records lost between them)", path, lsn, report.last_lsn);
        break;
      }
      if (lsn > after_lsn) {
        CELL_RETURN_IF_ERROR(apply(lsn, *record));
        ++report.records;
      }
      report.last_lsn = lsn;
      valid_length = reader.valid_length();
    }
    if (damage.empty() && reader.end() == log::Reader::End::kClean) continue;
    if (damage.empty() && !reader.status().IsCorruption()) {
      return reader.status();  // the file could not be read (an I/O error): nothing is known to be damaged
    }
    const bool torn = damage.empty() && reader.end() == log::Reader::End::kTornTail;
    if (damage.empty()) damage = fmt::format("{}: {}", path, reader.status().message());
    if (i + 1 < files.size() && files[i + 1] <= after_lsn + 1) {
      // The damage is in records the checkpoint holds (the next file starts at or below the first one needed).
      diag::Warning("region log {}: {}; the checkpoint holds those records, so the log is read on", dir, damage);
      report.last_lsn = files[i + 1] - 1;
      continue;
    }
    report.end = torn ? log::Reader::End::kTornTail : log::Reader::End::kCorrupt;
    const size_t dropped_files = files.size() - i - 1;
    if (mode == RecoverMode::kReadOnly) {
      // (A tail being appended to by a paused owner that resumed looks torn too: it is past what was acknowledged.)
      report.damage = fmt::format("{}; read up to offset {} of that file{} (nothing changed)", damage, valid_length,
                                  dropped_files == 0 ? "" : fmt::format(", {} later files not read", dropped_files));
      diag::Info("region log {}: {}", dir, report.damage);
      break;
    }
    // Cut the log at its last whole record: what follows is not read again, and appends come after it.
    CELL_RETURN_IF_ERROR(env->Truncate(path, valid_length));
    {
      CELL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> cut, env->NewAppendableFile(path));
      CELL_RETURN_IF_ERROR(cut->Sync());  // the file's new length survives a power loss
      CELL_RETURN_IF_ERROR(cut->Close());
    }
    for (size_t j = i + 1; j < files.size(); ++j) {
      CELL_RETURN_IF_ERROR(env->RemoveFile(FilePath(dir, files[j])));
    }
    CELL_RETURN_IF_ERROR(env->SyncDir(dir));
    report.damage = fmt::format("{}; the log was cut at offset {} of that file{}", damage, valid_length,
                                dropped_files == 0 ? "" : fmt::format(" and {} later files removed", dropped_files));
    if (report.end == log::Reader::End::kCorrupt) {
      diag::Error("region log {}: {}; records after the damage are lost", dir, report.damage);
    } else {
      diag::Info("region log {}: {} (a write that was never acknowledged under sync durability)", dir, report.damage);
    }
    break;
  }
  return report;
}

RegionLog::RegionLog(std::string dir, uint64_t next_lsn, const RegionLogOptions& options)
    : dir_(std::move(dir)), options_(options), next_lsn_(next_lsn) {
  appended_lsn_ = durable_lsn_ = next_lsn - 1;
}

StatusOr<std::unique_ptr<RegionLog>> RegionLog::Open(const std::string& dir, uint64_t next_lsn,
                                                     const RegionLogOptions& options) {
  if (next_lsn == 0) return Status::InvalidArgument("log sequence numbers start at 1");
  Env* env = options.env;
  CELL_RETURN_IF_ERROR(env->CreateDirs(dir));
  CELL_ASSIGN_OR_RETURN(const std::vector<uint64_t> files, Files(dir, env));
  std::unique_ptr<RegionLog> log(new RegionLog(dir, next_lsn, options));
  {
    std::lock_guard lock(log->mu_);
    const auto last_size = files.empty() ? StatusOr<uint64_t>(uint64_t{0}) : env->FileSize(FilePath(dir, files.back()));
    if (!files.empty() &&
        (files.back() > next_lsn || (files.back() == next_lsn && (!last_size.ok() || *last_size > 0)))) {
      return Status::FailedPrecondition(
          fmt::format("region log {} already holds records from {} on; it must be recovered before appending from {}",
                      dir, files.back(), next_lsn));
    }
    CELL_RETURN_IF_ERROR(log->OpenFile(next_lsn));
  }
  if (options.durability == Durability::kAsync) {
    log->flusher_ = std::thread([l = log.get()] { l->FlushLoop(); });
  } else {
    log->committer_ = std::thread([l = log.get()] { l->CommitLoop(); });
  }
  return log;
}

RegionLog::~RegionLog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  waiters_cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  if (committer_.joinable()) committer_.join();  // it answers every waiter first
  if (Status s = Flush(); !s.ok()) diag::Error("region log {}: closing: {}", dir_, s.ToString());
  std::lock_guard lock(mu_);
  if (file_ != nullptr) (void)file_->Close();
}

Status RegionLog::OpenFile(uint64_t first_lsn) {
  CELL_ASSIGN_OR_RETURN(file_, options_.env->NewWritableFile(FilePath(dir_, first_lsn)));
  writer_ = std::make_unique<log::Writer>(file_.get());
  return options_.env->SyncDir(dir_);  // the new file's name survives a power loss
}

Status RegionLog::Fail(const Status& s) {
  if (failed_.ok()) {
    failed_ = Status::FromCode(s.code(), fmt::format("region log {} failed, no write is taken: {}", dir_, s.message()));
    diag::Error("{}", failed_.ToString());
  }
  synced_cv_.notify_all();
  return failed_;
}

StatusOr<uint64_t> RegionLog::Append(const LogRecord& record) {
  CELL_ASSIGN_OR_RETURN(const uint64_t lsn, Add(record));
  CELL_RETURN_IF_ERROR(Commit(lsn));
  return lsn;
}

Status RegionLog::Commit(uint64_t lsn) {
  std::unique_lock lock(mu_);
  if (options_.durability == Durability::kAsync) return failed_;
  return SyncUpTo(std::min(lsn, appended_lsn_), lock);
}

StatusOr<uint64_t> RegionLog::Add(const LogRecord& record) {
  std::string bytes = record.Encode(0);
  std::unique_lock lock(mu_);
  if (!failed_.ok()) return failed_;
  while (writer_->size() >= options_.max_file_bytes) {
    // A new file: everything in the old one is synced first, so durable_lsn_ never counts an unsynced file. One
    // thread rolls over; the others, waking, find the new file short and go on.
    if (syncing_) {
      synced_cv_.wait(lock);
      if (!failed_.ok()) return failed_;
      continue;
    }
    if (durable_lsn_ < appended_lsn_) {
      if (Status s = file_->Sync(); !s.ok()) return Fail(s);
      ++syncs_;
      durable_lsn_ = appended_lsn_;
      synced_cv_.notify_all();
    }
    if (Status s = file_->Close(); !s.ok()) return Fail(s);
    if (Status s = OpenFile(next_lsn_); !s.ok()) return Fail(s);
  }
  const uint64_t lsn = next_lsn_;
  EncodeFixed64(bytes.data(), lsn);  // Encode(0) left room for it
  if (Status s = writer_->AddRecord(bytes); !s.ok()) return Fail(s);
  ++next_lsn_;
  appended_lsn_ = lsn;
  appended_bytes_ += bytes.size();
  return lsn;
}

Status RegionLog::SyncUpTo(uint64_t lsn, std::unique_lock<std::mutex>& lock) {
  while (durable_lsn_ < lsn && failed_.ok()) {
    if (syncing_) {  // another thread's fdatasync may cover this record: wait for it
      synced_cv_.wait(lock);
      continue;
    }
    // This thread syncs everything appended so far, for itself and whoever appended meanwhile (group commit).
    syncing_ = true;
    const uint64_t target = appended_lsn_;
    WritableFile* file = file_.get();
    lock.unlock();
    const Status s = file->Sync();
    lock.lock();
    syncing_ = false;
    if (!s.ok()) return Fail(s);
    ++syncs_;
    durable_lsn_ = std::max(durable_lsn_, target);
    synced_cv_.notify_all();
  }
  return failed_;
}

Status RegionLog::Flush() {
  std::unique_lock lock(mu_);
  return SyncUpTo(appended_lsn_, lock);
}

void RegionLog::WhenDurable(uint64_t lsn, DurableFn done) {
  std::unique_lock lock(mu_);
  lsn = std::min(lsn, appended_lsn_);
  if (options_.durability == Durability::kAsync || lsn <= durable_lsn_ || !failed_.ok()) {
    const Status s = failed_;
    lock.unlock();
    std::move(done)(s);
    return;
  }
  if (stopping_) {  // the committer may be gone: sync here
    const Status s = SyncUpTo(lsn, lock);
    lock.unlock();
    std::move(done)(s);
    return;
  }
  waiters_.emplace_back(lsn, std::move(done));
  waiters_cv_.notify_one();
}

void RegionLog::CommitLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    waiters_cv_.wait(lock, [&] { return stopping_ || !waiters_.empty(); });
    if (waiters_.empty()) break;  // stopping, and every waiter answered
    uint64_t need = 0;
    for (const auto& w : waiters_) need = std::max(need, w.first);
    // One fdatasync for every waiter so far (and whatever was appended meanwhile); more may register during it.
    const Status s = SyncUpTo(need, lock);
    std::vector<DurableFn> ready;
    for (size_t i = 0; i < waiters_.size();) {
      if (!s.ok() || waiters_[i].first <= durable_lsn_) {
        ready.push_back(std::move(waiters_[i].second));
        waiters_[i] = std::move(waiters_.back());
        waiters_.pop_back();
      } else {
        ++i;
      }
    }
    lock.unlock();
    for (DurableFn& done : ready) std::move(done)(s);
    lock.lock();
  }
}

void RegionLog::FlushLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    // A timer, not a synchronisation: sleep the interval (or until stopped), whatever wakes the thread early.
    const auto due = std::chrono::steady_clock::now() + options_.async_flush_interval;
    stop_cv_.wait_until(lock, due, [&] { return stopping_; });
    if (stopping_ || !failed_.ok()) break;
    (void)SyncUpTo(appended_lsn_, lock);  // a failure is kept in failed_ and returned by the next Append
  }
}

uint64_t RegionLog::appended_lsn() const {
  std::lock_guard lock(mu_);
  return appended_lsn_;
}
uint64_t RegionLog::durable_lsn() const {
  std::lock_guard lock(mu_);
  return durable_lsn_;
}
uint64_t RegionLog::appended_bytes() const {
  std::lock_guard lock(mu_);
  return appended_bytes_;
}

uint64_t RegionLog::syncs() const {
  std::lock_guard lock(mu_);
  return syncs_;
}

}  // namespace cell::logging
