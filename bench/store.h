// The store cell-bench drives: a small interface with one implementation per store (bench/cell_store.h over the
// public Cell client, bench/redis_store.h over hiredis, bench/postgres_store.h over libpq), so that the same load
// phase, workloads, loops, time series and summary measure each, and only the operations differ.
//
// A Store hands out one StoreSession per bench thread. Operations complete through callbacks, in one of two ways:
//   on the store's own threads (Cell: the client's transport threads), whatever the bench thread is doing; or
//   only while the session's own thread is inside the session (Redis: its thread reads the replies), in Get, Put,
//   Scan, ScanReverse, AwaitCompletion, Progress and WaitUntil. completes_in_caller() says which; the harness's
//   in-flight window waits on a condition variable for the first kind and drives the session for the second.
// Requests are written as a pipelining client writes them: the ones a thread starts wait in a buffer and go out
// together when it flushes or waits (Flush, AwaitCompletion, Progress, WaitUntil, and the synchronous calls). Redis
// queues commands in its session's output buffer; Cell's requests are held when the thread holds a cell::SendHold
// (the harness's threads do); PostgreSQL's calls are synchronous.
//
// Transactions (the bank and txn-mix workloads, bench/txn_workload.h) are synchronous: RunTransaction runs a body
// against a TxnOps in one serializable transaction of the store's own and commits it, running it again on the
// store's conflict error:
//   Cell        cell::RunTransaction (Aborted from a read or Commit; the client backs off itself)
//   PostgreSQL  BEGIN ISOLATION LEVEL SERIALIZABLE ... COMMIT; SQLSTATE 40001 (serialization failure) or 40P01
//               (deadlock) from any statement
//   Redis       WATCH of every key read (and of the scan index for a scan), then MULTI, SET..., EXEC; a nil EXEC
//               (a watched key changed)
// A body must be safe to run again (it sees a fresh transaction each time) and must treat what an attempt that
// aborts read as void (Cell's reads are optimistic). It returns what the operations returned when one fails (an
// Aborted from them is the store's conflict), and OK to commit; Aborted is reserved for conflicts: a body that
// wants to give up for a reason of its own returns another error (nothing is written) and is not run again.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cell/client.h"
#include "cell/status.h"

namespace cell::bench {

// How many times a transaction is run before RunTransaction gives up with the last Aborted.
inline constexpr int kTransactionAttempts = 100;

// The operations inside one transaction (see the file comment), valid only during its body.
class TxnOps {
 public:
  virtual ~TxnOps() = default;
  // OK and the value (this transaction's own write if it made one), NotFound, or an error; Aborted: a conflict.
  virtual Status Get(std::string_view key, std::string* value) = 0;
  // Inserts or replaces, as of the commit (Redis: buffered until EXEC, and also added to the scan index; PostgreSQL
  // runs it at once, so it may return Aborted).
  virtual Status Put(std::string_view key, std::string_view value) = 0;
  // Up to `limit` pairs with keys at or after `start`, in key order, this transaction's own writes included,
  // appended to *out. The range read is part of what the commit validates (no phantoms).
  virtual Status Scan(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) = 0;
};
using TxnBody = std::function<Status(TxnOps& txn)>;

class StoreSession {
 public:
  using Clock = std::chrono::steady_clock;
  using GetDone = std::function<void(const Status& status, std::string_view value)>;
  using PutDone = std::function<void(const Status& status)>;

  virtual ~StoreSession() = default;

  // Starts a get; `done` runs exactly once, with OK and the value, NotFound, or the error. `key` need outlive only
  // the call (the harness makes the next key in the same string); `value` is valid only during the callback. A
  // callback may start further operations on this session (the read-modify-write's put).
  virtual void Get(std::string_view key, GetDone done) = 0;
  // Starts a put; `insert` says the key may be new (Redis also adds it to the index its scans read). `done` runs
  // exactly once.
  virtual void Put(std::string_view key, std::string_view value, bool insert, PutDone done) = 0;
  // Synchronously: up to `limit` pairs with keys at or after `start`, in key order, appended to *out.
  virtual Status Scan(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) = 0;
  // Synchronously: up to `limit` pairs with keys before `before` (empty: no bound), the greatest first, appended to
  // *out. The reverse of Scan, so that a walk down the key space reads pages as one up it does (bench/walk_workload.h).
  virtual Status ScanReverse(std::string_view before, size_t limit,
                             std::vector<std::pair<std::string, std::string>>* out) = 0;

  // Writes the requests this thread has started and not yet written (see the file comment). The harness calls it
  // before it waits on anything but the session.
  virtual void Flush() = 0;
  // Whether callbacks run only while this session's thread is inside it (see the file comment).
  virtual bool completes_in_caller() const = 0;
  // completes_in_caller sessions: waits until at least one outstanding operation has completed (running its
  // callback), or the session has failed (bounded by the store's timeout); returns at once if none is outstanding.
  // Others: returns at once.
  virtual void AwaitCompletion() = 0;
  // Runs the callbacks of the operations whose results have already come, without waiting.
  virtual void Progress() = 0;
  // Returns at `until`, running callbacks as results come meanwhile (a store that completes on its own threads just
  // sleeps).
  virtual void WaitUntil(Clock::time_point until) = 0;
  // OK while the session can take operations; otherwise why it cannot (a lost connection), and every operation
  // since fails with this at once. Cell's sessions never fail: its client retries.
  virtual Status status() const = 0;

  // Synchronously, on the calling thread, with no other operation of this session outstanding: runs `body` in a new
  // transaction and commits it; on the store's conflict (see the file comment) rolls back, backs off and runs it
  // again, up to kTransactionAttempts times. OK: committed. Aborted: every attempt conflicted. Otherwise the body's
  // error or the store's (nothing written). *attempts: how many times the body was started (at least 1 unless the
  // session had failed already).
  virtual Status RunTransaction(const TxnBody& body, int* attempts) = 0;
};

// The pause before running a transaction again after its `aborts`-th conflict (1, 2, ...): random up to 50 us
// doubling per conflict, at most 5 ms, so that transactions that collided do not collide again in step. PostgreSQL
// and Redis use it; Cell's client backs off on its own.
inline std::chrono::microseconds ConflictBackoff(int aborts) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  const int64_t cap = std::min<int64_t>(int64_t{50} << std::clamp(aborts - 1, 0, 20), 5000);
  return std::chrono::microseconds(std::uniform_int_distribution<int64_t>(0, cap)(rng));
}

class Store {
 public:
  virtual ~Store() = default;
  // A session for one thread (Redis: a connection of its own).
  virtual StatusOr<std::unique_ptr<StoreSession>> NewSession() = 0;
  // Cell's client counters (searches by side, retries, node cache, the selector's estimates), which the time series
  // and the summary report; a store without them reports zeros.
  virtual Client::Stats stats() const = 0;
};

}  // namespace cell::bench
