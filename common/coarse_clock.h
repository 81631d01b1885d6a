// The kernel's last tick of steady_clock's own clock (CLOCK_MONOTONIC_COARSE): a few nanoseconds to read where a
// precise reading costs tens in a VM, for the times that need milliseconds, not nanoseconds (a request's deadline, a
// read lease's check). Never ahead of the real time; behind it by about a tick (CoarseResolution()), up to two when a
// tick comes out of phase with the timekeeping's steps, more only while the kernel's tick is held up.
#pragma once

#include <chrono>
#include <ctime>

namespace cell {

inline std::chrono::steady_clock::time_point CoarseNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::steady_clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

// The coarse clock's tick (the kernel's; 10 ms if it does not say).
inline std::chrono::nanoseconds CoarseResolution() {
  static const std::chrono::nanoseconds resolution = [] {
    timespec res{0, 10'000'000};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    return std::chrono::seconds(res.tv_sec) + std::chrono::nanoseconds(res.tv_nsec);
  }();
  return resolution;
}

// A time `after` from now, two ticks later than the coarse clock says: not earlier than a precise reading would give
// (but while the kernel's tick is held up), and later by at most two ticks. A deadline so made gives its caller the
// time asked, or a few milliseconds more.
inline std::chrono::steady_clock::time_point CoarseDeadline(std::chrono::steady_clock::duration after) {
  return CoarseNow() + 2 * CoarseResolution() + after;
}

}  // namespace cell
