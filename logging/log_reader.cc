// The log reader (see log_reader.h).
#include "logging/log_reader.h"

#include <fmt/format.h>

#include "common/little_endian.h"
#include "logging/crc32c.h"

namespace cell::logging::log {

Reader::Reader(SequentialFile* file) : file_(file) { block_.reserve(kBlockSize); }

bool Reader::Stop(End end, std::string message) {
  end_ = end;
  status_ = end == End::kClean ? Status::OK() : Status::Corruption(message);
  return false;
}

bool Reader::FillBlock() {
  block_start_ += block_.size();
  block_.resize(kBlockSize);
  auto n = file_->Read(kBlockSize, block_.data());
  if (!n.ok()) {
    block_.clear();
    end_ = End::kCorrupt;
    status_ = n.status();
    return false;
  }
  block_.resize(*n);
  pos_ = 0;
  eof_ = *n < kBlockSize;
  return !block_.empty();
}

bool Reader::RestIsZeros(size_t from) {
  for (;;) {
    for (size_t i = from; i < block_.size(); ++i) {
      if (block_[i] != 0) return false;
    }
    if (eof_ || !FillBlock()) return end_ == End::kNotYet;
    from = 0;
  }
}

Reader::Fragment Reader::ReadFragment(RecordType* type, std::string_view* payload) {
  for (;;) {
    if (block_.size() - pos_ < kHeaderSize) {
      if (!eof_ && block_.size() == kBlockSize) {  // a full block's trailer: on to the next block
        if (FillBlock()) continue;
        if (end_ != End::kNotYet) return Fragment::kEnd;  // a read error
        Stop(End::kClean, "");
        return Fragment::kEnd;
      }
      if (block_.empty() && !eof_) {  // the first block
        if (FillBlock()) continue;
        if (end_ != End::kNotYet) return Fragment::kEnd;
        Stop(End::kClean, "");
        return Fragment::kEnd;
      }
      const size_t left = block_.size() - pos_;
      if (left == 0) {
        Stop(End::kClean, "");
      } else {
        Stop(End::kTornTail,
             fmt::format("log ends inside a record header at offset {} ({} bytes)", block_start_ + pos_, left));
      }
      return Fragment::kEnd;
    }
    const char* h = block_.data() + pos_;
    const uint32_t stored = DecodeFixed32(h);
    const size_t length = DecodeFixed16(h + 4);
    const auto type_byte = static_cast<uint8_t>(h[6]);
    const uint64_t offset = block_start_ + pos_;
    if (type_byte == 0 && stored == 0 && length == 0) {
      if (RestIsZeros(pos_)) {
        Stop(End::kTornTail, fmt::format("log ends in zeros from offset {}", offset));
      } else if (end_ == End::kNotYet) {
        Stop(End::kCorrupt, fmt::format("log damaged at offset {}: a zero header with log after it", offset));
      }
      return Fragment::kEnd;
    }
    if (kHeaderSize + length > kBlockSize - pos_) {  // the writer never lets a fragment cross a block's end
      Stop(End::kCorrupt,
           fmt::format("log damaged at offset {}: a fragment of {} bytes crosses its block's end", offset, length));
      return Fragment::kEnd;
    }
    if (kHeaderSize + length > block_.size() - pos_) {
      if (eof_) {
        Stop(End::kTornTail, fmt::format("log ends inside a record at offset {} ({} of {} payload bytes)", offset,
                                         block_.size() - pos_ - kHeaderSize, length));
      } else {
        Stop(End::kCorrupt,
             fmt::format("log damaged at offset {}: a fragment of {} bytes crosses its block's end", offset, length));
      }
      return Fragment::kEnd;
    }
    if (type_byte == 0 || type_byte > kMaxRecordType) {
      Stop(End::kCorrupt, fmt::format("log damaged at offset {}: fragment type {}", offset, type_byte));
      return Fragment::kEnd;
    }
    const std::string_view body(block_.data() + pos_ + kHeaderSize, length);
    const uint32_t actual =
        crc32c::Extend(crc32c::Value(std::string_view(reinterpret_cast<const char*>(&type_byte), 1)), body);
    if (crc32c::Unmask(stored) != actual) {
      if (eof_ && pos_ + kHeaderSize + length == block_.size()) {
        // The file's very last fragment: a write the crash cut short (its pages reached the disk in part).
        Stop(End::kTornTail, fmt::format("log ends in a fragment that fails its checksum at offset {}", offset));
        return Fragment::kEnd;
      }
      Stop(End::kCorrupt,
           fmt::format("log damaged at offset {}: checksum mismatch in a fragment of {} bytes", offset, length));
      return Fragment::kEnd;
    }
    pos_ += kHeaderSize + length;
    *type = static_cast<RecordType>(type_byte);
    *payload = body;
    return Fragment::kOk;
  }
}

bool Reader::ReadRecord(std::string* record) {
  if (end_ != End::kNotYet) return false;
  record->clear();
  bool in_record = false;
  uint64_t record_start = 0;
  for (;;) {
    RecordType type;
    std::string_view payload;
    const uint64_t fragment_offset = block_start_ + pos_;
    if (ReadFragment(&type, &payload) == Fragment::kEnd) {
      if (in_record && end_ == End::kClean) {
        // The file ended cleanly between fragments of one record: its last fragments were never written.
        Stop(End::kTornTail, fmt::format("log ends inside the record at offset {}", record_start));
      }
      return false;
    }
    switch (type) {
      case RecordType::kFull:
      case RecordType::kFirst:
        if (in_record) {
          return Stop(End::kCorrupt, fmt::format("log damaged at offset {}: the record at offset {} has no end",
                                                 fragment_offset, record_start));
        }
        in_record = true;
        record_start = fragment_offset;
        record->assign(payload);
        if (type == RecordType::kFirst) continue;
        break;
      case RecordType::kMiddle:
      case RecordType::kLast:
        if (!in_record) {
          return Stop(End::kCorrupt, fmt::format("log damaged at offset {}: a record's continuation without its start",
                                                 fragment_offset));
        }
        record->append(payload);
        if (type == RecordType::kMiddle) continue;
        break;
      case RecordType::kZero:
        return Stop(End::kCorrupt, "unreachable: fragment type 0");
    }
    valid_length_ = block_start_ + pos_;
    return true;
  }
}

}  // namespace cell::logging::log
