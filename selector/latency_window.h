// LatencyWindow: the last n latency samples of one measure (server-side searches to one server, or one-sided reads
// from it), with Cell's refinements (ATC'16 section 2.5):
//   - a sample s with |s - mean| >= K * sigma is discarded as an outlier (once the window holds enough samples to
//     judge; sigma has a floor of 1% of the mean, so a steady stream does not make every new sample an outlier);
//   - when more than half of the samples offered in one window's span are discarded, the distribution has moved (a
//     load spike, a step change): the history is dropped, and the window refills from the new samples;
//   - a window whose last sample is older than the idle limit is dropped too (stale after a quiet period);
//   - a sample older than max_age leaves the window (not in the paper, whose clients sent millions of searches a
//     second: where the side the rule does not prefer gets only the exploration's 1%, a few dozen samples a second,
//     n samples would reach back seconds, to a load that is gone).
// Pure logic: times are passed in; not thread-safe (the selector locks around it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cell::selector {

struct WindowOptions {
  size_t capacity = 100;        // n: samples kept
  double outlier_sigmas = 3.0;  // K; 0 turns outlier filtering off
  uint64_t idle_reset_us = 3'000'000;
  uint64_t max_age_us = 1'000'000;   // 0: samples leave only when newer ones push them out
  size_t min_samples_to_judge = 10;  // outliers are judged only once this many samples are kept
};

class LatencyWindow {
 public:
  explicit LatencyWindow(const WindowOptions& options = {});

  // Offers a sample taken at `now_us`. Returns false if it was discarded as an outlier (or is not a latency: NaN,
  // infinite or negative).
  bool Add(double latency_us, uint64_t now_us);
  // Drops the history if it has been idle past the limit at `now_us`, and the samples older than max_age.
  void Expire(uint64_t now_us);
  void Clear();

  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  double mean() const { return count_ == 0 ? 0 : sum_ / static_cast<double>(count_); }
  double stddev() const;
  // The lowest sample kept since the history was last dropped.
  double min() const { return min_; }
  // The lowest sample kept since the window was created or last idle (0 before the first): what a request costs
  // with no queue. Drops of the history for outliers keep it, since after a step up (a queue building) the new
  // samples' minimum would hide the queue; an idle gap drops it with the rest.
  double floor() const { return floor_; }

  uint64_t discarded() const { return discarded_total_; }
  uint64_t resets() const { return resets_; }  // history dropped (outlier majority or idle)

 private:
  WindowOptions options_;
  std::vector<double> ring_;
  std::vector<uint64_t> times_;  // when each sample of ring_ was taken
  size_t next_ = 0, count_ = 0;
  double sum_ = 0, sum_sq_ = 0, min_ = 0, floor_ = 0;
  bool has_floor_ = false;
  uint64_t last_us_ = 0;
  // The span of the current window: samples offered, and of those discarded.
  size_t offered_in_span_ = 0, discarded_in_span_ = 0;
  uint64_t discarded_total_ = 0, resets_ = 0;
};

}  // namespace cell::selector
