// cell-sql-bench: SQL point and range SELECTs per second through SQLite on Cell (the virtual table module of
// sql/cell_vtab.h), against the same queries on SQLite's own in-memory table and on a private PostgreSQL (issue 21's
// SQL benchmark; docs/BENCHMARKS.md). One client thread; the stores are bench/sql_stores.h.
//
// Each store gets the same table t(id, name, score), loaded with rows id = 0 .. keys - 1 (name: 20 bytes derived
// from the id, score: a double derived from it), one prepared INSERT per row, --load-batch rows per transaction; the
// load's time is reported apart. Then each round runs, for each store in --stores order, for --seconds each:
//   point  SELECT id, name, score FROM t WHERE id = ?                            a uniformly random id
//   range  SELECT id, name, score FROM t WHERE id >= ? AND id < ? ORDER BY id    --range-rows (100) rows from a
//                                                                                uniformly random start
// with statements prepared once and bound again per query, every row stepped through and checked: a point query must
// return exactly its row, a range exactly its rows in id order, each with the name and score loaded (a wrong answer
// is exit status 1). Each (round, query) draws the same ids for every store. --warmup seconds of each before the
// first round are checked, not reported. Before the queries each store's plans are checked (bench/sql_stores.h):
// a key lookup and a key range, no full scan, no sort; on Cell also by the module's counters after every run: one
// Get per point query, one scan per range query and exactly its rows read.
//
//   cell-sql-bench --cluster=tcp://127.0.0.1:7000 [--stores=cell,sqlite,postgres] [--queries=point,range]
//                  [--keys=100000] [--seconds=3] [--rounds=3] [--warmup=1] [--range-rows=100] [--range-limit]
//                  [--load-batch=500] [--postgres-durability=off] [--postgres-cpus=0] [--key-file=F] [--prefix=P]
//                  [--seed=1]
//
// Cell's search: the module opens its client with the default options, so gets and scans search as the adaptive
// selector chooses; its arguments offer no way to pick a side, so neither does this bench (the JSON records the
// searches each side made). Every query is timed (one clock read per query, the same for every store) for its
// latency.
//
// Output: one JSON line per store's load ({"phase":"load",...}) and per (round, store, query) ({"phase":"run",
// "queries_per_s", "rows_per_s", "p50_us", "p99_us", and on Cell the module's and the client's counters for the
// run}) on stdout; a table of the medians over rounds and each round's ratios of Cell to the others on stderr.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "bench/sql_stores.h"

namespace {

using Clock = std::chrono::steady_clock;
using cell::Status;
using cell::bench::SqlRow;
using cell::bench::SqlRows;
using cell::bench::SqlStore;

struct Flags {
  std::vector<std::string> stores = {"cell", "sqlite", "postgres"};
  std::vector<std::string> queries = {"point", "range"};
  uint64_t keys = 100000;
  double seconds = 3;
  int rounds = 3;
  double warmup = 1;
  uint64_t range_rows = 100;
  bool range_limit = false;
  size_t load_batch = 500;
  uint64_t seed = 1;
  cell::bench::SqlStoreOptions store;
};

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The rows loaded, by id: what every answer is checked against.
std::vector<SqlRow> Rows(uint64_t keys) {
  std::vector<SqlRow> rows(keys);
  for (uint64_t id = 0; id < keys; ++id) {
    rows[id].id = static_cast<int64_t>(id);
    rows[id].name = fmt::format("name-{:015x}", Mix(id) >> 4);                           // 20 bytes
    rows[id].score = static_cast<double>(Mix(id ^ 0x5bd1e995ULL) % 100000000) / 1000.0;  // 0 .. 99,999.999
  }
  return rows;
}

// The answer in `got` to the query for `count` rows from id `first` (a point query: 1).
Status Check(const std::vector<SqlRow>& want, int64_t first, uint64_t count, const SqlRows& got) {
  if (got.count != count) {
    return Status::Internal(fmt::format("{} rows from id {}: {} rows came back", count, first, got.count));
  }
  for (uint64_t i = 0; i < count; ++i) {
    const SqlRow& g = got.rows[i];
    const SqlRow& w = want[static_cast<size_t>(first) + i];
    if (g.id != w.id || g.name != w.name || g.score != w.score) {
      return Status::Internal(fmt::format("{} rows from id {}: row {} is ({}, '{}', {}), not ({}, '{}', {})", count,
                                          first, i, g.id, g.name, g.score, w.id, w.name, w.score));
    }
  }
  return Status::OK();
}

struct Run {
  uint64_t queries = 0, rows = 0;
  double seconds = 0;
  std::vector<uint32_t> latency_ns;
  double Percentile(double p) {
    if (latency_ns.empty()) return 0;
    const size_t at = std::min(latency_ns.size() - 1, static_cast<size_t>(p * static_cast<double>(latency_ns.size())));
    std::nth_element(latency_ns.begin(), latency_ns.begin() + static_cast<ptrdiff_t>(at), latency_ns.end());
    return latency_ns[at] / 1000.0;
  }
};

// Runs one query shape against `store` for `seconds`, ids drawn from `seed`; every answer checked.
Status RunQueries(SqlStore& store, bool range, const Flags& f, const std::vector<SqlRow>& want, uint64_t seed,
                  double seconds, Run* run) {
  std::mt19937_64 rng(seed);
  const uint64_t n = range ? f.range_rows : 1;
  std::uniform_int_distribution<int64_t> pick(0, static_cast<int64_t>(f.keys - n));
  SqlRows got;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  auto now = start;
  while (now < end) {
    const int64_t id = pick(rng);
    Status s = range ? store.Range(id, id + static_cast<int64_t>(n), &got) : store.Point(id, &got);
    const auto done = Clock::now();
    if (!s.ok()) return s;
    CELL_RETURN_IF_ERROR(Check(want, id, n, got));
    run->latency_ns.push_back(static_cast<uint32_t>(
        std::min<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(done - now).count(), UINT32_MAX)));
    ++run->queries;
    run->rows += got.count;
    now = done;
  }
  run->seconds = std::chrono::duration<double>(now - start).count();
  return Status::OK();
}

// The Cell module's counters over one run: each point query one Get and no scan, each range query one scan that read
// exactly its rows. FailedPrecondition otherwise (a plan that reads more than the query needs).
Status CheckCounters(const std::map<std::string, uint64_t>& d, bool range, const Flags& f, const Run& run) {
  const auto at = [&](const char* name) { return d.count(name) != 0 ? d.at(name) : 0; };
  const uint64_t q = run.queries;
  const bool ok = range ? at("scans") == q && at("gets") == 0 && at("rows") == q * f.range_rows
                        : at("gets") == q && at("scans") == 0 && at("rows") == q;
  if (ok) return Status::OK();
  return Status::FailedPrecondition(fmt::format("cell: {} {} queries made gets={} scans={} rows={}", q,
                                                range ? "range" : "point", at("gets"), at("scans"), at("rows")));
}

std::string CountersJson(const std::map<std::string, uint64_t>& before, const std::map<std::string, uint64_t>& after,
                         std::map<std::string, uint64_t>* delta) {
  std::string json;
  for (const auto& [name, value] : after) {
    (*delta)[name] = value - (before.count(name) != 0 ? before.at(name) : 0);
    json += fmt::format("{}\"{}\":{}", json.empty() ? "" : ",", name, (*delta)[name]);
  }
  return json.empty() ? "" : ",\"counters\":{" + json + "}";
}

struct Opened {
  std::string name;
  std::unique_ptr<SqlStore> store;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "cell-sql-bench: %s\n", what.c_str());
  std::exit(1);
}

// Opens, loads and checks the plans of every store; prints each load's JSON line.
std::vector<Opened> OpenAndLoad(const Flags& f, const std::vector<SqlRow>& rows) {
  std::vector<Opened> stores;
  for (const std::string& name : f.stores) {
    auto opened = cell::bench::OpenSqlStore(name, f.store);
    if (!opened.ok()) Die(name + ": " + opened.status().ToString());
    const auto start = Clock::now();
    if (Status s = (*opened)->Load(rows, f.load_batch); !s.ok()) Die(name + ": load: " + s.ToString());
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (Status s = (*opened)->CheckPlans(); !s.ok()) Die(s.ToString());
    std::printf(
        "{\"phase\":\"load\",\"store\":\"%s\",\"keys\":%llu,\"batch\":%zu,\"load_s\":%.3f,"
        "\"rows_per_s\":%.0f}\n",
        name.c_str(), static_cast<unsigned long long>(f.keys), f.load_batch, seconds,
        static_cast<double>(f.keys) / seconds);
    std::fflush(stdout);
    std::fprintf(stderr, "%s: loaded %llu rows in %.2f s\n", name.c_str(), static_cast<unsigned long long>(f.keys),
                 seconds);
    stores.push_back({name, std::move(*opened)});
  }
  return stores;
}

struct Result {
  double queries_per_s = 0, rows_per_s = 0, p50_us = 0;
};
using Results = std::map<std::tuple<std::string, std::string, int>, Result>;  // (query, store, round)

// One (round, store, query) run: checked, printed as a JSON line, and its rates kept.
void RunOne(const Flags& f, const std::vector<SqlRow>& rows, Opened& s, bool range, int round, Results* results) {
  const char* query = range ? "range" : "point";
  const auto before = s.store->Counters();
  Run run;
  const uint64_t seed = Mix(f.seed ^ (static_cast<uint64_t>(round) << 8) ^ (range ? 1 : 2));
  if (Status st = RunQueries(*s.store, range, f, rows, seed, round == 0 ? f.warmup : f.seconds, &run); !st.ok()) {
    Die(fmt::format("{}: {} query, round {}: {}", s.name, query, round, st.ToString()));
  }
  std::map<std::string, uint64_t> delta;
  const std::string counters = CountersJson(before, s.store->Counters(), &delta);
  if (s.name == "cell") {
    if (Status st = CheckCounters(delta, range, f, run); !st.ok()) Die(st.ToString());
  }
  if (round == 0) return;  // the warm-up
  const Result r{run.queries / run.seconds, run.rows / run.seconds, run.Percentile(0.5)};
  (*results)[{query, s.name, round}] = r;
  std::printf(
      "{\"phase\":\"run\",\"round\":%d,\"store\":\"%s\",\"query\":\"%s\",\"keys\":%llu,\"range_rows\":%llu,"
      "\"range_limit\":%s,\"seconds\":%.3f,\"queries\":%llu,\"rows\":%llu,\"queries_per_s\":%.1f,"
      "\"rows_per_s\":%.1f,\"p50_us\":%.2f,\"p99_us\":%.2f%s}\n",
      round, s.name.c_str(), query, static_cast<unsigned long long>(f.keys),
      static_cast<unsigned long long>(f.range_rows), f.range_limit ? "true" : "false", run.seconds,
      static_cast<unsigned long long>(run.queries), static_cast<unsigned long long>(run.rows), r.queries_per_s,
      r.rows_per_s, r.p50_us, run.Percentile(0.99), counters.c_str());
  std::fflush(stdout);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The medians over rounds, and each round's ratio of Cell's queries/s to each other store's, on stderr.
void PrintTable(const Flags& f, const Results& results) {
  std::fprintf(stderr, "cell-sql-bench: %llu rows, one client thread, %d rounds of %.1f s each; medians:\n",
               static_cast<unsigned long long>(f.keys), f.rounds, f.seconds);
  std::fprintf(stderr, "%-7s %-9s %14s %14s %10s\n", "query", "store", "queries/s", "rows/s", "p50 us");
  for (const std::string& query : f.queries) {
    for (const std::string& store : f.stores) {
      std::vector<double> qps, rps, p50;
      for (int round = 1; round <= f.rounds; ++round) {
        const Result& r = results.at({query, store, round});
        qps.push_back(r.queries_per_s);
        rps.push_back(r.rows_per_s);
        p50.push_back(r.p50_us);
      }
      std::fprintf(stderr, "%-7s %-9s %14.0f %14.0f %10.1f\n", query.c_str(), store.c_str(), Median(qps), Median(rps),
                   Median(p50));
    }
    if (std::find(f.stores.begin(), f.stores.end(), "cell") == f.stores.end()) continue;
    for (const std::string& other : f.stores) {
      if (other == "cell") continue;
      std::string ratios;
      for (int round = 1; round <= f.rounds; ++round) {
        ratios += fmt::format(" {:.3f}x", results.at({query, "cell", round}).queries_per_s /
                                              results.at({query, other, round}).queries_per_s);
      }
      std::fprintf(stderr, "  %s: cell / %s queries/s, each round:%s\n", query.c_str(), other.c_str(), ratios.c_str());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "cell-sql-bench: point and range SELECTs per second through SQLite on Cell, SQLite's own table and "
      "PostgreSQL, one client thread; JSON lines on stdout, a table on stderr"};
  Flags f;
  f.store.postgres.durability = "off";
  f.store.prefix = fmt::format("cell-sql-bench-{}-{}", static_cast<long long>(std::time(nullptr)), getpid());
  app.add_option("--stores", f.stores, "the stores, in the order each round runs them")
      ->delimiter(',')
      ->check(CLI::IsMember({"cell", "sqlite", "postgres"}));
  app.add_option("--queries", f.queries, "the queries, in the order each round runs them")
      ->delimiter(',')
      ->check(CLI::IsMember({"point", "range"}));
  app.add_option("--cluster", f.store.cluster, "cell: the cluster (the module's cluster='...', e.g. tcp://HOST:PORT)");
  app.add_option("--key-file", f.store.key_file, "cell: the client key file (default: CELL_KEY_FILE, if set)");
  app.add_option("--search", f.store.search,
                 "cell: how the table's reads search (the module's search='...'): "
                 "adaptive (default), server or client");
  app.add_option("--prefix", f.store.prefix, "cell: the table's tuple prefix (default: one of this run's own)");
  app.add_option("--keys", f.keys, "rows loaded into each store")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--seconds", f.seconds, "seconds of each (round, store, query)")->check(CLI::PositiveNumber);
  app.add_option("--rounds", f.rounds, "rounds")->check(CLI::Range(1, 1000));
  app.add_option("--warmup", f.warmup, "seconds of each (store, query) before the first round, not reported")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--range-rows", f.range_rows, "rows of a range query")->check(CLI::Range(1, 4096));
  app.add_flag("--range-limit", f.range_limit, "end the range query with LIMIT <range-rows> (every store)");
  app.add_option("--load-batch", f.load_batch, "rows per load transaction (Cell: at most 1,000 writes each)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--seed", f.seed, "seed of the ids drawn");
  app.add_option("--postgres-durability", f.store.postgres.durability,
                 "postgres: sync, async or off (bench/private_postgres.h; off matches a cell-server without "
                 "--data-dir)")
      ->check(CLI::IsMember({"sync", "async", "off"}));
  app.add_option("--postgres-cpus", f.store.postgres.cpus, "postgres: the CPUs its processes run on (default: any)")
      ->delimiter(',');
  app.add_option("--postgres-bin", f.store.postgres.bin_dir, "postgres: the directory of initdb and postgres");
  CLI11_PARSE(app, argc, argv);
  const bool cell = std::find(f.stores.begin(), f.stores.end(), "cell") != f.stores.end();
  if (cell && f.store.cluster.empty()) Die("--stores has cell: give --cluster");
  if (f.range_rows > f.keys) Die("--range-rows is more than --keys");
  if (f.range_limit) f.store.range_limit = f.range_rows;

  const std::vector<SqlRow> rows = Rows(f.keys);
  std::vector<Opened> stores = OpenAndLoad(f, rows);
  Results results;
  for (int round = f.warmup > 0 ? 0 : 1; round <= f.rounds; ++round) {
    for (Opened& s : stores) {
      for (const std::string& q : f.queries) RunOne(f, rows, s, q == "range", round, &results);
    }
    if (round > 0) std::fprintf(stderr, "round %d of %d done\n", round, f.rounds);
  }
  PrintTable(f, results);
  return 0;
}
