// Checkpoints (logging/checkpoint.h): an image of two regions round-trips, all-zero chunks left out of the file;
// damage anywhere is found and said where; a crash while one is written leaves nothing under its name; recovery
// loads the newest good one (falling back to the older, zeros included), replays the log after it, and refuses with a
// clear error when records are missing.
#include "logging/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
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
    other_.assign(kOtherSize, '\0');  // its first chunk stays all zeros
    for (size_t i = 1 << 20; i < kOtherSize; ++i) other_[i] = static_cast<char>(rng());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static RegionReadFn Reader(const std::string* region) {
    return [region](uint64_t offset, size_t n, char* out) {
      std::memcpy(out, region->data() + offset, n);
      return Status::OK();
    };
  }
  static RegionWriteFn Writer(std::string* region) {
    return [region](uint64_t offset, std::string_view bytes) {
      region->replace(offset, bytes.size(), bytes);
      return Status::OK();
    };
  }
  // Region 1 is `a`, region 2 is `b`: read from and written to.
  static std::vector<CheckpointRegion> Regions(std::string* a, std::string* b) {
    return {{.id = 1, .size = a->size(), .read = Reader(a), .write = Writer(a)},
            {.id = 2, .size = b->size(), .read = Reader(b), .write = Writer(b)}};
  }
  std::vector<CheckpointRegion> Live() { return Regions(&region_, &other_); }
  // Applies a log record's byte ranges to the regions they name.
  static std::function<Status(uint64_t, const LogRecord&)> Apply(std::string* a, std::string* b) {
    return [a, b](uint64_t, const LogRecord& r) {
      for (const auto& range : r.ranges)
        (range.region == 1 ? a : b)->replace(range.offset, range.bytes.size(), range.bytes);
      return Status::OK();
    };
  }
  // Writes `bytes` at `offset` in region 1 (or 2) and logs it.
  void WriteAndLog(RegionLog* log, uint64_t offset, const std::string& bytes, uint32_t region = 1) {
    (region == 1 ? region_ : other_).replace(offset, bytes.size(), bytes);
    LogRecord r;
    r.ranges.push_back({offset, bytes, region});
    ASSERT_TRUE(log->Append(r).ok());
  }

  static constexpr uint64_t kSize = 3 * (1 << 20) + 12345;  // three whole chunks and a short one
  static constexpr uint64_t kOtherSize = 2 * (1 << 20) + 8;
  static constexpr uint64_t kHeader = 24 + 2 * 12 + 4;  // with two regions
  std::string dir_;
  std::string region_, other_;
  FaultEnv env_;
};

TEST_F(CheckpointTest, AnImageRoundTripsWithoutItsZeroChunks) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 7, Live()).ok());
  EXPECT_EQ(ListCheckpoints(dir_).value(), std::vector<uint64_t>{7});
  EXPECT_EQ(std::filesystem::file_size(CheckpointPath(dir_, 7)),
            kHeader + kSize + 4 * 8 + (kOtherSize - (1 << 20)) + 3 * 8 + 12)
      << "the all-zero chunk is 8 bytes in the file";
  std::string loaded(kSize, '\0'), loaded_other(kOtherSize, '\0');
  ASSERT_TRUE(LoadCheckpoint(dir_, 7, Regions(&loaded, &loaded_other), /*zero=*/true).ok());
  EXPECT_TRUE(loaded == region_);
  EXPECT_TRUE(loaded_other == other_);
  std::string longer(kSize + 1, '\0');
  EXPECT_TRUE(LoadCheckpoint(dir_, 7, Regions(&longer, &loaded_other), true).IsCorruption()) << "another size";
  auto swapped = Regions(&loaded, &loaded_other);
  std::swap(swapped[0].id, swapped[1].id);
  EXPECT_TRUE(LoadCheckpoint(dir_, 7, swapped, true).IsCorruption()) << "other region ids";
  EXPECT_TRUE(LoadCheckpoint(dir_, 8, Regions(&loaded, &loaded_other), true).IsNotFound());
}

TEST_F(CheckpointTest, DamageAnywhereIsFoundAndLocated) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 7, Live()).ok());
  const std::string path = CheckpointPath(dir_, 7);
  const std::string good = ReadFileToString(Env::Posix(), path).value();
  std::string loaded(kSize, '\0'), loaded_other(kOtherSize, '\0');
  // A flipped bit in the header, in the region list, in a chunk's length, in a chunk, in a chunk's crc, in the
  // zero chunk's crc, in the trailer.
  for (uint64_t at : {uint64_t{3}, uint64_t{12}, uint64_t{30}, kHeader + 1, kHeader + 4 + 100,
                      kHeader + 4 + (1 << 20) + 1, kHeader + 4 * 8 + kSize + 5, good.size() - 2}) {
    std::string bad = good;
    bad[at] ^= 0x04;
    ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path, bad).ok());
    const Status s = LoadCheckpoint(dir_, 7, Regions(&loaded, &loaded_other), true);
    EXPECT_TRUE(s.IsCorruption()) << "flip at " << at << ": " << s.ToString();
    EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
  }
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path, good.substr(0, good.size() - 5)).ok());
  EXPECT_TRUE(LoadCheckpoint(dir_, 7, Regions(&loaded, &loaded_other), true).IsCorruption());
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path, good + "x").ok());
  EXPECT_TRUE(LoadCheckpoint(dir_, 7, Regions(&loaded, &loaded_other), true).IsCorruption());
  const Status chunk = [&] {
    std::string bad = good;
    bad[kHeader + 2 * ((1 << 20) + 8) + 4 + 5] ^= 1;  // the third chunk
    EXPECT_TRUE(WriteFileAtomically(Env::Posix(), path, bad).ok());
    return LoadCheckpoint(dir_, 7, Regions(&loaded, &loaded_other), true);
  }();
  EXPECT_NE(chunk.message().find("region 1 offset 2097152"), std::string::npos) << chunk.ToString();
}

TEST_F(CheckpointTest, ChunksTheRegionSaysAreHolesAreStoredAsZerosUnread) {
  // Region 2's first chunk is zeros and said to be a hole: it must not be read.
  auto regions = Live();
  regions[1].read = [&](uint64_t offset, size_t n, char* out) {
    if (offset < (1 << 20)) return Status::Internal("a hole was read");
    std::memcpy(out, other_.data() + offset, n);
    return Status::OK();
  };
  regions[1].hole = [](uint64_t offset, size_t n) { return offset + n <= (1 << 20); };
  ASSERT_TRUE(WriteCheckpoint(dir_, 7, regions).ok());
  std::string loaded(kSize, 'x'), loaded_other(kOtherSize, 'x');
  ASSERT_TRUE(LoadCheckpoint(dir_, 7, Regions(&loaded, &loaded_other), /*zero=*/false).ok());
  EXPECT_EQ(loaded, region_);
  EXPECT_EQ(loaded_other, other_) << "the hole loads as zeros";
}

TEST_F(CheckpointTest, ACrashWhileWritingLeavesNothingUnderItsName) {
  int reads = 0;
  const RegionReadFn failing = [&](uint64_t offset, size_t n, char* out) {
    if (++reads == 3) return Status::Unavailable("the copy was cut short");
    std::memcpy(out, region_.data() + offset, n);
    return Status::OK();
  };
  auto regions = Live();
  regions[0].read = failing;
  EXPECT_FALSE(WriteCheckpoint(dir_, 9, regions, &env_).ok());
  EXPECT_TRUE(ListCheckpoints(dir_).value().empty()) << "only a .tmp, which is not a checkpoint";
  // A power loss after a completed checkpoint keeps it whole: it was synced before its rename.
  ASSERT_TRUE(WriteCheckpoint(dir_, 9, Live(), &env_).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  std::string loaded(kSize, '\0'), loaded_other(kOtherSize, '\0');
  EXPECT_TRUE(LoadCheckpoint(dir_, 9, Regions(&loaded, &loaded_other), true).ok());
}

TEST_F(CheckpointTest, RecoveryLoadsTheNewestGoodCheckpointAndReplaysTheLogAfterIt) {
  {
    auto log = RegionLog::Open(dir_, 1, {.max_file_bytes = 4096, .env = &env_});
    ASSERT_TRUE(log.ok());
    std::mt19937_64 rng(2);
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 50; ++i) {
        WriteAndLog(log->get(), rng() % (kSize - 600), std::string(500, 'a' + i % 26));
        WriteAndLog(log->get(), (1 << 20) + rng() % (kOtherSize - (1 << 20) - 600), std::string(400, 'o'), 2);
      }
      // A fuzzy copy: writes go on between the checkpoint's lsn and the copy (the copy sees some of them).
      auto regions = Live();
      regions[0].read = [&](uint64_t offset, size_t n, char* out) {
        WriteAndLog(log->get(), rng() % (kSize - 600), std::string(500, 'Z'));
        std::memcpy(out, region_.data() + offset, n);
        return Status::OK();
      };
      auto lsn = TakeCheckpoint(dir_, log->get(), regions, &env_);
      ASSERT_TRUE(lsn.ok()) << lsn.status().ToString();
    }
    for (int i = 0; i < 20; ++i) WriteAndLog(log->get(), rng() % (kSize - 600), std::string(300, '0' + i % 10));
  }
  const auto checkpoints = ListCheckpoints(dir_).value();
  ASSERT_EQ(checkpoints.size(), 2u) << "the two newest are kept";

  std::string rebuilt(kSize, '\0'), rebuilt_other(kOtherSize, '\0');
  auto recovery = Recover(dir_, Regions(&rebuilt, &rebuilt_other), Apply(&rebuilt, &rebuilt_other), &env_);
  ASSERT_TRUE(recovery.ok()) << recovery.status().ToString();
  EXPECT_EQ(recovery->checkpoint_lsn, checkpoints.back());
  EXPECT_GT(recovery->replay.records, 20u);
  EXPECT_TRUE(rebuilt == region_) << "the fuzzy image and the log after it give the region exactly";
  EXPECT_TRUE(rebuilt_other == other_);

  // The newest checkpoint damaged: the older one and the longer log rebuild the same bytes.
  std::string bad = ReadFileToString(Env::Posix(), CheckpointPath(dir_, checkpoints.back())).value();
  bad[100] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), CheckpointPath(dir_, checkpoints.back()), bad).ok());
  std::string again(kSize, '\0'), again_other(kOtherSize, '\0');
  recovery = Recover(dir_, Regions(&again, &again_other), Apply(&again, &again_other), &env_);
  ASSERT_TRUE(recovery.ok()) << recovery.status().ToString();
  EXPECT_EQ(recovery->checkpoint_lsn, checkpoints.front());
  ASSERT_EQ(recovery->problems.size(), 1u);
  EXPECT_TRUE(again == region_);
  EXPECT_TRUE(again_other == other_);

  EXPECT_EQ(ListCheckpoints(dir_).value(), std::vector<uint64_t>{checkpoints.front()})
      << "the damaged one is set aside (as .bad), so pruning never counts it among the two newest";
  EXPECT_TRUE(Env::Posix()->FileExists(CheckpointPath(dir_, checkpoints.back()) + ".bad"));

  // No checkpoint left: the log no longer reaches back to record 1, and recovery says so rather than guess.
  ASSERT_TRUE(Env::Posix()->RemoveFile(CheckpointPath(dir_, checkpoints.front())).ok());
  std::string none(kSize, '\0'), none_other(kOtherSize, '\0');
  auto refused = Recover(dir_, Regions(&none, &none_other), Apply(&none, &none_other), &env_);
  ASSERT_TRUE(refused.status().IsCorruption());
  EXPECT_NE(refused.status().message().find("missing"), std::string::npos) << refused.status().ToString();
}

TEST_F(CheckpointTest, WithoutCheckpointsTheLogAloneRebuildsTheRegions) {
  region_.assign(kSize, '\0');
  other_.assign(kOtherSize, '\0');
  {
    auto log = RegionLog::Open(dir_, 1, {.env = &env_});
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < 30; ++i) WriteAndLog(log->get(), i * 1000, std::string(700, 'q'), 1 + i % 2);
  }
  std::string rebuilt(kSize, '\0'), rebuilt_other(kOtherSize, '\0');
  auto recovery = Recover(dir_, Regions(&rebuilt, &rebuilt_other), Apply(&rebuilt, &rebuilt_other), &env_);
  ASSERT_TRUE(recovery.ok());
  EXPECT_EQ(recovery->checkpoint_lsn, 0u);
  EXPECT_EQ(recovery->replay.records, 30u);
  EXPECT_EQ(recovery->next_lsn(), 31u);
  EXPECT_TRUE(rebuilt == region_);
  EXPECT_TRUE(rebuilt_other == other_);
}

TEST_F(CheckpointTest, FallingBackToAnOlderCheckpointRestoresItsZeroChunks) {
  // The older checkpoint has region 2's first chunk all zeros; the newer has it written, and fails its check only
  // in its last chunk, after that chunk was loaded. The fallback must put the zeros back.
  ASSERT_TRUE(WriteCheckpoint(dir_, 5, Live()).ok());
  const std::string older_other = other_;
  other_.replace(100, 5, "dirty");
  ASSERT_TRUE(WriteCheckpoint(dir_, 6, Live()).ok());
  const std::string path = CheckpointPath(dir_, 6);
  std::string bad = ReadFileToString(Env::Posix(), path).value();
  bad[bad.size() - 12 - 4 - 3] ^= 1;  // inside region 2's last chunk
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path, bad).ok());
  std::string rebuilt(kSize, '\0'), rebuilt_other(kOtherSize, '\0');
  auto recovery = Recover(dir_, Regions(&rebuilt, &rebuilt_other), Apply(&rebuilt, &rebuilt_other), &env_);
  ASSERT_TRUE(recovery.ok()) << recovery.status().ToString();
  EXPECT_EQ(recovery->checkpoint_lsn, 5u);
  EXPECT_EQ(recovery->problems.size(), 1u);
  EXPECT_TRUE(rebuilt == region_);
  EXPECT_TRUE(rebuilt_other == older_other) << "the newer checkpoint's bytes in the older's zero chunk were undone";
}

// A survivor reads a log its old owner may still append to (RecoverMode::kReadOnly): the same regions come back, and
// not a byte of the directory changes, though it holds what a repairing recovery changes: a damaged newer checkpoint,
// an interrupted checkpoint's .tmp, and a torn tail.
TEST_F(CheckpointTest, ARecoveryThatOnlyReadsRebuildsTheSameRegionsAndChangesNoFile) {
  {
    auto log = RegionLog::Open(dir_, 1, {.env = &env_});
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < 10; ++i) WriteAndLog(log->get(), i * 5000, std::string(900, 'a' + i), 1 + i % 2);
    ASSERT_TRUE(TakeCheckpoint(dir_, log->get(), Live(), &env_).ok());
    for (int i = 0; i < 10; ++i) WriteAndLog(log->get(), i * 7000 + 3, std::string(600, 'A' + i), 1 + i % 2);
  }
  const uint64_t good = ListCheckpoints(dir_).value().back();
  std::string bad = ReadFileToString(Env::Posix(), CheckpointPath(dir_, good)).value();
  bad[100] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), CheckpointPath(dir_, good + 1), bad).ok());
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), CheckpointPath(dir_, good + 2) + ".tmp", "interrupted").ok());
  const auto files = RegionLog::Files(dir_).value();
  ASSERT_FALSE(files.empty());
  {
    std::FILE* f = std::fopen(RegionLog::FilePath(dir_, files.back()).c_str(), "ab");
    ASSERT_NE(f, nullptr);
    std::fputs("\x01\x02\x03", f);  // half a record header: an append under way
    std::fclose(f);
  }
  const auto snapshot = [this] {
    std::map<std::string, std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      out[e.path().filename().string()] = ReadFileToString(Env::Posix(), e.path().string()).value();
    }
    return out;
  };
  const auto before = snapshot();

  std::string read(kSize, '\0'), read_other(kOtherSize, '\0');
  auto recovery = Recover(dir_, Regions(&read, &read_other), Apply(&read, &read_other), &env_, RecoverMode::kReadOnly);
  ASSERT_TRUE(recovery.ok()) << recovery.status().ToString();
  EXPECT_EQ(recovery->checkpoint_lsn, good);
  EXPECT_EQ(recovery->problems.size(), 1u) << "the damaged checkpoint is passed over";
  EXPECT_EQ(recovery->replay.records, 10u);
  EXPECT_EQ(recovery->replay.end, log::Reader::End::kTornTail);
  EXPECT_TRUE(read == region_);
  EXPECT_TRUE(read_other == other_);
  EXPECT_TRUE(snapshot() == before) << "a read-only recovery changed the directory";

  // The same directory under a repairing recovery: the same regions, and the files it changes (so the check above
  // could fail).
  std::string repaired(kSize, '\0'), repaired_other(kOtherSize, '\0');
  recovery = Recover(dir_, Regions(&repaired, &repaired_other), Apply(&repaired, &repaired_other), &env_);
  ASSERT_TRUE(recovery.ok()) << recovery.status().ToString();
  EXPECT_TRUE(repaired == region_);
  EXPECT_TRUE(repaired_other == other_);
  const auto after = snapshot();
  EXPECT_FALSE(after == before);
  EXPECT_TRUE(after.contains(std::filesystem::path(CheckpointPath(dir_, good + 1) + ".bad").filename().string()));
  EXPECT_FALSE(after.contains(std::filesystem::path(CheckpointPath(dir_, good + 2) + ".tmp").filename().string()));
}

}  // namespace
}  // namespace cell::logging
