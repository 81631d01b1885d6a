// The bench harness's workload generators: key distributions, operation mixes, key and value shapes, and the
// open-loop arrival clock, checked against what they promise.
#include "bench/workload.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "bench/series.h"

namespace cell::bench {
namespace {

TEST(Zipfian, TheTopRanksComeAsOftenAsTheLawSays) {
  constexpr uint64_t kN = 1000;
  ZipfianGenerator zipf(kN, 0.99);
  std::mt19937_64 rng(1);
  constexpr int kDraws = 1'000'000;
  std::vector<int> count(kN);
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t r = zipf.Next(rng);
    ASSERT_LT(r, kN);
    ++count[r];
  }
  // Ranks 0 and 1 are exact in Gray's method: 1/zeta(n) and (1/2^theta)/zeta(n).
  EXPECT_NEAR(count[0] / double(kDraws), 1.0 / zipf.zetan(), 0.005);
  EXPECT_NEAR(count[1] / double(kDraws), std::pow(0.5, 0.99) / zipf.zetan(), 0.005);
  // The head is heavy: the top 10% of ranks take well over half the draws (the law says about 68%).
  double law = 0;
  for (uint64_t k = 1; k <= kN / 10; ++k) law += 1.0 / std::pow(double(k), 0.99);
  law /= zipf.zetan();
  int top = 0;
  for (uint64_t k = 0; k < kN / 10; ++k) top += count[k];
  EXPECT_NEAR(top / double(kDraws), law, 0.03);
  EXPECT_GT(count[0], count[10]);
  EXPECT_GT(count[10], count[500]);
}

TEST(KeyChooser, UniformCoversTheKeysEvenly) {
  KeyChooser keys(100, Distribution::kUniform, 0.99);
  std::mt19937_64 rng(2);
  std::vector<int> count(100);
  for (int i = 0; i < 200000; ++i) ++count[keys.Next(rng, 99)];
  double chi2 = 0;
  for (int c : count) chi2 += (c - 2000.0) * (c - 2000.0) / 2000.0;
  EXPECT_LT(chi2, 160) << "99 degrees of freedom: 160 is beyond the 99.99th percentile";
}

TEST(KeyChooser, ZipfianSpreadsThePopularKeysOverTheKeySpace) {
  KeyChooser keys(10000, Distribution::kZipfian, 0.99);
  std::mt19937_64 rng(3);
  std::map<uint64_t, int> count;
  for (int i = 0; i < 200000; ++i) {
    const uint64_t k = keys.Next(rng, 9999);
    ASSERT_LT(k, 10000u);
    ++count[k];
  }
  std::vector<std::pair<int, uint64_t>> by_count;
  for (auto [k, c] : count) by_count.push_back({c, k});
  std::sort(by_count.rbegin(), by_count.rend());
  // The ten most popular keys are not neighbours (scrambled), and the most popular is far above the median.
  std::set<uint64_t> top;
  for (int i = 0; i < 10; ++i) top.insert(by_count[i].second);
  EXPECT_GT(*top.rbegin() - *top.begin(), 1000u);
  EXPECT_GT(by_count[0].first, 50 * by_count[by_count.size() / 2].first);
}

TEST(KeyChooser, LatestFavoursTheNewestKeys) {
  KeyChooser keys(10000, Distribution::kLatest, 0.99);
  std::mt19937_64 rng(4);
  int recent = 0;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t k = keys.Next(rng, 12000);  // 2,000 inserted since the load
    ASSERT_LE(k, 12000u);
    recent += k >= 11000 ? 1 : 0;
  }
  EXPECT_GT(recent, 60000) << "the newest 1,000 of 12,000 keys should take most of the draws";
}

TEST(Workload, YcsbMixesComeOutInTheirProportions) {
  struct Want {
    const char* name;
    double read, update, insert, scan, rmw;
  };
  for (const Want& w : {Want{"a", .5, .5, 0, 0, 0}, Want{"b", .95, .05, 0, 0, 0}, Want{"c", 1, 0, 0, 0, 0},
                        Want{"d", .95, 0, .05, 0, 0}, Want{"e", 0, 0, .05, .95, 0}, Want{"f", .5, 0, 0, 0, .5},
                        Want{"mix:0.3", .3, .7, 0, 0, 0}}) {
    auto workload = ParseWorkload(w.name);
    ASSERT_TRUE(workload.ok()) << w.name;
    std::mt19937_64 rng(5);
    std::map<OpKind, int> count;
    constexpr int kOps = 100000;
    for (int i = 0; i < kOps; ++i) ++count[workload->Pick(rng)];
    EXPECT_NEAR(count[OpKind::kRead] / double(kOps), w.read, 0.01) << w.name;
    EXPECT_NEAR(count[OpKind::kUpdate] / double(kOps), w.update, 0.01) << w.name;
    EXPECT_NEAR(count[OpKind::kInsert] / double(kOps), w.insert, 0.01) << w.name;
    EXPECT_NEAR(count[OpKind::kScan] / double(kOps), w.scan, 0.01) << w.name;
    EXPECT_NEAR(count[OpKind::kReadModifyWrite] / double(kOps), w.rmw, 0.01) << w.name;
  }
  EXPECT_EQ(ParseWorkload("d")->distribution, Distribution::kLatest);
  for (const char* bad : {"g", "", "mix:", "mix:1.2", "A"}) {
    auto workload = ParseWorkload(bad);
    ASSERT_FALSE(workload.ok()) << bad;
    EXPECT_TRUE(workload.status().IsInvalidArgument());
  }
  EXPECT_TRUE(ParseDistribution("zipfian").ok());
  EXPECT_FALSE(ParseDistribution("normal").ok());
}

TEST(Shapes, KeysAreCellsShapesUniqueAndInOrder) {
  constexpr uint64_t kCount = 100000;
  std::string previous;
  std::map<size_t, int> lengths;
  for (uint64_t i = 0; i < kCount; ++i) {
    const std::string key = KeyOf(i, kCount);
    ASSERT_GE(key.size(), 8u);
    ASSERT_LE(key.size(), 64u);
    ASSERT_LT(previous, key) << "keys sort in the order of their index";
    previous = key;
    ++lengths[key.size()];
    const std::string value = ValueOf(key, i);
    ASSERT_GE(value.size(), 8u);
    ASSERT_LE(value.size(), 256u);
    ASSERT_TRUE(ValueBelongsTo(value, key));
    ASSERT_TRUE(ValueBelongsTo(ValueOf(key, i + 7), key)) << "any version of a key's value belongs to it";
  }
  EXPECT_EQ(lengths.size(), 57u) << "every length from 8 to 64 occurs";
  // Another key's value is taken for this key's only when their fill characters agree: about 1 in 26.
  int confused = 0;
  for (uint64_t i = 0; i < 1000; ++i) confused += ValueBelongsTo(ValueOf(KeyOf(i, kCount), 0), KeyOf(i + 1, kCount));
  EXPECT_LT(confused, 80) << "of 1,000 neighbouring pairs";
  EXPECT_FALSE(ValueBelongsTo("short", KeyOf(1, 10)));
  // The format: "k", the index zero-padded to the width of the largest (an index past it has more digits), letters.
  EXPECT_EQ(KeyOf(7, 1000).substr(0, 4), "k007");
  EXPECT_EQ(KeyOf(123456, 1000).substr(0, 7), "k123456");
  EXPECT_EQ(KeyOf(0, 1).substr(0, 2), "k0");
  for (uint64_t i : {0ull, 5ull, 99999ull}) {
    const std::string key = KeyOf(i, kCount);
    EXPECT_EQ(key.substr(0, 6), fmt::format("k{:05d}", i));
    EXPECT_TRUE(std::all_of(key.begin() + 6, key.end(), [](char c) { return c >= 'a' && c <= 'z'; })) << key;
  }
  // One wrong byte anywhere (the 8-byte words and the tail) is caught.
  const std::string key = KeyOf(3, kCount);
  const std::string good = ValueOf(key, 1);
  for (size_t at = 0; at < good.size(); ++at) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] + 1);
    ASSERT_FALSE(ValueBelongsTo(bad, key)) << "byte " << at << " of " << good.size();
  }
}

// The keys of earlier measurements (docs/BENCHMARKS.md), written as they were first defined, one letter at a time:
// KeyOf writes the same bytes faster, so the stores hold the same keys across versions of the harness.
TEST(Shapes, KeysAreThoseOfTheirFirstDefinition) {
  const auto fnv = [](uint64_t v) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xFF)) * 0x100000001B3ull;
    return h;
  };
  const auto reference = [&](uint64_t i, uint64_t count) {
    std::string digits = std::to_string(i);
    const size_t width = std::to_string(std::max<uint64_t>(count, 1) - 1).size();
    std::string key = "k" + std::string(width > digits.size() ? width - digits.size() : 0, '0') + digits;
    const size_t length = 8 + fnv(i) % 57;
    const uint64_t h = fnv(i ^ 0x5bd1e995);
    for (size_t j = key.size(); j < length; ++j) key.push_back(static_cast<char>('a' + (h >> (j % 60)) % 26));
    return key;
  };
  for (uint64_t count : {1ull, 10ull, 1000ull, 200000ull, 20000000ull}) {
    for (uint64_t i = 0; i < 20000; ++i) ASSERT_EQ(KeyOf(i, count), reference(i, count)) << i << " of " << count;
    for (uint64_t i : {count, 10 * count + 3, uint64_t{1} << 63, ~uint64_t{0}}) {
      ASSERT_EQ(KeyOf(i, count), reference(i, count)) << i << " of " << count;
    }
  }
}

// The same for values: a fill (a hash of the key) and a length (a hash of the key and the version) as first defined,
// one byte at a time, so that a store loaded by another version of the harness still checks.
TEST(Shapes, ValuesAreThoseOfTheirFirstDefinition) {
  const auto fnv = [](uint64_t v) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xFF)) * 0x100000001B3ull;
    return h;
  };
  const auto reference = [&](const std::string& key, uint64_t version) {
    uint64_t fill = 0, length = version;
    for (unsigned char c : key) fill = fill * 131 + c, length = length * 131 + c;
    return std::string(8 + fnv(length) % 249, static_cast<char>('A' + fnv(fill) % 26));
  };
  for (uint64_t i = 0; i < 20000; ++i) {
    const std::string key = KeyOf(i, 200000);
    const std::string value = reference(key, i % 7);
    ASSERT_EQ(ValueOf(key, i % 7), value) << key;
    ASSERT_EQ(FillOf(key), value[0]) << key;
    ASSERT_TRUE(ValueHasFill(value, value[0])) << key;
    ASSERT_FALSE(ValueHasFill(value, static_cast<char>(value[0] + 1))) << key;
  }
  for (size_t length : {7, 257}) EXPECT_FALSE(ValueHasFill(std::string(length, 'A'), 'A')) << length;
  for (size_t length = 8; length <= 256; ++length) {
    ASSERT_TRUE(ValueHasFill(std::string(length, 'Q'), 'Q')) << length;
    std::string last(length, 'Q');
    last.back() = 'R';
    ASSERT_FALSE(ValueHasFill(last, 'Q')) << "the tail, at length " << length;
  }
}

TEST(ArrivalClock, GapsArePoissonAtTheRate) {
  const auto start = ArrivalClock::Clock::time_point();
  ArrivalClock clock(10000, start, 6);  // 10,000 per second: 100 us apart on average
  constexpr int kArrivals = 100000;
  std::vector<double> gaps;
  auto last = start;
  for (int i = 0; i < kArrivals; ++i) {
    const auto at = clock.Next();
    ASSERT_GE(at, last);
    gaps.push_back(std::chrono::duration<double, std::micro>(at - last).count());
    last = at;
  }
  double mean = 0, var = 0;
  for (double g : gaps) mean += g;
  mean /= kArrivals;
  for (double g : gaps) var += (g - mean) * (g - mean);
  const double cv = std::sqrt(var / kArrivals) / mean;
  EXPECT_NEAR(mean, 100.0, 2.0);
  EXPECT_NEAR(cv, 1.0, 0.03) << "exponential gaps: standard deviation equals the mean";
  // A spike: the rate changes as it goes.
  clock.set_rate(25000);
  const auto before = last;
  for (int i = 0; i < 25000; ++i) last = clock.Next();
  EXPECT_NEAR(std::chrono::duration<double>(last - before).count(), 1.0, 0.03);
}

TEST(LatencyRecorder, SamplesAreDrainedOnceAndSummarisedByRank) {
  LatencyRecorder r;
  for (int i = 100; i >= 1; --i) r.Record(i);
  std::vector<float> interval;
  r.Drain(&interval);
  ASSERT_EQ(interval.size(), 100u);
  std::vector<float> again;
  r.Drain(&again);
  EXPECT_TRUE(again.empty()) << "a sample is drained once";
  std::vector<float> total = interval;
  const LatencySummary first = Summarize(&interval);
  EXPECT_EQ(first.count, 100u);
  EXPECT_DOUBLE_EQ(first.p50_us, 50);  // nearest rank: 50 of the 100 samples are <= 50
  EXPECT_DOUBLE_EQ(first.p90_us, 90);
  EXPECT_DOUBLE_EQ(first.p99_us, 99);
  EXPECT_DOUBLE_EQ(first.max_us, 100);
  for (int i = 0; i < 100; ++i) r.Record(1000);
  r.Drain(&total);
  const LatencySummary all = Summarize(&total);
  EXPECT_EQ(all.count, 200u);
  EXPECT_DOUBLE_EQ(all.p50_us, 100);  // the 100th of 200
  EXPECT_DOUBLE_EQ(all.p90_us, 1000);
  std::vector<float> none;
  EXPECT_EQ(Summarize(&none).count, 0u);
}

TEST(Series, ACsvRowHasAFieldForEveryColumn) {
  IntervalRow row;
  row.t_s = 1.5;
  row.interval_s = 0.1;
  row.ops = 250;
  row.latency = {.count = 250, .p50_us = 10, .p90_us = 20, .p99_us = 30.5, .max_us = 40};
  row.server_fraction = 0.25;
  row.retries = 3;
  row.target_rate = 5000;
  row.hogs = 2;
  row.aborts = 7;
  const std::string csv = CsvRow(row);
  EXPECT_EQ(csv, "1.500,0.100,250,2500,10.0,20.0,30.5,40.0,0.250,3,5000,2,7");
  const std::string header = CsvHeader();
  EXPECT_EQ(std::count(csv.begin(), csv.end(), ','), std::count(header.begin(), header.end(), ','));
}

}  // namespace
}  // namespace cell::bench
