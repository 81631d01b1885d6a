// Little-endian fixed-width integers: the one codec for every integer Cell puts in bytes it writes to a file or a
// socket (wire frames in rpc/frame.h, the verbs connection hello in rpc/verbs/verbs_link.h, log fragments in
// logging/log_format.h, region log records in logging/region_log.h, checkpoint files in logging/checkpoint.h).
//
// Those formats are defined as little-endian byte sequences, not as the host's memory layout, so they are written and
// read a byte at a time with shifts: the result is the same on any host, needs no alignment, and compilers turn each
// loop into a single load or store on little-endian machines.
//
//   PutFixed32(&out, v)          appends 4 bytes to a std::string
//   EncodeFixed32(p, v)          writes 4 bytes at p (the caller owns the room)
//   DecodeFixed32(p)             reads 4 bytes at p (the caller checked they are there)
//   LittleEndianReader r(bytes)  takes fields off the front of untrusted bytes, false once they run short
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cell {
namespace little_endian_internal {

template <typename T>
inline void Encode(char* out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff);
}

template <typename T>
inline T Decode(const char* in) {
  uint64_t value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return static_cast<T>(value);
}

template <typename T>
inline void Put(std::string* out, T value) {
  char bytes[sizeof(T)];
  Encode<T>(bytes, value);
  out->append(bytes, sizeof(T));
}

}  // namespace little_endian_internal

// Writes `value` as 2, 4 or 8 little-endian bytes at `out`.
inline void EncodeFixed16(char* out, uint16_t value) { little_endian_internal::Encode(out, value); }
inline void EncodeFixed32(char* out, uint32_t value) { little_endian_internal::Encode(out, value); }
inline void EncodeFixed64(char* out, uint64_t value) { little_endian_internal::Encode(out, value); }

// Appends `value` as 2, 4 or 8 little-endian bytes to `out`.
inline void PutFixed16(std::string* out, uint16_t value) { little_endian_internal::Put(out, value); }
inline void PutFixed32(std::string* out, uint32_t value) { little_endian_internal::Put(out, value); }
inline void PutFixed64(std::string* out, uint64_t value) { little_endian_internal::Put(out, value); }

// Reads the 2, 4 or 8 little-endian bytes at `in`.
inline uint16_t DecodeFixed16(const char* in) { return little_endian_internal::Decode<uint16_t>(in); }
inline uint32_t DecodeFixed32(const char* in) { return little_endian_internal::Decode<uint32_t>(in); }
inline uint64_t DecodeFixed64(const char* in) { return little_endian_internal::Decode<uint64_t>(in); }

// Takes fields off the front of bytes that may be short or malformed (a record read back from disk). Each Read
// returns false, and takes nothing, when fewer bytes are left than the field needs; the caller turns that into its
// own Corruption status, naming what it was reading.
class LittleEndianReader {
 public:
  explicit LittleEndianReader(std::string_view bytes) : rest_(bytes) {}

  bool ReadU8(uint8_t* value) {
    if (rest_.empty()) return false;
    *value = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    return true;
  }
  bool ReadFixed16(uint16_t* value) { return ReadFixed(value); }
  bool ReadFixed32(uint32_t* value) { return ReadFixed(value); }
  bool ReadFixed64(uint64_t* value) { return ReadFixed(value); }
  // Copies the next `n` bytes into `out`.
  bool ReadBytes(size_t n, std::string* out) {
    if (rest_.size() < n) return false;
    out->assign(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return true;
  }

  // The bytes not read yet.
  std::string_view rest() const { return rest_; }

 private:
  template <typename T>
  bool ReadFixed(T* value) {
    if (rest_.size() < sizeof(T)) return false;
    *value = little_endian_internal::Decode<T>(rest_.data());
    rest_.remove_prefix(sizeof(T));
    return true;
  }

  std::string_view rest_;
};

}  // namespace cell
