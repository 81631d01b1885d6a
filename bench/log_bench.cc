// cell-log-bench: what write-ahead logging costs a tree's puts, and how long recovery takes, on this machine.
//
// Put throughput: a GlobalTree (one server, local splits) under `--threads` writers putting random keys of Cell's
// shapes for `--seconds`, each put committed (server::RegionLogger::Commit, as a request would be before its reply)
// with logging off, async and sync, interleaved over `--rounds`, for values of 8..256 bytes and of 1 KiB. The log
// is physical redo: every put logs its record and the whole 1 KB leaf it changed (and a split, every node it wrote).
// Async flush lag: how long after an Add its record is on disk under async (the documented bound is the flush
// interval plus one fdatasync). Recovery: `--recovery-keys` puts, then the time to rebuild both regions from the
// log alone, and from a checkpoint (the log after it empty).
//
//   cell-log-bench [--threads=2] [--seconds=2] [--rounds=3] [--keys=100000] [--recovery-keys=200000]
//                  [--dir=/tmp/cell-log-bench] [--async-flush-ms=10]
// The last line of stdout is one JSON object.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "logging/checkpoint.h"
#include "logging/region_log.h"
#include "meganode/global_tree.h"
#include "server/region_logger.h"

namespace {

using cell::Status;
using Clock = std::chrono::steady_clock;
namespace logging = cell::logging;

struct Flags {
  int threads = 2;
  double seconds = 2;
  int rounds = 3;
  uint64_t keys = 100000;
  uint64_t recovery_keys = 200000;
  std::string dir = "/tmp/cell-log-bench";
  int async_flush_ms = 10;
};

std::string KeyOf(uint64_t k) {
  std::string key = fmt::format("k{:016x}", k * 0x9e3779b97f4a7c15ull);
  key.resize(8 + k % 57, 'x');  // 8..64 bytes
  return key;
}
std::string Key(std::mt19937_64& rng, uint64_t space) { return KeyOf(rng() % space); }

// A tree whose writes go to logs under `dir` (mode "off": no logs).
struct Logged {
  std::unique_ptr<logging::RegionLog> log;
  std::unique_ptr<cell::server::RegionLogger> logger;
  std::unique_ptr<cell::meganode::GlobalTree> tree;
};

std::unique_ptr<Logged> Open(const Flags& f, const std::string& mode, const std::string& dir, uint64_t keys) {
  auto l = std::make_unique<Logged>();
  cell::meganode::GlobalTreeOptions o;
  o.meganode_bytes = uint64_t{64} << 20;
  o.meganodes = static_cast<uint32_t>(std::max<uint64_t>(4, keys / 150000 + 2));
  o.extent_region_bytes = std::max<uint64_t>(uint64_t{256} << 20, keys * 512);  // Cell's records fit 512 B blocks
  if (mode != "off") {
    std::filesystem::remove_all(dir);
    const logging::RegionLogOptions lo{
        .durability = mode == "sync" ? logging::Durability::kSync : logging::Durability::kAsync,
        .async_flush_interval = std::chrono::milliseconds(f.async_flush_ms)};
    auto log = logging::RegionLog::Open(dir, 1, lo);
    if (!log.ok()) {
      std::fprintf(stderr, "cell-log-bench: %s\n", log.status().ToString().c_str());
      std::exit(1);
    }
    l->log = std::move(*log);
    l->logger = std::make_unique<cell::server::RegionLogger>(
        l->log.get(), std::vector<uint32_t>{o.node_region_id, o.extent_region_id});
    o.write_sink = l->logger.get();
  }
  auto t = cell::meganode::GlobalTree::Open(o);
  if (!t.ok()) {
    std::fprintf(stderr, "cell-log-bench: %s\n", t.status().ToString().c_str());
    std::exit(1);
  }
  l->tree = std::move(*t);
  return l;
}

// Puts every key of the space once (logged, committed once at the end), so that every mode's timed puts are
// overwrites of a tree of the same size.
void Preload(const Flags& f, Logged& l, bool logged, size_t min_value, size_t max_value) {
  std::mt19937_64 rng(7);
  for (uint64_t k = 0; k < f.keys; ++k) {
    const std::string key = KeyOf(k);
    Status s = l.tree->Put(key, std::string(min_value + rng() % (max_value - min_value + 1), 'p'));
    if (!s.ok()) {
      std::fprintf(stderr, "cell-log-bench: preload: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  }
  if (logged && !l.logger->Commit().ok()) std::exit(1);
}

// Puts for `seconds` from `threads` threads; ops/s. *syncs: the fdatasyncs the logs made meanwhile; *ops: the puts.
double Puts(const Flags& f, Logged& l, bool logged, size_t min_value, size_t max_value, uint64_t seed, uint64_t* syncs,
            uint64_t* puts) {
  std::atomic<uint64_t> ops{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const uint64_t syncs_before = l.log == nullptr ? 0 : l.log->syncs();
  const auto start = Clock::now();
  for (int t = 0; t < f.threads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed * 100 + t);
      uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const std::string key = Key(rng, f.keys);
        const size_t len = min_value + rng() % (max_value - min_value + 1);
        Status s = l.tree->Put(key, std::string(len, static_cast<char>('a' + rng() % 26)));
        if (s.ok() && logged) s = l.logger->Commit();
        if (!s.ok()) {
          std::fprintf(stderr, "cell-log-bench: put: %s\n", s.ToString().c_str());
          std::exit(1);
        }
        ++n;
      }
      ops.fetch_add(n);
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(f.seconds));  // the run's length, not a synchronisation
  stop = true;
  for (auto& th : threads) th.join();
  *syncs = (l.log == nullptr ? 0 : l.log->syncs()) - syncs_before;
  *puts = ops.load();
  return static_cast<double>(ops.load()) / std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Under async: one thread adds a record every 200 us for a second while another watches durable_lsn; the lags.
std::vector<double> AsyncLagsMs(const Flags& f) {
  const std::string dir = f.dir + "/lag";
  std::filesystem::remove_all(dir);
  auto log = logging::RegionLog::Open(
      dir, 1,
      {.durability = logging::Durability::kAsync, .async_flush_interval = std::chrono::milliseconds(f.async_flush_ms)});
  if (!log.ok()) return {};
  std::vector<Clock::time_point> added;
  added.reserve(10000);
  std::atomic<uint64_t> last{0};
  std::atomic<bool> stop{false};
  std::vector<double> lags;
  std::thread watcher([&] {
    uint64_t seen = 0;
    const auto give_up = Clock::now() + std::chrono::seconds(3) + std::chrono::milliseconds(f.async_flush_ms);
    while ((!stop.load() || seen < last.load()) && Clock::now() < give_up) {
      const uint64_t durable = (*log)->durable_lsn();
      const auto now = Clock::now();
      const uint64_t upto = std::min(durable, last.load(std::memory_order_acquire));
      for (; seen < upto; ++seen) lags.push_back(std::chrono::duration<double, std::milli>(now - added[seen]).count());
      std::this_thread::sleep_for(std::chrono::microseconds(50));  // polling granularity of the measurement
    }
  });
  logging::LogRecord record;
  record.ranges.push_back({0, std::string(1024, 'x')});
  const auto end = Clock::now() + std::chrono::seconds(1);
  while (Clock::now() < end && added.size() < added.capacity()) {
    added.push_back(Clock::now());
    auto lsn = (*log)->Add(record);
    if (!lsn.ok()) break;
    last.store(*lsn, std::memory_order_release);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  stop = true;  // the watcher waits for the flusher to pass the last record (or gives up)
  watcher.join();
  return lags;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Asks the kernel to drop dir's files from the page cache (they are synced), so recovery reads them from the disk.
void DropCache(const std::string& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// Rebuilds a tree's regions from dir into fresh regions, its files read from the disk; seconds (the regions' page
// faults included).
double Recover(const std::string& dir, uint64_t node_size, uint64_t extent_size, uint64_t* records) {
  DropCache(dir);
  const auto start = Clock::now();
  auto nodes = cell::meganode::Region::Create(1, node_size, cell::meganode::RegionBacking::kMemfd);
  auto extents = cell::meganode::Region::Create(2, extent_size, cell::meganode::RegionBacking::kMemfd);
  if (!nodes.ok() || !extents.ok()) std::exit(1);
  const cell::server::RegionMemory n{1, (*nodes)->Resolve(0, node_size), node_size};
  const cell::server::RegionMemory e{2, (*extents)->Resolve(0, extent_size), extent_size};
  auto r = logging::Recover(
      dir, cell::server::TreeCheckpointRegions(**nodes, **extents),
      [&](uint64_t, const logging::LogRecord& rec) { return cell::server::ApplyLogRecord(rec, n, e); });
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  if (!r.ok()) {
    std::fprintf(stderr, "cell-log-bench: recovery: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  *records += r->replay.records;
  return s;
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cell-log-bench: put throughput with write-ahead logging off, async and sync; recovery time"};
  Flags f;
  app.add_option("--threads", f.threads, "writer threads")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--seconds", f.seconds, "each put run's length")->check(CLI::Range(0.1, 600.0))->capture_default_str();
  app.add_option("--rounds", f.rounds, "interleaved rounds (medians reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--keys", f.keys, "key space of the put runs")
      ->check(CLI::Range(1000, 100000000))
      ->capture_default_str();
  app.add_option("--recovery-keys", f.recovery_keys, "keys put before recovery is timed (0: skip)")
      ->capture_default_str();
  app.add_option("--dir", f.dir, "where the logs and checkpoints go (emptied first, removed after)")
      ->capture_default_str();
  app.add_option("--async-flush-ms", f.async_flush_ms, "async durability's flush interval")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::vector<std::string> modes = {"off", "async", "sync"};
  const std::vector<std::tuple<std::string, size_t, size_t>> shapes = {{"cell", 8, 256}, {"1k", 1024, 1024}};
  std::map<std::string, std::vector<double>> rates, sync_ratio;
  for (int round = 0; round < f.rounds; ++round) {
    for (const auto& [shape, lo, hi] : shapes) {
      for (const std::string& mode : modes) {
        auto l = Open(f, mode, f.dir + "/run", f.keys);
        uint64_t syncs = 0, puts = 0;
        Preload(f, *l, mode != "off", lo, hi);
        const double r = Puts(f, *l, mode != "off", lo, hi, round + 1, &syncs, &puts);
        rates[shape + "/" + mode].push_back(r);
        if (mode == "sync") sync_ratio[shape].push_back(static_cast<double>(syncs) / static_cast<double>(puts));
        std::fprintf(stderr, "round %d %s %s: %.0f puts/s\n", round + 1, shape.c_str(), mode.c_str(), r);
      }
    }
  }
  std::string throughput;
  for (const auto& [shape, lo, hi] : shapes) {
    const double off = Median(rates[shape + "/off"]), async = Median(rates[shape + "/async"]),
                 sync = Median(rates[shape + "/sync"]);
    throughput += fmt::format(
        "{}\"{}\":{{\"off\":{:.0f},\"async\":{:.0f},\"sync\":{:.0f},\"async_vs_off\":{:.3f},"
        "\"sync_vs_off\":{:.3f},\"sync_fdatasyncs_per_put\":{:.2f}}}",
        throughput.empty() ? "" : ",", shape, off, async, sync, async / off, sync / off, Median(sync_ratio[shape]));
  }

  const std::vector<double> lags = AsyncLagsMs(f);

  std::string recovery = "null";
  if (f.recovery_keys > 0) {
    auto l = Open(f, "async", f.dir + "/recovery", f.recovery_keys);
    std::mt19937_64 rng(99);
    for (uint64_t i = 0; i < f.recovery_keys; ++i) {
      const std::string key = fmt::format("r{:016x}", i * 0x9e3779b97f4a7c15ull);
      Status s = l->tree->Put(key, std::string(8 + rng() % 249, 'v'));
      if (!s.ok()) {
        std::fprintf(stderr, "cell-log-bench: load: %s\n", s.ToString().c_str());
        return 1;
      }
    }
    (void)l->log->Flush();
    const uint64_t node_size = l->tree->node_region().size(), extent_size = l->tree->extent_region().size();
    const uint64_t log_bytes = DirBytes(f.dir + "/recovery");
    uint64_t records = 0;
    const double from_log = Recover(f.dir + "/recovery", node_size, extent_size, &records);
    const uint64_t log_records = records;
    const auto cp_start = Clock::now();
    auto cp =
        logging::TakeCheckpoint(f.dir + "/recovery", l->log.get(),
                                cell::server::TreeCheckpointRegions(l->tree->node_region(), l->tree->extent_region()));
    const double checkpoint_s = std::chrono::duration<double>(Clock::now() - cp_start).count();
    if (!cp.ok()) {
      std::fprintf(stderr, "cell-log-bench: checkpoint: %s\n", cp.status().ToString().c_str());
      return 1;
    }
    const uint64_t checkpoint_bytes =
        logging::ListCheckpoints(f.dir + "/recovery")->empty()
            ? 0
            : std::filesystem::file_size(logging::CheckpointPath(f.dir + "/recovery", *cp));
    records = 0;
    const double from_checkpoint = Recover(f.dir + "/recovery", node_size, extent_size, &records);
    recovery = fmt::format(
        "{{\"keys\":{},\"log_bytes\":{},\"log_records\":{},\"from_log_s\":{:.2f},\"checkpoint_s\":{:.2f},"
        "\"checkpoint_bytes\":{},\"from_checkpoint_s\":{:.2f}}}",
        f.recovery_keys, log_bytes, log_records, from_log, checkpoint_s, checkpoint_bytes, from_checkpoint);
  }
  std::filesystem::remove_all(f.dir);
  std::printf(
      "{\"bench\":\"log\",\"threads\":%d,\"seconds\":%.1f,\"rounds\":%d,\"keys\":%llu,\"puts_per_s\":{%s},"
      "\"async_flush_ms\":%d,\"async_lag_ms\":{\"samples\":%zu,\"p50\":%.2f,\"p99\":%.2f,\"max\":%.2f},"
      "\"recovery\":%s}\n",
      f.threads, f.seconds, f.rounds, static_cast<unsigned long long>(f.keys), throughput.c_str(), f.async_flush_ms,
      lags.size(), Percentile(lags, 0.5), Percentile(lags, 0.99), Percentile(lags, 1.0), recovery.c_str());
  return 0;
}
