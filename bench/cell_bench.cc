// cell-bench: the harness researchers run against a Cell cluster, through the public client (include/cell/client.h),
// or against Redis (--store=redis, through hiredis) or PostgreSQL (--store=postgres, through libpq), so that each
// runs the same workload in one harness.
//
// A load phase puts N keys; a run phase drives a workload (bench/workload.h: YCSB a..f or mix:<x>; uniform, Zipfian
// or latest keys) for a fixed time from T client threads, either
//   closed loop: each thread keeps up to `--inflight` operations going (a client-side get completes in its thread);
//                once all are in flight it waits for half of them to complete, then refills (both stores alike), or
//   open loop:   `--rate` arrivals per second in all (Poisson), each operation's latency measured from the time it
//                was due, so time spent queued counts; `--spike=start:duration:factor` multiplies the rate for a
//                while (Cell's figure 7: 10:5:2.5).
// Every value read is checked against its key. Every `--interval-ms` a row of the time series (throughput, latency
// percentiles, server-side fraction, retries) goes to `--csv`; one JSON line with the summary is printed last on
// stdout:
//   {"bench":"cell", "store":"cell", "workload":..., "search":..., "ops_per_s":..., "p50_us":..., "p99_us":...,
//    "server_fraction":..., ...}
//
//   cell-bench --cluster=tcp://127.0.0.1:7000 [--keys=100000] [--workload=c]
//              [--search=adaptive|server|client|dex|fixed:x]
//              [--transport=shm] [--threads=1] [--inflight=16] [--duration=3] [--rate=0] [--spike=S:D:F] [--csv=FILE]
//              [--shape=cell|fixed] [--key-bytes=16] [--value-bytes=100] [--no-load]
//   cell-bench --store=redis [--redis=127.0.0.1:6379 | --redis=unix:/path] [the same workload, loop and output flags]
//   cell-bench --store=postgres [--postgres=CONNINFO] [--durability=sync|async|off] [the same flags]
//
// Transactional workloads (bench/txn_workload.h; closed loop only, synchronous, one transaction at a time per thread):
//   --workload=bank [--audit-fraction=0.05] [--audit-span=100] [--initial-balance=1000]   SmallBank-like transfers
//                                                         and audits, the total checked at the end ("invariant_ok")
//   --workload=txn-mix [--txn-ops=4] [--txn-read-fraction=0.5]                   transactions of random gets and puts
// Their summary has "transactions_per_s", "abort_rate", "p50_us", "p99_us" (committed transactions, retries
// included) and "checker": "ok" or "failed" (exit status 1) from a serializability check of what the transactions
// read and wrote (bench/txn_history.h), or "not run" with --no-check [--check-max-txns=500000].
//
// The walk (bench/walk_workload.h; closed loop only): each thread walks every loaded key forward, then backward, in
// pages of --scan-length (100) pairs, for --seconds (whole walks), each walk checked (a key missed, repeated or out of
// order is exit status 1):
//   --workload=walk [--scan-length=100] [--walk=iterator|pages]   iterator: cell::Client::NewIterator (Cell only,
//                                                         its default); pages: the store's Scan and ScanReverse
// Its summary has "walk_forward_pairs_per_s", "walk_backward_pairs_per_s", "walks" and "walk_ok".
//
// PostgreSQL (bench/postgres_store.h): a table kv(k bytea primary key, v bytea), prepared statements, transactions
// at SERIALIZABLE retried on SQLSTATE 40001/40P01. Without --postgres the harness starts a PostgreSQL of its own
// (bench/private_postgres.h: initdb in a temporary directory, a Unix socket there only, as the `postgres` user when
// run as root) with --durability's settings (sync: fsync and synchronous_commit on; async: synchronous_commit off;
// off: fsync, synchronous_commit and full_page_writes off), and stops it and removes it at the end. For Cell,
// --durability is only recorded in the summary (the servers' own --durability decides), and likewise for an external
// PostgreSQL, whose actual settings the summary records ("postgres":{...}).
//
// The store sits behind bench/store.h: Cell's (bench/cell_store.h) wraps one cell::Client; Redis's
// (bench/redis_store.h) gives each thread its own pipelined connection: GET and SET, and for scans (YCSB e) a sorted
// set of every key loaded or inserted, read by ZRANGEBYLEX then MGET. Redis has no search sides, retries, node cache
// or estimates: those fields are 0 (the CSV's too), "search" is "none" and "transport" is tcp or unix. A Redis
// session that fails in the run (a lost connection, no reply within 10 s) stops it: a message, exit status 1, no
// summary.
// bench/cell_vs_redis.sh runs it (gets only, fixed shapes) against a pinned server, with Redis in the same run.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/hogs.h"
#include "bench/open_store.h"
#include "bench/progress.h"
#include "bench/series.h"
#include "bench/store.h"
#include "bench/txn_workload.h"
#include "bench/walk_workload.h"
#include "bench/window.h"
#include "bench/workload.h"
#include "cell/client.h"

namespace {

using Clock = std::chrono::steady_clock;
using cell::bench::OpKind;

// The fixed shape (what redis-benchmark -d N asks of Redis): "k" and i zero-padded to `bytes`; the value is the key
// then '#' up to `value_bytes`.
struct Shapes {
  bool cell = true;
  size_t key_bytes = 16, value_bytes = 100;
  uint64_t key_space = 0;  // keys are numbered below this (the load's and the inserts')

  std::string Key(uint64_t i) const {
    std::string k;
    KeyInto(i, &k);
    return k;
  }
  // Key(i) into *k, whose memory it keeps (a get's key, made in the thread's own string).
  void KeyInto(uint64_t i, std::string* k) const {
    if (cell) return cell::bench::KeyOfInto(i, key_space, k);
    char digits[20];
    size_t n = 0;
    do {
      digits[n++] = static_cast<char>('0' + i % 10);
      i /= 10;
    } while (i != 0);
    k->assign(std::max(key_bytes, n + 1), '0');
    (*k)[0] = 'k';
    for (size_t j = 0; j < n; ++j) (*k)[k->size() - 1 - j] = digits[j];
  }
  std::string Value(const std::string& key, uint64_t version) const {
    if (cell) return cell::bench::ValueOf(key, version);
    std::string v = key;
    v.resize(std::max(value_bytes, key.size()), '#');
    return v;
  }
  // Whether `value` is one this harness could have written for `key` (checked in the measured loop: no allocation).
  bool Belongs(std::string_view value, std::string_view key) const {
    if (cell) return cell::bench::ValueBelongsTo(value, key);
    if (value.size() != std::max(value_bytes, key.size()) || value.substr(0, key.size()) != key) return false;
    return std::all_of(value.begin() + key.size(), value.end(), [](char c) { return c == '#'; });
  }
  // Belongs for key i, told FillFor(its key): a get's callback keeps i and the fill, not a copy of the key (Cell's
  // shape checks the fill alone; the fixed shape's value begins with the key, which is made again).
  char FillFor(std::string_view key) const { return cell ? cell::bench::FillOf(key) : 0; }
  bool BelongsTo(std::string_view value, uint64_t i, char fill) const {
    return cell ? cell::bench::ValueHasFill(value, fill) : Belongs(value, Key(i));
  }
};

// "start_s:duration_s:factor".
struct Spike {
  double start_s = 0, duration_s = 0, factor = 1;
  bool active(double t_s) const { return t_s >= start_s && t_s < start_s + duration_s; }
};
std::optional<Spike> ParseSpike(const std::string& text) {
  Spike s;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%lf:%lf:%lf%c", &s.start_s, &s.duration_s, &s.factor, &extra) != 3 ||
      !std::isfinite(s.start_s) || !std::isfinite(s.duration_s) || !std::isfinite(s.factor) || s.start_s < 0 ||
      s.duration_s <= 0 || s.factor < 0.01 || s.factor > 1000) {
    return std::nullopt;
  }
  return s;
}

// What went wrong, counted; the first message kept.
struct Errors {
  std::atomic<uint64_t> count{0};
  std::mutex mu;
  std::string first;
  void Add(const std::string& what) {
    if (count.fetch_add(1) == 0) {
      std::lock_guard lock(mu);
      first = what;
    }
  }
};

// Puts pair_of(0 .. keys - 1) through `loader`: in transactions of 100 when `batched` (PostgreSQL, where each single
// put would be a commit of its own), else 64 asynchronous puts (inserts) in flight. The seconds it took, or -1 after
// a message.
double Load(cell::bench::StoreSession& loader, bool batched, uint64_t keys,
            const std::function<std::pair<std::string, std::string>(uint64_t)>& pair_of) {
  const auto start = Clock::now();
  cell::bench::Progress progress("loading", keys);
  if (batched) {
    const auto each = [&](uint64_t done) { progress.Update(done); };
    if (cell::Status s = cell::bench::LoadInTransactions(loader, keys, pair_of, each); !s.ok()) {
      std::fprintf(stderr, "cell-bench: %s\n", s.ToString().c_str());
      return -1;
    }
  } else {
    cell::SendHold hold;  // requests go out together, as Redis's do (bench/store.h)
    cell::bench::Window window(64, loader, 63);
    Errors failed;
    for (uint64_t i = 0; i < keys && loader.status().ok(); ++i) {
      window.Acquire();
      progress.Update(i);
      const auto [key, value] = pair_of(i);
      loader.Put(key, value, /*insert=*/true, [&](const cell::Status& s) {
        if (!s.ok()) failed.Add(s.ToString());
        window.Release();
      });
    }
    window.Drain();
    if (failed.count.load() > 0) {
      std::fprintf(stderr, "cell-bench: %llu puts failed, the first: %s\n",
                   static_cast<unsigned long long>(failed.count.load()), failed.first.c_str());
      return -1;
    }
  }
  progress.Finish();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::fprintf(stderr, "loaded %llu keys in %.2f s\n", static_cast<unsigned long long>(keys), seconds);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "cell-bench: a workload against a running Cell cluster, Redis or PostgreSQL; a time series to CSV, a JSON "
      "summary last. With --store=redis or postgres, the Cell-only fields (server_fraction, retries, "
      "in_place_searches, node_cache_*, "
      "explorations, load_steps, estimates; the CSV's server_fraction and retries) are 0, search is \"none\""};
  cell::ClientOptions options;
  std::string store_kind = "cell", redis_address = "127.0.0.1:6379";
  std::string transport = "shm", workload_name = "c", distribution_name, shape = "cell", spike_text, csv_path;
  uint64_t keys = 100000, seed = 1;
  size_t key_bytes = 16, value_bytes = 100;
  int threads = 1, depth = 16, interval_ms = 100;
  double seconds = 3, rate = 0, theta = 0.99;
  bool no_load = false;
  std::string postgres_conninfo, postgres_bin, durability = "sync";
  cell::bench::TxnBenchOptions txn;
  std::string walk_name;
  size_t scan_length = 100;
  app.add_option("--store", store_kind,
                 "what to measure: cell (a Cell cluster, --cluster), redis (a redis-server, --redis; GET/SET, scans "
                 "by a sorted set of the keys; use a Redis of the bench's own) or postgres (--postgres, or a "
                 "PostgreSQL the bench starts)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cell", "redis", "postgres"}));
  app.add_option("--cluster", options.cluster,
                 "cell: the cluster URI (zk://... or an embedded server's tcp://...); required");
  app.add_option("--key-file", options.key_file, "cell: the cluster's client key, for servers with keys")
      ->envname("CELL_KEY_FILE");
  auto* redis_option = app.add_option("--redis", redis_address, "redis: HOST:PORT, [IPV6]:PORT or unix:/path/to/socket")
                           ->capture_default_str();
  auto* postgres_option =
      app.add_option("--postgres", postgres_conninfo,
                     "postgres: a server's libpq connection string (\"host=... dbname=...\" or postgresql://...; use a "
                     "database of the bench's own). Without it the bench starts a private server for the run");
  app.add_option("--postgres-bin", postgres_bin,
                 "postgres, private server: the directory of initdb and postgres (default: the newest "
                 "/usr/lib/postgresql/<version>/bin, else PATH)");
  std::vector<int> postgres_cpus;
  app.add_option("--postgres-cpus", postgres_cpus,
                 "postgres, private server: the CPUs it runs on (e.g. 0: the server's CPU of an experiment, while the "
                 "bench runs on another with taskset)");
  app.add_option("--durability", durability,
                 "sync, async or off: configures the private PostgreSQL (sync: fsync and synchronous_commit on; async: "
                 "synchronous_commit off; off: fsync off too); recorded in the summary for every store (Cell's "
                 "servers' own --durability decides theirs)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sync", "async", "off"}));
  app.add_option("--search", options.search, "cell: adaptive, server, client, dex or fixed:<fraction server-side>")
      ->capture_default_str();
  app.add_option("--transport", transport, "cell: tcp, shm or verbs")->capture_default_str();
  app.add_option("--keys", keys, "keys loaded (and read: a workload's inserts add more)")->capture_default_str();
  app.add_option("--workload", workload_name,
                 "YCSB a, b, c, d, e, f, mix:<read fraction> (reads and updates), the transactional bank or "
                 "txn-mix (bench/txn_workload.h), or walk (whole walks of the keys both ways, bench/walk_workload.h)")
      ->capture_default_str();
  auto* scan_length_option = app.add_option("--scan-length", scan_length, "walk: pairs per page")
                                 ->capture_default_str()
                                 ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  auto* walk_option = app.add_option("--walk", walk_name,
                                     "walk: how pages are read: iterator (cell::Client::NewIterator, read-ahead fixed "
                                     "at --scan-length; Cell only, its default) or pages (the store's Scan and "
                                     "ScanReverse: Cell's, Redis's ZRANGEBYLEX/ZREVRANGEBYLEX + MGET, SQL's)")
                          ->check(CLI::IsMember({"iterator", "pages"}));
  app.add_option("--audit-fraction", txn.audit_fraction, "bank: the fraction of transactions that are audits")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--audit-span", txn.audit_span,
                 "bank: accounts an audit scans (consecutive, from a random one; all of them: checked against the "
                 "total)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{10000}));
  app.add_option("--initial-balance", txn.initial_balance, "bank: every account's balance at the load")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--txn-ops", txn.txn_ops, "txn-mix: gets and puts per transaction")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--txn-read-fraction", txn.txn_read_fraction,
                 "txn-mix: the fraction of a transaction's operations "
                 "that are gets")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--check,!--no-check", txn.check,
               "bank, txn-mix: record what the transactions read and wrote and check it is strictly serializable "
               "after the run (bench/txn_history.h); a failed check is exit status 1")
      ->capture_default_str();
  app.add_option("--check-max-txns", txn.check_max_txns,
                 "bank, txn-mix: transactions recorded for the check, all threads together (the check takes ~13 s and "
                 "~2.8 GB per million bank transactions); past it the rest of the run is not checked")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  app.add_option("--distribution", distribution_name, "uniform, zipfian or latest (default: the workload's)");
  app.add_option("--theta", theta, "Zipfian skew")->capture_default_str()->check(CLI::Range(0.01, 0.999));
  app.add_option("--shape", shape, "cell (keys 8..64 bytes, values 8..256) or fixed (--key-bytes, --value-bytes)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cell", "fixed"}));
  app.add_option("--key-bytes", key_bytes, "fixed shape")->capture_default_str()->check(CLI::Range(8, 255));
  app.add_option("--value-bytes", value_bytes, "fixed shape")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  app.add_option("--threads", threads, "client threads (redis, postgres: a connection each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--inflight,--depth", depth,
                 "operations in flight per thread (closed loop; the cap, open loop; transactional workloads: 1)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--duration,--seconds", seconds, "the run phase, seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 86400.0));
  app.add_option("--rate", rate, "open loop: arrivals per second, all threads together (0: closed loop)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e8));
  app.add_option("--spike", spike_text, "open loop: start_s:duration_s:factor, e.g. 10:5:2.5");
  app.add_option("--csv", csv_path, "write the time series here");
  std::vector<std::string> hog_texts;
  app.add_option("--hog", hog_texts,
                 "CPU contention: start_s:duration_s:cpu[+cpu...] runs a busy process pinned to each CPU for that "
                 "period (repeatable; e.g. the server's CPU: 10:5:0)");
  std::vector<std::string> window_texts;
  app.add_option("--window", window_texts,
                 "from_s:to_s: also summarize the operations completed in this part of the run (repeatable; exact "
                 "percentiles, in the JSON's \"windows\"; e.g. before and during a spike: 3:8 and 8:13)");
  app.add_option("--interval-ms", interval_ms, "the time series' step")
      ->capture_default_str()
      ->check(CLI::Range(10, 60000));
  app.add_option("--seed", seed)->capture_default_str();
  app.add_option("--node-cache-bytes", options.node_cache_bytes, "cell: client-side search's node cache (0: none)")
      ->capture_default_str();
  app.add_option("--node-cache-levels", options.node_cache_levels,
                 "cell: cache nodes at least this many levels above the leaves")
      ->capture_default_str();
  app.add_flag("--no-load", no_load,
               "the keys are there already (from an earlier run with the same --keys and --shape)");
  app.add_option("--explore", options.selector.explore,
                 "cell, adaptive: probability of taking the side estimated slower")
      ->capture_default_str();
  app.add_option("--sample-one-in", options.selector.sample_one_in,
                 "cell, adaptive: time the reads of one client-side search in this many")
      ->capture_default_str();
  app.add_option("--selector-window", options.selector.window, "cell, adaptive: latency samples kept per measure")
      ->capture_default_str();
  int64_t max_age_ms = options.selector.max_age.count();
  app.add_option("--selector-max-age-ms", max_age_ms,
                 "cell, adaptive: latency samples older than this leave the window (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--outlier-sigmas", options.selector.outlier_sigmas,
                 "cell, adaptive: samples this many standard deviations off the mean are dropped (0: none)")
      ->capture_default_str();
  app.add_option("--steer", options.selector.steer_per_s,
                 "cell, adaptive: how fast the split between the sides follows the rule, per second (0: per get)")
      ->capture_default_str();
  app.add_option("--load-step", options.selector.load_step,
                 "cell, adaptive: a step in the client's own load on a server by this factor (50 ms against 1 s) "
                 "rescales the split so that the server's rate stays the same (0: never)")
      ->capture_default_str();
  app.add_option("--selector-floor", options.selector.floor,
                 "cell, adaptive: how each side's latency is costed: marginal (latency squared over the side's "
                 "fastest: what one more search adds to every search's wait), read (less the fastest read's, for "
                 "both: Cell's rule), per-side (less each side's fastest) or none (whole latencies)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  options.selector.max_age = std::chrono::milliseconds(max_age_ms);

  std::vector<std::pair<double, double>> windows;
  for (const std::string& text : window_texts) {
    double from = 0, to = 0;
    char extra = 0;
    if (std::sscanf(text.c_str(), "%lf:%lf%c", &from, &to, &extra) != 2 || !(from >= 0) || !(to > from)) {
      std::fprintf(stderr, "cell-bench: --window=%s is not from_s:to_s with 0 <= from < to\n", text.c_str());
      return 2;
    }
    windows.emplace_back(from, to);
  }
  const bool redis = store_kind == "redis", postgres = store_kind == "postgres";
  if (store_kind == "cell" && options.cluster.empty()) {
    std::fprintf(stderr, "cell-bench: --cluster is required with --store=cell\n");
    return 2;
  }
  if (store_kind != "cell" && !options.cluster.empty()) {
    std::fprintf(stderr, "cell-bench: --cluster is for --store=cell; Redis is at --redis, PostgreSQL at --postgres\n");
    return 2;
  }
  if (!redis && redis_option->count() > 0) {
    std::fprintf(stderr, "cell-bench: --redis is for --store=redis\n");
    return 2;
  }
  if (!postgres && postgres_option->count() > 0) {
    std::fprintf(stderr, "cell-bench: --postgres is for --store=postgres\n");
    return 2;
  }
  const bool transactional = cell::bench::IsTxnWorkload(workload_name);
  const bool walk = workload_name == "walk";
  if ((transactional || walk) && rate > 0) {
    std::fprintf(stderr, "cell-bench: --workload=%s runs a closed loop only (no --rate)\n", workload_name.c_str());
    return 2;
  }
  if (!walk && (scan_length_option->count() > 0 || walk_option->count() > 0)) {
    std::fprintf(stderr, "cell-bench: --scan-length and --walk are for --workload=walk\n");
    return 2;
  }
  if (walk_name.empty()) walk_name = store_kind == "cell" ? "iterator" : "pages";
  if (walk && walk_name == "iterator" && store_kind != "cell") {
    std::fprintf(stderr, "cell-bench: --walk=iterator is Cell's (cell::Client::NewIterator); %s walks in pages\n",
                 store_kind.c_str());
    return 2;
  }
  if (walk && shape == "fixed" && key_bytes >= 255) {
    // A forward page goes on from the last key + "\0", which must still be a key.
    std::fprintf(stderr, "cell-bench: --workload=walk needs keys under 255 bytes (--key-bytes)\n");
    return 2;
  }
  if (workload_name == "bank" && keys < 2) {
    std::fprintf(stderr, "cell-bench: --workload=bank needs at least 2 accounts (--keys)\n");
    return 2;
  }

  // A name and a key distribution; the operations are bench/txn_workload.h's or bench/walk_workload.h's.
  cell::bench::Workload own_loop;
  own_loop.name = workload_name;
  auto workload = transactional || walk ? cell::StatusOr<cell::bench::Workload>(own_loop)
                                        : cell::bench::ParseWorkload(workload_name);
  if (!workload.ok()) {
    std::fprintf(stderr, "cell-bench: %s\n", workload.status().ToString().c_str());
    return 2;
  }
  if (!distribution_name.empty()) {
    auto d = cell::bench::ParseDistribution(distribution_name);
    if (!d.ok()) {
      std::fprintf(stderr, "cell-bench: %s\n", d.status().ToString().c_str());
      return 2;
    }
    workload->distribution = *d;
  }
  std::optional<Spike> spike;
  if (!spike_text.empty()) {
    spike = ParseSpike(spike_text);
    if (!spike || rate <= 0) {
      std::fprintf(stderr,
                   "cell-bench: --spike wants start_s:duration_s:factor (start >= 0, duration > 0, factor 0.01..1000) "
                   "and an open loop (--rate)\n");
      return 2;
    }
  }
  if (rate > 0 && rate < 1) {
    std::fprintf(stderr, "cell-bench: --rate is arrivals per second: at least 1 (0: closed loop)\n");
    return 2;
  }
  std::vector<cell::bench::HogPeriod> hog_periods;
  for (const std::string& text : hog_texts) {
    auto period = cell::bench::ParseHogPeriod(text);
    if (!period.ok()) {
      std::fprintf(stderr, "cell-bench: %s\n", period.status().ToString().c_str());
      return 2;
    }
    hog_periods.push_back(*period);
  }
  cell::bench::Hogs hogs(hog_periods);
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    if (!csv) {
      std::fprintf(stderr, "cell-bench: cannot write %s\n", csv_path.c_str());
      return 2;
    }
    csv << (walk ? cell::bench::WalkCsvHeader() : cell::bench::CsvHeader()) << "\n";
  }
  keys = std::max<uint64_t>(keys, 1);
  Shapes shapes{shape == "cell", key_bytes, value_bytes, keys * 2};

  cell::bench::StoreConfig store_config;
  store_config.kind = store_kind;
  store_config.client = options;
  store_config.transport = transport;
  store_config.redis_address = redis_address;
  store_config.postgres_conninfo = postgres_conninfo;
  store_config.postgres_bin = postgres_bin;
  store_config.postgres_cpus = postgres_cpus;
  store_config.durability = durability;
  store_config.threads = threads;
  auto opened_or = cell::bench::OpenStore(store_config);
  if (!opened_or.ok()) {
    const cell::Status& s = opened_or.status();  // Redis's and PostgreSQL's messages say what failed
    std::fprintf(stderr, "cell-bench: %s\n", store_kind == "cell" ? s.ToString().c_str() : s.message().c_str());
    return s.IsInvalidArgument() ? 2 : 1;
  }
  const cell::bench::OpenedStore opened = std::move(*opened_or);  // before the sessions: they go first
  cell::bench::Store* const store = opened.store.get();
  const std::string& search_name = opened.search;
  const std::string& transport_name = opened.transport;
  // One session per thread, connected before the clock starts (Redis, PostgreSQL: a connection each).
  const auto new_session = [&]() -> std::unique_ptr<cell::bench::StoreSession> {
    auto session = store->NewSession();
    if (!session.ok()) {
      std::fprintf(stderr, "cell-bench: %s\n", session.status().message().c_str());
      return nullptr;
    }
    return std::move(*session);
  };

  const cell::bench::Bank bank(keys, txn.initial_balance);
  double load_seconds = 0;
  if (!no_load) {
    const std::unique_ptr<cell::bench::StoreSession> loader = new_session();
    if (loader == nullptr) return 1;
    load_seconds = Load(*loader, postgres, keys, [&](uint64_t i) {
      if (workload_name == "bank") return std::make_pair(bank.Key(i), bank.InitialValue());
      std::string key = shapes.Key(i);
      std::string value = shapes.Value(key, 0);
      return std::make_pair(std::move(key), std::move(value));
    });
    if (load_seconds < 0) return 1;
  }

  const cell::bench::KeyChooser chooser(keys, workload->distribution, theta);
  std::atomic<uint64_t> next_insert{keys};  // inserted keys are numbered from here
  std::atomic<uint64_t> by_kind[5] = {};
  std::atomic<uint64_t> not_found{0};
  Errors errors;
  std::vector<cell::bench::LatencyRecorder> recorders(threads);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> unissued{0}, inserts_over{0};
  std::vector<std::unique_ptr<cell::bench::StoreSession>> sessions;
  for (int t = 0; t < threads; ++t) {
    sessions.push_back(new_session());
    if (sessions.back() == nullptr) return 1;
  }
  if (transactional) {
    txn.workload = workload_name;
    txn.keys = keys;
    txn.distribution = workload->distribution;
    txn.theta = theta;
    txn.threads = threads;
    txn.seconds = seconds;
    txn.interval_ms = interval_ms;
    txn.seed = seed;
    txn.windows = windows;
    txn.key_of = [&shapes](uint64_t i) { return shapes.Key(i); };
    txn.value_of = [&shapes](const std::string& key, uint64_t version) { return shapes.Value(key, version); };
    txn.belongs = [&shapes](std::string_view value, std::string_view key) { return shapes.Belongs(value, key); };
    const std::string head = fmt::format(
        "\"bench\":\"cell\",\"store\":\"{}\",\"workload\":\"{}\",\"search\":\"{}\",\"transport\":\"{}\","
        "\"durability\":\"{}\"{},\"shape\":\"{}\",\"keys\":{},\"threads\":{},\"seconds\":{:.2f},\"load_s\":{:.2f}",
        store_kind, workload_name, search_name, transport_name, durability, opened.postgres_json, shape, keys, threads,
        seconds, load_seconds);
    return cell::bench::RunTxnBench(txn, *store, sessions, hogs, csv.is_open() ? &csv : nullptr, head);
  }
  if (walk) {
    cell::bench::WalkOptions walk_options;
    walk_options.keys = keys;
    walk_options.page_pairs = scan_length;
    walk_options.reader = *cell::bench::ParseWalkReader(walk_name);
    walk_options.client = opened.client;
    walk_options.threads = threads;
    walk_options.seconds = seconds;
    walk_options.interval_ms = interval_ms;
    walk_options.windows = windows;
    walk_options.key_of = [&shapes](uint64_t i) { return shapes.Key(i); };
    walk_options.belongs = [&shapes](std::string_view value, std::string_view key) {
      return shapes.Belongs(value, key);
    };
    const std::string head = fmt::format(
        "\"bench\":\"cell\",\"store\":\"{}\",\"workload\":\"walk\",\"search\":\"{}\",\"transport\":\"{}\","
        "\"durability\":\"{}\"{},\"shape\":\"{}\",\"keys\":{},\"key_bytes\":{},\"value_bytes\":{},\"threads\":{},"
        "\"seconds\":{:.2f},\"load_s\":{:.2f}",
        store_kind, search_name, transport_name, durability, opened.postgres_json, shape, keys, key_bytes, value_bytes,
        threads, seconds, load_seconds);
    return cell::bench::RunWalkBench(walk_options, *store, sessions, hogs, csv.is_open() ? &csv : nullptr, head);
  }
  Errors session_failures;  // a session that failed (Redis: a lost connection) stops the run
  std::atomic<bool> aborted{false};
  const cell::Client::Stats before = store->stats();
  const auto run_start = Clock::now();
  const auto end = run_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  const auto rate_at = [&](Clock::time_point t) {
    const double since = std::chrono::duration<double>(t - run_start).count();
    return spike && spike->active(since) ? rate * spike->factor : rate;
  };

  // Hogs due at the start start now (a hog that cannot be pinned is an error of the run's set-up).
  if (cell::Status s = hogs.Update(0); !s.ok()) {
    std::fprintf(stderr, "cell-bench: %s\n", s.ToString().c_str());
    return 2;
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      cell::bench::LatencyRecorder& recorder = recorders[t];
      cell::bench::StoreSession& session = *sessions[t];
      cell::SendHold hold;  // requests go out together, as Redis's do (bench/store.h)
      // Closed loop: a full window is refilled once half of it has come back, so that a thread whose completions
      // run on the client's I/O thread (Cell's RPCs) is woken once per half window, not once per reply, and its
      // refill goes out as one write; Redis's session, which reads its replies itself, refills the same way. Open
      // loop: at once, so that arrivals are not held back.
      cell::bench::Window window(depth, session, rate > 0 ? depth - 1 : depth / 2);
      std::mt19937_64 rng(seed * 1000003 + t);
      cell::bench::ArrivalClock arrivals(rate > 0 ? rate / threads : 1, run_start, seed * 7919 + t);
      uint64_t version = 1;
      Clock::time_point last_due = run_start;
      std::string get_key;  // a get's key, made in place operation after operation
      std::optional<Clock::time_point> drawn_not_issued;
      while (!stop.load(std::memory_order_relaxed)) {
        Clock::time_point due;  // open loop: when this arrival is due (closed loop: unused, and the clock not read)
        if (rate > 0) {
          // The rate in force at the clock's own time (not now: a thread that lags must not shift the spike).
          arrivals.set_rate(rate_at(last_due) / threads);
          due = last_due = arrivals.Next();
          // Wait for the arrival's time (not synchronisation): sleep in short slices while it is far, then yield
          // until it comes, since a timer's wake-up can be late by tens of microseconds and the lateness would
          // count as latency (yielding, not spinning, leaves the CPU to the client's transport threads). A session
          // whose replies this thread reads (Redis) takes them meanwhile, so each latency ends when its reply came.
          while (due - Clock::now() > std::chrono::microseconds(300) && !stop.load(std::memory_order_relaxed)) {
            session.WaitUntil(
                std::min(due - std::chrono::microseconds(200), Clock::now() + std::chrono::milliseconds(20)));
          }
          while (Clock::now() < due && !stop.load(std::memory_order_relaxed)) {
            session.Progress();
            std::this_thread::yield();
          }
          if (stop.load(std::memory_order_relaxed)) {
            drawn_not_issued = due;
            break;
          }
          session.Progress();  // a thread that is behind did not wait above: take the replies that have come
        }
        window.Acquire();
        const auto begin = rate > 0 ? due : Clock::now();  // open loop: from when it was due
        const auto finish = [&recorder, &window, begin] {
          recorder.Record(std::chrono::duration<double, std::micro>(Clock::now() - begin).count());
          window.Release();
        };
        const OpKind kind = workload->Pick(rng);
        by_kind[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
        const uint64_t newest = next_insert.load(std::memory_order_relaxed) - 1;
        switch (kind) {
          case OpKind::kRead:
          case OpKind::kReadModifyWrite: {
            const uint64_t i = chooser.Next(rng, newest);
            shapes.KeyInto(i, &get_key);  // the session copies what it keeps of it
            const bool rmw = kind == OpKind::kReadModifyWrite;
            const char fill = shapes.FillFor(get_key);
            session.Get(
                get_key, [&, i, fill, rmw, finish, v = version++](const cell::Status& s, std::string_view value) {
                  if (s.IsNotFound() && i >= keys) {
                    not_found.fetch_add(1, std::memory_order_relaxed);  // an insert not done yet
                  } else if (!s.ok() || !shapes.BelongsTo(value, i, fill)) {
                    errors.Add(shapes.Key(i) + ": " + (s.ok() ? "a value that is not this key's" : s.ToString()));
                  }
                  if (!rmw || !s.ok()) return finish();
                  const std::string key = shapes.Key(i);
                  session.Put(key, shapes.Value(key, v), /*insert=*/false, [&, key, finish](const cell::Status& p) {
                    if (!p.ok()) errors.Add(key + ": " + p.ToString());
                    finish();
                  });
                });
            break;
          }
          case OpKind::kUpdate:
          case OpKind::kInsert: {
            uint64_t i = kind == OpKind::kInsert ? next_insert.fetch_add(1) : chooser.Next(rng, newest);
            bool insert = kind == OpKind::kInsert;
            if (i >= shapes.key_space) {  // keys past the space would not sort in order: update instead
              inserts_over.fetch_add(1, std::memory_order_relaxed);
              i = chooser.Next(rng, keys - 1);
              insert = false;
            }
            const std::string key = shapes.Key(i);
            session.Put(key, shapes.Value(key, version++), insert, [&, key, finish](const cell::Status& s) {
              if (!s.ok()) errors.Add(key + ": " + s.ToString());
              finish();
            });
            break;
          }
          case OpKind::kScan: {
            // Synchronous (the client has no asynchronous scan): 1..100 pairs from a chosen key.
            const uint64_t i = chooser.Next(rng, newest);
            const size_t length = 1 + rng() % 100;
            std::vector<std::pair<std::string, std::string>> pairs;
            const std::string start = shapes.Key(i);
            const cell::Status s = session.Scan(start, length, &pairs);
            if (!s.ok()) errors.Add("scan: " + s.ToString());
            for (size_t j = 1; j < pairs.size() && s.ok(); ++j) {
              if (!(pairs[j - 1].first < pairs[j].first)) {
                errors.Add("scan: pairs out of order");
                break;
              }
            }
            finish();
            // The start and the values are checked after the latency is taken, so Cell's scan latency is what it
            // was (only the order check precedes it); Redis reads a scan's values by a second command (MGET), so
            // they are worth checking, for both stores alike.
            if (!pairs.empty() && pairs.front().first < start) errors.Add("scan: a key before the start key");
            for (const auto& [k, v] : pairs) {
              if (!shapes.Belongs(v, k)) {
                errors.Add("scan: " + k + ": a value that is not this key's");
                break;
              }
            }
            break;
          }
        }
        if (cell::Status s = session.status(); !s.ok()) {  // Redis: the connection is gone; the run cannot go on
          session_failures.Add(s.ToString());
          aborted = true;
          stop = true;
        }
      }
      if (rate > 0) {
        // Arrivals due before the end that were never issued (the thread fell behind): counted, since leaving them
        // out would hide the worst latencies.
        for (Clock::time_point due = drawn_not_issued ? *drawn_not_issued : arrivals.Next(); due < end;) {
          unissued.fetch_add(1, std::memory_order_relaxed);
          arrivals.set_rate(rate_at(due) / threads);
          due = arrivals.Next();
        }
      }
      window.Drain();
    });
  }

  // The time series: every interval, what completed in it.
  cell::Client::Stats last = before;
  std::vector<float> all, interval;
  std::vector<std::pair<double, size_t>> interval_ends;  // each interval's end (s) and where its samples end in all
  uint64_t completed_in_time = 0;                        // completed by the end of the run phase
  auto tick = run_start;
  while (tick < end && !aborted.load()) {
    const auto from = tick;
    tick = std::min(end, tick + std::chrono::milliseconds(interval_ms));
    std::this_thread::sleep_until(tick);  // the sampling period, not synchronisation
    interval.clear();
    for (auto& r : recorders) r.Drain(&interval);
    all.insert(all.end(), interval.begin(), interval.end());
    cell::bench::IntervalRow row;
    row.t_s = std::chrono::duration<double>(tick - run_start).count();
    interval_ends.emplace_back(row.t_s, all.size());
    row.interval_s = std::chrono::duration<double>(tick - from).count();
    row.latency = cell::bench::Summarize(&interval);
    row.ops = row.latency.count;
    completed_in_time += row.ops;
    const cell::Client::Stats now = store->stats();
    const double server = static_cast<double>(now.server_searches - last.server_searches);
    const double client_side = static_cast<double>(now.client_searches - last.client_searches);
    row.server_fraction = server + client_side > 0 ? server / (server + client_side) : 0;
    row.retries = now.retries - last.retries;
    row.target_rate = rate > 0 ? rate_at(tick - std::chrono::microseconds(1)) : 0;
    if (cell::Status s = hogs.Update(row.t_s); !s.ok()) errors.Add("hogs: " + s.ToString());
    row.hogs = hogs.running();
    last = now;
    if (csv.is_open()) csv << cell::bench::CsvRow(row) << "\n";
  }
  stop = true;
  hogs.StopAll();
  for (auto& th : pool) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - run_start).count();
  // What was in flight at the end counts for latency (those are the slowest), not for throughput.
  for (auto& r : recorders) r.Drain(&all);
  if (csv.is_open()) csv.flush();
  const cell::Client::Stats after = store->stats();
  if (aborted.load()) {
    std::fprintf(stderr, "cell-bench: the run stopped after %.2f s: %s\n", elapsed, session_failures.first.c_str());
    return 1;
  }

  // The windows' exact summaries: the samples of the intervals that ended within each (before `all` is sorted).
  const std::string window_json = cell::bench::WindowsJson(all, interval_ends, windows);
  const cell::bench::LatencySummary total = cell::bench::Summarize(&all);
  const double server = static_cast<double>(after.server_searches - before.server_searches);
  const double client_side = static_cast<double>(after.client_searches - before.client_searches);
  if (errors.count.load() > 0) {
    std::fprintf(stderr, "cell-bench: %llu wrong or failed operations, the first: %s\n",
                 static_cast<unsigned long long>(errors.count.load()), errors.first.c_str());
  }
  std::string estimates;  // what the adaptive selector believed at the end, per server
  for (const auto& e : after.estimates) {
    char one[256];
    std::snprintf(one, sizeof(one),
                  "%s{\"server\":%llu,\"server_search_us\":%.2f,\"server_rtt_us\":%.2f,\"read_us\":%.3f,"
                  "\"rtt_us\":%.3f,\"reads_per_search\":%.2f}",
                  estimates.empty() ? "" : ",", static_cast<unsigned long long>(e.server), e.server_search_us,
                  e.server_rtt_us, e.read_us, e.rtt_us, after.reads_per_search);
    estimates += one;
  }
  std::printf(
      "{\"bench\":\"cell\",\"store\":\"%s\",\"workload\":\"%s\",\"search\":\"%s\",\"transport\":\"%s\","
      "\"durability\":\"%s\"%s,\"shape\":\"%s\","
      "\"keys\":%llu,\"key_bytes\":%zu,\"value_bytes\":%zu,\"threads\":%d,\"depth\":%d,\"rate\":%.0f,"
      "\"seconds\":%.2f,\"load_s\":%.2f,\"ops\":%llu,\"gets\":%llu,\"updates\":%llu,\"inserts\":%llu,"
      "\"scans\":%llu,\"rmws\":%llu,\"ops_per_s\":%.0f,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,"
      "\"server_fraction\":%.3f,\"retries\":%llu,\"in_place_searches\":%llu,\"node_cache_hits\":%llu,\"node_cache_"
      "misses\":%llu,"
      "\"explorations\":%llu,\"load_steps\":%llu,\"estimates\":[%s],\"not_found\":%llu,\"unissued\":%llu,\"inserts_"
      "over_key_space\":%llu,"
      "\"windows\":[%s],\"drain_s\":%.2f,\"errors\":%llu}\n",
      store_kind.c_str(), workload->name.c_str(), search_name.c_str(), transport_name.c_str(), durability.c_str(),
      opened.postgres_json.c_str(), shape.c_str(), static_cast<unsigned long long>(keys), key_bytes, value_bytes,
      threads, depth, rate, seconds, load_seconds, static_cast<unsigned long long>(total.count),
      static_cast<unsigned long long>(by_kind[0].load()), static_cast<unsigned long long>(by_kind[1].load()),
      static_cast<unsigned long long>(by_kind[2].load()), static_cast<unsigned long long>(by_kind[3].load()),
      static_cast<unsigned long long>(by_kind[4].load()), completed_in_time / seconds, total.p50_us, total.p90_us,
      total.p99_us, server + client_side > 0 ? server / (server + client_side) : 0.0,
      static_cast<unsigned long long>(after.retries - before.retries),
      static_cast<unsigned long long>(after.in_place_searches - before.in_place_searches),
      static_cast<unsigned long long>(after.node_cache_hits - before.node_cache_hits),
      static_cast<unsigned long long>(after.node_cache_misses - before.node_cache_misses),
      static_cast<unsigned long long>(after.explorations - before.explorations),
      static_cast<unsigned long long>(after.load_steps - before.load_steps), estimates.c_str(),
      static_cast<unsigned long long>(not_found.load()), static_cast<unsigned long long>(unissued.load()),
      static_cast<unsigned long long>(inserts_over.load()), window_json.c_str(), elapsed - seconds,
      static_cast<unsigned long long>(errors.count.load()));
  return errors.count.load() == 0 ? 0 : 1;
}
