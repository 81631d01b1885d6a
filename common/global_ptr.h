// GlobalPtr: the only way Cell names a byte of memory, on any server: (region id, offset in that region).
//
// Packed into one 64-bit word wherever it is stored (node entries, right links, wire messages):
//
//   bits 63..40  region id (24 bits, 1..16,777,215; 0 means "no region", so the packed null pointer is 0)
//   bits 39..0   byte offset inside the region (40 bits, regions up to 1 TiB)
//
// Which server holds a region is written in the region table (membership/), never in a pointer, so pointers stay
// valid when a region moves to another server.
#pragma once

#include <cstdint>
#include <functional>

namespace cell {

struct GlobalPtr {
  static constexpr int kOffsetBits = 40;
  static constexpr uint64_t kOffsetMask = (uint64_t{1} << kOffsetBits) - 1;
  static constexpr uint32_t kMaxRegionId = (1u << 24) - 1;
  static constexpr uint64_t kMaxOffset = kOffsetMask;

  uint32_t region = 0;
  uint64_t offset = 0;

  constexpr bool is_null() const { return region == 0; }
  constexpr uint64_t Pack() const { return (uint64_t{region} << kOffsetBits) | (offset & kOffsetMask); }
  static constexpr GlobalPtr Unpack(uint64_t word) {
    return GlobalPtr{static_cast<uint32_t>(word >> kOffsetBits), word & kOffsetMask};
  }
  constexpr GlobalPtr Plus(uint64_t bytes) const { return GlobalPtr{region, offset + bytes}; }

  friend constexpr bool operator==(const GlobalPtr& a, const GlobalPtr& b) {
    return a.region == b.region && a.offset == b.offset;
  }
};

}  // namespace cell

template <>
struct std::hash<cell::GlobalPtr> {
  size_t operator()(const cell::GlobalPtr& p) const noexcept { return std::hash<uint64_t>()(p.Pack()); }
};
