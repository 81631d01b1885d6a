// Region checkpoints (logging/checkpoint.h): an image round-trips; damage anywhere is found and said where; a crash
// while one is written leaves nothing under its name; recovery loads the newest good one (falling back to the
// older), replays the log after it, and refuses with a clear error when records are missing.
#include "logging/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "test/logging/fault_env.h"
#include "test/logging/test_dir.h"

namespace cell::logging {
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("cell_checkpoint_test");
    std::mt19937_64 rng(1);
    region_.resize(kSize);
    for (char& c : region_) c = static_cast<char>(rng());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  RegionReadFn Reader(const std::string& region) {
    return [&region](uint64_t offset, size_t n, char* out) {
      std::memcpy(out, region.data() + offset, n);
      return Status::OK();
    };
  }
  static RegionWriteFn Writer(std::string* region) {
    return [region](uint64_t offset, std::string_view bytes) {
      region->replace(offset, bytes.size(), bytes);
      return Status::OK();
    };
  }
  // Applies a log record's byte ranges to `region`.
  static std::function<Status(uint64_t, const LogRecord&)> Apply(std::string* region) {
    return [region](uint64_t, const LogRecord& r) {
      for (const auto& range : r.ranges) region->replace(range.offset, range.bytes.size(), range.bytes);
      return Status::OK();
    };
  }
  // Writes `bytes` at `offset` in region_, and logs it (after the write, as the server does).
  void WriteAndLog(RegionLog* log, uint64_t offset, const std::string& bytes) {
    region_.replace(offset, bytes.size(), bytes);
    LogRecord r;
    r.ranges.push_back({offset, bytes});
    ASSERT_TRUE(log->Append(r).ok());
  }

  static constexpr uint64_t kSize = 3 * (1 << 20) + 12345;  // three whole chunks and a short one
  std::string dir_;
  std::string region_;
  FaultEnv env_;
};

TEST_F(CheckpointTest, AnImageRoundTrips) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 7, kSize, Reader(region_)).ok());
  EXPECT_EQ(ListCheckpoints(dir_).value(), std::vector<uint64_t>{7});
  std::string loaded(kSize, '\0');
  ASSERT_TRUE(LoadCheckpoint(dir_, 7, kSize, Writer(&loaded)).ok());
  EXPECT_TRUE(loaded == region_);
  EXPECT_TRUE(LoadCheckpoint(dir_, 7, kSize + 1, Writer(&loaded)).IsCorruption()) << "a region of another size";
  EXPECT_TRUE(LoadCheckpoint(dir_, 8, kSize, Writer(&loaded)).IsNotFound());
}

TEST_F(CheckpointTest, DamageAnywhereIsFoundAndLocated) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 7, kSize, Reader(region_)).ok());
  const std::string path = CheckpointPath(dir_, 7);
  const std::string good = ReadFileToString(Env::Posix(), path).value();
  std::string loaded(kSize, '\0');
  // A flipped bit in the header, in a chunk, in a chunk's crc, in the trailer; a truncation; bytes after the end.
  for (uint64_t at : {uint64_t{3}, uint64_t{12}, uint64_t{32 + 100}, uint64_t{32 + (1 << 20) + 4 + 77},
                      uint64_t{32 + (1 << 20) + 1}, good.size() - 2}) {
    std::string bad = good;
    bad[at] ^= 0x04;
    ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path, bad).ok());
    const Status s = LoadCheckpoint(dir_, 7, kSize, Writer(&loaded));
    EXPECT_TRUE(s.IsCorruption()) << "flip at " << at << ": " << s.ToString();
    EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
  }
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path, good.substr(0, good.size() - 5)).ok());
  EXPECT_TRUE(LoadCheckpoint(dir_, 7, kSize, Writer(&loaded)).IsCorruption());
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path, good + "x").ok());
  EXPECT_TRUE(LoadCheckpoint(dir_, 7, kSize, Writer(&loaded)).IsCorruption());
  const Status chunk = [&] {
    std::string bad = good;
    bad[32 + 2 * ((1 << 20) + 4) + 5] ^= 1;  // the third chunk
    EXPECT_TRUE(WriteFileAtomically(Env::Posix(), path, bad).ok());
    return LoadCheckpoint(dir_, 7, kSize, Writer(&loaded));
  }();
  EXPECT_NE(chunk.message().find("region offset 2097152"), std::string::npos) << chunk.ToString();
}

TEST_F(CheckpointTest, ACrashWhileWritingLeavesNothingUnderItsName) {
  int reads = 0;
  const RegionReadFn failing = [&](uint64_t offset, size_t n, char* out) {
    if (++reads == 3) return Status::Unavailable("the copy was cut short");
    std::memcpy(out, region_.data() + offset, n);
    return Status::OK();
  };
  EXPECT_FALSE(WriteCheckpoint(dir_, 9, kSize, failing, &env_).ok());
  EXPECT_TRUE(ListCheckpoints(dir_).value().empty()) << "only a .tmp, which is not a checkpoint";
  // A power loss after a completed checkpoint keeps it whole: it was synced before its rename.
  ASSERT_TRUE(WriteCheckpoint(dir_, 9, kSize, Reader(region_), &env_).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  std::string loaded(kSize, '\0');
  EXPECT_TRUE(LoadCheckpoint(dir_, 9, kSize, Writer(&loaded)).ok());
}

TEST_F(CheckpointTest, RecoveryLoadsTheNewestGoodCheckpointAndReplaysTheLogAfterIt) {
  {
    auto log = RegionLog::Open(dir_, 1, {.max_file_bytes = 4096, .env = &env_});
    ASSERT_TRUE(log.ok());
    std::mt19937_64 rng(2);
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 50; ++i) WriteAndLog(log->get(), rng() % (kSize - 600), std::string(500, 'a' + i % 26));
      // A fuzzy copy: writes go on between the checkpoint's lsn and the copy (the copy sees some of them).
      auto lsn = TakeCheckpoint(dir_, log->get(), kSize, [&](uint64_t offset, size_t n, char* out) {
        WriteAndLog(log->get(), rng() % (kSize - 600), std::string(500, 'Z'));
        std::memcpy(out, region_.data() + offset, n);
        return Status::OK();
      }, &env_);
      ASSERT_TRUE(lsn.ok()) << lsn.status().ToString();
    }
    for (int i = 0; i < 20; ++i) WriteAndLog(log->get(), rng() % (kSize - 600), std::string(300, '0' + i % 10));
  }
  const auto checkpoints = ListCheckpoints(dir_).value();
  ASSERT_EQ(checkpoints.size(), 2u) << "the two newest are kept";

  std::string rebuilt(kSize, '\0');
  auto recovery = RecoverRegion(dir_, kSize, Writer(&rebuilt), Apply(&rebuilt), &env_);
  ASSERT_TRUE(recovery.ok()) << recovery.status().ToString();
  EXPECT_EQ(recovery->checkpoint_lsn, checkpoints.back());
  EXPECT_GT(recovery->replay.records, 20u);
  EXPECT_TRUE(rebuilt == region_) << "the fuzzy image and the log after it give the region exactly";

  // The newest checkpoint damaged: the older one and the longer log rebuild the same bytes.
  std::string bad = ReadFileToString(Env::Posix(), CheckpointPath(dir_, checkpoints.back())).value();
  bad[100] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), CheckpointPath(dir_, checkpoints.back()), bad).ok());
  std::string again(kSize, '\0');
  recovery = RecoverRegion(dir_, kSize, Writer(&again), Apply(&again), &env_);
  ASSERT_TRUE(recovery.ok()) << recovery.status().ToString();
  EXPECT_EQ(recovery->checkpoint_lsn, checkpoints.front());
  ASSERT_EQ(recovery->problems.size(), 1u);
  EXPECT_TRUE(again == region_);

  EXPECT_EQ(ListCheckpoints(dir_).value(), std::vector<uint64_t>{checkpoints.front()})
      << "the damaged one is set aside (as .bad), so pruning never counts it among the two newest";
  EXPECT_TRUE(Env::Posix()->FileExists(CheckpointPath(dir_, checkpoints.back()) + ".bad"));

  // No checkpoint left: the log no longer reaches back to record 1, and recovery says so rather than guess.
  ASSERT_TRUE(Env::Posix()->RemoveFile(CheckpointPath(dir_, checkpoints.front())).ok());
  std::string none(kSize, '\0');
  auto refused = RecoverRegion(dir_, kSize, Writer(&none), Apply(&none), &env_);
  ASSERT_TRUE(refused.status().IsCorruption());
  EXPECT_NE(refused.status().message().find("missing"), std::string::npos) << refused.status().ToString();
}

TEST_F(CheckpointTest, WithoutCheckpointsTheLogAloneRebuildsTheRegion) {
  std::string expected(kSize, '\0');
  {
    auto log = RegionLog::Open(dir_, 1, {.env = &env_});
    ASSERT_TRUE(log.ok());
    region_.assign(kSize, '\0');
    for (int i = 0; i < 30; ++i) WriteAndLog(log->get(), i * 1000, std::string(700, 'q'));
    expected = region_;
  }
  std::string rebuilt(kSize, 'g');  // whatever was in memory: recovery starts from zeros, as the region did
  auto recovery = RecoverRegion(dir_, kSize, Writer(&rebuilt), Apply(&rebuilt), &env_);
  ASSERT_TRUE(recovery.ok());
  EXPECT_EQ(recovery->checkpoint_lsn, 0u);
  EXPECT_EQ(recovery->replay.records, 30u);
  EXPECT_EQ(recovery->next_lsn(), 31u);
  EXPECT_TRUE(rebuilt == expected);
}

}  // namespace
}  // namespace cell::logging
