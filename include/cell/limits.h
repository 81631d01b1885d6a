// The size limits of keys and values, the same for every Cell operation.
#pragma once

#include <cstddef>

namespace cell {

// Keys are 1..255 bytes, ordered bytewise (memcmp order, a proper prefix sorts first).
inline constexpr size_t kMinKeySize = 1;
inline constexpr size_t kMaxKeySize = 255;
// Values are 0..1 MiB.
inline constexpr size_t kMaxValueSize = size_t{1} << 20;

}  // namespace cell
