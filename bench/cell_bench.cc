// cell-bench: gets against a running Cell cluster, through the public client (include/cell/client.h).
//
// Loads N keys, then runs gets of uniformly random keys for a fixed time from T client threads, each keeping D
// operations in flight (server-side search; a client-side search completes in its thread, so D is 1 there).
// Every value read is checked. Prints progress on stderr and one JSON line last on stdout:
//   {"bench":"cell", "search":..., "ops_per_s":..., "p50_us":..., "p99_us":..., "server_fraction":..., ...}
//
//   cell-bench --cluster=tcp://127.0.0.1:7000 [--keys=100000] [--search=adaptive|server|client|dex|fixed:x] [--transport=shm]
//              [--threads=1] [--depth=16] [--seconds=3] [--key-bytes=16] [--value-bytes=100] [--no-load]
// bench/cell_vs_redis.sh runs it against a pinned server, with Redis in the same run.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cell/client.h"

namespace {

using Clock = std::chrono::steady_clock;

// "k" and i in decimal, zero-padded to `bytes` (longer if i needs more digits). One allocation, no formatting.
std::string Key(uint64_t i, size_t bytes) {
  char digits[20];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + i % 10);
    i /= 10;
  } while (i != 0);
  std::string k(std::max(bytes, n + 1), '0');
  k[0] = 'k';
  for (size_t j = 0; j < n; ++j) k[k.size() - 1 - j] = digits[j];
  return k;
}

// A key's value: the key, then '#' up to `bytes`.
std::string Value(const std::string& key, size_t bytes) {
  std::string v = key;
  v.resize(std::max(bytes, key.size()), '#');
  return v;
}

// value == Value(key, bytes), without building it (the check runs in the measured loop).
bool IsValueOf(std::string_view value, std::string_view key, size_t bytes) {
  if (value.size() != std::max(bytes, key.size()) || value.substr(0, key.size()) != key) return false;
  return std::all_of(value.begin() + key.size(), value.end(), [](char c) { return c == '#'; });
}

// A window of at most `depth` operations in flight.
class Window {
 public:
  explicit Window(int depth) : depth_(depth) {}
  void Acquire() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ < depth_; });
    ++in_flight_;
  }
  void Release() {
    std::lock_guard lock(mu_);
    --in_flight_;
    cv_.notify_all();
  }
  void Drain() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
  const int depth_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cell-bench: gets against a running Cell cluster; prints JSON"};
  cell::ClientOptions options;
  std::string transport = "shm";
  uint64_t keys = 100000;
  size_t key_bytes = 16, value_bytes = 100;
  int threads = 1, depth = 16;
  double seconds = 3;
  bool no_load = false;
  app.add_option("--cluster", options.cluster, "the cluster URI (zk://... or an embedded server's tcp://...)")
      ->required();
  app.add_option("--search", options.search, "adaptive, server, client, dex or fixed:<fraction server-side>")->capture_default_str();
  app.add_option("--transport", transport, "tcp, shm or verbs")->capture_default_str();
  app.add_option("--keys", keys)->capture_default_str();
  app.add_option("--key-bytes", key_bytes)->capture_default_str()->check(CLI::Range(8, 255));
  app.add_option("--value-bytes", value_bytes)->capture_default_str()->check(CLI::Range(0, 1 << 20));
  app.add_option("--threads", threads)->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--depth", depth, "operations in flight per thread")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--seconds", seconds)->capture_default_str();
  app.add_option("--node-cache-bytes", options.node_cache_bytes, "client-side search's node cache (0: none)")->capture_default_str();
  app.add_option("--node-cache-levels", options.node_cache_levels, "cache nodes at least this many levels above the leaves")->capture_default_str();
  app.add_flag("--no-load", no_load, "the keys are there already (from an earlier run)");
  app.add_option("--explore", options.selector.explore, "adaptive: probability of taking the side estimated slower")
      ->capture_default_str();
  app.add_option("--sample-one-in", options.selector.sample_one_in,
                 "adaptive: time the reads of one client-side search in this many")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  options.transports = {transport};
  options.timeout = std::chrono::milliseconds(10000);
  auto opened = cell::Client::Open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "cell-bench: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  cell::Client& client = **opened;

  double load_seconds = 0;
  if (!no_load) {
    const auto start = Clock::now();
    Window window(64);
    std::atomic<uint64_t> failed{0};
    std::mutex error_mu;
    std::string first_error;
    for (uint64_t i = 0; i < keys; ++i) {
      window.Acquire();
      const std::string key = Key(i, key_bytes);
      client.PutAsync(key, Value(key, value_bytes), [&](const cell::Status& s) {
        if (!s.ok() && failed.fetch_add(1) == 0) {
          std::lock_guard lock(error_mu);
          first_error = s.ToString();
        }
        window.Release();
      });
    }
    window.Drain();
    if (failed.load() > 0) {
      std::fprintf(stderr, "cell-bench: %llu puts failed, the first: %s\n",
                   static_cast<unsigned long long>(failed.load()), first_error.c_str());
      return 1;
    }
    load_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::fprintf(stderr, "loaded %llu keys in %.2f s\n", static_cast<unsigned long long>(keys), load_seconds);
  }

  const cell::Client::Stats before = client.stats();
  struct Worker {
    std::mutex mu;
    std::vector<uint32_t> latencies_ns;  // capped at 4.29 s, far above anything expected
    uint64_t errors = 0;
    std::string first_error;
  };
  std::vector<Worker> workers(threads);
  std::atomic<bool> stop{false};
  const auto run_start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Worker& w = workers[t];
      Window window(depth);
      std::mt19937_64 rng(t + 1);
      while (!stop.load(std::memory_order_relaxed)) {
        window.Acquire();
        const std::string key = Key(rng() % keys, key_bytes);
        const auto begin = Clock::now();
        client.GetAsync(key, [&, key, begin](const cell::Status& s, std::string_view value) {
          const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - begin).count();
          const bool right = s.ok() && IsValueOf(value, key, value_bytes);
          {
            std::lock_guard lock(w.mu);
            w.latencies_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(ns, UINT32_MAX)));
            if (!right && w.errors++ == 0) w.first_error = key + ": " + s.ToString();
          }
          window.Release();
        });
      }
      window.Drain();
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // the measured interval
  stop = true;
  for (auto& th : pool) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - run_start).count();
  const cell::Client::Stats after = client.stats();

  std::vector<uint32_t> all;
  uint64_t errors = 0;
  std::string first_error;
  for (Worker& w : workers) {
    all.insert(all.end(), w.latencies_ns.begin(), w.latencies_ns.end());
    errors += w.errors;
    if (first_error.empty()) first_error = w.first_error;
  }
  std::sort(all.begin(), all.end());
  const auto percentile = [&](double p) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))] / 1000.0;
  };
  const double server = static_cast<double>(after.server_searches - before.server_searches);
  const double client_side = static_cast<double>(after.client_searches - before.client_searches);
  // What the adaptive selector believed at the end, per server.
  std::string estimates;
  for (const auto& e : after.estimates) {
    char one[200];
    std::snprintf(one, sizeof(one), "%s{\"server\":%llu,\"server_search_us\":%.2f,\"read_us\":%.3f,\"rtt_us\":%.3f}",
                  estimates.empty() ? "" : ",", static_cast<unsigned long long>(e.server), e.server_search_us,
                  e.read_us, e.rtt_us);
    estimates += one;
  }
  if (errors > 0) std::fprintf(stderr, "cell-bench: %llu wrong or failed gets, the first: %s\n",
                               static_cast<unsigned long long>(errors), first_error.c_str());
  std::printf(
      "{\"bench\":\"cell\",\"search\":\"%s\",\"transport\":\"%s\",\"keys\":%llu,\"key_bytes\":%zu,"
      "\"value_bytes\":%zu,\"threads\":%d,\"depth\":%d,\"seconds\":%.2f,\"load_s\":%.2f,\"gets\":%zu,"
      "\"ops_per_s\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"server_fraction\":%.3f,\"retries\":%llu,"
      "\"node_cache_hits\":%llu,\"node_cache_misses\":%llu,\"explorations\":%llu,\"estimates\":[%s],"
      "\"errors\":%llu}\n",
      options.search.c_str(), transport.c_str(), static_cast<unsigned long long>(keys), key_bytes, value_bytes, threads,
      depth, elapsed, load_seconds, all.size(), all.size() / elapsed, percentile(0.5), percentile(0.99),
      server + client_side > 0 ? server / (server + client_side) : 0.0,
      static_cast<unsigned long long>(after.retries - before.retries),
      static_cast<unsigned long long>(after.node_cache_hits - before.node_cache_hits),
      static_cast<unsigned long long>(after.node_cache_misses - before.node_cache_misses),
      static_cast<unsigned long long>(after.explorations - before.explorations), estimates.c_str(),
      static_cast<unsigned long long>(errors));
  return errors == 0 ? 0 : 1;
}
