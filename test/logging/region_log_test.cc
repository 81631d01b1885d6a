// The region log (logging/region_log.h): records round-trip; sync appends survive a power loss and share their
// fdatasyncs; async appends are on disk after the flush interval; a failed write or sync fails the log for good;
// recovery replays in order, skips what a checkpoint holds, and cuts off a torn tail or corruption so that later
// appends are read.
#include "logging/region_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "test/logging/fault_env.h"
#include "test/logging/test_dir.h"

namespace cell::logging {
namespace {

LogRecord BytesRecord(uint64_t offset, std::string bytes) {
  LogRecord r;
  r.ranges.push_back({offset, std::move(bytes)});
  return r;
}

class RegionLogTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = FreshTestDir("cell_region_log_test"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Recovers dir_, returning the records replayed (by lsn order) and the report.
  std::vector<std::pair<uint64_t, LogRecord>> Replay(ReplayReport* report = nullptr, uint64_t after = 0) {
    std::vector<std::pair<uint64_t, LogRecord>> out;
    auto r = RegionLog::Recover(
        dir_, after,
        [&](uint64_t lsn, const LogRecord& rec) {
          out.emplace_back(lsn, rec);
          return Status::OK();
        },
        &env_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (report != nullptr && r.ok()) *report = *r;
    return out;
  }

  // Waits for a condition another thread makes true (bounded: a hang fails the test, it does not stall it).
  template <typename F>
  static bool WaitFor(F done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }

  // The first fdatasync through env_ waits, once it has begun (in_sync_), until the test counts release_ down.
  void HoldFirstSync() {
    env_.SetSyncHook([this] {
      if (syncs_seen_++ == 0) {
        in_sync_.count_down();
        release_.wait();
      }
    });
  }

  std::string dir_;
  FaultEnv env_;
  std::latch in_sync_{1}, release_{1};
  std::atomic<int> syncs_seen_{0};
};

TEST(LogRecord, RoundTripsAndRefusesWhatDoesNotParse) {
  LogRecord bytes;
  bytes.ranges = {{0, "abc"}, {1 << 20, std::string(3000, 'x')}, {7, ""}};
  LogRecord begin;
  begin.kind = LogRecord::Kind::kSplitBegin;
  begin.split = 42;
  begin.info = "meganode 3 -> 9";
  LogRecord end;
  end.kind = LogRecord::Kind::kSplitEnd;
  end.split = 42;
  for (const LogRecord& r : {bytes, begin, end}) {
    const std::string encoded = r.Encode(99);
    uint64_t lsn = 0;
    auto decoded = LogRecord::Decode(encoded, &lsn);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(lsn, 99u);
    EXPECT_EQ(decoded->kind, r.kind);
    EXPECT_EQ(decoded->split, r.split);
    EXPECT_EQ(decoded->info, r.info);
    ASSERT_EQ(decoded->ranges.size(), r.ranges.size());
    for (size_t i = 0; i < r.ranges.size(); ++i) {
      EXPECT_EQ(decoded->ranges[i].offset, r.ranges[i].offset);
      EXPECT_EQ(decoded->ranges[i].bytes, r.ranges[i].bytes);
    }
    // Every proper prefix, and anything with bytes after the end, is refused.
    for (size_t n = 0; n < encoded.size(); ++n) {
      EXPECT_TRUE(LogRecord::Decode(encoded.substr(0, n), &lsn).status().IsCorruption()) << n;
    }
    EXPECT_TRUE(LogRecord::Decode(encoded + "x", &lsn).status().IsCorruption());
  }
  std::string unknown = end.Encode(1);
  unknown[8] = 9;
  uint64_t lsn = 0;
  EXPECT_TRUE(LogRecord::Decode(unknown, &lsn).status().IsCorruption());
  std::string huge_count = LogRecord().Encode(1);
  huge_count[9] = huge_count[10] = huge_count[11] = huge_count[12] = '\xff';
  EXPECT_TRUE(LogRecord::Decode(huge_count, &lsn).status().IsCorruption());
}

TEST(Durability, ParsesItsTwoNames) {
  EXPECT_EQ(*ParseDurability("sync"), Durability::kSync);
  EXPECT_EQ(*ParseDurability("async"), Durability::kAsync);
  EXPECT_TRUE(ParseDurability("fsync").status().IsInvalidArgument());
}

class RegionLogFilesTest : public RegionLogTest, public ::testing::WithParamInterface<uint64_t> {};

// With files of the default size, and with files that roll over every few records while threads append.
TEST_P(RegionLogFilesTest, SyncAppendsFromManyThreadsSurviveAPowerLoss) {
  constexpr int kThreads = 8, kEach = 100;
  {
    auto log = RegionLog::Open(dir_, 1, {.durability = Durability::kSync, .max_file_bytes = GetParam(), .env = &env_});
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          auto lsn = (*log)->Append(BytesRecord(t * 1'000'000 + i, std::string(1 + i, static_cast<char>('a' + t))));
          ASSERT_TRUE(lsn.ok());
          ASSERT_GE((*log)->durable_lsn(), *lsn) << "acknowledged before it was on disk";
        }
      });
    }
    for (auto& th : threads) th.join();
    // The power goes before the log is closed (closing would flush).
    ASSERT_TRUE(env_.DropUnsyncedData().ok());
  }
  const auto records = Replay();
  ASSERT_EQ(records.size(), static_cast<size_t>(kThreads * kEach));
  std::vector<int> per_thread(kThreads, 0);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].first, i + 1) << "lsns are dense and in order";
    const auto& range = records[i].second.ranges.at(0);
    const int t = static_cast<int>(range.offset / 1'000'000), n = static_cast<int>(range.offset % 1'000'000);
    EXPECT_EQ(n, per_thread[t]++) << "each thread's appends in its order";
    EXPECT_EQ(range.bytes, std::string(1 + n, static_cast<char>('a' + t)));
  }
}
INSTANTIATE_TEST_SUITE_P(FileSizes, RegionLogFilesTest, ::testing::Values(uint64_t{64} << 20, uint64_t{4096}));

TEST_F(RegionLogTest, AppendsWaitingOnOneSyncShareTheNext) {
  HoldFirstSync();  // until four more appends are waiting
  auto log = RegionLog::Open(dir_, 1, {.durability = Durability::kSync, .env = &env_});
  ASSERT_TRUE(log.ok());
  std::thread first([&] { ASSERT_TRUE((*log)->Append(BytesRecord(0, "first")).ok()); });
  in_sync_.wait();
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i)
    waiters.emplace_back([&, i] { ASSERT_TRUE((*log)->Append(BytesRecord(i + 1, "w")).ok()); });
  ASSERT_TRUE(WaitFor([&] { return (*log)->appended_lsn() == 5; }));
  release_.count_down();
  first.join();
  for (auto& th : waiters) th.join();
  EXPECT_EQ((*log)->durable_lsn(), 5u);
  EXPECT_EQ((*log)->syncs(), 2u) << "one sync for the first append, one shared by the four that waited";
}

TEST_F(RegionLogTest, WhenDurableAnswersAfterTheSyncThatCoversItAndSharesIt) {
  HoldFirstSync();  // until eight more records are waiting
  auto log = RegionLog::Open(dir_, 1, {.durability = Durability::kSync, .env = &env_});
  ASSERT_TRUE(log.ok());
  RegionLog* l = log->get();
  std::mutex mu;
  std::vector<uint64_t> answered;  // lsns, in the order their callbacks ran
  std::vector<uint64_t> durable_then;
  const auto when = [&](uint64_t lsn) {
    l->WhenDurable(lsn, [&, lsn](const Status& s) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      std::lock_guard lock(mu);
      answered.push_back(lsn);
      durable_then.push_back(l->durable_lsn());
    });
  };
  when(*l->Add(BytesRecord(0, "first")));
  in_sync_.wait();  // the committer is in the first fdatasync
  for (int i = 0; i < 8; ++i) when(*l->Add(BytesRecord(i + 1, "w")));
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(answered.empty()) << "nothing is answered before its fdatasync";
  }
  release_.count_down();
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return answered.size() == 9;
  }));
  std::lock_guard lock(mu);
  for (size_t i = 0; i < answered.size(); ++i) EXPECT_GE(durable_then[i], answered[i]) << "answered before durable";
  EXPECT_EQ(l->syncs(), 2u) << "one sync for the first record, one shared by the eight that waited";
  // Already durable: answered at once, on the calling thread.
  bool at_once = false;
  l->WhenDurable(1, [&](const Status& s) { at_once = s.ok(); });
  EXPECT_TRUE(at_once);
}

TEST_F(RegionLogTest, WhenDurableGivesTheFailureAndAsyncAnswersAtOnce) {
  auto log = RegionLog::Open(dir_, 1, {.durability = Durability::kSync, .env = &env_});
  ASSERT_TRUE(log.ok());
  // Every record added before any waiter registers (the first failed sync fails the log, and later Adds with it).
  std::vector<uint64_t> lsns;
  for (int i = 0; i < 3; ++i) {
    auto lsn = (*log)->Add(BytesRecord(i, "x"));
    ASSERT_TRUE(lsn.ok()) << lsn.status().ToString();
    lsns.push_back(*lsn);
  }
  env_.FailSyncs(true);
  std::atomic<int> failed{0};
  for (uint64_t lsn : lsns) (*log)->WhenDurable(lsn, [&](const Status& s) { failed += !s.ok(); });
  ASSERT_TRUE(WaitFor([&] { return failed.load() == 3; }));
  env_.FailSyncs(false);
  log->reset();
  std::filesystem::remove_all(dir_);
  auto async_log = RegionLog::Open(
      dir_, 1, {.durability = Durability::kAsync, .async_flush_interval = std::chrono::hours(1), .env = &env_});
  ASSERT_TRUE(async_log.ok());
  bool at_once = false;
  (*async_log)->WhenDurable(*(*async_log)->Add(BytesRecord(0, "y")), [&](const Status& s) { at_once = s.ok(); });
  EXPECT_TRUE(at_once) << "async acknowledges at once";
  EXPECT_EQ((*async_log)->durable_lsn(), 0u);
}

TEST_F(RegionLogTest, AsyncAppendsAreOnDiskAfterTheFlushInterval) {
  auto log = RegionLog::Open(
      dir_, 1, {.durability = Durability::kAsync, .async_flush_interval = std::chrono::milliseconds(5), .env = &env_});
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 200; ++i) ASSERT_TRUE((*log)->Append(BytesRecord(i, "async")).ok());
  // No append waited for a sync; the flusher makes them durable within its interval.
  ASSERT_TRUE(WaitFor([&] { return (*log)->durable_lsn() == 200; }));
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ(Replay().size(), 200u);
}

TEST_F(RegionLogTest, AsyncAppendsDoNotWaitForASync) {
  auto log = RegionLog::Open(
      dir_, 1, {.durability = Durability::kAsync, .async_flush_interval = std::chrono::hours(1), .env = &env_});
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE((*log)->Append(BytesRecord(i, "async")).ok());
  EXPECT_EQ((*log)->syncs(), 0u) << "the flusher's hour has not passed";
  EXPECT_EQ((*log)->durable_lsn(), 0u);
  ASSERT_TRUE((*log)->Flush().ok());
  EXPECT_EQ((*log)->durable_lsn(), 100u);
}

TEST_F(RegionLogTest, DamageInRecordsACheckpointHoldsIsReadPast) {
  {
    auto log = RegionLog::Open(dir_, 1, {.max_file_bytes = 10'000, .env = &env_});
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < 40; ++i) ASSERT_TRUE((*log)->Append(BytesRecord(i, std::string(3000, 'x'))).ok());
  }
  const auto files = RegionLog::Files(dir_).value();
  ASSERT_GE(files.size(), 3u);
  std::string bytes = ReadFileToString(Env::Posix(), RegionLog::FilePath(dir_, files[0])).value();
  bytes[100] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), RegionLog::FilePath(dir_, files[0]), bytes).ok());
  ReplayReport report;
  const auto records = Replay(&report, files[1] - 1);  // a checkpoint holds the first file's records
  EXPECT_EQ(records.size(), 40 - (files[1] - 1));
  EXPECT_EQ(report.end, log::Reader::End::kClean);
  EXPECT_EQ(RegionLog::Files(dir_)->size(), files.size()) << "nothing cut";
}

TEST_F(RegionLogTest, AFailedSyncFailsTheLogForGood) {
  auto log = RegionLog::Open(dir_, 1, {.durability = Durability::kSync, .env = &env_});
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->Append(BytesRecord(0, "ok")).ok());
  env_.FailSyncs(true);
  auto failed = (*log)->Append(BytesRecord(1, "not acknowledged"));
  ASSERT_TRUE(failed.status().IsUnavailable()) << failed.status().ToString();
  EXPECT_NE(failed.status().message().find("injected"), std::string::npos) << "the cause reaches the caller";
  env_.FailSyncs(false);
  auto after = (*log)->Append(BytesRecord(2, "after"));
  EXPECT_FALSE(after.ok()) << "no write is acknowledged on top of one whose sync failed";
  EXPECT_NE(after.status().message().find("failed"), std::string::npos) << after.status().ToString();
  EXPECT_EQ((*log)->durable_lsn(), 1u);

  // The same in async mode: appends return at once, and once the flusher's sync fails, every later one fails.
  std::filesystem::remove_all(dir_);
  auto async_log = RegionLog::Open(
      dir_, 1, {.durability = Durability::kAsync, .async_flush_interval = std::chrono::milliseconds(1), .env = &env_});
  ASSERT_TRUE(async_log.ok());
  env_.FailSyncs(true);
  ASSERT_TRUE((*async_log)->Append(BytesRecord(0, "x")).ok());
  ASSERT_TRUE(WaitFor([&] { return !(*async_log)->Append(BytesRecord(0, "y")).ok(); }));
  env_.FailSyncs(false);
}

TEST_F(RegionLogTest, AFailedWriteReachesTheCaller) {
  auto log = RegionLog::Open(dir_, 1, {.durability = Durability::kSync, .env = &env_});
  ASSERT_TRUE(log.ok());
  env_.FailWrites(true);
  EXPECT_TRUE((*log)->Append(BytesRecord(0, "x")).status().IsUnavailable());
  env_.FailWrites(false);
  EXPECT_FALSE((*log)->Append(BytesRecord(0, "y")).ok());
}

TEST_F(RegionLogTest, RecoveryCutsATornTailAndReadsWhatIsAppendedAfterIt) {
  {
    auto log = RegionLog::Open(dir_, 1, {.env = &env_});
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < 10; ++i) ASSERT_TRUE((*log)->Append(BytesRecord(i, std::string(5000, 'a' + i))).ok());
  }
  const std::string file = RegionLog::FilePath(dir_, 1);
  const uint64_t size = Env::Posix()->FileSize(file).value();
  ASSERT_TRUE(Env::Posix()->Truncate(file, size - 1000).ok());  // the last record is torn
  ReplayReport report;
  auto records = Replay(&report);
  EXPECT_EQ(records.size(), 9u);
  EXPECT_EQ(report.end, log::Reader::End::kTornTail);
  EXPECT_EQ(report.last_lsn, 9u);
  EXPECT_NE(report.damage.find(RegionLog::FilePath(dir_, 1)), std::string::npos) << report.damage;
  {
    auto log = RegionLog::Open(dir_, report.last_lsn + 1, {.env = &env_});
    ASSERT_TRUE(log.ok());
    auto lsn = (*log)->Append(BytesRecord(99, "after the crash"));
    ASSERT_TRUE(lsn.ok());
    EXPECT_EQ(*lsn, 10u);
  }
  records = Replay(&report);
  ASSERT_EQ(records.size(), 10u);
  EXPECT_EQ(report.end, log::Reader::End::kClean) << report.damage;
  EXPECT_EQ(records.back().second.ranges[0].bytes, "after the crash");
  // Records at or below a checkpoint's lsn are read past, not replayed.
  EXPECT_EQ(Replay(nullptr, 7).size(), 3u);
}

TEST_F(RegionLogTest, CorruptionInOneFileDropsTheRestAndSaysSo) {
  {
    auto log = RegionLog::Open(dir_, 1, {.max_file_bytes = 20'000, .env = &env_});
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < 40; ++i) ASSERT_TRUE((*log)->Append(BytesRecord(i, std::string(3000, 'a' + i % 26))).ok());
  }
  auto files = Env::Posix()->GetChildren(dir_);
  ASSERT_TRUE(files.ok());
  ASSERT_GE(files->size(), 5u) << "the log rolled over to new files";
  ReplayReport report;
  ASSERT_EQ(Replay(&report).size(), 40u);
  EXPECT_EQ(report.end, log::Reader::End::kClean);

  // A flipped bit in the second file's second record.
  const auto first_lsns = RegionLog::Files(dir_).value();
  const std::string second = RegionLog::FilePath(dir_, first_lsns[1]);
  std::string bytes = ReadFileToString(Env::Posix(), second).value();
  bytes[3100] ^= 0x10;
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), second, bytes).ok());
  const auto records = Replay(&report);
  EXPECT_EQ(report.end, log::Reader::End::kCorrupt);
  EXPECT_NE(report.damage.find(second), std::string::npos) << report.damage;
  EXPECT_NE(report.damage.find("removed"), std::string::npos) << report.damage;
  ASSERT_EQ(records.size(), first_lsns[1]) << "the records of the first file and the first of the second";
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].second.ranges[0].bytes, std::string(3000, static_cast<char>('a' + i % 26)));
  }
  EXPECT_EQ(Env::Posix()->GetChildren(dir_)->size(), 2u) << "the files after the damage are gone";
  // Replaying again finds a clean log of the records before the damage.
  EXPECT_EQ(Replay(&report).size(), records.size());
  EXPECT_EQ(report.end, log::Reader::End::kClean);
}

TEST_F(RegionLogTest, FilesACheckpointHoldsAreRemovedAndAGapIsRefused) {
  {
    auto log = RegionLog::Open(dir_, 1, {.max_file_bytes = 10'000, .env = &env_});
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < 40; ++i) ASSERT_TRUE((*log)->Append(BytesRecord(i, std::string(3000, 'x'))).ok());
  }
  const auto before = RegionLog::Files(dir_).value();
  ASSERT_GE(before.size(), 8u);
  ASSERT_TRUE(RegionLog::RemoveFilesBefore(dir_, 20).ok());  // a checkpoint holds records 1..20
  const auto after = RegionLog::Files(dir_).value();
  ASSERT_LT(after.size(), before.size());
  EXPECT_LE(after.front(), 21u) << "the file holding record 21 is kept";
  EXPECT_GT(after.front(), 1u);
  ReplayReport report;
  EXPECT_EQ(Replay(&report, 20).size(), 20u) << "records 21..40";
  EXPECT_EQ(report.end, log::Reader::End::kClean);
  // Without the checkpoint, the records before the first file are missing: a clear error, nothing replayed.
  auto missing = RegionLog::Recover(
      dir_, 0, [](uint64_t, const LogRecord&) { return Status::OK(); }, &env_);
  ASSERT_TRUE(missing.status().IsCorruption());
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos) << missing.status().ToString();
  // The last file is never removed, even when a checkpoint holds all of it.
  ASSERT_TRUE(RegionLog::RemoveFilesBefore(dir_, 40).ok());
  EXPECT_EQ(RegionLog::Files(dir_)->size(), 1u);
  // Appending from an lsn the log has passed is refused.
  EXPECT_EQ(RegionLog::Open(dir_, 2, {.env = &env_}).status().code(), Status::Code::kFailedPrecondition);
}

TEST_F(RegionLogTest, AMissingDirectoryIsAnEmptyLog) {
  ReplayReport report;
  EXPECT_TRUE(Replay(&report).empty());
  EXPECT_EQ(report.last_lsn, 0u);
  EXPECT_TRUE(RegionLog::Open(dir_, 0, {.env = &env_}).status().IsInvalidArgument());
}

}  // namespace
}  // namespace cell::logging
