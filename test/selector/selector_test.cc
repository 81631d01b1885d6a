// The selector, fed synthetic latency streams: steady, step change, spike, outliers, idle gap; and the policies'
// decisions on them.
#include "selector/selector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <vector>

namespace cell::selector {
namespace {

constexpr uint64_t kMs = 1000;  // microseconds

TEST(LatencyWindow, ASteadyStreamIsAveragedOverTheLastNSamples) {
  LatencyWindow w(WindowOptions{.capacity = 10});
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(w.Add(i % 2 == 0 ? 9.0 : 11.0, i));
  EXPECT_EQ(w.size(), 10u);
  EXPECT_DOUBLE_EQ(w.mean(), 10.0);
  EXPECT_NEAR(w.stddev(), 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(w.min(), 9.0);
  EXPECT_EQ(w.discarded(), 0u);
}

TEST(LatencyWindow, AnOutlierIsDiscardedAndLeavesTheMeanAlone) {
  LatencyWindow w(WindowOptions{.capacity = 100});
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(w.Add(10.0 + (i % 3), i));
  const double before = w.mean();
  EXPECT_FALSE(w.Add(1000.0, 50));  // far beyond 3 sigma
  EXPECT_FALSE(w.Add(0.01, 51));
  EXPECT_DOUBLE_EQ(w.mean(), before);
  EXPECT_EQ(w.discarded(), 2u);
  EXPECT_EQ(w.resets(), 0u);
  EXPECT_TRUE(w.Add(11.5, 52)) << "a sample inside the spread is kept";
}

TEST(LatencyWindow, AStepChangeDropsTheHistoryWithinHalfAWindow) {
  LatencyWindow w(WindowOptions{.capacity = 100});
  uint64_t t = 0;
  for (int i = 0; i < 200; ++i) w.Add(10.0 + (i % 2), t++);
  int taken = 0;
  while (w.mean() < 50 && taken < 200) {
    w.Add(100.0 + (taken % 2), t++);
    ++taken;
  }
  EXPECT_LE(taken, 51) << "the window should follow a step within half a window's samples";
  EXPECT_GE(w.resets(), 1u);
  EXPECT_NEAR(w.mean(), 100.5, 1.0);
  EXPECT_GE(w.min(), 100.0) << "the minimum starts again with the history";
}

TEST(LatencyWindow, AnIdleGapDropsTheHistory) {
  LatencyWindow w(WindowOptions{.capacity = 100, .idle_reset_us = 3000 * kMs, .max_age_us = 0});
  for (int i = 0; i < 20; ++i) w.Add(10.0, i);
  w.Expire(2000 * kMs);
  EXPECT_EQ(w.size(), 20u) << "2 s idle is not enough";
  w.Expire(3100 * kMs);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.resets(), 1u);
  EXPECT_TRUE(w.Add(500.0, 3200 * kMs)) << "after the gap, any sample starts a new history";
  EXPECT_DOUBLE_EQ(w.mean(), 500.0);
}

TEST(LatencyWindow, SamplesOlderThanTheMaxAgeLeave) {
  LatencyWindow w(WindowOptions{.capacity = 100, .outlier_sigmas = 0, .max_age_us = 1000 * kMs});
  for (int i = 0; i < 10; ++i) w.Add(500.0, i * kMs);               // a busy moment: 10 samples at 500 us
  for (int i = 0; i < 10; ++i) w.Add(100.0, (500 + i * 50) * kMs);  // then one every 50 ms at 100 us
  EXPECT_EQ(w.size(), 20u);
  EXPECT_DOUBLE_EQ(w.mean(), 300.0);
  w.Expire(1005 * kMs);  // the first 5 are over 1 s old
  EXPECT_EQ(w.size(), 15u);
  w.Expire(1100 * kMs);
  EXPECT_EQ(w.size(), 10u);
  EXPECT_DOUBLE_EQ(w.mean(), 100.0) << "only the recent samples are left";
  w.Expire(2100 * kMs);
  EXPECT_TRUE(w.empty()) << "a second after the last sample, none is left";
  // Wrapping around the ring after samples aged out keeps the sums right: 80 samples from slot 20 reach the end of
  // the ring, where the sums are made afresh from the kept samples only (not the aged-out 500s and 100s before).
  for (int i = 0; i < 80; ++i) w.Add(i % 2 == 0 ? 40.0 : 60.0, 2200 * kMs + i);
  EXPECT_EQ(w.size(), 80u);
  EXPECT_NEAR(w.mean(), 50.0, 1e-9);
  EXPECT_NEAR(w.stddev(), 10.0, 1e-9);
  for (int i = 80; i < 250; ++i) w.Add(i % 2 == 0 ? 40.0 : 60.0, 2200 * kMs + i);
  EXPECT_EQ(w.size(), 100u);
  EXPECT_NEAR(w.mean(), 50.0, 1e-9);
}

TEST(LatencyWindow, AnIdleGapDropsTheFloorEvenAfterTheSamplesAgedOut) {
  LatencyWindow w(WindowOptions{.idle_reset_us = 3000 * kMs, .max_age_us = 1000 * kMs});
  w.Add(10.0, 0);
  w.Expire(1500 * kMs);  // aged out, not idle yet
  EXPECT_TRUE(w.empty());
  EXPECT_DOUBLE_EQ(w.floor(), 10.0);
  w.Add(50.0, 5000 * kMs);  // after a 5 s gap
  EXPECT_DOUBLE_EQ(w.floor(), 50.0) << "measured afresh after the idle gap";
}

// Feeds `count` samples of each measure of server 1, each time stepping `*t` by 10 us.
void Feed(ModelSelector& s, double server_us, double read_us, double rtt_us, int count, uint64_t* t) {
  for (int i = 0; i < count; ++i) {
    s.OnServerSearch(1, server_us + (i % 2), *t);
    // Reads: mostly at read_us, one in ten at the round-trip floor.
    s.OnRead(1, i % 10 == 0 ? rtt_us : read_us, *t);
    *t += 10;
  }
}

// The default rule (marginal costs) applied to each search (no steering), no exploration: decisions the tests can
// predict.
SelectorOptions NoExploration() { return SelectorOptions{.explore = 0, .seed = 1, .steer_per_s = 0}; }
// The paper's rule as written: one floor, the fastest read's, for both sides.
SelectorOptions ReadFloor() {
  return SelectorOptions{.explore = 0, .seed = 1, .floor = SelectorOptions::Floor::kRead, .steer_per_s = 0};
}
SelectorOptions PerSideFloor() {
  return SelectorOptions{.explore = 0, .seed = 1, .floor = SelectorOptions::Floor::kPerSide, .steer_per_s = 0};
}

TEST(CellSelector, WhileUnmeasuredItTriesBothSidesThenTheMissingOne) {
  ModelSelector s(ModelSelector::Rule::kCell, NoExploration());
  const Side first = s.Choose(1, 0, 0), second = s.Choose(1, 0, 1);
  EXPECT_NE(first, second) << "with nothing measured, both sides are tried";
  s.OnRead(1, 5.0, 2);
  EXPECT_EQ(s.Choose(1, 0, 3), Side::kServer) << "reads measured, server-side searches not yet";
  ModelSelector t(ModelSelector::Rule::kCell, NoExploration());
  t.OnServerSearch(1, 5.0, 0);
  EXPECT_EQ(t.Choose(1, 0, 1), Side::kClient);
}

TEST(CellSelector, IdleServersAreSearchedOnTheServerAndBusyOnesByReads) {
  ModelSelector s(ModelSelector::Rule::kCell, NoExploration());
  uint64_t t = 0;
  // Idle server: a search costs little more than a round trip; reads queue a little (m = 4 reads of ~3 us extra).
  Feed(s, /*server_us=*/8, /*read_us=*/8, /*rtt_us=*/5, 100, &t);
  EXPECT_EQ(s.Choose(1, 0, t), Side::kServer);
  // The server's CPU saturates: its searches wait in its queue (a step to 200 us). Within half a window of samples
  // the estimate follows, and clients read instead.
  int samples = 0;
  while (s.Preferred(1, 0, t) == Side::kServer && samples < 100) {
    s.OnServerSearch(1, 200.0 + (samples % 3), t);
    t += 10;
    ++samples;
  }
  EXPECT_LE(samples, 51);
  EXPECT_EQ(s.Choose(1, 0, t), Side::kClient);
  // The spike ends: searches are fast again; the estimate follows back.
  samples = 0;
  while (s.Preferred(1, 0, t) == Side::kClient && samples < 100) {
    s.OnServerSearch(1, 8.0 + (samples % 2), t);
    t += 10;
    ++samples;
  }
  EXPECT_LE(samples, 51);
  EXPECT_EQ(s.Choose(1, 0, t), Side::kServer);
  const SelectorStats stats = s.stats();
  EXPECT_GE(stats.history_resets, 1u) << "the step up should have dropped the history";
  ASSERT_EQ(stats.servers.size(), 1u);
  EXPECT_DOUBLE_EQ(stats.servers[0].rtt_us, 5.0);
}

TEST(CellSelector, ASingleSlowSearchDoesNotTurnTheDecision) {
  ModelSelector s(ModelSelector::Rule::kCell, NoExploration());
  uint64_t t = 0;
  Feed(s, 8, 8, 5, 100, &t);
  ASSERT_EQ(s.Preferred(1, 0, t), Side::kServer);
  const uint64_t outliers = s.stats().outliers;
  for (int i = 0; i < 5; ++i) s.OnServerSearch(1, 5000.0, t += 10);  // a few stragglers: outliers
  EXPECT_EQ(s.Preferred(1, 0, t), Side::kServer);
  EXPECT_EQ(s.stats().outliers - outliers, 5u);
}

TEST(CellSelector, DeeperMeganodesFavourTheServer) {
  ModelSelector s(ModelSelector::Rule::kCell, ReadFloor());
  uint64_t t = 0;
  // l_s - RTT = 25; l_r - RTT = 5: a traversal of m = 4 reads costs 20 (client), of m = 8 costs 40 (server).
  Feed(s, 30, 10, 5, 100, &t);
  const uint64_t shallow = 0x1000, deep = 0x2000;
  EXPECT_EQ(s.Preferred(1, shallow, t), Side::kClient) << "m starts at the height estimate, 4";
  for (int i = 0; i < 10; ++i) s.OnTraversal(deep, 8);
  EXPECT_EQ(s.Preferred(1, deep, t), Side::kServer);
  EXPECT_EQ(s.Preferred(1, shallow, t), Side::kClient);
  s.OnTraversal(shallow, 3);
  s.OnTraversal(shallow, 5);
  EXPECT_DOUBLE_EQ(s.stats().reads_per_search, (10 * 8 + 3 + 5) / 12.0) << "m over every traversal kept";
}

TEST(CellSelector, IdleHistoryIsDroppedAndMeasuredAfresh) {
  ModelSelector s(ModelSelector::Rule::kCell, ReadFloor());
  uint64_t t = 0;
  Feed(s, 200, 8, 5, 100, &t);
  ASSERT_EQ(s.Preferred(1, 0, t), Side::kClient);
  t += 4000 * kMs;  // four quiet seconds
  const Side a = s.Choose(1, 0, t), b = s.Choose(1, 0, t + 1);
  EXPECT_NE(a, b) << "after an idle gap nothing is measured: both sides are tried again";
}

TEST(CellSelector, EachSideIsJudgedByWhatItWaitsBeyondItsOwnFloor) {
  // An RPC's round trip costs 60 us with no queue, a read's 19.5 us (shm with the NIC model): the floors differ.
  ModelSelector per_side(ModelSelector::Rule::kCell, PerSideFloor());
  ModelSelector one_floor(ModelSelector::Rule::kCell, ReadFloor());
  uint64_t t = 0, u = 0;
  // Idle server; reads queue a little at the NIC (mean ~25 us over a floor of 19.5: m x 5.5 us queued per search).
  Feed(per_side, /*server_us=*/60, /*read_us=*/26, /*rtt_us=*/19.5, 100, &t);
  Feed(one_floor, 60, 26, 19.5, 100, &u);
  EXPECT_EQ(per_side.Preferred(1, 0, t), Side::kServer) << "the server's queue is empty, the NIC's is not";
  EXPECT_EQ(one_floor.Preferred(1, 0, u), Side::kClient) << "one floor counts the RPC's 40 us extra as queueing";
  // Whole latencies: a search on the server (60.5 us) against four reads (4 x ~25 us).
  ModelSelector whole(
      ModelSelector::Rule::kCell,
      SelectorOptions{.explore = 0, .seed = 1, .floor = SelectorOptions::Floor::kNone, .steer_per_s = 0});
  uint64_t w = 0;
  Feed(whole, 60, 26, 19.5, 100, &w);
  EXPECT_EQ(whole.Preferred(1, 0, w), Side::kServer);
  Feed(whole, 140, 26, 19.5, 100, &w);
  EXPECT_EQ(whole.Preferred(1, 0, w), Side::kClient) << "140 us against ~100";
  const SelectorStats stats = per_side.stats();
  ASSERT_EQ(stats.servers.size(), 1u);
  EXPECT_DOUBLE_EQ(stats.servers[0].server_rtt_us, 60.0);
  EXPECT_DOUBLE_EQ(stats.servers[0].rtt_us, 19.5);
  // The server's CPU saturates (its searches take 200 us): per-side turns to reads, and its floor stays the idle one
  // although the step drops the window's history.
  for (int i = 0; i < 100; ++i) per_side.OnServerSearch(1, 200.0 + (i % 3), t += 10);
  EXPECT_EQ(per_side.Preferred(1, 0, t), Side::kClient);
  EXPECT_GE(per_side.stats().history_resets, 1u);
  EXPECT_DOUBLE_EQ(per_side.stats().servers[0].server_rtt_us, 60.0);
}

// Feeds `count` samples of each measure of server 1, alternating two values per measure (so each mean lies between
// them and each floor is the lower), each time stepping `*t` by 10 us.
void FeedPairs(ModelSelector& s, double search_lo, double search_hi, double read_lo, double read_hi, int count,
               uint64_t* t) {
  for (int i = 0; i < count; ++i) {
    s.OnServerSearch(1, i % 2 == 0 ? search_lo : search_hi, *t);
    s.OnRead(1, i % 2 == 0 ? read_lo : read_hi, *t);
    *t += 10;
  }
}

TEST(CellSelector, MarginalCostsKeepAServerWithRoomAndLeaveItBeforeItsLatencyMatchesTheReads) {
  // Experiment 3's shape: a read's round trip (280 us) costs what an idle server-side search does (270 us), and a
  // client-side search takes m = 5 reads.
  const auto make = [](SelectorOptions::Floor floor) {
    auto s = std::make_unique<ModelSelector>(
        ModelSelector::Rule::kCell, SelectorOptions{.explore = 0, .seed = 1, .floor = floor, .steer_per_s = 0});
    for (int i = 0; i < 10; ++i) s->OnTraversal(0x1000, 5);
    return s;
  };
  // A server at ~40% load: its searches 330 us on average (floor 270); reads 288 us (floor 280). One floor for both
  // (Cell's rule) sees 60 us of server queue against 5 x 8 of reads' and sends the search to reads, which take
  // 1,440 us; the marginal costs are 330^2/270 = 403 against 5 x 288^2/280 = 1,481.
  auto read = make(SelectorOptions::Floor::kRead);
  auto marginal = make(SelectorOptions::Floor::kMarginal);
  uint64_t t = 0, u = 0;
  FeedPairs(*read, 270, 390, 280, 296, 100, &t);
  FeedPairs(*marginal, 270, 390, 280, 296, 100, &u);
  EXPECT_EQ(read->Preferred(1, 0x1000, t), Side::kClient);
  EXPECT_EQ(marginal->Preferred(1, 0x1000, u), Side::kServer);
  // Near saturation: searches 700 us on average over the same floor. Whole latencies would still choose the server
  // (700 < 1,440); the marginal cost, 700^2/270 = 1,815, counts what one more search adds to the queue's others.
  auto whole = make(SelectorOptions::Floor::kNone);
  auto busy = make(SelectorOptions::Floor::kMarginal);
  uint64_t v = 0, w = 0;
  FeedPairs(*whole, 270, 1130, 280, 296, 100, &v);
  FeedPairs(*busy, 270, 1130, 280, 296, 100, &w);
  EXPECT_EQ(whole->Preferred(1, 0x1000, v), Side::kServer);
  EXPECT_EQ(busy->Preferred(1, 0x1000, w), Side::kClient);
  // A read floor of 0 (a clock too coarse to time it) counts reads at their whole latency, not at infinity.
  auto coarse = make(SelectorOptions::Floor::kMarginal);
  uint64_t x = 0;
  FeedPairs(*coarse, 270, 390, 0, 2, 100, &x);
  EXPECT_EQ(coarse->Preferred(1, 0x1000, x), Side::kClient);
}

// Steered at 2/s, one-sample windows without outlier filtering or exploration: each new sample sets its side's cost
// exactly.
SelectorOptions SteeredOneSample() {
  return SelectorOptions{.window = 1,
                         .outlier_sigmas = 0,
                         .explore = 0,
                         .max_age_us = 0,
                         .seed = 3,
                         .floor = SelectorOptions::Floor::kPerSide,
                         .steer_per_s = 2.0};
}

TEST(CellSelector, SteeringMovesTheSplitAtItsRateAndSettlesWhereTheQueuesMeet) {
  const SelectorOptions steered = SteeredOneSample();
  ModelSelector s(ModelSelector::Rule::kCell, steered);
  uint64_t t = 0;
  s.OnServerSearch(1, 50, t);  // the floors: 50 us for a search, 10 us for a read
  s.OnRead(1, 10, t);
  s.OnServerSearch(1, 52, t);  // server cost 2 us; client cost m x 1 us = 4
  s.OnRead(1, 11, t);
  ASSERT_EQ(s.Preferred(1, 0, t), Side::kServer);
  s.Choose(1, 0, t);
  // It starts where the whole latencies share the time evenly: 52 us a search against m x 11 = 44 us a traversal.
  EXPECT_NEAR(s.stats().servers[0].split, 44.0 / (52 + 44), 1e-9);
  for (int i = 0; i < 300; ++i) s.Choose(1, 0, t += kMs);  // 300 ms at 2/s: all the way to the server
  EXPECT_DOUBLE_EQ(s.stats().servers[0].split, 1.0);
  EXPECT_EQ(s.Choose(1, 0, t), Side::kServer);
  // The server's cost rises to 6 us (reads preferred). Decisions 1 ms apart for 100 ms: the split falls by
  // 2/s x 0.1 s = 0.2, not at once to 0.
  s.OnServerSearch(1, 56, t);
  ASSERT_EQ(s.Preferred(1, 0, t), Side::kClient);
  int server = 0;
  for (int i = 0; i < 100; ++i) server += s.Choose(1, 0, t += kMs) == Side::kServer ? 1 : 0;
  EXPECT_NEAR(s.stats().servers[0].split, 0.8, 1e-6);
  EXPECT_GT(server, 75) << "about 90 of 100 expected";
  EXPECT_LT(server, 99);
  // A gap of 2 s without decisions (shorter than the idle reset) moves it by 100 ms' worth at most.
  s.Choose(1, 0, t += 2'000 * kMs);
  EXPECT_NEAR(s.stats().servers[0].split, 0.6, 1e-6);
  // Back to an idle server (cost 1 against 4): 0.02 up in 10 ms; held for 300 ms more it reaches 1.
  s.OnServerSearch(1, 51, t);
  s.Choose(1, 0, t += 10 * kMs);
  EXPECT_NEAR(s.stats().servers[0].split, 0.62, 1e-6);
  for (int i = 0; i < 300; ++i) s.Choose(1, 0, t += kMs);
  EXPECT_DOUBLE_EQ(s.stats().servers[0].split, 1.0);

  // A rule that flips with every decision (the two queues about equal) holds the split where it is. One-sample
  // windows without outlier filtering make each new server-side sample decide the rule's preference.
  ModelSelector flip(ModelSelector::Rule::kCell, steered);
  uint64_t u = 0;
  Feed(flip, 60, 26, 19.5, 100, &u);  // floors 60 (search) and 19.5 (read); the last read 26: m x 6.5 = 26 queued
  flip.Choose(1, 0, u);
  const double start = flip.stats().servers[0].split;
  for (int i = 0; i < 300; ++i) {
    const bool busy = i % 2 == 0;
    flip.OnServerSearch(1, busy ? 99.0 : 73.0, u);  // alternately 39 us queued and 13, against the reads' 26
    ASSERT_EQ(flip.Preferred(1, 0, u), busy ? Side::kClient : Side::kServer) << i;
    flip.Choose(1, 0, u += kMs);
  }
  EXPECT_GT(flip.stats().servers[0].split, start - 0.05) << "300 ms of drift one way would have taken it to an end";
  EXPECT_LT(flip.stats().servers[0].split, start + 0.05);
}

// A selector that prefers the server (cost 2 us against m x 1 us = 4), whose split barely steers (0.01/s): what
// moves the split in the load-step tests is the client's load alone. Its split starts at kLoadStepStart, where 52 us a
// search and m x 11 = 44 us a traversal share the time evenly.
constexpr double kLoadStepStart = 44.0 / (52 + 44);
std::unique_ptr<ModelSelector> LoadStepSelector(double load_step) {
  auto s = std::make_unique<ModelSelector>(ModelSelector::Rule::kCell,
                                           SelectorOptions{.window = 1,
                                                           .outlier_sigmas = 0,
                                                           .explore = 0,
                                                           .max_age_us = 0,
                                                           .seed = 5,
                                                           .floor = SelectorOptions::Floor::kPerSide,
                                                           .steer_per_s = 0.01,
                                                           .load_step = load_step});
  s->OnServerSearch(1, 50, 0);
  s->OnRead(1, 10, 0);
  s->OnServerSearch(1, 52, 0);
  s->OnRead(1, 11, 0);
  return s;
}

// `n` searches of server 1, `gap_us` apart; returns the split after them.
double Searches(ModelSelector& s, int n, uint64_t gap_us, uint64_t* t) {
  for (int i = 0; i < n; ++i) s.Choose(1, 0, *t += gap_us);
  return s.stats().servers[0].split;
}

TEST(CellSelector, AStepInTheClientsLoadRescalesTheSplitSoTheServersRateHolds) {
  auto owner = LoadStepSelector(1.5);
  ModelSelector& s = *owner;
  uint64_t t = 0;
  // 1,000 searches/s for 1.5 s: the estimates settle without a step (their start from zero is not one).
  const double before = Searches(s, 1500, kMs, &t);
  EXPECT_NEAR(before, kLoadStepStart + 0.015, 1e-4) << "the start, then 0.01/s for 1.5 s";
  EXPECT_EQ(s.stats().load_steps, 0u);
  // 4,000/s (a spike of x4): the split falls to about a quarter of what it was, so that the server gets about the
  // 473 searches/s it got.
  const double spike = Searches(s, 800, 250, &t);  // 200 ms
  EXPECT_GE(s.stats().load_steps, 1u);
  EXPECT_GT(spike, 0.1);
  EXPECT_LT(spike, 0.16) << "expected about 0.473 / 4";
  // Back to 1,000/s for 300 ms: the split returns to about where it was.
  const double after = Searches(s, 300, kMs, &t);
  EXPECT_GT(after, 0.42);
  EXPECT_LT(after, 0.56);

  // Without load steps, the same spike moves the split only by steering.
  auto off_owner = LoadStepSelector(0);
  ModelSelector& off = *off_owner;
  uint64_t u = 0;
  Searches(off, 1500, kMs, &u);
  EXPECT_NEAR(Searches(off, 800, 250, &u), kLoadStepStart + 0.017, 1e-4);
  EXPECT_EQ(off.stats().load_steps, 0u);
}

TEST(CellSelector, ASteadyPoissonLoadAndAResumedOneAreNotLoadSteps) {
  auto owner = LoadStepSelector(1.5);
  ModelSelector& s = *owner;
  std::mt19937_64 rng(11);
  std::exponential_distribution<double> gap(2000.0 / 1e6);  // 2,000 searches/s, Poisson arrivals
  uint64_t t = 0;
  for (int i = 0; i < 40'000; ++i) s.Choose(1, 0, t += static_cast<uint64_t>(gap(rng)) + 1);
  EXPECT_EQ(s.stats().load_steps, 0u) << "20 s of a steady load, noise only";
  // A pause of 2 s (longer than the slow estimate's second), then the same load: the estimates start afresh.
  t += 2'000 * kMs;
  for (int i = 0; i < 6'000; ++i) s.Choose(1, 0, t += static_cast<uint64_t>(gap(rng)) + 1);
  EXPECT_EQ(s.stats().load_steps, 0u);
}

TEST(CellSelector, ASideWhoseSamplesAgedOutIsMeasuredAgain) {
  ModelSelector s(ModelSelector::Rule::kCell, NoExploration());  // max age 1 s
  uint64_t t = 0;
  Feed(s, 500, 8, 5, 100, &t);  // a busy server: reads preferred
  ASSERT_EQ(s.Choose(1, 0, t), Side::kClient);
  // 1.5 s of client-side searches only: the server's samples age out, and the next search goes there to measure it,
  // rather than judging the server by a load a second and a half old.
  for (int i = 0; i < 150; ++i) s.OnRead(1, 8, t += 10 * kMs);
  EXPECT_EQ(s.Choose(1, 0, t), Side::kServer);
  EXPECT_EQ(s.stats().servers[0].server_samples, 0u);
}

TEST(LatencyWindow, WhatIsNotALatencyIsRefused) {
  LatencyWindow w;
  EXPECT_FALSE(w.Add(std::nan(""), 0));
  EXPECT_FALSE(w.Add(std::numeric_limits<double>::infinity(), 1));
  EXPECT_FALSE(w.Add(-5.0, 2));
  EXPECT_TRUE(w.empty());
  EXPECT_TRUE(w.Add(7.0, 3));
  EXPECT_DOUBLE_EQ(w.floor(), 7.0);
  EXPECT_DOUBLE_EQ(w.mean(), 7.0);
}

TEST(LatencyWindow, TheFloorOutlivesAStepButNotAnIdleGap) {
  LatencyWindow w;
  for (int i = 0; i < 100; ++i) w.Add(10.0 + (i % 2), i * 10);
  for (int i = 0; i < 100; ++i) w.Add(300.0 + (i % 2), 1000 + i * 10);  // a queue builds: the history is dropped
  EXPECT_GE(w.resets(), 1u);
  EXPECT_GE(w.min(), 300.0);
  EXPECT_DOUBLE_EQ(w.floor(), 10.0) << "the no-queue cost is still what it was";
  w.Add(50.0, 5'000'000);  // after more than 3 s of quiet
  EXPECT_DOUBLE_EQ(w.floor(), 50.0) << "measured afresh after an idle gap";
}

TEST(CellSelector, ExplorationTakesTheWorseSideForAboutOnePercentOfTheTime) {
  // A search on the server costs 200.5 us (its mean); a traversal m x 7.7 = 30.8 us. Exploring 1% of the time means
  // one search in 100 x 200.5 / 30.8 = 651 on the server: about 31 of 20,000, not 200.
  ModelSelector s(
      ModelSelector::Rule::kCell,
      SelectorOptions{.explore = 0.01, .seed = 7, .floor = SelectorOptions::Floor::kRead, .steer_per_s = 0});
  uint64_t t = 0;
  Feed(s, 200, 8, 5, 100, &t);
  int server = 0;
  for (int i = 0; i < 20000; ++i) server += s.Choose(1, 0, t) == Side::kServer ? 1 : 0;
  EXPECT_GT(server, 8);  // expected 31; the bounds are over 4 sigma away
  EXPECT_LT(server, 60);
  EXPECT_EQ(s.stats().explorations, static_cast<uint64_t>(server));
}

TEST(CellSelector, ASideManyTimesDearerIsNeitherStartedAtHalfNorExploredOftenWhenSteered) {
  // shm-like: a server-side search 300 us, a traversal 4 x 2.5 = 10 us. Steered, exploring 1% of the time.
  ModelSelector s(ModelSelector::Rule::kCell, SelectorOptions{.explore = 0.01, .seed = 9, .steer_per_s = 1.0});
  uint64_t t = 0;
  Feed(s, 300, 2.5, 2.5, 100, &t);
  double server_us = 0, client_us = 0;
  for (int i = 0; i < 20000; ++i) {  // 20 ms of decisions: steering alone would move the split by only 0.02
    const bool on_server = s.Choose(1, 0, t += 1) == Side::kServer;
    (on_server ? server_us : client_us) += on_server ? 300.5 : 10;
  }
  // The split starts at 10 / 310.5 = 3.2% (not one half) and falls from there; with exploration the server takes
  // about 3-4% of the searches, under half of the time instead of the 94% a start at one half would have cost.
  EXPECT_LT(s.stats().servers[0].split, 0.04);
  EXPECT_LT(server_us / (server_us + client_us), 0.5);
  EXPECT_LT(s.stats().explorations, 30u) << "expected about 7 (1% of the time, at 30x the cost)";
}

// The scans' selector (whole latencies, a client-side scan counted as one read), steered, with no outlier filtering,
// aging or exploration, so that the windows' means and the split are exact.
SelectorOptions ExactScanSelector() {
  return SelectorOptions{.outlier_sigmas = 0,
                         .explore = 0,
                         .max_age_us = 0,
                         .initial_reads = 1,
                         .seed = 3,
                         .floor = SelectorOptions::Floor::kNone,
                         .steer_per_s = 1.0};
}

// The split's start follows the estimates while they fill: the first samples of each side are its cold start (a
// client's first scan over a fresh mapping is many times slower than the next), and a start fixed on them lies near one
// half. Once a window is full, steering alone moves the split.
TEST(CellSelector, TheSplitStartsWhereAFullWindowsEstimatesPutItNotWhereTheColdFirstSamplesDid) {
  ModelSelector s(ModelSelector::Rule::kCell, ExactScanSelector());
  uint64_t t = 0;
  s.OnServerSearch(1, 900, t);
  s.OnRead(1, 800, t);
  s.Choose(1, 0, t);
  EXPECT_NEAR(s.stats().servers[0].split, 800.0 / (900 + 800), 1e-9) << "the start, from one sample each";
  // 10 ms of scans, 100 us apart: the reads at 15 us, one server-side scan in ten at 300 us.
  for (int i = 1; i < 100; ++i) {
    s.OnRead(1, 15, t += 100);
    if (i % 10 == 0) s.OnServerSearch(1, 300, t);
    s.Choose(1, 0, t);
  }
  s.Choose(1, 0, t += ModelSelector::kRefreshUs);  // a refresh (decisions between refreshes draw without the lock)
  const double read_mean = (800 + 99 * 15) / 100.0, search_mean = (900 + 9 * 300) / 10.0;
  const double start = read_mean / (search_mean + read_mean);  // 0.06, where a start fixed at first stays at 0.46
  EXPECT_NEAR(s.stats().servers[0].split, start, 0.001) << "the read window is full: the start rests on it";
  // The start is over: the server's scans turning fast (1 us, a full window of them) move the split at the steering
  // rate, 0.001 in 1 ms, not to where the new estimates share the time evenly (0.96).
  for (int i = 0; i < 100; ++i) s.OnServerSearch(1, 1, t);
  s.Choose(1, 0, t += kMs);
  EXPECT_NEAR(s.stats().servers[0].split, start + 0.001, 0.001);
}

// A client too slow to fill a window ends the start after ModelSelector::kStartUs all the same, and steers from there:
// held at the even share, the side many times dearer would take half the time.
TEST(CellSelector, AStartThatNoWindowFillsEndsAfterASecond) {
  ModelSelector s(ModelSelector::Rule::kCell, ExactScanSelector());
  uint64_t t = 0;
  s.OnServerSearch(1, 300, t);
  s.OnRead(1, 10, t);
  s.Choose(1, 0, t);
  // Ten scans a second: 11 reads and one more server-side scan by 1.1 s, far from a window of 100.
  for (int i = 1; i <= 11; ++i) {
    s.OnRead(1, 10, t += 100 * kMs);
    if (i == 5) s.OnServerSearch(1, 300, t);
    s.Choose(1, 0, t);
  }
  const double before = s.stats().servers[0].split;
  // The client side turns dear (five reads of 2 ms: their mean 595 us against the server's 300): a start still under
  // way would move the split to the new even share (0.66); steering moves it up by 0.001 in 1 ms.
  for (int i = 0; i < 5; ++i) s.OnRead(1, 2000, t);
  ASSERT_EQ(s.Preferred(1, 0, t), Side::kServer);
  s.Choose(1, 0, t += kMs);
  EXPECT_NEAR(s.stats().servers[0].split, before + 0.001, 1e-6) << "the start ended after a second";
}

// Steered decisions between refreshes draw from what the last one published, without the lock; a sample that
// changes the rule's side moves the split from the next refresh, kRefreshUs later at most, and the refresh counts
// every decision made meanwhile.
TEST(CellSelector, DecisionsBetweenRefreshesDrawFromThePublishedSplitAndAreCounted) {
  const SelectorOptions steered = SteeredOneSample();
  ModelSelector s(ModelSelector::Rule::kCell, steered);
  uint64_t t = 0;
  s.OnServerSearch(1, 50, t);
  s.OnRead(1, 10, t);
  s.OnServerSearch(1, 52, t);  // server preferred (cost 2 us against 4)
  s.OnRead(1, 11, t);
  for (int i = 0; i < 300; ++i) s.Choose(1, 0, t += kMs);  // the split reaches 1
  ASSERT_DOUBLE_EQ(s.stats().servers[0].split, 1.0);
  // The server's cost rises (reads preferred): within the refresh interval decisions still draw from split 1.
  s.OnServerSearch(1, 56, t);
  int server = 0;
  for (uint64_t i = 1; i < ModelSelector::kRefreshUs; ++i) server += s.Choose(1, 0, t + i) == Side::kServer ? 1 : 0;
  EXPECT_EQ(server, static_cast<int>(ModelSelector::kRefreshUs) - 1);
  EXPECT_DOUBLE_EQ(s.stats().servers[0].split, 1.0) << "no refresh yet";
  // The next refresh, 100 ms of decisions later, moves it by 2/s x 0.1 s.
  t += ModelSelector::kRefreshUs;
  for (int i = 0; i < 100; ++i) s.Choose(1, 0, t += kMs);
  EXPECT_NEAR(s.stats().servers[0].split, 0.8 - 2.0 * ModelSelector::kRefreshUs / 1e6, 1e-6);
  EXPECT_EQ(s.stats().server_decisions + s.stats().client_decisions, 300u + ModelSelector::kRefreshUs - 1 + 100);
}

TEST(CellSelector, OperationsThatReportNothingFollowTheSplitAndNeverForceAMeasurement) {
  // Steered: gets leave the split near the client side (a search 300 us, a traversal 10 us).
  ModelSelector s(ModelSelector::Rule::kCell,
                  SelectorOptions{.explore = 0.01, .max_age_us = 1'000'000, .seed = 13, .steer_per_s = 1.0});
  uint64_t t = 0;
  Feed(s, 300, 2.5, 2.5, 100, &t);
  for (int i = 0; i < 1000; ++i) s.Choose(1, 0, t += 1000);  // 1 s of gets: the split goes to 0
  ASSERT_LT(s.stats().servers[0].split, 0.01);
  // 2 s later every sample has aged out: a get would be sent to be measured, a scan follows the split.
  t += 2'000'000;
  int server = 0;
  for (int i = 0; i < 1000; ++i) server += s.Follow(1, 0, t += 10) == Side::kServer ? 1 : 0;
  EXPECT_LT(server, 30) << "about 1% expected (the split), not every one as an unmeasured side would have it";
  // Gets are what measure the sides whose samples aged out: with both windows empty, they alternate.
  const Side first = s.Choose(1, 0, t), second = s.Choose(1, 0, t);
  EXPECT_NE(first, second);

  // Per operation (no steering): the rule's side once measured, the server before.
  ModelSelector per_get(ModelSelector::Rule::kCell, NoExploration());
  uint64_t u = 0;
  EXPECT_EQ(per_get.Follow(1, 0, u), Side::kServer) << "unmeasured";
  Feed(per_get, 300, 2.5, 2.5, 100, &u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(per_get.Follow(1, 0, u), Side::kClient);
  EXPECT_EQ(per_get.stats().explorations, 0u);
}

TEST(DexSelector, PushesToTheServerWhenItBeatsTheMissingNodesReadCost) {
  ModelSelector s(ModelSelector::Rule::kDex, NoExploration());
  uint64_t t = 0;
  // 4 x (10 + 0.04) x 1.2 = 48.2 us: a 40 us search goes to the server, a 60 us one does not.
  for (int i = 0; i < 50; ++i) {
    s.OnServerSearch(1, 40.0, t);
    s.OnRead(1, 10.0, t);
    t += 10;
  }
  EXPECT_EQ(s.Preferred(1, 0, t), Side::kServer);
  for (int i = 0; i < 50; ++i) s.OnServerSearch(1, 60.0, t += 10);  // 50-sample window: the old ones are gone
  EXPECT_EQ(s.Preferred(1, 0, t), Side::kClient);
  EXPECT_EQ(s.stats().outliers, 0u) << "DEX keeps every sample";
}

TEST(Selector, ModesParseAndBadOnesAreRefusedWithTheChoices) {
  for (const char* mode : {"server", "client", "adaptive", "dex", "fixed:0", "fixed:0.25", "fixed:1"}) {
    auto s = MakeSelector(mode);
    EXPECT_TRUE(s.ok()) << mode << ": " << s.status().ToString();
  }
  for (const char* mode : {"", "fixed:", "fixed:1.5", "fixed:-0.1", "fixed:0.5x", "Adaptive", "jsq"}) {
    auto s = MakeSelector(mode);
    ASSERT_FALSE(s.ok()) << mode;
    EXPECT_TRUE(s.status().IsInvalidArgument());
    EXPECT_NE(s.status().message().find("adaptive"), std::string::npos) << s.status().message();
  }
  EXPECT_EQ(*ParseFloor("per-side"), SelectorOptions::Floor::kPerSide);
  EXPECT_EQ(*ParseFloor("read"), SelectorOptions::Floor::kRead);
  EXPECT_EQ(*ParseFloor("none"), SelectorOptions::Floor::kNone);
  EXPECT_EQ(*ParseFloor("marginal"), SelectorOptions::Floor::kMarginal);
  EXPECT_TRUE(ParseFloor("rtt").status().IsInvalidArgument());
  EXPECT_NE(ParseFloor("rtt").status().message().find("per-side"), std::string::npos);
  EXPECT_FALSE((*MakeSelector("server"))->Measures());
  EXPECT_TRUE((*MakeSelector("adaptive"))->Measures());
}

TEST(Selector, AFixedFractionIsKept) {
  auto s = MakeSelector("fixed:0.3", SelectorOptions{.seed = 3});
  ASSERT_TRUE(s.ok());
  int server = 0;
  for (int i = 0; i < 20000; ++i) server += (*s)->Choose(1, 0, 0) == Side::kServer ? 1 : 0;
  EXPECT_NEAR(server / 20000.0, 0.3, 0.03);
  EXPECT_EQ((*s)->stats().server_decisions, static_cast<uint64_t>(server));
  EXPECT_EQ((*MakeSelector("server"))->Choose(1, 0, 0), Side::kServer);
  EXPECT_EQ((*MakeSelector("client"))->Choose(1, 0, 0), Side::kClient);
}

TEST(Selector, ManyThreadsDecideAndReportAtOnce) {
  auto made = MakeSelector("adaptive", SelectorOptions{.seed = 5});
  ASSERT_TRUE(made.ok());
  Selector& s = **made;
  constexpr int kThreads = 4, kOps = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        const uint64_t server = 1 + (i % 3), now = static_cast<uint64_t>(i) * 10;
        if (i % 7 == 0) s.Follow(server, 0, now);  // reads the published split while others refresh it
        if (s.Choose(server, 0x1000 * (t + 1), now) == Side::kServer) {
          s.OnServerSearch(server, 20.0 + i % 5, now);
        } else {
          s.OnRead(server, 3.0 + i % 2, now);
          s.OnTraversal(0x1000 * (t + 1), 4);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const SelectorStats stats = s.stats();
  EXPECT_EQ(stats.server_decisions + stats.client_decisions, uint64_t{kThreads} * (kOps + (kOps + 6) / 7));
  EXPECT_EQ(stats.servers.size(), 3u);
}

}  // namespace
}  // namespace cell::selector
