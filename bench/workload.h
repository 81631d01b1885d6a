// Workloads for cell-bench: YCSB's core workloads over Cell's key and value shapes, uniform, Zipfian or latest key
// choice, and the open-loop arrival clock. Pure logic, deterministic for a seed; the harness drives a store with it.
//
//   workload  operations                                  key choice (default)
//   a         50% read, 50% update                        zipfian
//   b         95% read, 5% update                         zipfian
//   c         100% read                                   zipfian
//   d         95% read, 5% insert                         latest (recent inserts are popular)
//   e         95% scan (1..100 pairs), 5% insert          zipfian (the scan's first key)
//   f         50% read, 50% read-modify-write             zipfian
//   mix:<x>   x read, 1 - x update (0..1; Cell's figure 9)  zipfian
//
// Keys (KeyOf): key i is 'k', then i in decimal zero-padded to the width of the key count, then filler up to a
// length of 8..64 bytes drawn from i: keys sort in the order of i, so a scan from key i covers i, i+1, ...
// Values (ValueOf): 8..256 bytes of one character drawn from the key, so a reader can check that a value belongs to
// its key (ValueBelongsTo) whatever update it saw.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include "cell/status.h"

namespace cell::bench {

// A uniform draw from [0, 1).
inline double Uniform01(std::mt19937_64& rng) { return std::uniform_real_distribution<double>(0, 1)(rng); }

// YCSB's Zipfian generator (after Gray et al., SIGMOD'94): ranks 0..n-1, rank 0 the most popular, P(rank k) close to
// (1 / (k + 1)^theta) / zeta(n, theta).
class ZipfianGenerator {
 public:
  ZipfianGenerator(uint64_t n, double theta);
  uint64_t Next(std::mt19937_64& rng) const;
  uint64_t n() const { return n_; }
  double zetan() const { return zetan_; }

 private:
  uint64_t n_;
  double theta_, alpha_, zetan_, eta_, half_pow_theta_;
};

enum class Distribution { kUniform, kZipfian, kLatest };

// Picks key indices among `count` keys. Zipfian ranks are scrambled over the key space (YCSB's scrambled Zipfian:
// the popular keys are not neighbours); latest picks `newest - rank`, the newest key being the last inserted.
class KeyChooser {
 public:
  KeyChooser(uint64_t count, Distribution distribution, double theta);
  uint64_t Next(std::mt19937_64& rng, uint64_t newest) const;

 private:
  uint64_t count_;
  Distribution distribution_;
  ZipfianGenerator zipf_;
};

enum class OpKind { kRead, kUpdate, kInsert, kScan, kReadModifyWrite };

struct Workload {
  std::string name;
  double read = 0, update = 0, insert = 0, scan = 0, read_modify_write = 0;  // fractions, summing to 1
  Distribution distribution = Distribution::kZipfian;
  OpKind Pick(std::mt19937_64& rng) const;
};

// "a".."f" or "mix:<x>"; InvalidArgument naming the choices otherwise.
StatusOr<Workload> ParseWorkload(std::string_view name);
// "uniform", "zipfian" or "latest".
StatusOr<Distribution> ParseDistribution(std::string_view name);

std::string KeyOf(uint64_t i, uint64_t key_count);
// KeyOf into *key, whose memory it keeps (the harness makes a key per operation).
void KeyOfInto(uint64_t i, uint64_t key_count, std::string* key);
std::string ValueOf(std::string_view key, uint64_t version);
bool ValueBelongsTo(std::string_view value, std::string_view key);
// ValueBelongsTo in two halves, so that a get's check need not keep a copy of its key: the character every value of
// `key` is made of, and whether `value` is one made of `fill`.
char FillOf(std::string_view key);
bool ValueHasFill(std::string_view value, char fill);

// Poisson arrivals at `rate_per_s`: each call gives the intended start of the next operation (exponential gaps),
// from `start`. An open-loop harness measures latency from these times, so time spent queued counts.
class ArrivalClock {
 public:
  using Clock = std::chrono::steady_clock;
  ArrivalClock(double rate_per_s, Clock::time_point start, uint64_t seed);
  Clock::time_point Next();
  void set_rate(double rate_per_s) { rate_ = rate_per_s; }  // a load spike changes it as it goes

 private:
  double rate_;
  Clock::time_point at_;
  std::mt19937_64 rng_;
};

}  // namespace cell::bench
