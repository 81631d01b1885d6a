// The harness's measurements: latency samples per interval and for the whole run, and the time series it writes
// (one CSV row per interval). Thread-safe: workers record, a sampler thread takes each interval.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cell::bench {

struct LatencySummary {
  uint64_t count = 0;
  double p50_us = 0, p90_us = 0, p99_us = 0, max_us = 0;
};

// Latencies in microseconds, recorded by one worker and drained by the sampler each interval.
class LatencyRecorder {
 public:
  void Record(double us);
  // Moves the samples recorded since the last call to the end of *out.
  void Drain(std::vector<float>* out);

 private:
  std::mutex mu_;
  std::vector<float> samples_;
};

// Summarises `samples` (reordered in place): percentiles by rank.
LatencySummary Summarize(std::vector<float>* samples);

// One row of the time series.
struct IntervalRow {
  double t_s = 0;  // end of the interval, from the start of the run phase
  double interval_s = 0;
  uint64_t ops = 0;
  LatencySummary latency;      // of the operations that completed in the interval
  double server_fraction = 0;  // of the searches decided in the interval
  uint64_t retries = 0;
  double target_rate = 0;  // open loop: the arrival rate asked for (0: closed loop)
  int hogs = 0;            // CPU hog processes running at the end of the interval
  uint64_t aborts = 0;     // transactional workloads: attempts that conflicted, of the transactions ended in it
};

std::string CsvHeader();
std::string CsvRow(const IntervalRow& row);

// The exact summaries of parts of a run, for the JSON summary's "windows": for each (from_s, to_s), the samples of
// the intervals that ended within it, as {"from_s":..,"to_s":..,"ops":..,"p50_us":..,"p90_us":..,"p99_us":..,
// "max_us":..}, joined by commas. `all` holds the run's samples in the order of its intervals (not yet reordered by
// Summarize); `interval_ends` each interval's end (s from the start) and where its samples end in `all`.
std::string WindowsJson(const std::vector<float>& all, const std::vector<std::pair<double, size_t>>& interval_ends,
                        const std::vector<std::pair<double, double>>& windows);

}  // namespace cell::bench
