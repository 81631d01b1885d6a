// Size estimates of key ranges (btree::TreeReader::Estimate, GlobalReader::ApproximateSize) against the true counts
// of a model: exact inside one leaf, within a factor of two (plus a leaf's worth) for any range across many
// meganodes, for random and for sequential loads, the same through in-place and copied nodes, and never failing
// while writers split the meganodes it walks.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "btree/global_reader.h"
#include "btree/node_cache.h"
#include "meganode/global_tree.h"
#include "test/test_util.h"

namespace cell::meganode {
namespace {

std::unique_ptr<GlobalTree> Tree(uint64_t meganode_bytes, uint32_t meganodes) {
  GlobalTreeOptions o;
  o.meganode_bytes = meganode_bytes;
  o.meganodes = meganodes;
  o.extent_region_bytes = uint64_t{256} << 20;
  auto t = GlobalTree::Open(o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

std::string Key(uint64_t i) { return "key" + std::to_string(1000000 + i); }

btree::SizeEstimate Estimate(GlobalTree& tree, const std::string& start, const std::string& end) {
  btree::SizeEstimate est;
  GlobalPtr elsewhere;
  std::string resume;
  Status s = tree.ApproximateSize(start, end, &est, GlobalPtr(), &elsewhere, &resume);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(elsewhere.is_null()) << "a tree of one process has no other server";
  return est;
}

struct Truth {
  uint64_t keys = 0, bytes = 0;
};
Truth Count(const std::map<std::string, std::string>& model, const std::string& start, const std::string& end) {
  Truth t;
  if (!end.empty() && end <= start) return t;
  for (auto it = model.lower_bound(start); it != model.end() && (end.empty() || it->first < end); ++it) {
    ++t.keys;
    t.bytes += it->first.size() + it->second.size();
  }
  return t;
}

// What the estimate promises: within a factor of two of the truth, give or take `slack` (a leaf's worth at each end).
bool Plausible(uint64_t truth, uint64_t estimate, uint64_t slack) {
  return 2 * estimate + 2 * slack >= truth && estimate <= 2 * truth + slack;
}

TEST(SizeEstimate, ThePlausibilityCheckRejectsEstimatesOutsideItsBounds) {
  EXPECT_TRUE(Plausible(1000, 1000, 60));
  EXPECT_TRUE(Plausible(1000, 600, 60));
  EXPECT_FALSE(Plausible(1000, 3000, 60));
  EXPECT_FALSE(Plausible(1000, 400, 60));
  EXPECT_FALSE(Plausible(0, 200, 60));
  EXPECT_TRUE(Plausible(0, 0, 60));
}

TEST(SizeEstimate, IsExactInsideOneLeaf) {
  auto tree = Tree(64 << 10, 8);
  ASSERT_NE(tree, nullptr);
  std::map<std::string, std::string> model;
  for (int i = 0; i < 20; ++i) {  // one leaf of one meganode
    model[Key(i * 3)] = std::string(10 + i, 'v');
    ASSERT_TRUE(tree->Put(Key(i * 3), model[Key(i * 3)]).ok());
  }
  for (int a = -1; a <= 61; ++a) {
    for (int b = a; b <= 62; ++b) {
      const std::string start = a < 0 ? "" : Key(a), end = b > 61 ? "" : Key(b);
      const btree::SizeEstimate est = Estimate(*tree, start, end);
      const Truth truth = Count(model, start, end);
      ASSERT_EQ(est.keys, truth.keys) << "[" << start << ", " << end << ")";
    }
  }
  const btree::SizeEstimate all = Estimate(*tree, "", "");
  const Truth truth = Count(model, "", "");
  // Bytes per key are the leaf's average: exact for the whole leaf.
  EXPECT_EQ(all.bytes, truth.bytes);
}

void CheckRanges(GlobalTree& tree, const std::map<std::string, std::string>& model, uint64_t key_space,
                 std::mt19937_64& rng) {
  const uint64_t slack = 2 * btree::kMaxEntries;
  const uint64_t bytes_per_key = model.empty() ? 0 : Count(model, "", "").bytes / model.size();
  for (int i = 0; i < 400; ++i) {
    const uint64_t a = rng() % key_space, width = uint64_t{1} << (rng() % 17);
    const std::string start = i % 50 == 0 ? "" : Key(a);
    const std::string end = i % 40 == 0 ? "" : Key(a + width);
    const btree::SizeEstimate est = Estimate(tree, start, end);
    const Truth truth = Count(model, start, end);
    ASSERT_TRUE(Plausible(truth.keys, est.keys, slack))
        << "[" << start << ", " << end << "): " << truth.keys << " keys, estimated " << est.keys;
    ASSERT_TRUE(Plausible(truth.bytes, est.bytes, 2 * slack * bytes_per_key))
        << "[" << start << ", " << end << "): " << truth.bytes << " bytes, estimated " << est.bytes;
  }
}

TEST(SizeEstimate, IsWithinAFactorOfTwoAcrossManyMeganodesAfterRandomInserts) {
  auto tree = Tree(64 << 10, 512);  // 64 slots per meganode: local trees of two or three levels, dozens of meganodes
  ASSERT_NE(tree, nullptr);
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(11);
  constexpr uint64_t kSpace = 60000;
  for (int i = 0; i < 40000; ++i) {
    const std::string key = Key(rng() % kSpace);
    std::string value(rng() % 200, 'x');
    ASSERT_TRUE(tree->Put(key, value).ok()) << i;
    model[key] = std::move(value);
  }
  ASSERT_GT(tree->meganodes_in_use(), 20u);
  CheckRanges(*tree, model, kSpace, rng);
  // Deleted keys leave emptier leaves: still within the bounds.
  for (auto it = model.begin(); it != model.end();) {
    if (rng() % 3 == 0) {
      ASSERT_TRUE(tree->Delete(it->first).ok());
      it = model.erase(it);
    } else {
      ++it;
    }
  }
  CheckRanges(*tree, model, kSpace, rng);
}

TEST(SizeEstimate, IsWithinAFactorOfTwoAfterSequentialInserts) {
  auto tree = Tree(64 << 10, 512);
  ASSERT_NE(tree, nullptr);
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(12);
  constexpr uint64_t kKeys = 30000;
  for (uint64_t i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(tree->Put(Key(i), "value").ok()) << i;
    model[Key(i)] = "value";
  }
  CheckRanges(*tree, model, kKeys, rng);
  // The whole tree: its last nodes (where appends collect) do not stand for the rest.
  const btree::SizeEstimate all = Estimate(*tree, "", "");
  EXPECT_GE(all.keys, kKeys * 3 / 4);
  EXPECT_LE(all.keys, kKeys * 4 / 3);
}

TEST(SizeEstimate, CopiedNodesGiveTheSameEstimateAsTheServersOwn) {
  auto tree = Tree(16 << 10, 2048);  // 16 slots: three levels of meganodes
  ASSERT_NE(tree, nullptr);
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(tree->Put(Key(i * 13 % 20000), "v" + std::to_string(i)).ok());
  btree::CopyingNodeSource copies(testing::RegionFetcher(&tree->regions(), /*shuffle=*/false));
  btree::GlobalReader reader(&copies, tree->first_meganode());
  std::mt19937_64 rng(13);
  for (int i = 0; i < 200; ++i) {
    const std::string start = Key(rng() % 20000), end = Key(rng() % 20000);
    btree::SizeEstimate copied;
    ASSERT_TRUE(reader.ApproximateSize(start, end, &copied).ok());
    const btree::SizeEstimate own = Estimate(*tree, start, end);
    ASSERT_EQ(copied.keys, own.keys) << "[" << start << ", " << end << ")";
    ASSERT_EQ(copied.bytes, own.bytes);
  }
}

TEST(SizeEstimate, EmptyAndBadRanges) {
  auto tree = Tree(64 << 10, 64);
  ASSERT_NE(tree, nullptr);
  EXPECT_EQ(Estimate(*tree, "", "").keys, 0u) << "an empty tree";
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(tree->Put(Key(i), "v").ok());
  EXPECT_EQ(Estimate(*tree, Key(500), Key(500)).keys, 0u);
  EXPECT_EQ(Estimate(*tree, Key(600), Key(500)).keys, 0u) << "end below start";
  EXPECT_EQ(Estimate(*tree, "zzz", "").keys, 0u) << "above every key";
  EXPECT_EQ(Estimate(*tree, "", "a").keys, 0u) << "below every key";
  btree::SizeEstimate est;
  GlobalPtr elsewhere;
  std::string resume;
  const std::string too_long(kMaxKeySize + 1, 'k');
  EXPECT_TRUE(tree->ApproximateSize(too_long, "", &est, GlobalPtr(), &elsewhere, &resume).IsInvalidArgument());
  EXPECT_TRUE(tree->ApproximateSize("", too_long, &est, GlobalPtr(), &elsewhere, &resume).IsInvalidArgument());
}

TEST(SizeEstimate, EstimatesRacingSplitsNeverFailAndStayWithinWhatWasThere) {
  auto tree = Tree(32 << 10, 1024);
  ASSERT_NE(tree, nullptr);
  constexpr uint64_t kBefore = 5000, kAfter = 25000;
  for (uint64_t i = 0; i < kBefore; ++i) ASSERT_TRUE(tree->Put(Key(i * 5), "v").ok());
  std::atomic<bool> done{false};
  std::thread writer([&] {
    std::mt19937_64 rng(14);
    for (uint64_t i = kBefore; i < kAfter; ++i) {  // keys only added: the truth grows from kBefore to kAfter
      const Status s = tree->Put(Key(rng() % (kAfter * 5)), "value");
      if (!s.ok()) ADD_FAILURE() << s.ToString();
    }
    done = true;
  });
  int estimates = 0;
  while (!done || estimates == 0) {
    const btree::SizeEstimate est = Estimate(*tree, "", "");
    ASSERT_GE(2 * est.keys + 4 * btree::kMaxEntries, kBefore);
    ASSERT_LE(est.keys, 2 * kAfter + 2 * btree::kMaxEntries);
    ++estimates;
  }
  writer.join();
  EXPECT_GT(estimates, 0);
}

}  // namespace
}  // namespace cell::meganode
