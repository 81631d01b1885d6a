// CRC32C through ISA-L (see crc32c.h).
#include "logging/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace cell::logging::crc32c {

uint32_t Extend(uint32_t crc, std::string_view data) {
  // ISA-L keeps the register un-inverted between calls; the standard CRC inverts it at both ends.
  uint32_t state = ~crc;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t left = data.size();
  while (left > 0) {  // its length is an int
    const size_t n = std::min<size_t>(left, INT_MAX);
    state = crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(n), state);
    p += n;
    left -= n;
  }
  return ~state;
}

uint32_t Value(std::string_view data) { return Extend(0, data); }

}  // namespace cell::logging::crc32c
