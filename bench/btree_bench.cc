// cell-btree-bench: Cell's tree against absl::btree_map and std::map, single-threaded, same keys. Cell's runs through
// LocalStore, so through GlobalTree's code (what cell-server runs), in one meganode sized to hold every key.
//
// Workload (Cell's shape): keys of 8..64 random printable bytes, values of 8..256 bytes, both uniform. Per round and
// per structure: insert all keys into an empty structure (insert ops/s), look up random existing keys copying the
// value out (search ops/s), and scan 100 pairs from random existing keys copying keys and values (scan100 ops/s).
// Rounds interleave the structures so that machine noise hits all three alike; the JSON reports each metric's
// median over rounds, and the last line of stdout is that JSON object.
//
//   cell-btree-bench [--keys=2000000] [--searches=1000000] [--scans=20000] [--rounds=3] [--seed=1]
//                    [--backing=anonymous|memfd]
#include <absl/container/btree_map.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "meganode/local_store.h"

namespace {

bool g_memfd = false;  // --backing=memfd

struct Flags {
  size_t keys = 2000000;
  size_t searches = 1000000;
  size_t scans = 20000;
  int rounds = 3;
  uint64_t seed = 1;
};

bool ParseFlag(const char* arg, const char* name, uint64_t* out) {
  size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  char* end = nullptr;
  *out = std::strtoull(arg + n + 1, &end, 10);
  if (end == arg + n + 1 || *end != '\0') {
    std::fprintf(stderr, "cell-btree-bench: %s needs a number\n", name);
    std::exit(2);
  }
  return true;
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    uint64_t v = 0;
    if (ParseFlag(argv[i], "--keys", &v))
      f.keys = v;
    else if (ParseFlag(argv[i], "--searches", &v))
      f.searches = v;
    else if (ParseFlag(argv[i], "--scans", &v))
      f.scans = v;
    else if (ParseFlag(argv[i], "--rounds", &v))
      f.rounds = static_cast<int>(v);
    else if (ParseFlag(argv[i], "--seed", &v))
      f.seed = v;
    else if (std::strcmp(argv[i], "--backing=memfd") == 0)
      g_memfd = true;
    else if (std::strcmp(argv[i], "--backing=anonymous") == 0)
      g_memfd = false;
    else {
      std::fprintf(stderr,
                   "usage: cell-btree-bench [--keys=N] [--searches=N] [--scans=N] [--rounds=N] [--seed=N]\n"
                   "  --keys      keys loaded per structure (default 2000000)\n"
                   "  --searches  point lookups per round (default 1000000)\n"
                   "  --scans     100-pair scans per round (default 20000)\n"
                   "  --rounds    rounds; the JSON reports medians (default 3)\n"
                   "  --backing   anonymous (default, transparent huge pages) or memfd\n");
      std::exit(std::strcmp(argv[i], "--help") == 0 ? 0 : 2);
    }
  }
  if (f.keys == 0 || f.rounds <= 0) {
    std::fprintf(stderr, "cell-btree-bench: --keys and --rounds must be positive\n");
    std::exit(2);
  }
  return f;
}

std::string RandomPrintable(std::mt19937_64& rng, size_t len) {
  std::string s(len, ' ');
  for (char& c : s) c = static_cast<char>(33 + rng() % 94);
  return s;
}

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Result {
  std::vector<double> search, insert, scan100, bytes_per_key;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Workload {
  std::vector<std::string> keys, values;
  std::vector<uint32_t> search_order, scan_order;
};

volatile size_t g_sink;  // keeps results alive

template <typename Map>
void RunMap(const Workload& w, Result* r) {
  auto t0 = std::chrono::steady_clock::now();
  auto* m = new Map();
  for (size_t i = 0; i < w.keys.size(); ++i) m->emplace(w.keys[i], w.values[i]);
  auto t1 = std::chrono::steady_clock::now();
  std::string out;
  size_t sink = 0;
  for (uint32_t i : w.search_order) {
    auto it = m->find(w.keys[i]);
    if (it != m->end()) out.assign(it->second);
    sink += out.size();
  }
  auto t2 = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, std::string>> scan;
  for (uint32_t i : w.scan_order) {
    scan.clear();
    auto it = m->lower_bound(w.keys[i]);
    for (int n = 0; n < 100 && it != m->end(); ++n, ++it) scan.emplace_back(it->first, it->second);
    sink += scan.size();
  }
  auto t3 = std::chrono::steady_clock::now();
  g_sink = sink;
  // Memory: per node slot (key and value strings inline) plus the heap bytes of strings too long for SSO.
  double bytes = 0;
  for (const auto& [k, v] : *m)
    bytes += (k.size() > 15 ? k.capacity() + 1 : 0) + (v.size() > 15 ? v.capacity() + 1 : 0);
  bytes += static_cast<double>(m->size()) * sizeof(typename Map::value_type);
  delete m;
  r->insert.push_back(w.keys.size() / Seconds(t0, t1));
  r->search.push_back(w.search_order.size() / Seconds(t1, t2));
  r->scan100.push_back(w.scan_order.size() / Seconds(t2, t3));
  r->bytes_per_key.push_back(bytes / w.keys.size());
}

bool RunCell(const Workload& w, Result* r, std::string* shape) {
  cell::meganode::LocalStoreOptions o;
  o.backing = g_memfd ? cell::meganode::RegionBacking::kMemfd : cell::meganode::RegionBacking::kAnonymous;
  o.meganode_bytes = uint64_t{1} << 30;
  o.extent_region_bytes = uint64_t{2} << 30;
  while (o.meganode_bytes < w.keys.size() * 400) o.meganode_bytes *= 2;
  while (o.extent_region_bytes < w.keys.size() * 1200) o.extent_region_bytes *= 2;
  auto opened = cell::meganode::LocalStore::Open(o);
  if (!opened.ok()) {
    std::fprintf(stderr, "cell-btree-bench: %s\n", opened.status().ToString().c_str());
    return false;
  }
  auto& s = **opened;
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < w.keys.size(); ++i) {
    cell::Status st = s.Put(w.keys[i], w.values[i]);
    if (!st.ok()) {
      std::fprintf(stderr, "cell-btree-bench: put: %s\n", st.ToString().c_str());
      return false;
    }
  }
  auto t1 = std::chrono::steady_clock::now();
  std::string out;
  size_t sink = 0;
  for (uint32_t i : w.search_order) {
    if (s.Get(w.keys[i], &out).ok()) sink += out.size();
  }
  auto t2 = std::chrono::steady_clock::now();
  std::vector<cell::btree::KeyValue> scan;
  for (uint32_t i : w.scan_order) {
    scan.clear();
    s.Scan(w.keys[i], "", 100, &scan);
    sink += scan.size();
  }
  auto t3 = std::chrono::steady_clock::now();
  g_sink = sink;
  if (sink == 0) return false;
  cell::btree::BLinkTree::Shape sh;
  cell::Status st = s.tree().CheckInvariants(&sh);
  if (!st.ok() || sh.entries != w.keys.size()) {
    std::fprintf(stderr, "cell-btree-bench: tree check failed: %s\n", st.ToString().c_str());
    return false;
  }
  // Memory: node slots in use plus extent blocks in use and their allocator control bytes.
  double node_bytes = double(s.meganode().num_slots() - s.meganode().free_slots()) * 1024;
  double extent_bytes = double(s.extent_bytes_used()) * (1 + 1.0 / 32);
  char buf[160];
  std::snprintf(buf, sizeof buf, "{\"height\":%d,\"leaves\":%llu,\"nodes\":%llu,\"node_bytes_per_key\":%.1f}",
                sh.height, (unsigned long long)sh.leaves, (unsigned long long)sh.nodes, node_bytes / w.keys.size());
  *shape = buf;
  r->insert.push_back(w.keys.size() / Seconds(t0, t1));
  r->search.push_back(w.search_order.size() / Seconds(t1, t2));
  r->scan100.push_back(w.scan_order.size() / Seconds(t2, t3));
  r->bytes_per_key.push_back((node_bytes + extent_bytes) / w.keys.size());
  return true;
}

std::string Json(const Result& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "{\"search_ops\":%.0f,\"insert_ops\":%.0f,\"scan100_ops\":%.0f,\"bytes_per_key\":%.1f}",
                Median(r.search), Median(r.insert), Median(r.scan100), Median(r.bytes_per_key));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f = ParseFlags(argc, argv);
  Workload w;
  std::mt19937_64 rng(f.seed);
  w.keys.reserve(f.keys);
  w.values.reserve(f.keys);
  for (size_t i = 0; i < f.keys; ++i) {
    w.keys.push_back(RandomPrintable(rng, 8 + rng() % 57));
    w.values.push_back(RandomPrintable(rng, 8 + rng() % 249));
  }
  // Drop the (rare) duplicate keys so that every structure holds exactly the same set.
  {
    std::vector<uint32_t> idx(f.keys);
    for (uint32_t i = 0; i < f.keys; ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return w.keys[a] < w.keys[b]; });
    std::vector<bool> dup(f.keys, false);
    for (size_t i = 1; i < idx.size(); ++i)
      if (w.keys[idx[i]] == w.keys[idx[i - 1]]) dup[idx[i]] = true;
    size_t o = 0;
    for (size_t i = 0; i < f.keys; ++i) {
      if (dup[i]) continue;
      if (o != i) {
        w.keys[o] = std::move(w.keys[i]);
        w.values[o] = std::move(w.values[i]);
      }
      ++o;
    }
    w.keys.resize(o);
    w.values.resize(o);
  }
  for (size_t i = 0; i < f.searches; ++i) w.search_order.push_back(static_cast<uint32_t>(rng() % w.keys.size()));
  for (size_t i = 0; i < f.scans; ++i) w.scan_order.push_back(static_cast<uint32_t>(rng() % w.keys.size()));

  Result cell, absl, stdmap;
  std::string shape;
  for (int round = 0; round < f.rounds; ++round) {
    if (!RunCell(w, &cell, &shape)) return 1;
    RunMap<absl::btree_map<std::string, std::string>>(w, &absl);
    RunMap<std::map<std::string, std::string>>(w, &stdmap);
    std::fprintf(stderr,
                 "round %d: search ops/s cell %.0f absl %.0f std::map %.0f; insert ops/s cell %.0f absl %.0f "
                 "std::map %.0f\n",
                 round + 1, cell.search.back(), absl.search.back(), stdmap.search.back(), cell.insert.back(),
                 absl.insert.back(), stdmap.insert.back());
  }
  double search_ratio = Median(cell.search) / Median(absl.search);
  double insert_ratio = Median(cell.insert) / Median(absl.insert);
  std::printf(
      "{\"keys\":%zu,\"rounds\":%d,\"cell\":%s,\"absl\":%s,\"std_map\":%s,"
      "\"cell_vs_absl\":{\"search\":%.2f,\"insert\":%.2f,\"scan100\":%.2f},\"cell_tree\":%s}\n",
      w.keys.size(), f.rounds, Json(cell).c_str(), Json(absl).c_str(), Json(stdmap).c_str(), search_ratio, insert_ratio,
      Median(cell.scan100) / Median(absl.scan100), shape.c_str());
  return 0;
}
