// The buddy extent allocator: no overlaps, exact accounting, clear errors, and full merging after frees.
#include "meganode/extent_allocator.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace cell::meganode {
namespace {

std::unique_ptr<Region> MakeRegion(uint64_t size) {
  auto r = Region::Create(3, size, RegionBacking::kMemfd);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

TEST(ExtentAllocator, RandomAllocationsNeverOverlapAndFreeingAllRestoresTheWholeArea) {
  auto region = MakeRegion(uint64_t{1} << 22);
  const uint64_t area = (uint64_t{1} << 22) - 4096 * 3;  // not a power of two
  auto a = ExtentAllocator::Create(region.get(), 4096, area);
  ASSERT_TRUE(a.ok());
  std::mt19937_64 rng(1);
  std::map<uint64_t, uint64_t> live;  // offset -> block size
  uint64_t exhausted = 0;
  for (int i = 0; i < 50000; ++i) {
    if (live.empty() || rng() % 3) {
      uint64_t want = 1 + rng() % (rng() % 10 == 0 ? 100000 : 400);
      auto p = (*a)->Allocate(want);
      if (!p.ok()) {
        ASSERT_TRUE(p.status().IsResourceExhausted()) << p.status().ToString();
        ++exhausted;
        continue;
      }
      uint64_t size = (*a)->BlockSizeFor(want);
      ASSERT_GE(size, want);
      ASSERT_EQ(p->region, 3u);
      ASSERT_GE(p->offset, 4096u);
      ASSERT_LE(p->offset + size, 4096 + area);
      ASSERT_EQ(p->offset % 8, 0u);
      auto next = live.lower_bound(p->offset);
      if (next != live.end()) {
        ASSERT_LE(p->offset + size, next->first) << "overlaps the next block";
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, p->offset) << "overlaps the previous block";
      }
      live[p->offset] = size;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_TRUE((*a)->Free(GlobalPtr{3, it->first}).ok());
      live.erase(it);
    }
    uint64_t in_use = 0;
    if (i % 997 == 0) {
      for (auto& [o, s] : live) in_use += s;
      ASSERT_EQ((*a)->bytes_in_use(), in_use);
    }
  }
  EXPECT_GT(exhausted, 0u) << "the test never filled the area";
  for (auto& [o, s] : live) ASSERT_TRUE((*a)->Free(GlobalPtr{3, o}).ok());
  EXPECT_EQ((*a)->bytes_in_use(), 0u);
  // Everything merged back: the largest block fits again.
  uint64_t largest = uint64_t{1} << 21;
  auto big = (*a)->Allocate(largest);
  EXPECT_TRUE(big.ok()) << big.status().ToString();
}

TEST(ExtentAllocator, BadFreesAndImpossibleSizesGetClearErrors) {
  auto region = MakeRegion(1 << 20);
  auto a = ExtentAllocator::Create(region.get(), 0, 1 << 20);
  ASSERT_TRUE(a.ok());
  auto p = (*a)->Allocate(100);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE((*a)->Free(GlobalPtr{3, p->offset + 32}).IsInvalidArgument());
  EXPECT_TRUE((*a)->Free(GlobalPtr{4, p->offset}).IsInvalidArgument());
  EXPECT_TRUE((*a)->Free(*p).ok());
  EXPECT_TRUE((*a)->Free(*p).IsInvalidArgument()) << "double free must be refused";
  auto huge = (*a)->Allocate(uint64_t{1} << 21);
  EXPECT_TRUE(huge.status().IsResourceExhausted());
  EXPECT_NE(huge.status().message().find("larger than the extent area"), std::string::npos);
  EXPECT_TRUE(ExtentAllocator::Create(region.get(), 16, 1024).status().IsInvalidArgument());
  EXPECT_TRUE(ExtentAllocator::Create(region.get(), 0, uint64_t{2} << 20).status().IsInvalidArgument());
}

}  // namespace
}  // namespace cell::meganode
