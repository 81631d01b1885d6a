// The server's write sink over the tree's log (server/region_logger.h), end to end with a real tree: four threads put,
// overwrite and delete through dozens of meganode splits while checkpoints of both regions are copied; the newest
// checkpoint plus the log after it rebuild both regions byte for byte; a request's Commit makes its records durable
// (a power loss right after keeps them); and the appliers refuse records that do not fit their region.
#include "server/region_logger.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "logging/checkpoint.h"
#include "meganode/global_tree.h"
#include "test/join_at_end.h"
#include "test/logging/fault_env.h"
#include "test/logging/test_dir.h"

namespace cell::server {
namespace {

using logging::Durability;
using logging::RegionLog;

std::string Key(uint64_t i) { return "key" + std::to_string(1000000 + i); }

class RegionLoggerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = logging::FreshTestDir("cell_region_logger_test");
    auto log = RegionLog::Open(dir_, 1, {.durability = Durability::kSync, .env = &env_});
    ASSERT_TRUE(log.ok());
    log_ = std::move(*log);
    logger_ = std::make_unique<RegionLogger>(log_.get(), std::vector<uint32_t>{1, 2});
    meganode::GlobalTreeOptions o;
    o.meganode_bytes = 32 << 10;  // a split every few hundred keys
    o.meganodes = 512;
    o.extent_region_bytes = uint64_t{32} << 20;
    o.write_sink = logger_.get();
    auto tree = meganode::GlobalTree::Open(o);
    ASSERT_TRUE(tree.ok()) << tree.status().ToString();
    tree_ = std::move(*tree);
  }
  void TearDown() override {
    tree_.reset();
    logger_.reset();
    log_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Rebuilds both regions from the checkpoint and log into zeroed copies; compares them with the live ones.
  void ExpectRebuilt() {
    const meganode::Region& nodes = tree_->node_region();
    const meganode::Region& extents = tree_->extent_region();
    std::vector<uint64_t> node_copy(nodes.size() / 8, 0), extent_copy(extents.size() / 8, 0);
    const auto into = [](std::vector<uint64_t>& copy) {
      return [&copy](uint64_t offset, std::string_view bytes) {
        std::memcpy(reinterpret_cast<char*>(copy.data()) + offset, bytes.data(), bytes.size());
        return Status::OK();
      };
    };
    std::vector<logging::CheckpointRegion> regions = {
        {.id = 1, .size = nodes.size(), .read = nullptr, .write = into(node_copy)},
        {.id = 2, .size = extents.size(), .read = nullptr, .write = into(extent_copy)}};
    auto recovery = logging::Recover(
        dir_, regions,
        [&](uint64_t, const logging::LogRecord& r) {
          return ApplyLogRecord(r, {1, node_copy.data(), nodes.size()}, {2, extent_copy.data(), extents.size()});
        },
        &env_);
    ASSERT_TRUE(recovery.ok()) << recovery.status().ToString();
    EXPECT_GT(recovery->checkpoint_lsn, 0u);
    EXPECT_GT(recovery->replay.records, 0u);
    for (auto [live, copy, what] : {std::tuple{&nodes, &node_copy, "node"}, {&extents, &extent_copy, "extent"}}) {
      const uint64_t* words = live->Resolve(0, live->size());
      size_t differ = 0;
      for (size_t i = 0; i < copy->size(); ++i) differ += (*copy)[i] != words[i];
      EXPECT_EQ(differ, 0u) << what << " words differ";
    }
  }

  std::string dir_;
  logging::FaultEnv env_;
  std::unique_ptr<RegionLog> log_;
  std::unique_ptr<RegionLogger> logger_;
  std::unique_ptr<meganode::GlobalTree> tree_;
};

TEST_F(RegionLoggerTest, ACheckpointTakenDuringWritesAndTheLogAfterItRebuildTheRegions) {
  // Each writer makes 500 writes before the checkpoints start, writes on while they are copied, and makes 100 more
  // after they end (and 2,500 in all at least).
  std::atomic<int> done{0}, started{0};
  std::atomic<bool> checkpoints_done{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(20 + t);
      int after = 0;
      for (int i = 0;; ++i) {
        const uint64_t k = rng() % 4000;
        const Status s = rng() % 6 == 0 ? tree_->Delete(Key(k))
                                        : tree_->Put(Key(k), std::string(1 + rng() % 300, static_cast<char>('a' + t)));
        ASSERT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
        ASSERT_TRUE(logger_->Commit().ok());
        if (i == 500) started.fetch_add(1);
        if (checkpoints_done.load() && ++after >= 100 && i >= 2500) break;
      }
      done.fetch_add(1);
    });
  }
  // However the test ends, the writers are told to finish and are joined (a failed assertion returns early).
  testing::JoinAtEnd join_at_end{checkpoints_done, writers};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (started.load() < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ASSERT_EQ(started.load(), 4);
  // Checkpoints of both regions while the writers run (nodes copied stable, extents as they are).
  for (int round = 0; round < 2; ++round) {
    auto lsn = logging::TakeCheckpoint(dir_, log_.get(),
                                       TreeCheckpointRegions(tree_->node_region(), tree_->extent_region()), &env_);
    ASSERT_TRUE(lsn.ok()) << lsn.status().ToString();
  }
  checkpoints_done = true;
  for (auto& w : writers) w.join();
  ASSERT_EQ(done.load(), 4) << "a writer failed";
  EXPECT_GT(tree_->stats().splits.load(), 10u);
  // Every request committed: a power loss now loses nothing the regions hold.
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  ExpectRebuilt();
}

TEST(RegionLoggerAppliers, RefuseRecordsThatDoNotFitTheirRegion) {
  std::vector<uint64_t> region(4096 / 8, 0);
  logging::LogRecord::Range r{1000, std::string(1024, 'x')};  // not node-aligned
  EXPECT_TRUE(ApplyToNodeRegion(region.data(), 4096, r).IsCorruption());
  r = {4096, std::string(1024, 'x')};  // past the end
  EXPECT_TRUE(ApplyToNodeRegion(region.data(), 4096, r).IsCorruption());
  EXPECT_TRUE(ApplyToExtentRegion(region.data(), 4096, r).IsCorruption());
  // A record of a region that is neither.
  logging::LogRecord record;
  record.ranges.push_back({0, std::string(8, 'x'), 9});
  EXPECT_TRUE(ApplyLogRecord(record, {1, region.data(), 4096}, {2, region.data(), 4096}).IsCorruption());
  // An older image does not replace a newer one; an equal or newer one does.
  std::string image(1024, '\0');
  image[0] = 4;
  image[8] = 'n';
  r = {0, image};
  ASSERT_TRUE(ApplyToNodeRegion(region.data(), 4096, r).ok());
  image[0] = 2;
  image[8] = 'o';
  r = {0, image};
  ASSERT_TRUE(ApplyToNodeRegion(region.data(), 4096, r).ok());
  EXPECT_EQ(region[1] & 0xff, static_cast<uint64_t>('n'));
  image[0] = 4;
  image[8] = 'm';
  r = {0, image};
  ASSERT_TRUE(ApplyToNodeRegion(region.data(), 4096, r).ok());
  EXPECT_EQ(region[1] & 0xff, static_cast<uint64_t>('m'));
}

}  // namespace
}  // namespace cell::server
