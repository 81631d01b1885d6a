// What cell-bench's transactional workloads (bench/txn_workload.h) did, recorded as they run, and its conversion into
// a history for the serializability checker (bench/serializability.h), so that a run can say whether what its
// transactions saw was (strictly) serializable, on any store.
//
// Tags. Every write of the bank and of txn-mix is a read-modify-write of a key its transaction read, and stores with
// the value a tag naming that write: the bank's value is "<balance> <tag>", txn-mix's "<tag>:" then the shape's value.
// A tag is unique to one write of one run: bits 62..45 the run's nonce (random and nonzero, so that a --no-load run
// does not take an earlier run's tags for its own), 44..36 the thread, 35..0 the thread's count of writes (from 1).
// The load writes tag 0, and a value without a tag (a YCSB load's) reads as tag 0. Values do not grow: a write
// replaces the tag.
//
// Recording (ThreadHistory: one per bench thread, no locks). Per attempt of a transaction (each run of its body): its
// real-time bounds (steady_clock, ns: from the body's start to the return of RunTransaction for the last attempt, to
// the next attempt's start for the others), its outcome (the last attempt's from RunTransaction's status: committed
// if OK, unknown if Unavailable or DeadlineExceeded (the commit may have landed), aborted otherwise; the others are
// aborted, since a store runs a body again only after a conflict) and its operations: each key read with the tag
// read, and each write as (key, the tag its read saw, the new tag). An audit's scan is a read of each account it saw.
// 24 bytes an operation and 32 an attempt. Threads record transactions until the run's budget (--check-max-txns) is
// spent, then stop (a cut, below). The check runs after the run; its time and memory grow with the transactions
// recorded (the history's micro-operations and the checker's graph: the audits' reads are most of it), which is why
// the budget exists (docs/BENCHMARKS.md, "Transactions").
//
// Conversion (ConvertHistory). Per key, each write links its new tag to the tag it read, so the key's versions form a
// tree rooted at the tag the key held before the run (0 after a load):
//   * A version that two transactions both read and overwrote, both committed (or of unknown outcome, but read from
//     by one that counts), is a fork: one of the two updates is lost. It is reported as incompatible-order ("lost
//     update"): no single version order holds both branches. (The checker alone sees it only once both are read.)
//   * A tag read that no recorded write put in that key (a tag of this run's never written, or written to another
//     key), or a second tag from before the run in one key: garbage-element.
//   * Every other version becomes a list-append list: the path of writes from the root, as elements
//     (thread + 1) * 10^12 + count. Each branch's list is kept once and shared by its reads (ReadPrefix), so a hot
//     key costs its length once. A read of tag t is the prefix up to t, a write an Append of the new tag; reads come
//     from committed and unknown attempts only (an aborted attempt's reads are void; its writes stay, as an aborted
//     transaction's appends, so that a committed transaction that read one is G1a).
//   * Audits become reads of the accounts they saw, not scans: the bank never creates or deletes an account, and an
//     audit that missed one fails on its own (Bank::Audit).
// The checker then names every other anomaly, with real-time order: strict serializability, which Cell guarantees
// and PostgreSQL (SERIALIZABLE) and Redis (WATCH/MULTI/EXEC) give on one server.
//
// A cut: transactions started once the budget is spent are not recorded, but a recorded transaction still running
// may read what they wrote. Such a tag is known to be unrecorded (its count is at or past the count its thread had
// reached when it stopped); an attempt that read one is dropped, then every attempt that read a version a dropped one
// wrote, until none is left. The history checked is then closed under reads-from, so every dependency the checker
// infers from it is real: what it reports is an anomaly of the run; one that involved a dropped transaction may be
// missed. (The budget is shared, so every thread stops within a transaction of the others: few are dropped.)
//
// Anomalies name transactions T1.. (attempts, by their start), keys by the caller's key_name (cell-bench: the bank's
// account keys; txn-mix's "key#<index>", short enough to be kept inline), and versions by their elements.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bench/serializability.h"
#include "cell/status.h"

namespace cell::bench {

// --- Tags and the values that carry them. ---

// A random nonce for a run's tags (1 .. 2^18 - 1).
uint32_t NewRunNonce();
// The element that stands for a tag of this run in the checker's lists: (thread + 1) * 10^12 + count.
int64_t TagElement(uint64_t tag);

// The bank's "<balance> <tag>".
std::string BankValue(int64_t balance, uint64_t tag);
// "<balance> <tag>", or a bare "<balance>" (tag 0); false for anything else.
bool ParseBankValue(std::string_view value, int64_t* balance, uint64_t* tag);
// txn-mix's "<tag>:<value>".
std::string TaggedValue(uint64_t tag, std::string_view value);
// The tag of a txn-mix value, and the rest of it (the shape's value); a value without a "<digits>:" prefix has tag 0
// and is all rest.
std::string_view SplitTag(std::string_view value, uint64_t* tag);

// --- Recording. ---

enum class AttemptOutcome : uint8_t { kCommitted, kAborted, kUnknown };

// One bench thread's tags and record (see the file comment). Not thread-safe: its thread's alone.
class ThreadHistory {
 public:
  // The tag a write whose read was not recorded claims to have read: a bug of the harness, reported as malformed.
  static constexpr uint64_t kNoRead = ~uint64_t{0};

  struct Op {
    uint64_t key;      // the key's index (the bank's account, txn-mix's key)
    uint64_t read;     // the tag read
    uint64_t written;  // the tag written, 0 for a read only
  };
  struct Attempt {
    int64_t begin_ns;
    int64_t end_ns;
    uint64_t first_op;  // its operations: ops()[first_op, the next attempt's first_op)
    AttemptOutcome outcome;
  };

  static int64_t Now();

  // `thread` below 512; `max_txns`: the transactions it records before it stops (0: tags only, no record). With
  // `budget` (shared by a run's threads), each transaction recorded also takes one from it, and every thread stops
  // once it is spent: the cut falls at about the same time in every thread, so that few recorded transactions read
  // unrecorded writes.
  ThreadHistory(uint32_t nonce, int thread, uint64_t max_txns, std::atomic<int64_t>* budget = nullptr);

  uint64_t NewTag() { return base_ | ++writes_; }
  bool recording() const { return recording_; }

  // A transaction's start: from here on it is recorded whole, or (past max_txns) not at all.
  void BeginTransaction();
  // Each run of the transaction's body, at its start.
  void BeginAttempt(int64_t now_ns = Now());
  void Read(uint64_t key, uint64_t tag) {
    if (recording_) ops_.push_back({key, tag, 0});
  }
  // A write of `key` with `tag`: the read-modify-write of this attempt's last read of it.
  void Wrote(uint64_t key, uint64_t tag);
  // The transaction's end: `status` is what RunTransaction returned.
  void EndTransaction(const Status& status, int64_t now_ns = Now());

  int thread() const { return thread_; }
  uint32_t nonce() const { return nonce_; }
  const std::vector<Attempt>& attempts() const { return attempts_; }
  const std::vector<Op>& ops() const { return ops_; }
  uint64_t recorded_txns() const { return txns_; }
  // The count from which this thread's writes went unrecorded (a cut), or none.
  uint64_t unrecorded_from() const { return unrecorded_from_; }
  bool cut() const { return unrecorded_from_ != kNever; }
  size_t bytes() const { return attempts_.capacity() * sizeof(Attempt) + ops_.capacity() * sizeof(Op); }

 private:
  static constexpr uint64_t kNever = ~uint64_t{0};

  uint32_t nonce_;
  int thread_;
  uint64_t base_;
  uint64_t writes_ = 0;
  uint64_t max_txns_;
  std::atomic<int64_t>* budget_;
  uint64_t txns_ = 0;
  uint64_t unrecorded_from_ = kNever;
  bool recording_ = false;  // the current transaction is recorded
  bool open_ = false;       // an attempt of it is open
  std::vector<Attempt> attempts_;
  std::vector<Op> ops_;
};

// --- Conversion and check. ---

struct ConvertedHistory {
  serializability::History history;
  // What the conversion itself found (forks as incompatible-order, garbage tags, malformed records), the first
  // CheckOptions::max_reports_per_type of each type described, all counted.
  std::vector<serializability::Anomaly> anomalies;
  std::map<serializability::AnomalyType, size_t> anomaly_counts;
  size_t dropped = 0;  // attempts dropped after a cut
  bool cut = false;    // a thread stopped recording
};

// The threads' records (any order; `key_name` names a key's index in descriptions) as one history, transactions
// numbered T1.. by the start of their attempts.
ConvertedHistory ConvertHistory(const std::vector<const ThreadHistory*>& threads,
                                const std::function<std::string(uint64_t key)>& key_name,
                                const serializability::CheckOptions& options = {});

struct HistoryCheck {
  bool ok = true;
  size_t checked_txns = 0;  // committed transactions the checker saw (those of unknown outcome it counted included)
  size_t dropped_txns = 0;  // after a cut
  bool cut = false;
  std::vector<std::string> anomalies;            // the first `max_descriptions`, the conversion's first
  std::map<std::string, size_t> anomaly_counts;  // by type name ("G-single", "incompatible-order", ...)
  std::string summary;                           // one line: ok or not, how many, the counts
};

// ConvertHistory, then the checker (real time on).
HistoryCheck CheckHistory(const std::vector<const ThreadHistory*>& threads,
                          const std::function<std::string(uint64_t key)>& key_name, size_t max_descriptions = 5);

// The JSON summary's fields for a check that took `seconds` of a record of `bytes`, without braces:
//   "checker":"ok"|"failed","checked_txns":N,"check_complete":true|false,"check_dropped":N,"check_s":S,
//   "history_mb":M[,"anomaly_counts":{"G-single":n,...},"anomalies":["...",...]]   (the last two when failed)
std::string HistoryCheckJson(const HistoryCheck& check, double seconds, size_t bytes);

}  // namespace cell::bench
