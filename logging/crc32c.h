// CRC32C (Castagnoli, the iSCSI polynomial), computed by Intel's ISA-L (hardware-accelerated where the CPU can).
// Stored checksums are masked: a CRC of bytes that themselves contain CRCs (a log record holding a checkpoint's
// header, say) is weak, so what is stored is Mask(crc), a rotation plus a constant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cell::logging::crc32c {

// The CRC32C of data (the standard one: "123456789" gives 0xE3069283).
uint32_t Value(std::string_view data);
// The CRC32C of A + data, given crc = Value(A).
uint32_t Extend(uint32_t crc, std::string_view data);

inline constexpr uint32_t kMaskDelta = 0x9e3779b9u;
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
inline uint32_t Unmask(uint32_t masked) {
  const uint32_t rotated = masked - kMaskDelta;
  return (rotated >> 17) | (rotated << 15);
}

}  // namespace cell::logging::crc32c
