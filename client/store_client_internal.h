// What the client's pieces (store_client.cc, request_op.cc, one_sided_search.cc) share: which threads are the
// client's own, and small helpers for measuring and sorting outcomes. Internal to client/.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "cell/status.h"

namespace cell::client {

// Marks the calling thread as one of this client's (its timer thread, a connecting thread), where callbacks run.
void MarkClientThread();
// A synchronous operation waits for replies, connections and timers that this client's and the transports' threads
// deliver: FailedPrecondition if called on one of them (in a callback).
Status CheckMayWait();

// What is left of `deadline`, at least 1 ms (a transport's timeout must not be zero).
inline std::chrono::milliseconds Remaining(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

inline double MicrosBetween(std::chrono::steady_clock::time_point begin, std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double, std::micro>(end - begin).count();
}

}  // namespace cell::client
