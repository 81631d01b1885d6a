// The node cache: which nodes it keeps (by height above the leaves), the byte bound (least recently used out), and
// forgetting. (Stale copies during splits: GlobalTree.ReadersRacingMeganodeSplitsAlwaysFindStableKeys.)
#include "btree/node_cache.h"

#include <gtest/gtest.h>

#include <vector>

namespace cell::btree {
namespace {

constexpr GlobalPtr kMeganode{3, 1 << 20};

GlobalPtr Slot(uint32_t slot) { return kMeganode.Plus(uint64_t{slot} * kNodeSize); }

NodeImage TreeNode(uint32_t slot, int level, bool internal_meganode = false) {
  NodeImage image;
  NodeHeader h;
  h.meganode = kMeganode;
  h.slot = slot;
  h.level = level;
  if (internal_meganode) h.flags |= kFlagInternalMeganode;
  NodeEntry entry;
  entry.key = "k";
  entry.child = 1;
  EXPECT_TRUE(image.Build(h, "", "", &entry, level > 0 ? 1 : 0));
  return image;
}

NodeImage Header(int root_level, int meganode_level) {
  NodeImage image;
  MeganodeInfo info;
  info.level = meganode_level;
  image.BuildMeganodeHeader(kMeganode, 1, root_level, info);
  return image;
}

TEST(NodeCache, KeepsOnlyNodesHighEnoughAboveTheLeaves) {
  NodeCache cache(1 << 20, /*min_height=*/2);
  EXPECT_FALSE(cache.Qualifies(TreeNode(1, 0).w));
  EXPECT_FALSE(cache.Qualifies(TreeNode(2, 1).w));
  EXPECT_TRUE(cache.Qualifies(TreeNode(3, 2).w));
  EXPECT_TRUE(cache.Qualifies(TreeNode(4, 0, /*internal_meganode=*/true).w));  // above a whole leaf meganode
  EXPECT_FALSE(cache.Qualifies(Header(/*root_level=*/0, 0).w));
  EXPECT_TRUE(cache.Qualifies(Header(/*root_level=*/1, 0).w));  // one above its root, at height 1
  EXPECT_TRUE(cache.Qualifies(Header(0, /*meganode_level=*/1).w));
  NodeImage freed = TreeNode(5, 3);
  freed.MarkFree();
  EXPECT_FALSE(cache.Qualifies(freed.w));

  uint64_t copy[kNodeWords];
  cache.Offer(Slot(1), TreeNode(1, 0).w);
  EXPECT_FALSE(cache.Lookup(Slot(1), copy));
  const NodeImage high = TreeNode(3, 2);
  cache.Offer(Slot(3), high.w);
  ASSERT_TRUE(cache.Lookup(Slot(3), copy));
  EXPECT_EQ(0, std::memcmp(copy, high.w, kNodeSize));
  cache.Forget(Slot(3));
  EXPECT_FALSE(cache.Lookup(Slot(3), copy));
  EXPECT_EQ(cache.stats().forgotten.load(), 1u);
}

TEST(NodeCache, TheByteBoundDropsTheLeastRecentlyUsed) {
  // 16 shards of 4 nodes: 64 KiB.
  NodeCache cache(64 * kNodeSize, /*min_height=*/1);
  std::vector<GlobalPtr> offered;
  for (uint32_t slot = 1; slot <= 400; ++slot) {
    cache.Offer(Slot(slot), TreeNode(slot, 1).w);
    offered.push_back(Slot(slot));
  }
  EXPECT_LE(cache.size(), 64u);
  EXPECT_GE(cache.size(), 32u);  // the shards fill about evenly
  uint64_t copy[kNodeWords];
  int recent = 0;
  for (size_t i = offered.size() - 8; i < offered.size(); ++i) recent += cache.Lookup(offered[i], copy) ? 1 : 0;
  EXPECT_GE(recent, 6) << "the most recently offered nodes should mostly still be there";
  EXPECT_FALSE(cache.Lookup(offered[0], copy));
}

}  // namespace
}  // namespace cell::btree
