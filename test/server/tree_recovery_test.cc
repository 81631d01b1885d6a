// Rebuilding a tree from its log (meganode/tree_recovery.cc), with a real tree and log: after many splits
// and root splits the recovered tree holds every key, its meganodes and record blocks; and a crash in each window
// of a meganode split leaves a tree that holds every key written before it and takes writes again:
//   - before the left half's header names the right half: the right half is an orphan, and is freed;
//   - after, but before the right half is marked published: it is kept;
//   - after that, but before the left half is cut: the cut is finished.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "logging/checkpoint.h"
#include "meganode/global_tree.h"
#include "server/region_logger.h"
#include "test/logging/test_dir.h"

namespace cell::server {
namespace {

using logging::RegionLog;

std::string Key(uint64_t i) { return "key" + std::to_string(1000000 + i * 7919 % 1000000); }

meganode::GlobalTreeOptions Options() {
  meganode::GlobalTreeOptions o;
  o.meganode_bytes = 32 << 10;  // a split every few hundred keys
  o.meganodes = 256;
  o.extent_region_bytes = uint64_t{16} << 20;
  return o;
}

class TreeRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = logging::FreshTestDir("cell_tree_recovery_test");
    auto log = RegionLog::Open(dir_ + "/live", 1);
    ASSERT_TRUE(log.ok());
    log_ = std::move(*log);
    logger_ = std::make_unique<RegionLogger>(log_.get(), std::vector<uint32_t>{1, 2});
    auto o = Options();
    o.write_sink = logger_.get();
    auto tree = meganode::GlobalTree::Open(o);
    ASSERT_TRUE(tree.ok()) << tree.status().ToString();
    tree_ = std::move(*tree);
  }
  void TearDown() override {
    recovered_.reset();
    recovered_logger_.reset();
    recovered_log_.reset();
    tree_.reset();
    logger_.reset();
    log_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Copies the live log, flushed, to `name` (a crash at this moment: the page cache survives a killed process).
  std::string Snapshot(const std::string& name) {
    EXPECT_TRUE(log_->Flush().ok());
    const std::string to = dir_ + "/" + name;
    std::filesystem::copy(dir_ + "/live", to, std::filesystem::copy_options::recursive);
    return to;
  }

  // Rebuilds a tree from the log in `dir`, replaying the records up to `upto` (all, if 0); its repairs go to a log
  // of their own.
  void Recover(const std::string& dir, uint64_t upto = 0) {
    auto log = RegionLog::Open(dir + "-repairs", 1);
    ASSERT_TRUE(log.ok());
    recovered_log_ = std::move(*log);
    recovered_logger_ = std::make_unique<RegionLogger>(recovered_log_.get(), std::vector<uint32_t>{1, 2});
    auto o = Options();
    o.write_sink = recovered_logger_.get();
    o.restore = [&](meganode::Region& nodes, meganode::Region& extents) -> Status {
      const RegionMemory n{1, nodes.Resolve(0, nodes.size()), nodes.size()};
      const RegionMemory e{2, extents.Resolve(0, extents.size()), extents.size()};
      auto r = logging::Recover(dir, TreeCheckpointRegions(nodes, extents),
                                [&](uint64_t lsn, const logging::LogRecord& record) {
                                  return upto != 0 && lsn > upto ? Status::OK() : ApplyLogRecord(record, n, e);
                                });
      return r.status();
    };
    auto tree = meganode::GlobalTree::Open(o);
    ASSERT_TRUE(tree.ok()) << tree.status().ToString();
    recovered_ = std::move(*tree);
  }

  // The recovered tree holds exactly `model`, keeps its invariants, and takes 500 more puts.
  void ExpectHolds(const std::map<std::string, std::string>& model) {
    ASSERT_TRUE(recovered_->CheckInvariants().ok()) << recovered_->CheckInvariants().ToString();
    for (const auto& [k, v] : model) {
      std::string got;
      ASSERT_TRUE(recovered_->Get(k, &got).ok()) << k;
      ASSERT_EQ(got, v) << k;
    }
    std::vector<btree::KeyValue> all;
    ASSERT_TRUE(recovered_->Scan("", "", 1000000, &all).ok());
    EXPECT_EQ(all.size(), model.size()) << "no key that was not written";
    std::map<std::string, std::string> more = model;
    for (uint64_t i = 0; i < 500; ++i) {
      const std::string k = "after" + std::to_string(i);
      ASSERT_TRUE(recovered_->Put(k, std::string(100, 'z')).ok());
      more[k] = std::string(100, 'z');
    }
    for (const auto& [k, v] : more) {
      std::string got;
      ASSERT_TRUE(recovered_->Get(k, &got).ok()) << k;
      ASSERT_EQ(got, v) << k;
    }
    ASSERT_TRUE(recovered_->CheckInvariants().ok());
  }

  std::string dir_;
  std::unique_ptr<RegionLog> log_, recovered_log_;
  std::unique_ptr<RegionLogger> logger_, recovered_logger_;
  std::unique_ptr<meganode::GlobalTree> tree_, recovered_;
};

TEST_F(TreeRecoveryTest, TheLogRebuildsTheWholeTree) {
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(3);
  for (uint64_t i = 0; i < 6000; ++i) {
    const std::string k = Key(rng() % 4000);
    if (rng() % 5 == 0) {
      Status s = tree_->Delete(k);
      ASSERT_TRUE(s.ok() || s.IsNotFound());
      model.erase(k);
    } else {
      const std::string v(1 + rng() % 300, static_cast<char>('a' + i % 26));
      ASSERT_TRUE(tree_->Put(k, v).ok());
      model[k] = v;
    }
  }
  ASSERT_GT(tree_->stats().splits.load(), 10u);
  ASSERT_GT(tree_->stats().root_splits.load(), 0u);
  Recover(Snapshot("crash"));
  EXPECT_EQ(recovered_->meganodes_in_use(), tree_->meganodes_in_use());
  EXPECT_EQ(recovered_->extent_bytes_used(), tree_->extent_bytes_used()) << "every record's block, and no other";
  EXPECT_EQ(recovered_->recovery().records, model.size());
  EXPECT_EQ(recovered_->recovery().orphans_freed, 0u);
  EXPECT_EQ(recovered_->recovery().nodes_cut, 0u);
  ExpectHolds(model);
}

// Puts keys until the first meganode split reaches the window after the left half's header was published; there,
// `at_window` gets the lsn of that header's record and the lsn after it (the right half marked published).
class SplitCrashTest : public TreeRecoveryTest {
 protected:
  void RunToFirstSplit() {
    bool fired = false;
    tree_->set_split_observer([&](const std::string&) {
      if (fired) return;
      fired = true;
      published_ = log_->appended_lsn();  // the right half marked published, right after the left half's header
      snapshot_ = Snapshot("crash");
    });
    for (uint64_t i = 0; !fired && i < 100000; ++i) {
      const std::string k = Key(i);
      const std::string v(50 + i % 200, static_cast<char>('a' + i % 26));
      model_before_split_ = model_;
      ASSERT_TRUE(tree_->Put(k, v).ok());
      model_[k] = v;
    }
    ASSERT_TRUE(fired);
  }
  uint64_t published_ = 0;
  std::string snapshot_;
  std::map<std::string, std::string> model_, model_before_split_;
};

TEST_F(SplitCrashTest, BeforeTheRightHalfIsNamedItIsFreed) {
  RunToFirstSplit();
  Recover(snapshot_, published_ - 2);  // up to the right half's last entry, before the left half's header
  EXPECT_EQ(recovered_->recovery().orphans_freed, 1u);
  EXPECT_EQ(recovered_->meganodes_in_use(), 1u);
  ExpectHolds(model_before_split_);
}

TEST_F(SplitCrashTest, OnceNamedTheRightHalfIsKeptAndTheLeftHalfCut) {
  RunToFirstSplit();
  Recover(snapshot_, published_ - 1);  // the left half's header, not the right half's mark
  EXPECT_EQ(recovered_->recovery().pending_kept, 1u);
  EXPECT_EQ(recovered_->recovery().orphans_freed, 0u);
  EXPECT_GT(recovered_->recovery().nodes_cut, 0u);
  EXPECT_EQ(recovered_->meganodes_in_use(), 2u);
  ExpectHolds(model_before_split_);
}

TEST_F(SplitCrashTest, AfterThePublicationOnlyTheCutIsFinished) {
  RunToFirstSplit();
  Recover(snapshot_);
  EXPECT_EQ(recovered_->recovery().pending_kept, 0u);
  EXPECT_GT(recovered_->recovery().nodes_cut, 0u);
  ExpectHolds(model_before_split_);
}

}  // namespace
}  // namespace cell::server
