#include "rpc/frame.h"

#include <fmt/format.h>

#include "common/little_endian.h"

namespace cell::rpc {

void EncodeFrameHeader(const FrameHeader& h, char* out) {
  EncodeFixed32(out, kFrameMagic);
  out[4] = static_cast<char>(kFrameVersion);
  out[5] = static_cast<char>(h.type);
  EncodeFixed16(out + 6, h.aux);
  EncodeFixed32(out + 8, h.length);
  EncodeFixed32(out + 12, 0);
  EncodeFixed64(out + 16, h.request_id);
}

void AppendFrame(std::string& out, FrameType type, uint16_t aux, uint64_t request_id, std::string_view payload) {
  const size_t at = out.size();
  out.resize(at + kFrameHeaderBytes);
  EncodeFrameHeader(FrameHeader{type, aux, static_cast<uint32_t>(payload.size()), request_id}, out.data() + at);
  out.append(payload);
}

Status ReplyError(const Status& status, size_t response_bytes, uint32_t limit) {
  constexpr size_t kMaxErrorMessage = 4096;
  if (status.ok()) {
    return Status::ResourceExhausted(
        fmt::format("the response of {} bytes exceeds the message limit of {} bytes", response_bytes, limit));
  }
  if (status.message().size() <= kMaxErrorMessage) return status;
  return Status::FromCode(status.code(), std::string_view(status.message()).substr(0, kMaxErrorMessage));
}

Status ErrorFromFrame(uint16_t aux, std::string_view message) {
  if (aux == 0 || aux > static_cast<uint16_t>(Status::Code::kLastCode)) {
    return Status::Internal(fmt::format("malformed error reply (code {}): {}", aux, message));
  }
  return Status::FromCode(static_cast<Status::Code>(aux), message);
}

Status DecodeFrameHeader(std::string_view bytes, uint32_t max_payload_bytes, FrameHeader* h) {
  if (bytes.size() < kFrameHeaderBytes) return Status::InvalidArgument("malformed frame: header truncated");
  const char* p = bytes.data();
  const auto magic = DecodeFixed32(p);
  if (magic != kFrameMagic) {
    return Status::InvalidArgument(
        fmt::format("malformed frame: bad magic {:#010x} (expected {:#010x}); the peer is not a Cell endpoint", magic,
                    kFrameMagic));
  }
  const auto version = static_cast<uint8_t>(p[4]);
  if (version != kFrameVersion) {
    return Status::InvalidArgument(
        fmt::format("malformed frame: protocol version {} (this build speaks {})", version, kFrameVersion));
  }
  const auto type = static_cast<uint8_t>(p[5]);
  if (type == 0 || type > kMaxFrameType) {
    return Status::InvalidArgument(fmt::format("malformed frame: unknown frame type {}", type));
  }
  if (DecodeFixed32(p + 12) != 0) return Status::InvalidArgument("malformed frame: reserved header bits set");
  h->type = static_cast<FrameType>(type);
  h->aux = DecodeFixed16(p + 6);
  h->length = DecodeFixed32(p + 8);
  h->request_id = DecodeFixed64(p + 16);
  if (h->length > max_payload_bytes) {
    return Status::InvalidArgument(
        fmt::format("frame of {} payload bytes exceeds the message limit of {} bytes", h->length, max_payload_bytes));
  }
  return Status::OK();
}

char* FrameDecoder::PrepareAppend(size_t bytes) {
  if (capacity_ - size_ < bytes) {
    size_t capacity = capacity_ < 4096 ? 4096 : capacity_;
    while (capacity - size_ < bytes) capacity *= 2;
    auto grown = std::make_unique<char[]>(capacity);  // value-initialises once per growth, not per receive
    if (size_ > 0) std::memcpy(grown.get(), buffer_.get(), size_);
    buffer_ = std::move(grown);
    capacity_ = capacity;
  }
  return buffer_.get() + size_;
}

FrameDecoder::Result FrameDecoder::Next(FrameHeader* header, std::string_view* payload) {
  if (!error_.ok()) return Result::kMalformed;
  const std::string_view rest(buffer_.get() + consumed_, size_ - consumed_);
  if (rest.size() < kFrameHeaderBytes) return Result::kNeedMore;
  Status s = DecodeFrameHeader(rest, max_payload_, header);
  if (!s.ok()) {
    error_ = std::move(s);
    return Result::kMalformed;
  }
  if (rest.size() - kFrameHeaderBytes < header->length) return Result::kNeedMore;
  *payload = rest.substr(kFrameHeaderBytes, header->length);
  consumed_ += kFrameHeaderBytes + header->length;
  return Result::kFrame;
}

void FrameDecoder::Consume() {
  if (consumed_ == 0) return;
  if (consumed_ != size_) std::memmove(buffer_.get(), buffer_.get() + consumed_, size_ - consumed_);
  size_ -= consumed_;
  consumed_ = 0;
}

size_t FrameDecoder::BytesWanted() const {
  const size_t have = size_ - consumed_;
  if (have < kFrameHeaderBytes) return kFrameHeaderBytes - have;
  FrameHeader h;
  if (!DecodeFrameHeader(std::string_view(buffer_.get() + consumed_, have), max_payload_, &h).ok()) return 1;
  const size_t total = kFrameHeaderBytes + h.length;
  return total > have ? total - have : 1;
}

}  // namespace cell::rpc
