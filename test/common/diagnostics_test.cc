// diag::RateLimit: a burst from one place lets through at most its rate, and what it drops is counted and reported.
#include "common/diagnostics.h"

#include <gtest/gtest.h>

namespace cell::diag {
namespace {

TEST(RateLimit, ABurstPassesAtMostTheRateAndEveryDroppedLineIsCounted) {
  RateLimit limit(10);
  uint64_t allowed = 0, reported_dropped = 0;
  for (int i = 0; i < 1000; ++i) {
    uint64_t dropped = 0;
    if (limit.Allow(&dropped)) {
      ++allowed;
      reported_dropped += dropped;
    }
  }
  // The burst takes far less than a second, so it spans one or two of the limit's one-second windows.
  EXPECT_GE(allowed, 10u);
  EXPECT_LE(allowed, 20u);
  // What was dropped is reported by the next line let through; the rest is still pending.
  EXPECT_LE(reported_dropped, 1000u - allowed);
}

TEST(RateLimit, TheNextLineLetThroughSaysHowManyWereDropped) {
  RateLimit limit(1);
  uint64_t dropped = 0;
  // Find the start of a window: the first Allow of a window passes.
  while (!limit.Allow(&dropped)) {
  }
  int refused = 0;
  while (!limit.Allow(&dropped)) ++refused;  // refused until the next second's window
  EXPECT_GT(refused, 0);
  EXPECT_EQ(dropped, static_cast<uint64_t>(refused));
}

}  // namespace
}  // namespace cell::diag
