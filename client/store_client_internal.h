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

// Appends to *out the wire bytes of a plain get, put or delete (proto::KeyRequest with only its target, key, value,
// meganode and want_range set), as protobuf would serialize that message (`value` null: none; a field at its default
// is left out, as proto3 does). Written directly: the request path's protobuf message, its set-up and its generic
// serializer cost more than the whole encoding.
void AppendPlainKeyRequest(uint32_t region, uint64_t epoch, std::string_view key, const std::string* value,
                           uint64_t meganode, bool want_range, std::string* out);

inline double MicrosSince(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - begin).count();
}

}  // namespace cell::client
