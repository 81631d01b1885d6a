// Latency recording and the time series (see series.h).
#include "bench/series.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cell::bench {

LatencySummary Summarize(std::vector<float>* samples) {
  LatencySummary s;
  s.count = samples->size();
  if (samples->empty()) return s;
  const auto at = [&](double p) {
    // The nearest rank: the smallest sample with at least p of the samples at or below it.
    const double rank = std::ceil(p * static_cast<double>(samples->size()));
    const size_t i = std::min(samples->size() - 1, static_cast<size_t>(std::max(rank, 1.0)) - 1);
    std::nth_element(samples->begin(), samples->begin() + static_cast<std::ptrdiff_t>(i), samples->end());
    return static_cast<double>((*samples)[i]);
  };
  s.p50_us = at(0.50);
  s.p90_us = at(0.90);
  s.p99_us = at(0.99);
  s.max_us = *std::max_element(samples->begin(), samples->end());
  return s;
}

void LatencyRecorder::Record(double us) {
  std::lock_guard lock(mu_);
  samples_.push_back(static_cast<float>(us));
}

void LatencyRecorder::Drain(std::vector<float>* out) {
  std::lock_guard lock(mu_);
  out->insert(out->end(), samples_.begin(), samples_.end());
  samples_.clear();
}

std::string CsvHeader() {
  return "t_s,interval_s,ops,ops_per_s,p50_us,p90_us,p99_us,max_us,server_fraction,retries,target_rate,hogs,aborts";
}

std::string CsvRow(const IntervalRow& r) {
  const double rate = r.interval_s > 0 ? static_cast<double>(r.ops) / r.interval_s : 0;
  return fmt::format("{:.3f},{:.3f},{},{:.0f},{:.1f},{:.1f},{:.1f},{:.1f},{:.3f},{},{:.0f},{},{}", r.t_s, r.interval_s,
                     r.ops, rate, r.latency.p50_us, r.latency.p90_us, r.latency.p99_us, r.latency.max_us,
                     r.server_fraction, r.retries, r.target_rate, r.hogs, r.aborts);
}

std::string WindowsJson(const std::vector<float>& all, const std::vector<std::pair<double, size_t>>& interval_ends,
                        const std::vector<std::pair<double, double>>& windows) {
  std::string json;
  for (const auto& [from, to] : windows) {
    std::vector<float> part;
    size_t begin = 0;
    for (const auto& [t, end_index] : interval_ends) {
      if (t > from + 1e-9 && t <= to + 1e-9) part.insert(part.end(), all.begin() + begin, all.begin() + end_index);
      begin = end_index;
    }
    const LatencySummary w = Summarize(&part);
    json += fmt::format(
        "{}{{\"from_s\":{:.3f},\"to_s\":{:.3f},\"ops\":{},\"p50_us\":{:.1f},\"p90_us\":{:.1f},\"p99_us\":{:.1f},"
        "\"max_us\":{:.1f}}}",
        json.empty() ? "" : ",", from, to, w.count, w.p50_us, w.p90_us, w.p99_us, w.max_us);
  }
  return json;
}

}  // namespace cell::bench
