// Diagnostics for operators: one line per event on stderr, with a UTC timestamp and a severity letter.
//
//   LogWarning("closing connection from {}: {}", peer, status.ToString());
#pragma once

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

namespace cell {

template <typename... Args>
void Log(char severity, fmt::format_string<Args...> format, Args&&... args) {
  const auto now = std::chrono::system_clock::now();
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::string line =
      fmt::format("{} {:%Y-%m-%d %H:%M:%S}.{:06d} ", severity, std::chrono::floor<std::chrono::seconds>(now), micros);
  fmt::format_to(std::back_inserter(line), format, std::forward<Args>(args)...);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

template <typename... Args>
void LogInfo(fmt::format_string<Args...> format, Args&&... args) {
  Log('I', format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogWarning(fmt::format_string<Args...> format, Args&&... args) {
  Log('W', format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogError(fmt::format_string<Args...> format, Args&&... args) {
  Log('E', format, std::forward<Args>(args)...);
}

}  // namespace cell
