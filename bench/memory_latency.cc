// cell-memory-latency: how long this machine takes to load a cache line it does not hold, by working-set size: a
// pointer chase over a random cyclic permutation of 64-byte lines, each load's address the value the one before it
// read, so that no two loads overlap. Cell's gets at scale are a few such dependent misses (a node per level, then the
// record), and on a shared VM the caches one tenant gets vary from host to host and hour to hour: a benchmark session
// measures this first, so that its rates can be read against the memory they ran on (docs/BENCHMARKS.md).
//
//   cell-memory-latency [--mib=1,2,4,32,256,1024] [--pages=huge|small] [--loads=5000000]
// Prints one JSON line per size: {"mib":N,"pages":"huge","ns_per_load":X}.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr size_t kLine = 64;

[[noreturn]] void Usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: cell-memory-latency [--mib=N,N,...] [--pages=huge|small] [--loads=N]\n"
               "  --mib    working-set sizes in MiB (default 1,2,4,32,256,1024)\n"
               "  --pages  huge: transparent huge pages asked for (MADV_HUGEPAGE, the default); small: 4 KiB pages\n"
               "  --loads  dependent loads timed per size (default 5000000)\n");
  std::exit(code);
}

// Nanoseconds per load of a chase through `mib` MiB, or a negative number if the memory could not be had.
double Chase(size_t mib, bool huge, size_t loads) {
  const size_t bytes = mib << 20;
  const size_t lines = bytes / kLine;
  void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return -1;
  madvise(mapped, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  char* base = static_cast<char*>(mapped);
  std::vector<uint32_t> order(lines);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
  for (size_t i = 0; i < lines; ++i) {
    const uint64_t next = uint64_t{order[(i + 1) % lines]} * kLine;
    std::memcpy(base + uint64_t{order[i]} * kLine, &next, sizeof next);
  }
  uint64_t at = uint64_t{order[0]} * kLine;
  for (size_t i = 0; i < lines && i < loads; ++i) at = *reinterpret_cast<volatile uint64_t*>(base + at);  // warm
  const auto begin = std::chrono::steady_clock::now();
  for (size_t i = 0; i < loads; ++i) at = *reinterpret_cast<volatile uint64_t*>(base + at);
  const auto end = std::chrono::steady_clock::now();
  munmap(mapped, bytes);
  if (at % kLine != 0) return -1;  // (keeps the chase's result alive; never true)
  return std::chrono::duration<double, std::nano>(end - begin).count() / static_cast<double>(loads);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes = {1, 2, 4, 32, 256, 1024};
  bool huge = true;
  size_t loads = 5000000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help") Usage(0);
    if (arg.rfind("--mib=", 0) == 0) {
      sizes.clear();
      const char* p = arg.c_str() + 6;
      while (*p != '\0') {
        char* end = nullptr;
        const unsigned long long v = std::strtoull(p, &end, 10);
        if (end == p || v == 0 || v > (uint64_t{1} << 20) || (*end != ',' && *end != '\0')) {
          std::fprintf(stderr, "cell-memory-latency: --mib takes sizes in MiB, 1 or more, separated by commas\n");
          return 2;
        }
        sizes.push_back(v);
        p = *end == ',' ? end + 1 : end;
      }
      if (sizes.empty()) Usage(2);
    } else if (arg == "--pages=huge" || arg == "--pages=small") {
      huge = arg == "--pages=huge";
    } else if (arg.rfind("--loads=", 0) == 0) {
      char* end = nullptr;
      loads = std::strtoull(arg.c_str() + 8, &end, 10);
      if (loads == 0 || *end != '\0') {
        std::fprintf(stderr, "cell-memory-latency: --loads takes a positive number\n");
        return 2;
      }
    } else {
      Usage(2);
    }
  }
  for (size_t mib : sizes) {
    const double ns = Chase(mib, huge, loads);
    if (ns < 0) {
      std::fprintf(stderr, "cell-memory-latency: could not map %zu MiB\n", mib);
      return 1;
    }
    std::printf("{\"mib\":%zu,\"pages\":\"%s\",\"ns_per_load\":%.1f}\n", mib, huge ? "huge" : "small", ns);
  }
  return 0;
}
