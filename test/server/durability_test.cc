// Durability at the server (docs/DESIGN.md, "Durability"), with a cell-server in this process whose log goes through
// a fault-injecting Env (test/logging/fault_env.h) and a real client over TCP:
//   - a power loss (unsynced bytes dropped, and nothing more reaches the disk) keeps every write acknowledged under
//     --durability=sync;
//   - under async it loses the writes acknowledged within the flush bound (all of them, with a 60 s interval), and
//     keeps those acknowledged well before it (a 20 ms interval, writes acknowledged 1 s before the loss);
//   - a failed fdatasync (or write) reaches the client as an error, the server takes no more writes, and a restart
//     recovers everything acknowledged;
//   - damaged logs and checkpoints (a torn tail, a flipped bit mid-file, a missing checkpoint, all of them missing,
//     and then the log's first file too): recovery says what it found, keeps every write before the damage, never
//     serves a value that was not written, and refuses to start, saying why, when records are missing.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cell/client.h"
#include "logging/checkpoint.h"
#include "server/cell_server.h"
#include "test/logging/fault_env.h"
#include "test/logging/test_dir.h"

namespace cell::server {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string Key(uint64_t i) { return fmt::format("dur{:06}", i); }
std::string Value(uint64_t i, int version) {
  return fmt::format("value-{}-{}-", i, version) + std::string(i % 200, 'x');
}

class Durability : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = logging::FreshTestDir("cell_durability_test");
    fs::create_directories(dir_);
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    fs::remove_all(dir_);
  }

  StatusOr<std::unique_ptr<CellServer>> StartServer(logging::Env* env, const std::string& durability = "sync",
                                                    int flush_ms = 10, uint64_t checkpoint_every = 256 << 20) {
    ServerConfig config;
    config.listen = {"tcp://127.0.0.1:0"};
    config.data_dir = dir_;
    config.store.meganode_bytes = 16 << 10;  // splits every few hundred keys
    config.store.meganodes = 4096;
    config.store.extent_region_bytes = uint64_t{64} << 20;
    config.store.durability = *logging::ParseDurability(durability);
    config.store.async_flush_interval = std::chrono::milliseconds(flush_ms);
    config.store.checkpoint_log_bytes = checkpoint_every;
    config.store.env = env;
    return CellServer::Start(config);
  }
  // Starts the server (asserting it starts) and opens a client of it.
  void Start(logging::Env* env, const std::string& durability = "sync", int flush_ms = 10,
             uint64_t checkpoint_every = 256 << 20) {
    client_.reset();
    server_.reset();
    auto server = StartServer(env, durability, flush_ms, checkpoint_every);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    ClientOptions options;
    options.cluster = server_->uris()[0];
    options.search = "server";
    options.timeout = 5s;
    auto client = Client::Open(options);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }
  void Stop() {
    client_.reset();
    server_.reset();
  }
  std::optional<std::string> Get(uint64_t i) {
    std::string value;
    Status s = client_->Get(Key(i), &value);
    EXPECT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
    return s.ok() ? std::optional<std::string>(value) : std::nullopt;
  }
  // The newest log file of the server's one log directory.
  std::string NewestLogFile() {
    std::string newest;
    for (const auto& d : fs::directory_iterator(dir_)) {
      if (!d.is_directory()) continue;
      for (const auto& f : fs::directory_iterator(d.path())) {
        if (f.path().extension() == ".log" && f.path().string() > newest) newest = f.path().string();
      }
    }
    return newest;
  }
  std::string LogDir() { return fs::path(NewestLogFile()).parent_path().string(); }

  std::string dir_;
  std::unique_ptr<CellServer> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(Durability, SyncKeepsEveryAcknowledgedWriteThroughAPowerLoss) {
  logging::FaultEnv env;
  Start(&env, "sync");
  for (uint64_t i = 0; i < 1500; ++i) ASSERT_TRUE(client_->Put(Key(i), Value(i, 1)).ok());
  for (uint64_t i = 0; i < 1500; i += 3) ASSERT_TRUE(client_->Delete(Key(i)).ok());
  ASSERT_TRUE(env.PowerLoss().ok());
  Stop();  // its last flush fails: the power is off
  Start(logging::Env::Posix());
  for (uint64_t i = 0; i < 1500; ++i) {
    if (i % 3 == 0) {
      EXPECT_FALSE(Get(i).has_value()) << Key(i) << " was deleted";
    } else {
      EXPECT_EQ(Get(i), Value(i, 1)) << Key(i);
    }
  }
  EXPECT_TRUE(server_->store().recovery().recovered);
}

TEST_F(Durability, AsyncLosesWhatWasAcknowledgedWithinItsFlushInterval) {
  logging::FaultEnv env;
  Start(&env, "async", /*flush_ms=*/60000);  // nothing is synced within the test
  for (uint64_t i = 0; i < 300; ++i) ASSERT_TRUE(client_->Put(Key(i), Value(i, 1)).ok());
  ASSERT_TRUE(env.PowerLoss().ok());
  Stop();
  Start(logging::Env::Posix());
  int lost = 0;
  for (uint64_t i = 0; i < 300; ++i) lost += !Get(i).has_value();
  EXPECT_EQ(lost, 300) << "under async, an acknowledged write is on disk only once the flusher has synced it";
}

TEST_F(Durability, AsyncKeepsWhatWasAcknowledgedLongerThanItsBoundAgo) {
  logging::FaultEnv env;
  Start(&env, "async", /*flush_ms=*/20);
  for (uint64_t i = 0; i < 500; ++i) ASSERT_TRUE(client_->Put(Key(i), Value(i, 1)).ok());
  // Writes go on (keys of their own) for a second after the last of the first 500 was acknowledged: 50 flush
  // intervals, far past the bound of one interval plus one fdatasync.
  const auto old_enough = std::chrono::steady_clock::now() + 1s;
  uint64_t later = 0;
  while (std::chrono::steady_clock::now() < old_enough) {
    ASSERT_TRUE(client_->Put(Key(100000 + later), Value(later, 2)).ok());
    ++later;
  }
  ASSERT_TRUE(env.PowerLoss().ok());
  Stop();
  Start(logging::Env::Posix());
  for (uint64_t i = 0; i < 500; ++i) EXPECT_EQ(Get(i), Value(i, 1)) << Key(i);
  uint64_t kept = 0;
  for (uint64_t i = 0; i < later; ++i) {
    auto v = Get(100000 + i);
    if (v.has_value()) {
      EXPECT_EQ(*v, Value(i, 2));
      ++kept;
    }
  }
  std::printf(
      "{\"async_flush_ms\":20,\"old_writes\":500,\"old_kept\":500,\"recent_writes\":%llu,\"recent_kept\":%llu}\n",
      static_cast<unsigned long long>(later), static_cast<unsigned long long>(kept));
}

TEST_F(Durability, AFailedSyncReachesTheClientAndStopsWrites) {
  logging::FaultEnv env;
  Start(&env, "sync");
  for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(client_->Put(Key(i), Value(i, 1)).ok());
  env.FailSyncs(true);
  Status failed = client_->Put(Key(100), Value(100, 1));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("not acknowledged"), std::string::npos) << failed.ToString();
  env.FailSyncs(false);
  Status after = client_->Put(Key(101), Value(101, 1));
  EXPECT_FALSE(after.ok()) << "a log whose fdatasync failed takes no more writes";
  Stop();
  Start(logging::Env::Posix());
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(Get(i), Value(i, 1)) << Key(i);
  ASSERT_TRUE(client_->Put(Key(102), Value(102, 1)).ok()) << "the restarted server takes writes again";
}

TEST_F(Durability, AFailedWriteReachesTheClientToo) {
  logging::FaultEnv env;
  Start(&env, "sync");
  for (uint64_t i = 0; i < 50; ++i) ASSERT_TRUE(client_->Put(Key(i), Value(i, 1)).ok());
  env.FailWrites(true);
  Status failed = client_->Put(Key(50), Value(50, 1));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("not acknowledged"), std::string::npos) << failed.ToString();
  EXPECT_NE(failed.message().find("injected"), std::string::npos) << "the cause reaches the client";
  env.FailWrites(false);
  Stop();
  Start(logging::Env::Posix());
  for (uint64_t i = 0; i < 50; ++i) EXPECT_EQ(Get(i), Value(i, 1)) << Key(i);
}

TEST_F(Durability, ATornTailLosesOnlyTheLastWrite) {
  Start(logging::Env::Posix());
  for (uint64_t i = 0; i < 400; ++i) ASSERT_TRUE(client_->Put(Key(i), Value(i, 1)).ok());
  Stop();
  const std::string log = NewestLogFile();
  fs::resize_file(log, fs::file_size(log) - 5);
  Start(logging::Env::Posix());
  EXPECT_NE(server_->store().recovery().damage, "") << "recovery says what it cut off";
  // The tail was one record of the last put (its leaf image): every earlier put is whole.
  for (uint64_t i = 0; i + 1 < 400; ++i) EXPECT_EQ(Get(i), Value(i, 1)) << Key(i);
  const auto last = Get(399);
  EXPECT_TRUE(!last.has_value() || *last == Value(399, 1));
}

TEST_F(Durability, AFlippedBitMidLogKeepsEveryWriteBeforeIt) {
  Start(logging::Env::Posix());
  for (uint64_t i = 0; i < 300; ++i) ASSERT_TRUE(client_->Put(Key(i), Value(i, 1)).ok());
  const uint64_t before = fs::file_size(NewestLogFile());  // sync: the first 300 are in the file by now
  for (uint64_t i = 300; i < 600; ++i) ASSERT_TRUE(client_->Put(Key(i), Value(i, 1)).ok());
  Stop();
  const std::string log = NewestLogFile();
  const uint64_t size = fs::file_size(log);
  ASSERT_GT(size, before + 4096);
  {
    std::fstream f(log, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t at = before + (size - before) / 2;
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&c, 1);
  }
  Start(logging::Env::Posix());
  EXPECT_NE(server_->store().recovery().damage.find("damaged"), std::string::npos)
      << server_->store().recovery().damage;
  for (uint64_t i = 0; i < 300; ++i) EXPECT_EQ(Get(i), Value(i, 1)) << Key(i);
  int kept = 0;
  for (uint64_t i = 300; i < 600; ++i) {
    const auto v = Get(i);
    EXPECT_TRUE(!v.has_value() || *v == Value(i, 1)) << Key(i) << " holds a value never written";
    kept += v.has_value();
  }
  EXPECT_LT(kept, 300) << "the writes after the damage are cut off";
  std::vector<std::pair<std::string, std::string>> all;
  ASSERT_TRUE(client_->Scan(Key(0), Key(600), 1000, &all).ok());
  EXPECT_EQ(all.size(), 300u + kept);
}

TEST_F(Durability, AMissingCheckpointFallsBackAndNoneLeftRefusesToStart) {
  Start(logging::Env::Posix(), "sync", 10, /*checkpoint_every=*/256 << 10);
  // Enough writes for several checkpoints (a 256 KiB interval; a put logs a 1 KB leaf or more). Each is taken
  // within a second of the log passing the interval: wait for two, reading the directory (the checkpointer's
  // own progress, not a timed sleep).
  uint64_t n = 0;
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < give_up) {
    ASSERT_TRUE(client_->Put(Key(n), Value(n, 1)).ok());
    ++n;
    if (n % 100 == 0 && logging::ListCheckpoints(LogDir())->size() >= 2) break;
  }
  ASSERT_GE(logging::ListCheckpoints(LogDir())->size(), 2u);
  for (uint64_t i = 0; i < 50; ++i) ASSERT_TRUE(client_->Put(Key(n + i), Value(n + i, 1)).ok());
  n += 50;
  Stop();
  const std::string dir = LogDir();
  const auto checkpoints = *logging::ListCheckpoints(dir);
  fs::remove(logging::CheckpointPath(dir, checkpoints.back()));
  Start(logging::Env::Posix());
  EXPECT_EQ(server_->store().recovery().checkpoint_lsn, checkpoints[checkpoints.size() - 2]) << "the older one";
  for (uint64_t i = 0; i < n; ++i) EXPECT_EQ(Get(i), Value(i, 1)) << Key(i);
  Stop();
  // No checkpoint at all: the log still reaches back to its first record (its first file is still being written to),
  // so the log alone rebuilds everything.
  std::vector<uint64_t> left = *logging::ListCheckpoints(dir);
  ASSERT_FALSE(left.empty());
  for (uint64_t lsn : left) fs::remove(logging::CheckpointPath(dir, lsn));
  Start(logging::Env::Posix());
  EXPECT_EQ(server_->store().recovery().checkpoint_lsn, 0u);
  for (uint64_t i = 0; i < n; ++i) EXPECT_EQ(Get(i), Value(i, 1)) << Key(i);
  Stop();
  // No checkpoint, and only the newest log file (as once checkpoints let the older be removed): records are missing,
  // and the server refuses to start rather than serve a tree without them.
  left = *logging::ListCheckpoints(dir);
  for (uint64_t lsn : left) fs::remove(logging::CheckpointPath(dir, lsn));
  const auto files = *logging::RegionLog::Files(dir);
  ASSERT_FALSE(files.empty());
  ASSERT_GT(files.back(), 1u);
  for (size_t i = 0; i + 1 < files.size(); ++i) fs::remove(logging::RegionLog::FilePath(dir, files[i]));
  auto refused = StartServer(logging::Env::Posix());
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsCorruption()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("missing"), std::string::npos) << refused.status().ToString();
}

}  // namespace
}  // namespace cell::server
