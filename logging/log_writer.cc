// The log writer: records cut into block-sized fragments (see log_format.h).
#include "logging/log_writer.h"

#include <algorithm>
#include <cstring>

#include "common/little_endian.h"
#include "logging/crc32c.h"

namespace cell::logging::log {

Writer::Writer(WritableFile* file, uint64_t file_size)
    : file_(file), size_(file_size), block_offset_(file_size % kBlockSize) {}

Status Writer::AddRecord(std::string_view record) {
  bool first = true;
  do {
    const size_t left_in_block = kBlockSize - block_offset_;
    if (left_in_block < kHeaderSize) {
      // Too little room for a header: zeros to the block's end, and on to the next block.
      static constexpr char kZeros[kHeaderSize] = {};
      if (left_in_block > 0) CELL_RETURN_IF_ERROR(file_->Append(std::string_view(kZeros, left_in_block)));
      size_ += left_in_block;
      block_offset_ = 0;
    }
    const size_t room = kBlockSize - block_offset_ - kHeaderSize;
    const size_t n = std::min(room, record.size());
    const bool last = n == record.size();
    const RecordType type = first && last ? RecordType::kFull
                            : first       ? RecordType::kFirst
                            : last        ? RecordType::kLast
                                          : RecordType::kMiddle;
    CELL_RETURN_IF_ERROR(AddFragment(type, record.substr(0, n)));
    record.remove_prefix(n);
    first = false;
  } while (!record.empty());
  return Status::OK();
}

Status Writer::AddFragment(RecordType type, std::string_view payload) {
  char header[kHeaderSize];
  const auto type_byte = static_cast<char>(type);
  const uint32_t crc = crc32c::Mask(crc32c::Extend(crc32c::Value(std::string_view(&type_byte, 1)), payload));
  EncodeFixed32(header, crc);
  EncodeFixed16(header + 4, static_cast<uint16_t>(payload.size()));  // at most a block: fits
  header[6] = type_byte;
  // One append per fragment: the header and its payload reach the file together (fragment_ is reused, so a record
  // costs no allocation once the buffer has grown).
  fragment_.assign(header, kHeaderSize);
  fragment_.append(payload);
  CELL_RETURN_IF_ERROR(file_->Append(fragment_));
  block_offset_ += fragment_.size();
  size_ += fragment_.size();
  return Status::OK();
}

}  // namespace cell::logging::log
