#include "rpc/shm/nic_model.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

namespace cell::rpc::shm {

StatusOr<NicModel> NicModel::Parse(std::string_view spec) {
  NicModel model;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument(fmt::format("NIC model item '{}' is not name=value", item));
    }
    const std::string_view name = item.substr(0, eq);
    const std::string text(item.substr(eq + 1));
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(value >= 0)) {
      return Status::InvalidArgument(
          fmt::format("NIC model value '{}' for {} is not a non-negative number", text, name));
    }
    if (name == "reads_per_s") {
      model.reads_per_s = value;
    } else if (name == "bytes_per_s") {
      model.bytes_per_s = value;
    } else if (name == "latency_us") {
      model.latency_us = value;
    } else {
      return Status::InvalidArgument(
          fmt::format("unknown NIC model parameter '{}' (known: reads_per_s, bytes_per_s, latency_us)", name));
    }
  }
  return model;
}

int64_t NicModel::BusyNanos(uint32_t bytes) const {
  double ns = 0;
  if (reads_per_s > 0) ns = 1e9 / reads_per_s;
  if (bytes_per_s > 0) ns = std::max(ns, 1e9 * bytes / bytes_per_s);
  return static_cast<int64_t>(std::min(ns, 1e15));  // absurd rates (1e-300/s) stay a finite, if long, wait
}

Clock::time_point ReserveNic(std::atomic<int64_t>* busy_until_ns, int64_t busy_ns, int64_t latency_ns) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  int64_t busy_until = busy_until_ns->load(std::memory_order_relaxed);
  int64_t start;
  do {
    start = std::max(now, busy_until);
  } while (!busy_until_ns->compare_exchange_weak(busy_until, start + busy_ns, std::memory_order_relaxed));
  return Clock::time_point(std::chrono::nanoseconds(start + busy_ns + latency_ns));
}

}  // namespace cell::rpc::shm
