// Workload generators for cell-bench (see workload.h).
#include "bench/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace cell::bench {

namespace {
double Zeta(uint64_t n, double theta) {
  double sum = 0;
  for (uint64_t i = 1; i <= n; ++i) sum += 1.0 / std::pow(static_cast<double>(i), theta);
  return sum;
}

uint64_t Fnv64(uint64_t v) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int i = 0; i < 8; ++i) {
    h ^= v & 0xFF;
    h *= 0x100000001B3ull;
    v >>= 8;
  }
  return h;
}
}  // namespace

ZipfianGenerator::ZipfianGenerator(uint64_t n, double theta) : n_(std::max<uint64_t>(n, 1)), theta_(theta) {
  alpha_ = 1.0 / (1.0 - theta_);
  zetan_ = Zeta(n_, theta_);
  const double zeta2 = Zeta(2, theta_);
  eta_ = (1.0 - std::pow(2.0 / static_cast<double>(n_), 1.0 - theta_)) / (1.0 - zeta2 / zetan_);
  half_pow_theta_ = std::pow(0.5, theta_);
}

uint64_t ZipfianGenerator::Next(std::mt19937_64& rng) const {
  const double u = Uniform01(rng);
  const double uz = u * zetan_;
  if (uz < 1.0) return 0;
  if (uz < 1.0 + half_pow_theta_) return std::min<uint64_t>(1, n_ - 1);
  const double rank = static_cast<double>(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_);
  return std::min(static_cast<uint64_t>(rank), n_ - 1);
}

KeyChooser::KeyChooser(uint64_t count, Distribution distribution, double theta)
    : count_(std::max<uint64_t>(count, 1)), distribution_(distribution), zipf_(count_, theta) {}

uint64_t KeyChooser::Next(std::mt19937_64& rng, uint64_t newest) const {
  switch (distribution_) {
    case Distribution::kUniform:
      return std::uniform_int_distribution<uint64_t>(0, count_ - 1)(rng);
    case Distribution::kZipfian:
      return Fnv64(zipf_.Next(rng)) % count_;
    case Distribution::kLatest: {
      const uint64_t rank = zipf_.Next(rng);
      return rank > newest ? 0 : newest - rank;
    }
  }
  return 0;
}

OpKind Workload::Pick(std::mt19937_64& rng) const {
  double u = Uniform01(rng);
  if ((u -= read) < 0) return OpKind::kRead;
  if ((u -= update) < 0) return OpKind::kUpdate;
  if ((u -= insert) < 0) return OpKind::kInsert;
  if ((u -= scan) < 0) return OpKind::kScan;
  // Rounding at the top end: the last kind the workload has.
  if (read_modify_write > 0) return OpKind::kReadModifyWrite;
  if (scan > 0) return OpKind::kScan;
  if (insert > 0) return OpKind::kInsert;
  if (update > 0) return OpKind::kUpdate;
  return OpKind::kRead;
}

StatusOr<Workload> ParseWorkload(std::string_view name) {
  Workload w;
  w.name = std::string(name);
  if (name == "a") {
    w.read = 0.5, w.update = 0.5;
  } else if (name == "b") {
    w.read = 0.95, w.update = 0.05;
  } else if (name == "c") {
    w.read = 1;
  } else if (name == "d") {
    w.read = 0.95, w.insert = 0.05, w.distribution = Distribution::kLatest;
  } else if (name == "e") {
    w.scan = 0.95, w.insert = 0.05;
  } else if (name == "f") {
    w.read = 0.5, w.read_modify_write = 0.5;
  } else if (name.substr(0, 4) == "mix:") {
    const std::string number(name.substr(4));
    char* end = nullptr;
    const double x = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !(x >= 0 && x <= 1)) {
      return Status::InvalidArgument(fmt::format("workload '{}': mix:<x> needs a read fraction x in 0..1", name));
    }
    w.read = x, w.update = 1 - x;
  } else {
    return Status::InvalidArgument(
        fmt::format("workload '{}' is not one of a, b, c, d, e, f (YCSB's) or mix:<read fraction>", name));
  }
  return w;
}

StatusOr<Distribution> ParseDistribution(std::string_view name) {
  if (name == "uniform") return Distribution::kUniform;
  if (name == "zipfian") return Distribution::kZipfian;
  if (name == "latest") return Distribution::kLatest;
  return Status::InvalidArgument(fmt::format("key distribution '{}' is not one of uniform, zipfian, latest", name));
}

void KeyOfInto(uint64_t i, uint64_t key_count, std::string* key) {
  // "k", the index zero-padded to the width of the largest, then letters up to the key's length, letter j being
  // 'a' + (h >> (j % 60)) % 26 for a hash h of the index. Written into the string's buffer in one pass: the harness
  // makes a key per operation, on the client's CPU that the stores under test share.
  size_t width = 1;
  for (uint64_t c = std::max<uint64_t>(key_count, 1) - 1; c >= 10; c /= 10) ++width;
  char digits[20];
  const size_t n = static_cast<size_t>(std::to_chars(digits, digits + sizeof(digits), i).ptr - digits);
  const size_t length = 8 + Fnv64(i) % 57;  // 8..64
  const size_t head = 1 + std::max(width, n);
  key->assign(std::max(length, head), '0');
  char* k = key->data();
  k[0] = 'k';
  std::memcpy(k + head - n, digits, n);
  const uint64_t h = Fnv64(i ^ 0x5bd1e995);
  for (size_t j = head; j < length; ++j) k[j] = static_cast<char>('a' + (h >> (j < 60 ? j : j - 60)) % 26);
}

std::string KeyOf(uint64_t i, uint64_t key_count) {
  std::string key;
  KeyOfInto(i, key_count, &key);
  return key;
}

char FillOf(std::string_view key) {
  // h = the sum of key[k] * 131^(n-1-k) (mod 2^64), four bytes a step, so that a step's products do not wait for each
  // other (the harness checks every value it reads, on the client's CPU the stores under test share).
  constexpr uint64_t p1 = 131, p2 = p1 * p1, p3 = p2 * p1, p4 = p3 * p1;
  const auto* c = reinterpret_cast<const unsigned char*>(key.data());
  const size_t n = key.size();
  uint64_t h = 0;
  size_t k = 0;
  for (; k + 4 <= n; k += 4) h = h * p4 + c[k] * p3 + c[k + 1] * p2 + c[k + 2] * p1 + c[k + 3];
  for (; k < n; ++k) h = h * p1 + c[k];
  return static_cast<char>('A' + Fnv64(h) % 26);
}

std::string ValueOf(std::string_view key, uint64_t version) {
  uint64_t h = version;
  for (char c : key) h = h * 131 + static_cast<unsigned char>(c);
  return std::string(8 + Fnv64(h) % 249, FillOf(key));  // 8..256
}

bool ValueHasFill(std::string_view value, char fill) {
  if (value.size() < 8 || value.size() > 256) return false;
  // Every 8-byte word's difference from the fill or'd together, no branch a word; the last word covers the tail.
  const uint64_t word = 0x0101010101010101ull * static_cast<unsigned char>(fill);
  uint64_t diff = 0, a, b;
  size_t at = 0;
  for (; at + 16 <= value.size(); at += 16) {
    std::memcpy(&a, value.data() + at, 8);
    std::memcpy(&b, value.data() + at + 8, 8);
    diff |= (a ^ word) | (b ^ word);
  }
  if (at + 8 <= value.size()) {
    std::memcpy(&a, value.data() + at, 8);
    diff |= a ^ word;
  }
  std::memcpy(&a, value.data() + value.size() - 8, 8);
  return (diff | (a ^ word)) == 0;
}

bool ValueBelongsTo(std::string_view value, std::string_view key) { return ValueHasFill(value, FillOf(key)); }

ArrivalClock::ArrivalClock(double rate_per_s, Clock::time_point start, uint64_t seed)
    : rate_(rate_per_s), at_(start), rng_(seed) {}

ArrivalClock::Clock::time_point ArrivalClock::Next() {
  const double gap_s = std::exponential_distribution<double>(rate_)(rng_);
  at_ += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap_s));
  return at_;
}

}  // namespace cell::bench
