// cell-bench's transactional workloads, against any store of bench/store.h (Cell, PostgreSQL, Redis), each operation
// one serializable transaction (StoreSession::RunTransaction), run again on the store's conflict error:
//
//   bank     SmallBank-like. --keys accounts, keys "acct" + the index zero-padded to the width of the last (so that
//            they sort in index order), each loaded with --initial-balance (1000) as "<balance> <tag>" (tag 0; each
//            write's own tag after: bench/txn_history.h). With probability
//            1 - --audit-fraction a transfer: two distinct accounts chosen by the key distribution (--distribution,
//            --theta), an amount of 1..10; it reads both balances and writes both. A transfer whose source holds
//            less than the amount writes nothing and commits (it read, so it is still a transaction that validates;
//            "skipped_transfers" counts them): the application never aborts, so every abort is a store's conflict.
//            Otherwise an audit: a read-only transaction that scans --audit-span (100) consecutive accounts from a
//            uniformly random start and sums them. A partial sum says nothing alone; an audit that spans every
//            account must find the exact total, and is checked. At the end, with nothing else running, a full audit
//            by plain scans: every account there, none negative, and the sum exactly accounts * initial balance.
//            "invariant_ok" is that and every full-span audit of the run.
//   txn-mix  transactions of --txn-ops (4) operations over the --keys keys loaded as for the YCSB workloads, each a
//            get with probability --txn-read-fraction (0.5), else a put of a new value, which reads the key first (a
//            read-modify-write, so that the checker can order the writes: "<tag>:" then the shape's value); every
//            value a transaction that committed read must belong to its key.
//
// Each transaction's operations are drawn before it starts, so a retry runs the same transaction again. What an
// attempt read counts only if it commits (Cell's reads are optimistic: an attempt that aborts may have seen an
// inconsistent state), so bodies note what is wrong and the check is made after the commit.
//
// Closed loop: each of --threads threads runs transactions back to back, synchronously (unlike the YCSB workloads'
// windows of asynchronous operations: a transaction's operations depend on each other, and a synchronous loop per
// thread is how SmallBank and TPC-C clients run). A transaction's latency runs from its first attempt's start to
// its commit, retries and back-offs included; only committed transactions have one. The time series is the YCSB
// workloads' (bench/series.h): ops are committed transactions, and "aborts" counts the attempts that conflicted.
// The JSON summary adds "transactions", "transactions_per_s", "attempts", "aborts", "abort_rate" (aborts /
// attempts), "gave_up" (transactions that conflicted kTransactionAttempts times), and the serializability check.
//
// The check (--check, on by default; TxnBenchOptions::check): each thread records what its transactions read and
// wrote (bench/txn_history.h; no locks, nothing sent, so the recording does not change what is measured: its cost
// is in docs/BENCHMARKS.md), and after the run (and the
// bank's final audit, which joins the history) the record goes to the list-append checker
// (bench/serializability.h), real time included. The summary says "checker":"ok" or "failed" (then
// "anomaly_counts":{type: n} and "anomalies":[the first five]), "checked_txns" (committed transactions checked),
// "check_s" (its time, after the measured run), "history_mb" (the record), "check_complete" and "check_dropped"
// (the threads record --check-max-txns transactions in all: past that the rest of the run goes unchecked, and
// recorded ones that read an unrecorded write are dropped); a failed check is exit status 1. Without it (--no-check):
// "checker":"not run", and nothing is recorded (the values carry their tags all the same: the same workload).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/hogs.h"
#include "bench/store.h"
#include "bench/txn_history.h"
#include "bench/workload.h"
#include "cell/status.h"

namespace cell::bench {

// Whether `name` is one of this file's workloads ("bank", "txn-mix").
bool IsTxnWorkload(std::string_view name);

// The bank's accounts and its transactions.
class Bank {
 public:
  // `accounts` at least 2.
  explicit Bank(uint64_t accounts, int64_t initial_balance = 1000, std::string prefix = "acct");

  uint64_t accounts() const { return accounts_; }
  int64_t initial_balance() const { return initial_; }
  int64_t expected_total() const { return static_cast<int64_t>(accounts_) * initial_; }
  std::string Key(uint64_t i) const;

  std::string InitialValue() const { return BankValue(initial_, 0); }

  // Moves `amount` from account `from` to account `to` in one transaction; *skipped when the source held less (the
  // transaction committed, writing nothing). Corruption if a committed attempt found an account missing or not a
  // number. `history`: the thread's (its tags, and its record if it records; null: tag 0, nothing recorded).
  Status Transfer(StoreSession& session, uint64_t from, uint64_t to, int64_t amount, int* attempts, bool* skipped,
                  ThreadHistory* history = nullptr) const;
  // The sum of accounts first .. first + count - 1, read in one transaction (a scan). Corruption if the committed
  // scan did not return exactly those accounts, each a number.
  Status Audit(StoreSession& session, uint64_t first, uint64_t count, int64_t* sum, int* attempts,
               ThreadHistory* history = nullptr) const;
  // The sum of every account by plain scans (pages of 1000), for when nothing else runs: Corruption if an account
  // is missing, out of order, not a number or negative. `history` records it as one read-only transaction.
  Status Total(StoreSession& session, int64_t* sum, ThreadHistory* history = nullptr) const;

 private:
  uint64_t accounts_;
  int64_t initial_;
  std::string prefix_;
  int width_;
};

// Puts the pairs pair_of(0 .. n - 1) in transactions of up to 100 puts each: a load for a store whose single puts
// are each a commit of their own (PostgreSQL; a synchronous commit each would take minutes at 100k keys).
// `on_progress`, if given, is called with the number put so far after each transaction.
Status LoadInTransactions(StoreSession& session, uint64_t n,
                          const std::function<std::pair<std::string, std::string>(uint64_t)>& pair_of,
                          const std::function<void(uint64_t done)>& on_progress = nullptr);

struct TxnBenchOptions {
  std::string workload;  // "bank" or "txn-mix"
  uint64_t keys = 0;
  Distribution distribution = Distribution::kZipfian;
  double theta = 0.99;
  int threads = 1;
  double seconds = 3;
  int interval_ms = 100;
  uint64_t seed = 1;
  std::vector<std::pair<double, double>> windows;  // from_s, to_s: exact summaries of parts of the run
  bool check = true;                               // record the history and check it (see the file comment)
  uint64_t check_max_txns = 500'000;               // transactions recorded, all threads together
  // bank
  int64_t initial_balance = 1000;
  double audit_fraction = 0.05;
  uint64_t audit_span = 100;
  // txn-mix: the harness's keys and values (its --shape)
  int txn_ops = 4;
  double txn_read_fraction = 0.5;
  std::function<std::string(uint64_t i)> key_of;
  std::function<std::string(const std::string& key, uint64_t version)> value_of;
  std::function<bool(std::string_view value, std::string_view key)> belongs;
};

// Runs the workload for options.seconds with sessions[t] on thread t (the keys loaded already), writes the time
// series to *csv (if not null), runs the bank's final audit through sessions[0], and prints the JSON summary line:
// `json_head` (the harness's fields, without braces) followed by the workload's. Returns the process's exit status:
// 0, or 1 if an operation failed, a check failed, the invariant broke, the history was not serializable or a session
// failed (then, with a message and no summary).
int RunTxnBench(const TxnBenchOptions& options, Store& store, std::vector<std::unique_ptr<StoreSession>>& sessions,
                Hogs& hogs, std::ostream* csv, const std::string& json_head);

}  // namespace cell::bench
