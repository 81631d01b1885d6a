// cell-bench's closed-loop window: at most `depth` operations in flight per bench thread, refilled in batches that
// go out as one write. One class for both kinds of session (bench/store.h): a session that completes operations
// only in its own thread is driven while the window waits; otherwise completions arrive on the store's threads.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "bench/store.h"

namespace cell::bench {

// A window of at most `depth` operations in flight. Operations of a session that completes them only in its own
// thread (Redis: that thread reads the replies) complete while the window waits by driving the session; otherwise
// (Cell) they complete on the store's threads and the window waits for their Release, having flushed the session's
// held requests first. Either way a refill (the operations that fill the window again after a wait) goes out
// together, as one write, when the window is full again, however many completed while the thread waited (Cell's I/O
// thread may complete more than the wait asked for before the thread runs). Outside a refill, requests go out
// together while the window is at least half full: below that (operations that complete at once, such as Cell's
// client-side searches, keep it low) each goes out before the next operation starts, since holding it would only
// delay it.
//
// The count is one atomic word, and the thread waits for it on a futex: a Release takes no lock, and wakes the
// thread (one system call) only at a count it may wait for (the refill's, or 0), and only while it waits. A mutex and a
// condition variable cost a store whose completions run on other threads more: a futex call in each of the wait, the
// notify and the woken thread's next unlock, and a sleep whenever a completing thread preempts the window's thread
// holding the mutex. The harness must not charge its own waiting to the store it measures.
class Window {
 public:
  // `refill_at`: once the window is full, the thread waits until no more than this many are in flight, then issues
  // again (depth - 1: as soon as one completes).
  Window(int depth, StoreSession& session, int refill_at)
      : depth_(depth),
        refill_at_(std::clamp(refill_at, 0, depth - 1)),
        session_(session),
        driven_(session.completes_in_caller()) {}
  // A Release may still be returning on another thread after Drain saw its count: the window outlives it.
  ~Window() {
    while (releasing_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  void Acquire() {
    const int in_flight = in_flight_.load(std::memory_order_acquire);
    if (in_flight >= depth_) {
      session_.Flush();
      WaitFor(refill_at_);
      // This operation and the rest of the refill: held until the window is full.
      refill_left_ = depth_ - in_flight_.load(std::memory_order_acquire);
    } else if (refill_left_ == 0 && 2 * in_flight < depth_) {
      session_.Flush();
    }
    if (refill_left_ > 0) --refill_left_;
    in_flight_.fetch_add(1, std::memory_order_relaxed);
  }
  // On any thread, once per Acquire.
  void Release() {
    releasing_.fetch_add(1, std::memory_order_relaxed);
    const int now = in_flight_.fetch_sub(1, std::memory_order_seq_cst) - 1;
    // Only the counts a waiter waits for (Acquire's refill_at_, Drain's 0) wake it: while it waits nothing is added,
    // so the count passes through each of them. The flag is only read here, never cleared: a Release that reaches
    // the count the thread is not waiting for must not use up the wake-up of the one that reaches the count it is.
    if ((now == refill_at_ || now == 0) && asleep_.load(std::memory_order_seq_cst)) {
      syscall(SYS_futex, &in_flight_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    }
    releasing_.fetch_sub(1, std::memory_order_release);
  }
  void Drain() {
    session_.Flush();
    WaitFor(0);
  }

 private:
  static_assert(sizeof(std::atomic<int>) == sizeof(int), "the futex is the count itself");
  // Returns once no more than `target` are in flight: by driving the session (its completions run only in this
  // thread), else asleep on the count's futex until a Release passes `target`.
  void WaitFor(int target) {
    if (driven_) {
      // Every operation in flight has a reply to come (or has failed and completed), so this ends.
      while (in_flight_.load(std::memory_order_acquire) > target) session_.AwaitCompletion();
      return;
    }
    while (true) {
      const int seen = in_flight_.load(std::memory_order_acquire);
      if (seen <= target) {
        asleep_.store(false, std::memory_order_relaxed);
        return;
      }
      // Announced before the count is read again: a Release that then passes `target` sees it and wakes this thread,
      // or the check below (or the futex's own check of the word) sees the Release.
      asleep_.store(true, std::memory_order_seq_cst);
      if (in_flight_.load(std::memory_order_seq_cst) == seen) {
        syscall(SYS_futex, &in_flight_, FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
      }
    }
  }

  std::atomic<int> in_flight_{0};
  std::atomic<bool> asleep_{false};  // the window's thread waits (or is about to) on in_flight_; cleared by it alone
  std::atomic<int> releasing_{0};    // Releases under way
  int refill_left_ = 0;              // operations of the current refill still to be issued (only this thread's)
  const int depth_;
  const int refill_at_;
  StoreSession& session_;
  const bool driven_;
};

}  // namespace cell::bench
