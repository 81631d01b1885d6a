// cell-bench's transactional workloads (see txn_workload.h): the bank's transactions, txn-mix's, the closed loop
// that runs them, the time series and the summary.
#include "bench/txn_workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <tuple>

#include "bench/series.h"

namespace cell::bench {

namespace {

using Clock = std::chrono::steady_clock;
using Pairs = std::vector<std::pair<std::string, std::string>>;

// Whether `pairs` are exactly accounts first .. first + count - 1, each a balance of at least 0: "" and their sum in
// *sum, or what is wrong. Each account's tag goes to `history` (if not null), up to the first that is wrong.
std::string SumOf(const Bank& bank, const Pairs& pairs, uint64_t first, uint64_t count, int64_t* sum,
                  ThreadHistory* history) {
  *sum = 0;
  for (uint64_t j = 0; j < pairs.size() && j < count; ++j) {
    const std::string want = bank.Key(first + j);
    if (pairs[j].first != want) {
      return fmt::format(
          "account {} was wanted at position {} of the scan, and '{}' came (a store with other data "
          "in the accounts' range? use a store of the bench's own)",
          want, j, pairs[j].first);
    }
    int64_t balance = 0;
    uint64_t tag = 0;
    if (!ParseBankValue(pairs[j].second, &balance, &tag)) {
      return fmt::format("account {} holds '{}', not a balance", want, pairs[j].second);
    }
    if (history != nullptr) history->Read(first + j, tag);
    if (balance < 0) return fmt::format("account {} holds {}: below zero", want, balance);
    *sum += balance;
  }
  if (pairs.size() != count) {
    return fmt::format("a scan of {} accounts from {} found {}", count, bank.Key(first), pairs.size());
  }
  return "";
}

}  // namespace

bool IsTxnWorkload(std::string_view name) { return name == "bank" || name == "txn-mix"; }

Bank::Bank(uint64_t accounts, int64_t initial_balance, std::string prefix)
    : accounts_(std::max<uint64_t>(accounts, 2)), initial_(initial_balance), prefix_(std::move(prefix)), width_(1) {
  for (uint64_t c = accounts_ - 1; c >= 10; c /= 10) ++width_;
}

std::string Bank::Key(uint64_t i) const { return fmt::format("{}{:0{}}", prefix_, i, width_); }

Status Bank::Transfer(StoreSession& session, uint64_t from, uint64_t to, int64_t amount, int* attempts, bool* skipped,
                      ThreadHistory* history) const {
  const std::string from_key = Key(from), to_key = Key(to);
  std::string problem;  // what the last attempt found wrong: counts only if it committed
  if (history != nullptr) history->BeginTransaction();
  const Status s = session.RunTransaction(
      [&](TxnOps& txn) -> Status {
        if (history != nullptr) history->BeginAttempt();
        problem.clear();
        *skipped = false;
        std::string a, b;
        int64_t x = 0, y = 0;
        for (auto [account, key, value, balance] :
             {std::tuple{from, &from_key, &a, &x}, std::tuple{to, &to_key, &b, &y}}) {
          const Status got = txn.Get(*key, value);
          if (got.IsNotFound()) {
            problem = fmt::format("account {} is missing", *key);
            return Status::OK();
          }
          if (!got.ok()) return got;
          uint64_t tag = 0;
          if (!ParseBankValue(*value, balance, &tag)) {
            problem = fmt::format("account {} holds '{}', not a balance", *key, *value);
            return Status::OK();
          }
          if (history != nullptr) history->Read(account, tag);
        }
        if (x < amount) {
          *skipped = true;  // commits having read both: the source's balance was checked
          return Status::OK();
        }
        // In key order, so that two transfers between the same accounts lock them in the same order where
        // writes take locks (PostgreSQL's row locks: the other order deadlocks, found only after deadlock_timeout).
        std::pair<uint64_t, int64_t> writes[] = {{from, x - amount}, {to, y + amount}};
        if (to < from) std::swap(writes[0], writes[1]);
        for (const auto& [account, balance] : writes) {
          const uint64_t tag = history != nullptr ? history->NewTag() : 0;
          CELL_RETURN_IF_ERROR(txn.Put(account == from ? from_key : to_key, BankValue(balance, tag)));
          if (history != nullptr) history->Wrote(account, tag);
        }
        return Status::OK();
      },
      attempts);
  if (history != nullptr) history->EndTransaction(s);
  if (!s.ok()) return s;
  if (!problem.empty()) return Status::Corruption("transfer: " + problem);
  return Status::OK();
}

Status Bank::Audit(StoreSession& session, uint64_t first, uint64_t count, int64_t* sum, int* attempts,
                   ThreadHistory* history) const {
  Pairs pairs;
  std::string problem;
  if (history != nullptr) history->BeginTransaction();
  const Status s = session.RunTransaction(
      [&](TxnOps& txn) -> Status {
        if (history != nullptr) history->BeginAttempt();
        pairs.clear();
        CELL_RETURN_IF_ERROR(txn.Scan(Key(first), count, &pairs));
        problem = SumOf(*this, pairs, first, count, sum, history);
        return Status::OK();
      },
      attempts);
  if (history != nullptr) history->EndTransaction(s);
  if (!s.ok()) return s;
  if (!problem.empty()) return Status::Corruption("audit: " + problem);
  return Status::OK();
}

Status Bank::Total(StoreSession& session, int64_t* sum, ThreadHistory* history) const {
  *sum = 0;
  Pairs pairs;
  if (history != nullptr) {
    history->BeginTransaction();
    history->BeginAttempt();
  }
  Status s;
  for (uint64_t next = 0; next < accounts_ && s.ok();) {
    const uint64_t page = std::min<uint64_t>(1000, accounts_ - next);
    pairs.clear();
    s = session.Scan(Key(next), page, &pairs);
    int64_t part = 0;
    if (std::string problem = s.ok() ? SumOf(*this, pairs, next, page, &part, history) : ""; !problem.empty()) {
      s = Status::Corruption("final audit: " + problem);
    }
    *sum += part;
    next += page;
  }
  // Nothing else runs: the scans are one read-only transaction, committed (unless they failed).
  if (history != nullptr) history->EndTransaction(s.ok() ? Status::OK() : Status::Aborted("the final audit failed"));
  return s;
}

Status LoadInTransactions(StoreSession& session, uint64_t n,
                          const std::function<std::pair<std::string, std::string>(uint64_t)>& pair_of,
                          const std::function<void(uint64_t done)>& on_progress) {
  constexpr uint64_t kBatch = 100;
  Pairs batch;
  for (uint64_t i = 0; i < n; i += kBatch) {
    const uint64_t end = std::min(n, i + kBatch);
    batch.clear();
    for (uint64_t j = i; j < end; ++j) batch.push_back(pair_of(j));
    int attempts = 0;
    const Status s = session.RunTransaction(
        [&](TxnOps& txn) -> Status {
          for (const auto& [key, value] : batch) CELL_RETURN_IF_ERROR(txn.Put(key, value));
          return Status::OK();
        },
        &attempts);
    if (!s.ok()) return Status::FromCode(s.code(), fmt::format("load of keys {}..{}: {}", i, end - 1, s.message()));
    if (on_progress) on_progress(end);
  }
  return Status::OK();
}

namespace {

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
  std::string First() {
    std::lock_guard lock(mu);
    return first;
  }
};

// The state one run shares between its threads.
struct Run {
  Run(const TxnBenchOptions& options, std::optional<Bank> b)
      : o(options),
        bank(std::move(b)),
        chooser(options.keys, options.distribution, options.theta),
        recorders(options.threads) {
    // Each thread's tags, and its record when checking, from one budget of transactions.
    const uint32_t nonce = NewRunNonce();
    const uint64_t max = options.check ? options.check_max_txns : 0;
    histories.reserve(options.threads + 1);
    for (int t = 0; t < options.threads; ++t) histories.emplace_back(nonce, t, max, &record_budget);
    histories.emplace_back(nonce, options.threads, options.check ? 1 : 0);  // the bank's final audit
  }
  const TxnBenchOptions& o;
  const std::optional<Bank> bank;
  const KeyChooser chooser;
  std::vector<LatencyRecorder> recorders;
  std::atomic<int64_t> record_budget{static_cast<int64_t>(o.check_max_txns)};
  std::vector<ThreadHistory> histories;  // per thread, then the final audit's
  std::atomic<uint64_t> attempts{0}, aborts{0}, gave_up{0};
  std::atomic<uint64_t> transfers{0}, skipped{0}, audits{0}, full_audits{0}, gets{0}, puts{0};
  Errors errors, broken, session_failures;  // failed transactions and wrong results; invariant; lost sessions
  std::atomic<bool> stop{false}, aborted{false};
};

// One bank transaction: an audit or a transfer.
Status BankTransaction(Run& run, std::mt19937_64& rng, StoreSession& session, ThreadHistory& history, int* attempts) {
  const Bank& bank = *run.bank;
  const uint64_t n = bank.accounts();
  if (Uniform01(rng) < run.o.audit_fraction) {
    const uint64_t span = std::min(run.o.audit_span, n);
    const uint64_t first = std::uniform_int_distribution<uint64_t>(0, n - span)(rng);
    int64_t sum = 0;
    CELL_RETURN_IF_ERROR(bank.Audit(session, first, span, &sum, attempts, &history));
    run.audits.fetch_add(1, std::memory_order_relaxed);
    if (span == n) {
      run.full_audits.fetch_add(1, std::memory_order_relaxed);
      if (sum != bank.expected_total()) {
        run.broken.Add(fmt::format("an audit of every account found {}, not {}", sum, bank.expected_total()));
      }
    }
    return Status::OK();
  }
  const uint64_t from = run.chooser.Next(rng, n - 1);
  uint64_t to = from;
  for (int tries = 0; to == from && tries < 64; ++tries) to = run.chooser.Next(rng, n - 1);
  if (to == from) to = (from + 1) % n;  // a skew so strong that one account is nearly every draw
  const int64_t amount = 1 + static_cast<int64_t>(rng() % 10);
  bool skipped = false;
  CELL_RETURN_IF_ERROR(bank.Transfer(session, from, to, amount, attempts, &skipped, &history));
  run.transfers.fetch_add(1, std::memory_order_relaxed);
  if (skipped) run.skipped.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

// One txn-mix transaction: its operations drawn first, so that a retry runs the same transaction.
// A put reads its key first (a read-modify-write) and writes the shape's value behind a tag of its own.
Status MixTransaction(Run& run, std::mt19937_64& rng, StoreSession& session, ThreadHistory& history, uint64_t* version,
                      int* attempts) {
  struct Op {
    uint64_t index;
    std::string key;
    std::optional<std::string> value;  // a put's, without its tag
  };
  std::vector<Op> ops(run.o.txn_ops);
  uint64_t reads = 0;
  for (Op& op : ops) {
    op.index = run.chooser.Next(rng, run.o.keys - 1);
    op.key = run.o.key_of(op.index);
    if (Uniform01(rng) < run.o.txn_read_fraction) {
      ++reads;
    } else {
      op.value = run.o.value_of(op.key, (*version)++);
    }
  }
  std::string problem;  // the last attempt's: counts only if it committed
  history.BeginTransaction();
  const Status s = session.RunTransaction(
      [&](TxnOps& txn) -> Status {
        history.BeginAttempt();
        problem.clear();
        std::string value;
        for (const Op& op : ops) {
          const Status got = txn.Get(op.key, &value);
          uint64_t tag = 0;
          if (got.IsNotFound()) {
            problem =
                fmt::format("{}: missing (was it loaded? --no-load needs an earlier load of as many keys)", op.key);
          } else if (!got.ok()) {
            return got;
          } else if (!run.o.belongs(SplitTag(value, &tag), op.key)) {
            problem = fmt::format("{}: a value that is not this key's", op.key);
          }
          history.Read(op.index, tag);  // a missing key reads as tag 0, the load's
          if (!op.value) continue;
          const uint64_t written = history.NewTag();
          CELL_RETURN_IF_ERROR(txn.Put(op.key, TaggedValue(written, *op.value)));
          history.Wrote(op.index, written);
        }
        return Status::OK();
      },
      attempts);
  history.EndTransaction(s);
  if (!s.ok()) return s;
  if (!problem.empty()) return Status::Corruption("txn-mix: " + problem);
  run.gets.fetch_add(reads, std::memory_order_relaxed);
  run.puts.fetch_add(ops.size() - reads, std::memory_order_relaxed);
  return Status::OK();
}

// A thread's closed loop: transactions back to back until the run stops.
void Worker(Run& run, int t, StoreSession& session) {
  std::mt19937_64 rng(run.o.seed * 1000003 + t);
  uint64_t version = 1;
  while (!run.stop.load(std::memory_order_relaxed)) {
    const auto begin = Clock::now();
    int attempts = 0;
    ThreadHistory& history = run.histories[t];
    const Status s = run.bank ? BankTransaction(run, rng, session, history, &attempts)
                              : MixTransaction(run, rng, session, history, &version, &attempts);
    run.attempts.fetch_add(attempts, std::memory_order_relaxed);
    if (s.ok()) {
      run.recorders[t].Record(std::chrono::duration<double, std::micro>(Clock::now() - begin).count());
      run.aborts.fetch_add(attempts - 1, std::memory_order_relaxed);
    } else if (s.IsAborted()) {  // every attempt conflicted
      run.gave_up.fetch_add(1, std::memory_order_relaxed);
      run.aborts.fetch_add(attempts, std::memory_order_relaxed);
    } else {
      run.aborts.fetch_add(std::max(attempts - 1, 0), std::memory_order_relaxed);
      run.errors.Add(s.ToString());
    }
    if (Status failed = session.status(); !failed.ok()) {  // a lost connection: the run cannot go on
      run.session_failures.Add(failed.ToString());
      run.aborted = true;
      run.stop = true;
    }
  }
}

// The summary's workload fields after the harness's head.
std::string SummaryJson(Run& run, const LatencySummary& total, uint64_t committed_in_time, double seconds,
                        double elapsed, const std::string& windows, std::optional<int64_t> final_total,
                        const std::string& check) {
  const uint64_t attempts = run.attempts.load(), aborts = run.aborts.load();
  std::string json = fmt::format(
      "\"distribution\":\"{}\",\"theta\":{:.3f},\"transactions\":{},\"transactions_per_s\":{:.0f},"
      "\"ops_per_s\":{:.0f},\"attempts\":{},\"aborts\":{},\"abort_rate\":{:.4f},\"gave_up\":{},\"p50_us\":{:.1f},"
      "\"p90_us\":{:.1f},\"p99_us\":{:.1f},\"max_us\":{:.1f},",
      run.o.distribution == Distribution::kUniform   ? "uniform"
      : run.o.distribution == Distribution::kZipfian ? "zipfian"
                                                     : "latest",
      run.o.theta, committed_in_time, committed_in_time / seconds, committed_in_time / seconds, attempts, aborts,
      attempts > 0 ? static_cast<double>(aborts) / static_cast<double>(attempts) : 0.0, run.gave_up.load(),
      total.p50_us, total.p90_us, total.p99_us, total.max_us);
  if (run.bank) {
    const bool ok = final_total && *final_total == run.bank->expected_total() && run.broken.count.load() == 0;
    json += fmt::format(
        "\"accounts\":{},\"initial_balance\":{},\"audit_fraction\":{:.3f},\"audit_span\":{},\"transfers\":{},"
        "\"skipped_transfers\":{},\"audits\":{},\"full_audits\":{},\"final_total\":{},\"expected_total\":{},"
        "\"invariant_ok\":{},",
        run.bank->accounts(), run.bank->initial_balance(), run.o.audit_fraction,
        std::min(run.o.audit_span, run.bank->accounts()), run.transfers.load(), run.skipped.load(), run.audits.load(),
        run.full_audits.load(), final_total ? std::to_string(*final_total) : "null", run.bank->expected_total(),
        ok ? "true" : "false");
  } else {
    json += fmt::format("\"txn_ops\":{},\"txn_read_fraction\":{:.3f},\"gets\":{},\"puts\":{},", run.o.txn_ops,
                        run.o.txn_read_fraction, run.gets.load(), run.puts.load());
  }
  json += fmt::format("{},\"windows\":[{}],\"drain_s\":{:.2f},\"errors\":{}", check, windows, elapsed - seconds,
                      run.errors.count.load());
  return json;
}

}  // namespace

int RunTxnBench(const TxnBenchOptions& options, Store& store, std::vector<std::unique_ptr<StoreSession>>& sessions,
                Hogs& hogs, std::ostream* csv, const std::string& json_head) {
  std::optional<Bank> bank;
  if (options.workload == "bank") bank.emplace(options.keys, options.initial_balance);
  Run run(options, std::move(bank));
  const Client::Stats before = store.stats();
  const auto run_start = Clock::now();
  const auto end =
      run_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.seconds));
  if (Status s = hogs.Update(0); !s.ok()) {
    std::fprintf(stderr, "cell-bench: %s\n", s.ToString().c_str());
    return 2;
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < options.threads; ++t) pool.emplace_back([&run, &sessions, t] { Worker(run, t, *sessions[t]); });

  // The time series: every interval, the transactions that committed in it.
  Client::Stats last = before;
  uint64_t last_aborts = 0, committed_in_time = 0;
  std::vector<float> all, interval;
  std::vector<std::pair<double, size_t>> interval_ends;
  for (auto tick = run_start; tick < end && !run.aborted.load();) {
    const auto from = tick;
    tick = std::min(end, tick + std::chrono::milliseconds(options.interval_ms));
    std::this_thread::sleep_until(tick);  // the sampling period, not synchronisation
    interval.clear();
    for (auto& r : run.recorders) r.Drain(&interval);
    all.insert(all.end(), interval.begin(), interval.end());
    IntervalRow row;
    row.t_s = std::chrono::duration<double>(tick - run_start).count();
    interval_ends.emplace_back(row.t_s, all.size());
    row.interval_s = std::chrono::duration<double>(tick - from).count();
    row.latency = Summarize(&interval);
    row.ops = row.latency.count;
    committed_in_time += row.ops;
    const Client::Stats now = store.stats();
    const double server = static_cast<double>(now.server_searches - last.server_searches);
    const double client_side = static_cast<double>(now.client_searches - last.client_searches);
    row.server_fraction = server + client_side > 0 ? server / (server + client_side) : 0;
    row.retries = now.retries - last.retries;
    const uint64_t aborts = run.aborts.load();
    row.aborts = aborts - last_aborts;
    last_aborts = aborts;
    if (Status s = hogs.Update(row.t_s); !s.ok()) run.errors.Add("hogs: " + s.ToString());
    row.hogs = hogs.running();
    last = now;
    if (csv != nullptr) *csv << CsvRow(row) << "\n";
  }
  run.stop = true;
  hogs.StopAll();
  for (auto& th : pool) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - run_start).count();
  for (auto& r : run.recorders) r.Drain(&all);  // those that ended after the end count for latency only
  if (csv != nullptr) csv->flush();
  if (run.aborted.load()) {
    std::fprintf(stderr, "cell-bench: the run stopped after %.2f s: %s\n", elapsed,
                 run.session_failures.First().c_str());
    return 1;
  }

  std::optional<int64_t> final_total;
  if (run.bank) {
    int64_t sum = 0;
    const Status s = run.bank->Total(*sessions[0], &sum, &run.histories.back());
    if (s.ok()) {
      final_total = sum;
      if (sum != run.bank->expected_total()) {
        run.broken.Add(fmt::format("the final audit found {}, not {}", sum, run.bank->expected_total()));
      }
    } else {
      run.broken.Add(s.ToString());
    }
  }
  // The history's check, after everything else (it takes its time, not the run's).
  std::string check_json = "\"checker\":\"not run\"";
  bool serializable = true;
  if (options.check) {
    const auto check_start = Clock::now();
    std::vector<const ThreadHistory*> threads;
    size_t bytes = 0;
    for (const ThreadHistory& history : run.histories) {
      threads.push_back(&history);
      bytes += history.bytes();
    }
    const Bank* bank = run.bank ? &*run.bank : nullptr;
    const HistoryCheck check =
        CheckHistory(threads, [bank](uint64_t i) { return bank != nullptr ? bank->Key(i) : fmt::format("key#{}", i); });
    const double check_s = std::chrono::duration<double>(Clock::now() - check_start).count();
    check_json = HistoryCheckJson(check, check_s, bytes);
    serializable = check.ok;
    if (!check.ok) {
      std::fprintf(stderr, "cell-bench: the history is not serializable: %s\n", check.summary.c_str());
      for (const std::string& anomaly : check.anomalies) std::fprintf(stderr, "  %s\n", anomaly.c_str());
    }
  }
  const std::string windows = WindowsJson(all, interval_ends, options.windows);  // before `all` is reordered
  const LatencySummary total = Summarize(&all);
  if (run.errors.count.load() > 0) {
    std::fprintf(stderr, "cell-bench: %llu failed transactions or wrong results, the first: %s\n",
                 static_cast<unsigned long long>(run.errors.count.load()), run.errors.First().c_str());
  }
  if (run.broken.count.load() > 0) {
    std::fprintf(stderr, "cell-bench: the bank's invariant broke (%llu times), the first: %s\n",
                 static_cast<unsigned long long>(run.broken.count.load()), run.broken.First().c_str());
  }
  std::printf(
      "{%s,%s}\n", json_head.c_str(),
      SummaryJson(run, total, committed_in_time, options.seconds, elapsed, windows, final_total, check_json).c_str());
  std::fflush(stdout);
  return run.errors.count.load() == 0 && run.broken.count.load() == 0 && serializable ? 0 : 1;
}

}  // namespace cell::bench
