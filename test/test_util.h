// Helpers shared by Cell's tests: key generators and node fetchers that behave like a NIC copying a node.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <thread>

#include "btree/node_lock.h"
#include "btree/node_source.h"
#include "meganode/region.h"

namespace cell::testing {

// Keys of `min_len..max_len` random bytes drawn from `alphabet` (a small alphabet makes shared prefixes likely).
inline std::string RandomKey(std::mt19937_64& rng, size_t min_len, size_t max_len, std::string_view alphabet) {
  size_t len = min_len + rng() % (max_len - min_len + 1);
  std::string s(len, ' ');
  for (char& c : s) c = alphabet[rng() % alphabet.size()];
  return s;
}

inline constexpr std::string_view kPrintable =
    "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~";
inline constexpr std::string_view kTinyAlphabet = std::string_view("ab\0", 3);  // includes zero bytes

// A fetcher that reads straight from this process's regions. With `shuffle`, a node's 16 cache lines are copied
// in random order, with a short spin between lines and a yield after one of them, as a NIC or a remote CPU might:
// the reads of one node spread over time while writers run. One yield, not one per line: on a loaded machine each
// yield waits a turn of the CPU (docs/BENCHMARKS.md, "Torn-copy test").
inline btree::NodeFetcher RegionFetcher(const meganode::RegionSet* regions, bool shuffle) {
  return [regions, shuffle](GlobalPtr p, size_t words, uint64_t* dst) -> Status {
    const uint64_t* src = regions->Resolve(p, words * 8);
    if (src == nullptr) return Status::Unavailable("no such region or offset");
    if (!shuffle || words != btree::kNodeWords) {
      CopyFromShared(dst, src, words);
      return Status::OK();
    }
    thread_local std::mt19937_64 rng(std::hash<std::thread::id>()(std::this_thread::get_id()));
    constexpr size_t kLines = btree::kNodeSize / btree::kCacheLine, kLineWords = btree::kCacheLine / 8;
    int order[kLines];
    for (size_t i = 0; i < kLines; ++i) order[i] = static_cast<int>(i);
    std::shuffle(order, order + kLines, rng);
    const size_t yield_at = rng() % kLines;
    for (size_t i = 0; i < kLines; ++i) {
      CopyFromShared(dst + order[i] * kLineWords, src + order[i] * kLineWords, kLineWords);
      if (i == yield_at)
        std::this_thread::yield();
      else
        for (int spin = 0; spin < 64; ++spin) btree::CpuRelax();
    }
    return Status::OK();
  };
}

// Stress tests run shorter under ThreadSanitizer, which slows code down many times.
inline int StressScale() {
#if defined(__SANITIZE_THREAD__)
  return 1;
#else
  return 5;
#endif
}

}  // namespace cell::testing
