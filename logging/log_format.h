// The write-ahead log's file format: LevelDB's framing, fixed blocks of fragments.
//
// A log file is a sequence of 32 KiB blocks (the last one may be short). A block holds fragments, each a 7-byte
// header and its payload:
//
//   +---------+---------+------+-----------------+
//   | crc: 4  | len: 2  | type |  payload: len   |     little-endian; crc = crc32c::Mask(CRC32C(type, payload))
//   +---------+---------+------+-----------------+
//
// type: kFull (a whole record), or kFirst, kMiddle..., kLast (a record cut across blocks). A fragment never crosses
// a block's end: when fewer than 7 bytes are left in a block they are zeros (a trailer), and the next fragment
// begins the next block. A record is one kFull fragment if it fits in what is left of the block, else it is cut.
// A record may be empty (a kFull of length 0). Type 0 is never written: a header of zeros reads as a corrupt
// record, and a file that ends inside a header or a payload as a torn tail (log_reader.h tells the two apart).
// The records' contents are the region log's business (region_log.h); this layer carries bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cell::logging::log {

enum class RecordType : uint8_t { kZero = 0, kFull = 1, kFirst = 2, kMiddle = 3, kLast = 4 };
inline constexpr uint8_t kMaxRecordType = 4;

inline constexpr size_t kBlockSize = 32768;
inline constexpr size_t kHeaderSize = 4 + 2 + 1;

}  // namespace cell::logging::log
