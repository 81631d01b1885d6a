// The moving latency window with Cell's outlier rule (see latency_window.h).
#include "selector/latency_window.h"

#include <algorithm>
#include <cmath>

namespace cell::selector {

LatencyWindow::LatencyWindow(const WindowOptions& options) : options_(options) {
  options_.capacity = std::max<size_t>(options_.capacity, 1);
  ring_.resize(options_.capacity);
  times_.resize(options_.capacity);
}

double LatencyWindow::stddev() const {
  if (count_ < 2) return 0;
  const double m = mean();
  return std::sqrt(std::max(0.0, sum_sq_ / static_cast<double>(count_) - m * m));
}

void LatencyWindow::Clear() {
  next_ = count_ = 0;
  sum_ = sum_sq_ = min_ = 0;
  offered_in_span_ = discarded_in_span_ = 0;
}

void LatencyWindow::Expire(uint64_t now_us) {
  // (The floor outlives the samples' ageing out, so an idle gap is judged by the last sample, kept or not.)
  if ((count_ > 0 || has_floor_) && now_us > last_us_ && now_us - last_us_ > options_.idle_reset_us) {
    if (count_ > 0) ++resets_;
    Clear();
    has_floor_ = false;  // after a quiet period the floor is measured afresh too (the path may have changed)
  }
  while (options_.max_age_us > 0 && count_ > 0) {  // the oldest samples, while too old, leave
    const size_t oldest = (next_ + options_.capacity - count_) % options_.capacity;
    if (now_us <= times_[oldest] || now_us - times_[oldest] <= options_.max_age_us) break;
    sum_ -= ring_[oldest];
    sum_sq_ -= ring_[oldest] * ring_[oldest];
    if (--count_ == 0) sum_ = sum_sq_ = 0;
  }
}

bool LatencyWindow::Add(double latency_us, uint64_t now_us) {
  if (!std::isfinite(latency_us) || latency_us < 0) return false;  // not a latency: never let it into the sums
  Expire(now_us);
  last_us_ = std::max(last_us_, now_us);
  if (++offered_in_span_ > options_.capacity) {  // a new window's span begins
    offered_in_span_ = 1;
    discarded_in_span_ = 0;
  }
  if (options_.outlier_sigmas > 0 && count_ >= options_.min_samples_to_judge) {
    const double m = mean();
    const double sigma = std::max(stddev(), 0.01 * m);
    if (std::fabs(latency_us - m) >= options_.outlier_sigmas * sigma) {
      ++discarded_total_;
      if (++discarded_in_span_ * 2 > options_.capacity) {
        // Most of a window's worth is "outliers": the latency has moved. Start again from this sample.
        Clear();
        ++resets_;
        offered_in_span_ = 1;
      } else {
        return false;
      }
    }
  }
  if (count_ == options_.capacity) {  // the oldest sample leaves
    const double old = ring_[next_];
    sum_ -= old;
    sum_sq_ -= old * old;
    --count_;
  }
  ring_[next_] = latency_us;
  times_[next_] = now_us;
  next_ = (next_ + 1) % options_.capacity;
  ++count_;
  sum_ += latency_us;
  sum_sq_ += latency_us * latency_us;
  if (next_ == 0) {
    // Once per lap, sum the samples kept afresh, so that rounding left by samples leaving never builds up.
    sum_ = sum_sq_ = 0;
    for (size_t i = options_.capacity - count_; i < options_.capacity; ++i) {
      sum_ += ring_[i];
      sum_sq_ += ring_[i] * ring_[i];
    }
  }
  min_ = count_ == 1 ? latency_us : std::min(min_, latency_us);
  floor_ = has_floor_ ? std::min(floor_, latency_us) : latency_us;
  has_floor_ = true;
  return true;
}

}  // namespace cell::selector
