// The store cell-bench drives: a small interface with one implementation per store (bench/cell_store.h over the
// public Cell client, bench/redis_store.h over hiredis), so that the same load phase, workloads, loops, time series
// and summary measure either, and only the operations differ.
//
// A Store hands out one StoreSession per bench thread. Operations complete through callbacks, in one of two ways:
//   on the store's own threads (Cell: the client's transport threads), whatever the bench thread is doing; or
//   only while the session's own thread is inside the session (Redis: its thread reads the replies), in Get, Put,
//   Scan, AwaitCompletion, Progress and WaitUntil. completes_in_caller() says which; the harness's in-flight window
//   waits on a condition variable for the first kind and drives the session for the second.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cell/client.h"
#include "cell/status.h"

namespace cell::bench {

class StoreSession {
 public:
  using Clock = std::chrono::steady_clock;
  using GetDone = std::function<void(const Status& status, std::string_view value)>;
  using PutDone = std::function<void(const Status& status)>;

  virtual ~StoreSession() = default;

  // Starts a get; `done` runs exactly once, with OK and the value, NotFound, or the error. `value` is valid only
  // during the callback. A callback may start further operations on this session (the read-modify-write's put).
  virtual void Get(std::string_view key, GetDone done) = 0;
  // Starts a put; `insert` says the key may be new (Redis also adds it to the index its scans read). `done` runs
  // exactly once.
  virtual void Put(std::string_view key, std::string_view value, bool insert, PutDone done) = 0;
  // Synchronously: up to `limit` pairs with keys at or after `start`, in key order, appended to *out.
  virtual Status Scan(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) = 0;

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
};

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
