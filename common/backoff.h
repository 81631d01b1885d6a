// Backoff: when to try again something that failed and may work later, and when to give up. Delays double from
// `first` up to `max`; an attempt is allowed while it would begin before the deadline and within the attempt limit.
// The client's request retries, the tree's unseals and separators sent to other servers, ZooKeeper's retry after a
// lost connection and a restarted server's wait for its old registration take their delays from one of these, so
// that they back off the same way.
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

namespace cell {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  Backoff(Clock::duration first, Clock::duration max, Clock::time_point deadline = Clock::time_point::max(),
          int max_attempts = std::numeric_limits<int>::max())
      : next_(first), max_(max), deadline_(deadline), attempts_left_(max_attempts) {}

  // The time the next attempt may begin, or nullopt if the deadline would pass first or the attempts are used up.
  std::optional<Clock::time_point> Next() {
    const Clock::time_point now = Clock::now();
    if (attempts_left_ <= 0 || next_ >= deadline_ - now) return std::nullopt;
    --attempts_left_;
    ++retries_;
    const Clock::time_point due = now + next_;
    next_ = std::min(next_ * 2, max_);
    return due;
  }
  // The delay before the next attempt (as Next(), measured from now).
  std::optional<Clock::duration> NextDelay() {
    const std::optional<Clock::time_point> due = Next();
    if (!due) return std::nullopt;
    return *due - Clock::now();
  }
  int retries() const { return retries_; }  // how often Next allowed an attempt

 private:
  Clock::duration next_;
  const Clock::duration max_;
  const Clock::time_point deadline_;
  int attempts_left_;
  int retries_ = 0;
};

}  // namespace cell
