// Diagnostics for operators: one line per event on stderr, with a severity letter and a UTC timestamp, through
// spdlog. ("Log" in this tree means the write-ahead log, logging/; these are diagnostics.)
//
//   diag::Warning("closing connection from {}: {}", peer, status.ToString());
//
// The level is CELL_DIAG_LEVEL's (debug, info, warning, error or off; default info). A line that can repeat at a
// high rate (one per failed request, say) goes through a RateLimit.
#pragma once

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <utility>

namespace cell::diag {

// The process's diagnostics logger (stderr), made on first use.
spdlog::logger& Logger();

template <typename... Args>
void Debug(fmt::format_string<Args...> format, Args&&... args) {
  Logger().debug(format, std::forward<Args>(args)...);
}
template <typename... Args>
void Info(fmt::format_string<Args...> format, Args&&... args) {
  Logger().info(format, std::forward<Args>(args)...);
}
template <typename... Args>
void Warning(fmt::format_string<Args...> format, Args&&... args) {
  Logger().warn(format, std::forward<Args>(args)...);
}
template <typename... Args>
void Error(fmt::format_string<Args...> format, Args&&... args) {
  Logger().error(format, std::forward<Args>(args)...);
}

// At most `per_second` lines a second from one place (a static RateLimit beside the line); the rest are counted, and
// the next line let through says how many were dropped:
//
//   static diag::RateLimit limit;
//   if (uint64_t dropped; limit.Allow(&dropped)) diag::Warning("refused a request: {} ({} like it dropped)", ...);
class RateLimit {
 public:
  explicit RateLimit(uint32_t per_second = 10) : per_second_(per_second) {}
  // True if a line may be written now (*dropped: how many were refused since the last one let through).
  bool Allow(uint64_t* dropped);

 private:
  const uint32_t per_second_;
  std::atomic<int64_t> window_{0};  // the second (steady clock) being counted
  std::atomic<uint32_t> in_window_{0};
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace cell::diag
