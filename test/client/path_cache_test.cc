// The path cache: lookups by range, overlapping ranges replaced, the bound kept by dropping the least recently used.
#include "client/path_cache.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>

namespace cell::client {
namespace {

btree::MeganodeRange Range(uint64_t id, std::string min, std::string max) {
  return btree::MeganodeRange{GlobalPtr{7, id << 20}, std::move(min), std::move(max)};
}

TEST(PathCache, FindsTheRangeHoldingAKeyAndNothingOutside) {
  PathCache cache;
  EXPECT_TRUE(cache.Lookup("a").is_null());
  cache.Insert(Range(1, "", "d"));
  cache.Insert(Range(2, "d", "m"));
  cache.Insert(Range(3, "q", ""));
  EXPECT_EQ(cache.Lookup("").offset, 1u << 20);
  EXPECT_EQ(cache.Lookup("c\xff").offset, 1u << 20);
  EXPECT_EQ(cache.Lookup("d").offset, 2u << 20);
  EXPECT_TRUE(cache.Lookup("m").is_null());  // max is exclusive, and [m, q) is not cached
  EXPECT_TRUE(cache.Lookup("p").is_null());
  EXPECT_EQ(cache.Lookup("q").offset, 3u << 20);
  EXPECT_EQ(cache.Lookup("\xff\xff").offset, 3u << 20);
}

TEST(PathCache, ANewerRangeReplacesTheOnesItOverlapsWithinItsBoundsOnly) {
  PathCache cache;
  cache.Insert(Range(1, "a", "z"));
  // The meganode split: its left half keeps [a, k), a new one took [k, z).
  cache.Insert(Range(1, "a", "k"));
  cache.Insert(Range(2, "k", "z"));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Lookup("j").offset, 1u << 20);
  EXPECT_EQ(cache.Lookup("k").offset, 2u << 20);
  // A range learnt later overlapping both: they keep their parts outside it, and those keys still have a start.
  cache.Insert(Range(3, "b", "y"));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.Lookup("a").offset, 1u << 20);
  EXPECT_EQ(cache.Lookup("b").offset, 3u << 20);
  EXPECT_EQ(cache.Lookup("x").offset, 3u << 20);
  EXPECT_EQ(cache.Lookup("y").offset, 2u << 20);
  EXPECT_TRUE(cache.Lookup("z").is_null());
  // A split learnt of inside one range: the range keeps both sides of it.
  cache.Insert(Range(4, "c", "d"));
  EXPECT_EQ(cache.size(), 5u);
  EXPECT_EQ(cache.Lookup("b").offset, 3u << 20);
  EXPECT_EQ(cache.Lookup("c").offset, 4u << 20);
  EXPECT_EQ(cache.Lookup("d").offset, 3u << 20);
  EXPECT_EQ(cache.Lookup("x").offset, 3u << 20);
}

TEST(PathCache, ARangeLearntInsideAnotherIsTheMostRecentlyUsed) {
  PathCache cache(1);
  cache.Insert(Range(1, "a", "z"));
  cache.Insert(Range(2, "c", "d"));  // splits [a, z) in three; only the newest fits
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.Lookup("c").offset, 2u << 20);
}

TEST(PathCache, TheLeastRecentlyUsedRangeGoesFirstWhenFull) {
  PathCache cache(3);
  cache.Insert(Range(1, "a", "b"));
  cache.Insert(Range(2, "b", "c"));
  cache.Insert(Range(3, "c", "d"));
  EXPECT_FALSE(cache.Lookup("a").is_null());  // 1 is now the most recently used; 2 the least
  cache.Insert(Range(4, "d", "e"));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_TRUE(cache.Lookup("b").is_null());
  EXPECT_FALSE(cache.Lookup("a").is_null());
  EXPECT_FALSE(cache.Lookup("c").is_null());
  EXPECT_FALSE(cache.Lookup("d").is_null());
}

// A thread's remembered answer (the lock-free hit) is the locked lookup's: it lapses with every Insert, it holds
// only inside its range, and it is never another cache's, even one at the same address.
TEST(PathCache, AThreadsRememberedRangeLapsesWithEveryChange) {
  PathCache cache;
  cache.Insert(Range(1, "a", "z"));
  EXPECT_EQ(cache.Lookup("m").offset, 1u << 20);  // remembered: [a, z) -> 1
  EXPECT_EQ(cache.Lookup("n").offset, 1u << 20);  // answered from it
  EXPECT_TRUE(cache.Lookup("z").is_null()) << "outside the remembered range";
  EXPECT_TRUE(cache.Lookup("0").is_null()) << "below it";
  EXPECT_EQ(cache.Lookup("b").offset, 1u << 20);
  cache.Insert(Range(2, "k", "z"));  // the meganode split
  EXPECT_EQ(cache.Lookup("n").offset, 2u << 20);
  EXPECT_EQ(cache.Lookup("b").offset, 1u << 20);
  // Another thread's answers are its own: it sees the split at once, and its lookups change nothing here.
  std::thread([&] {
    EXPECT_EQ(cache.Lookup("p").offset, 2u << 20);
    EXPECT_EQ(cache.Lookup("c").offset, 1u << 20);
  }).join();
  EXPECT_EQ(cache.Lookup("c").offset, 1u << 20);
  for (int i = 0; i < 3; ++i) {
    // A cache made where the last one was remembers nothing of it.
    std::optional<PathCache> other(std::in_place);
    EXPECT_TRUE(other->Lookup("c").is_null());
    other->Insert(Range(10 + i, "a", "z"));
    EXPECT_EQ(other->Lookup("c").offset, uint64_t(10 + i) << 20);
  }
}

}  // namespace
}  // namespace cell::client
