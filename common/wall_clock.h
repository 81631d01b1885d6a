// Wall-clock time in microseconds since the epoch: what versions, lock expiries and generation ids are made of (they
// must go on growing across restarts, which a monotonic clock does not promise). Intervals use steady_clock.
#pragma once

#include <chrono>
#include <cstdint>

namespace cell {

inline uint64_t WallMicros() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

}  // namespace cell
