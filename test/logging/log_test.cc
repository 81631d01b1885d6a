// The log's framing (logging/log_format.h): records of every size round-trip through blocks and fragments; a torn
// tail, a flipped bit or zeros are found, reported, and never read past or returned as records; the Env seam drops
// unsynced bytes on a simulated power loss.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "logging/crc32c.h"
#include "logging/env.h"
#include "logging/log_reader.h"
#include "logging/log_writer.h"
#include "test/logging/fault_env.h"
#include "test/logging/test_dir.h"

namespace cell::logging {
namespace {

using log::kBlockSize;
using log::kHeaderSize;
using log::Reader;

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("cell_log_test");
    ASSERT_TRUE(Env::Posix()->CreateDirs(dir_).ok());
    path_ = dir_ + "/log";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `records` to a new log; returns the offset each record starts at.
  std::vector<uint64_t> Write(const std::vector<std::string>& records, Env* env = Env::Posix()) {
    auto file = env->NewWritableFile(path_);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    log::Writer writer(file->get());
    std::vector<uint64_t> starts;
    for (const std::string& r : records) {
      starts.push_back(writer.size());
      EXPECT_TRUE(writer.AddRecord(r).ok());
    }
    EXPECT_TRUE((*file)->Close().ok());
    return starts;
  }

  struct Read {
    std::vector<std::string> records;
    Reader::End end;
    Status status;
    uint64_t valid_length;
  };
  Read ReadAll() {
    auto file = Env::Posix()->NewSequentialFile(path_);
    EXPECT_TRUE(file.ok());
    Reader reader(file->get());
    Read out;
    std::string record;
    while (reader.ReadRecord(&record)) out.records.push_back(record);
    out.end = reader.end();
    out.status = reader.status();
    out.valid_length = reader.valid_length();
    return out;
  }

  void Corrupt(uint64_t offset, char xor_mask) {
    std::string bytes = ReadFileToString(Env::Posix(), path_).value();
    bytes[offset] ^= xor_mask;
    ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path_, bytes).ok());
  }
  uint64_t Size() { return Env::Posix()->FileSize(path_).value(); }

  std::string dir_, path_;
};

std::string Bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(Crc32c, MatchesTheStandardAndItsMaskRoundTrips) {
  EXPECT_EQ(crc32c::Value("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c::Value(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720's test vector
  EXPECT_EQ(crc32c::Value(std::string(32, '\xff')), 0x62A8AB43u);
  EXPECT_EQ(crc32c::Extend(crc32c::Value("1234"), "56789"), 0xE3069283u);
  EXPECT_EQ(crc32c::Value(""), 0u);
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xffffffffu}) {
    EXPECT_NE(crc32c::Mask(crc), crc);
    EXPECT_EQ(crc32c::Unmask(crc32c::Mask(crc)), crc);
  }
}

TEST_F(LogTest, RecordsOfEverySizeRoundTrip) {
  std::vector<std::string> records = {
      "", "a", Bytes(100, 1), Bytes(kBlockSize - kHeaderSize, 2), Bytes(kBlockSize, 3), Bytes(3 * kBlockSize + 17, 4),
      ""};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 500; ++i) records.push_back(Bytes(rng() % (i % 10 == 0 ? 100'000 : 300), rng()));
  Write(records);
  const Read read = ReadAll();
  EXPECT_EQ(read.end, Reader::End::kClean) << read.status.ToString();
  EXPECT_TRUE(read.status.ok());
  ASSERT_EQ(read.records.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) EXPECT_EQ(read.records[i], records[i]) << "record " << i;
  EXPECT_EQ(read.valid_length, Size());
}

TEST_F(LogTest, ABlockEndTooShortForAHeaderIsSkipped) {
  // The first record leaves 6 bytes in the block: zeros, and the second record starts the next block.
  const std::string first = Bytes(kBlockSize - kHeaderSize - 6, 7);
  const auto starts = Write({first, "second", Bytes(kBlockSize - 2 * kHeaderSize - 6, 8), "fourth"});
  EXPECT_EQ(starts[1], kBlockSize - 6);
  const Read read = ReadAll();
  EXPECT_EQ(read.end, Reader::End::kClean);
  ASSERT_EQ(read.records.size(), 4u);
  EXPECT_EQ(read.records[0], first);
  EXPECT_EQ(read.records[1], "second");
  EXPECT_EQ(read.records[3], "fourth");
}

TEST_F(LogTest, AppendingToAnExistingLogContinuesItsBlocks) {
  Write({Bytes(40'000, 9), "b"});
  const uint64_t size = Size();
  {
    auto file = Env::Posix()->NewAppendableFile(path_);
    ASSERT_TRUE(file.ok());
    log::Writer writer(file->get(), size);
    ASSERT_TRUE(writer.AddRecord(Bytes(70'000, 10)).ok());
    ASSERT_TRUE(writer.AddRecord("d").ok());
    ASSERT_TRUE((*file)->Close().ok());
  }
  const Read read = ReadAll();
  EXPECT_EQ(read.end, Reader::End::kClean);
  ASSERT_EQ(read.records.size(), 4u);
  EXPECT_EQ(read.records[2], Bytes(70'000, 10));
  EXPECT_EQ(read.records[3], "d");
}

TEST_F(LogTest, ATornTailAnywhereInTheLastRecordLosesOnlyThatRecord) {
  // The last record spans three blocks; cut the file at every 997th byte of it, and at each fragment boundary.
  std::vector<std::string> records;
  for (int i = 0; i < 20; ++i) records.push_back(Bytes(3000 + i, 100 + i));
  records.push_back(Bytes(2 * kBlockSize + 500, 200));
  const auto starts = Write(records);
  const std::string whole = ReadFileToString(Env::Posix(), path_).value();
  std::vector<uint64_t> cuts;
  for (uint64_t cut = starts.back() + 1; cut < whole.size(); cut += 997) cuts.push_back(cut);
  for (uint64_t block_end = (starts.back() / kBlockSize + 1) * kBlockSize; block_end < whole.size();
       block_end += kBlockSize) {
    cuts.push_back(block_end);  // between two fragments: the file ends cleanly, the record does not
  }
  for (uint64_t cut : cuts) {
    ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path_, std::string_view(whole).substr(0, cut)).ok());
    const Read read = ReadAll();
    EXPECT_EQ(read.end, Reader::End::kTornTail) << "cut at " << cut << ": " << read.status.ToString();
    EXPECT_TRUE(read.status.IsCorruption());
    ASSERT_EQ(read.records.size(), records.size() - 1) << "cut at " << cut;
    for (size_t i = 0; i + 1 < records.size(); ++i) ASSERT_EQ(read.records[i], records[i]);
    EXPECT_EQ(read.valid_length, starts.back()) << "appending resumes where the torn record began";
  }
}

TEST_F(LogTest, AFlippedBitStopsTheReadAtTheDamagedRecordAndSaysWhere) {
  std::vector<std::string> records;
  for (int i = 0; i < 100; ++i) records.push_back(Bytes(1000 + 37 * i, 300 + i));
  const auto starts = Write(records);
  for (int bit : {0, 3, 7}) {
    for (uint64_t where : {starts[50] + kHeaderSize + 10, starts[50] + 1, starts[50] + 4, starts[50] + 6}) {
      Write(records);
      Corrupt(where, static_cast<char>(1 << bit));
      const Read read = ReadAll();
      ASSERT_EQ(read.end, Reader::End::kCorrupt) << "flip at " << where << ": " << read.status.ToString();
      EXPECT_TRUE(read.status.IsCorruption());
      EXPECT_NE(read.status.ToString().find("offset"), std::string::npos) << read.status.ToString();
      // Every record before the damage, and none after it (a later write without an earlier one is not a state).
      ASSERT_LE(read.records.size(), 50u);
      EXPECT_GE(read.records.size(), 50u - 1) << "the damage is in record 50 (or its header's length)";
      for (size_t i = 0; i < read.records.size(); ++i) ASSERT_EQ(read.records[i], records[i]);
    }
  }
}

TEST_F(LogTest, ZerosAfterTheLogAreATornTailButZerosInsideItAreCorruption) {
  const std::vector<std::string> records = {"one", Bytes(50'000, 11), "three"};
  Write(records);
  std::string bytes = ReadFileToString(Env::Posix(), path_).value();
  const size_t size = bytes.size();
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path_, bytes + std::string(70'000, '\0')).ok());
  Read read = ReadAll();
  EXPECT_EQ(read.end, Reader::End::kTornTail) << read.status.ToString();
  EXPECT_EQ(read.records, records);
  EXPECT_EQ(read.valid_length, size);
  // Zero the first record's bytes: the log after it is not a tail.
  std::fill(bytes.begin(), bytes.begin() + kHeaderSize + 3, '\0');
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path_, bytes).ok());
  read = ReadAll();
  EXPECT_EQ(read.end, Reader::End::kCorrupt) << read.status.ToString();
  EXPECT_TRUE(read.records.empty());
}

TEST_F(LogTest, AnEmptyOrMissingLog) {
  Write({});
  const Read read = ReadAll();
  EXPECT_EQ(read.end, Reader::End::kClean);
  EXPECT_TRUE(read.records.empty());
  EXPECT_TRUE(Env::Posix()->NewSequentialFile(dir_ + "/no-such-log").status().IsNotFound());
}

TEST_F(LogTest, APowerLossKeepsWhatWasSyncedAndNothingAfter) {
  FaultEnv env;
  auto file = env.NewWritableFile(path_);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(env.SyncDir(dir_).ok());  // the new file's name is durable
  log::Writer writer(file->get());
  ASSERT_TRUE(writer.AddRecord("synced 1").ok());
  ASSERT_TRUE(writer.AddRecord(Bytes(40'000, 12)).ok());
  ASSERT_TRUE((*file)->Sync().ok());
  ASSERT_TRUE(writer.AddRecord("not synced").ok());
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  const Read read = ReadAll();
  EXPECT_EQ(read.end, Reader::End::kClean);
  ASSERT_EQ(read.records.size(), 2u);
  EXPECT_EQ(read.records[0], "synced 1");

  // Failures injected at the seam reach the writer's caller.
  env.FailSyncs(true);
  EXPECT_TRUE((*file)->Sync().IsUnavailable());
  env.FailSyncs(false);
  env.FailWrites(true);
  EXPECT_FALSE(writer.AddRecord("x").ok());
}

// The power loss of the fault-injecting Env also loses directory entries not followed by a sync of their
// directory: files created, renamed and removed come back as they were at the last SyncDir; synced ones stay.
TEST_F(LogTest, APowerLossUndoesDirectoryEntriesNotSynced) {
  FaultEnv env;
  const auto write = [&](const std::string& path, const std::string& contents) {
    auto f = env.NewWritableFile(path);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append(contents).ok());
    ASSERT_TRUE((*f)->Sync().ok());
    ASSERT_TRUE((*f)->Close().ok());
  };
  write(dir_ + "/kept", "kept");
  write(dir_ + "/removed", "removed");
  write(dir_ + "/renamed", "renamed");
  write(dir_ + "/replaced", "old");
  ASSERT_TRUE(env.SyncDir(dir_).ok());
  write(dir_ + "/created", "created");  // never synced in its directory
  ASSERT_TRUE(env.RemoveFile(dir_ + "/removed").ok());
  ASSERT_TRUE(env.RenameFile(dir_ + "/renamed", dir_ + "/moved").ok());
  write(dir_ + "/replaced.tmp", "new");
  ASSERT_TRUE(env.RenameFile(dir_ + "/replaced.tmp", dir_ + "/replaced").ok());
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  EXPECT_FALSE(Env::Posix()->FileExists(dir_ + "/created"));
  EXPECT_EQ(ReadFileToString(Env::Posix(), dir_ + "/removed").value(), "removed");
  EXPECT_FALSE(Env::Posix()->FileExists(dir_ + "/moved"));
  EXPECT_EQ(ReadFileToString(Env::Posix(), dir_ + "/renamed").value(), "renamed");
  EXPECT_EQ(ReadFileToString(Env::Posix(), dir_ + "/replaced").value(), "old");
  EXPECT_FALSE(Env::Posix()->FileExists(dir_ + "/replaced.tmp"));
  EXPECT_EQ(ReadFileToString(Env::Posix(), dir_ + "/kept").value(), "kept");
  // The same changes followed by a sync of the directory survive.
  ASSERT_TRUE(WriteFileAtomically(&env, dir_ + "/replaced", "new").ok());  // syncs the directory itself
  ASSERT_TRUE(env.RemoveFile(dir_ + "/removed").ok());
  ASSERT_TRUE(env.SyncDir(dir_).ok());
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  EXPECT_EQ(ReadFileToString(Env::Posix(), dir_ + "/replaced").value(), "new");
  EXPECT_FALSE(Env::Posix()->FileExists(dir_ + "/removed"));
}

TEST_F(LogTest, AFileIsReplacedAtomically) {
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path_, "old").ok());
  ASSERT_TRUE(WriteFileAtomically(Env::Posix(), path_, "new contents").ok());
  EXPECT_EQ(ReadFileToString(Env::Posix(), path_).value(), "new contents");
  EXPECT_FALSE(Env::Posix()->FileExists(path_ + ".tmp"));
  auto children = Env::Posix()->GetChildren(dir_);
  ASSERT_TRUE(children.ok());
  EXPECT_EQ(children->size(), 1u);
}

}  // namespace
}  // namespace cell::logging
