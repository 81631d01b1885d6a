// The linearizability checker itself: it must accept what is linearizable and refuse what is not.
#include "test/linearizability.h"

#include <gtest/gtest.h>

#include <random>

namespace cell::testing {
namespace {

using Kind = RegisterOp::Kind;

RegisterOp Put(std::string v, uint64_t call, uint64_t ret) { return {Kind::kPut, "k", std::move(v), false, call, ret}; }
RegisterOp Get(std::string v, uint64_t call, uint64_t ret) { return {Kind::kGet, "k", std::move(v), true, call, ret}; }
RegisterOp GetNone(uint64_t call, uint64_t ret) { return {Kind::kGet, "k", "", false, call, ret}; }
RegisterOp Del(bool found, uint64_t call, uint64_t ret) { return {Kind::kDelete, "k", "", found, call, ret}; }

TEST(Linearizability, SequentialHistoriesThatAddUpAreAccepted) {
  EXPECT_TRUE(
      IsLinearizable({GetNone(1, 2), Put("a", 3, 4), Get("a", 5, 6), Del(true, 7, 8), GetNone(9, 10)}, nullptr));
}

TEST(Linearizability, AStaleReadAfterAWriteReturnedIsRefused) {
  // put(a) returned before the get was called, yet the get saw nothing.
  std::string why;
  EXPECT_FALSE(IsLinearizable({Put("a", 1, 2), GetNone(3, 4)}, &why));
  EXPECT_NE(why.find("'k'"), std::string::npos);
  EXPECT_FALSE(IsLinearizable({Put("a", 1, 2), Put("b", 3, 4), Get("a", 5, 6)}, nullptr));
}

TEST(Linearizability, AReadOverlappingAWriteMaySeeEitherValue) {
  EXPECT_TRUE(IsLinearizable({Put("a", 1, 2), Put("b", 3, 10), Get("a", 4, 5)}, nullptr));
  EXPECT_TRUE(IsLinearizable({Put("a", 1, 2), Put("b", 3, 10), Get("b", 4, 5)}, nullptr));
}

TEST(Linearizability, TwoReadsMayNotSeeAWriteAndThenUnseeIt) {
  // Both reads overlap put(b), but the first returned before the second began: new then old is impossible.
  EXPECT_FALSE(IsLinearizable({Put("a", 1, 2), Put("b", 3, 20), Get("b", 4, 5), Get("a", 6, 7)}, nullptr));
  EXPECT_TRUE(IsLinearizable({Put("a", 1, 2), Put("b", 3, 20), Get("a", 4, 5), Get("b", 6, 7)}, nullptr));
}

TEST(Linearizability, DeletesMustAgreeWithWhatWasThere) {
  EXPECT_FALSE(IsLinearizable({Put("a", 1, 2), Del(false, 3, 4)}, nullptr));
  EXPECT_FALSE(IsLinearizable({Del(true, 1, 2)}, nullptr));
  // Two concurrent deletes of one value: exactly one may find it.
  EXPECT_TRUE(IsLinearizable({Put("a", 1, 2), Del(true, 3, 6), Del(false, 4, 5)}, nullptr));
  EXPECT_FALSE(IsLinearizable({Put("a", 1, 2), Del(true, 3, 6), Del(true, 4, 5)}, nullptr));
}

TEST(Linearizability, KeysAreCheckedIndependently) {
  RegisterOp other = Put("x", 1, 2);
  other.key = "other";
  RegisterOp stale = GetNone(3, 4);
  stale.key = "other";
  std::string why;
  EXPECT_FALSE(IsLinearizable({Put("a", 1, 2), Get("a", 3, 4), other, stale}, &why));
  EXPECT_NE(why.find("'other'"), std::string::npos);
}

// Random histories made by a real sequential register with random (overlapping) intervals around each operation's
// true moment are linearizable; moving one get's result to an older value makes many of them not.
TEST(Linearizability, RandomHistoriesFromARealRegisterAreAccepted) {
  std::mt19937_64 rng(3);
  int refused_after_tampering = 0;
  for (int round = 0; round < 200; ++round) {
    std::vector<RegisterOp> ops;
    std::optional<std::string> state;
    std::vector<std::string> written;
    for (int i = 0; i < 30; ++i) {
      const uint64_t at = 1000 + 100 * i;  // the operation takes effect here
      const uint64_t call = at - rng() % 250, ret = at + rng() % 250;
      switch (rng() % 3) {
        case 0: {
          const std::string v = "v" + std::to_string(i);
          ops.push_back(Put(v, call, ret));
          state = v;
          written.push_back(v);
          break;
        }
        case 1:
          ops.push_back(state ? Get(*state, call, ret) : GetNone(call, ret));
          break;
        default:
          ops.push_back(Del(state.has_value(), call, ret));
          state.reset();
      }
    }
    ASSERT_TRUE(IsLinearizable(ops, nullptr)) << "round " << round;
    // Tamper: a late get reports the first value ever written.
    if (written.size() >= 3) {
      RegisterOp& last = ops.back();
      last = Get(written.front(), 100000, 100001);  // after everything else returned
      if (!IsLinearizable(ops, nullptr)) ++refused_after_tampering;
    }
  }
  EXPECT_GT(refused_after_tampering, 50);
}

}  // namespace
}  // namespace cell::testing
