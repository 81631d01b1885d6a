// Diagnostics (see diagnostics.h).
#include "common/diagnostics.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>
#include <memory>
#include <string_view>

namespace cell::diag {
namespace {

spdlog::level::level_enum LevelFromEnvironment() {
  const char* value = std::getenv("CELL_DIAG_LEVEL");
  if (value == nullptr) return spdlog::level::info;
  const std::string_view v(value);
  if (v == "debug") return spdlog::level::debug;
  if (v == "warning") return spdlog::level::warn;
  if (v == "error") return spdlog::level::err;
  if (v == "off") return spdlog::level::off;
  return spdlog::level::info;
}

}  // namespace

spdlog::logger& Logger() {
  static spdlog::logger* const logger = [] {
    // Leaked on purpose: threads may write diagnostics while static destructors run at exit.
    auto* l = new spdlog::logger("cell", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("%L %Y-%m-%d %H:%M:%S.%f %v", spdlog::pattern_time_type::utc);
    l->set_level(LevelFromEnvironment());
    l->flush_on(spdlog::level::debug);  // every line reaches stderr at once (a crash loses none)
    return l;
  }();
  return *logger;
}

bool RateLimit::Allow(uint64_t* dropped) {
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t window = window_.load(std::memory_order_relaxed);
  if (window != now && window_.compare_exchange_strong(window, now, std::memory_order_relaxed)) {
    in_window_.store(0, std::memory_order_relaxed);
  }
  if (in_window_.fetch_add(1, std::memory_order_relaxed) >= per_second_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  *dropped = dropped_.exchange(0, std::memory_order_relaxed);
  return true;
}

}  // namespace cell::diag
