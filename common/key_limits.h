// The checks of a key's and a value's size (cell/limits.h) that the client, the server and the tree all apply, so a
// request is refused with the same message wherever it is caught first.
#pragma once

#include <string>
#include <string_view>

#include "cell/limits.h"
#include "cell/status.h"

namespace cell {

// OK, or InvalidArgument naming the limit for an empty or oversized key.
inline Status CheckKeySize(std::string_view key) {
  if (key.size() >= kMinKeySize && key.size() <= kMaxKeySize) return Status::OK();
  return Status::InvalidArgument("key of " + std::to_string(key.size()) + " bytes; keys must be 1.." +
                                 std::to_string(kMaxKeySize) + " bytes");
}

// CheckKeySize, then InvalidArgument naming the limit for an oversized value.
inline Status CheckKeyValue(std::string_view key, std::string_view value) {
  CELL_RETURN_IF_ERROR(CheckKeySize(key));
  if (value.size() > kMaxValueSize) {
    return Status::InvalidArgument("value of " + std::to_string(value.size()) + " bytes exceeds the " +
                                   std::to_string(kMaxValueSize) + "-byte limit");
  }
  return Status::OK();
}

}  // namespace cell
