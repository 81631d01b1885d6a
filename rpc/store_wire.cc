// The store's hottest messages by hand (see store_wire.h). Protobuf's wire format: each field is a key (its number
// << 3 | its wire type: 0 varint, 2 length-delimited), then a varint or a length and that many bytes. Every field
// here has a number below 16, so its key is one byte.
#include "rpc/store_wire.h"

#include <google/protobuf/io/coded_stream.h>

namespace cell::rpc {
namespace {

using google::protobuf::io::CodedOutputStream;

constexpr int kVarint = 0, kBytes = 2;
constexpr char Key(int number, int wire_type) { return static_cast<char>(number << 3 | wire_type); }

void AppendVarint(uint64_t v, std::string* out) {
  uint8_t bytes[10];  // the longest varint of 64 bits
  const uint8_t* end = CodedOutputStream::WriteVarint64ToArray(v, bytes);
  out->append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(end - bytes));
}
void AppendVarintField(int number, uint64_t v, std::string* out) {
  if (v == 0) return;
  out->push_back(Key(number, kVarint));
  AppendVarint(v, out);
}
void AppendBytesField(int number, std::string_view v, std::string* out) {
  if (v.empty()) return;
  out->push_back(Key(number, kBytes));
  AppendVarint(v.size(), out);
  out->append(v);
}

// A cursor over wire bytes that reads what protobuf reads, and fails (false) where protobuf would, or where it would
// read something these parsers leave to it.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}
  bool done() const { return p_ == end_; }
  // A field's key, if it is one byte (every field read here has one).
  bool Key(int* number, int* wire_type) {
    if (p_ == end_ || (static_cast<uint8_t>(*p_) & 0x80) != 0) return false;
    const uint8_t key = static_cast<uint8_t>(*p_++);
    *number = key >> 3;
    *wire_type = key & 7;
    return true;
  }
  // At most 10 bytes, the last at most 1 (a varint of 64 bits, as protobuf writes it).
  bool Varint(uint64_t* v) {
    uint64_t result = 0;
    for (int i = 0; i < 10; ++i) {
      if (p_ == end_) return false;
      const uint8_t b = static_cast<uint8_t>(*p_++);
      if (i == 9 && b > 1) return false;
      result |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return false;
  }
  bool Bytes(std::string_view* v) {
    uint64_t n = 0;
    if (!Varint(&n) || n > static_cast<uint64_t>(end_ - p_) || n > INT32_MAX) return false;
    *v = std::string_view(p_, n);
    p_ += n;
    return true;
  }

 private:
  const char* p_;
  const char* end_;
};

// A set bit per field number seen: a field seen twice is left to protobuf (its merge rules).
bool FirstTime(uint32_t* seen, int number) {
  const uint32_t bit = uint32_t{1} << number;
  if ((*seen & bit) != 0) return false;
  *seen |= bit;
  return true;
}

bool ParseTarget(std::string_view bytes, proto::Target* target) {
  Reader r(bytes);
  uint32_t seen = 0;
  while (!r.done()) {
    int number = 0, type = 0;
    uint64_t v = 0;
    if (!r.Key(&number, &type) || type != kVarint || !FirstTime(&seen, number) || !r.Varint(&v)) return false;
    switch (number) {
      case 1:
        target->set_region(static_cast<uint32_t>(v));  // protobuf keeps a uint32's low 32 bits
        break;
      case 2:
        target->set_epoch(v);
        break;
      default:
        return false;
    }
  }
  return true;
}

}  // namespace

void AppendPlainKeyRequest(uint32_t region, uint64_t epoch, std::string_view key, const std::string* value,
                           uint64_t meganode, bool want_range, std::string* out) {
  // Fields in number order, as protobuf writes them. The target is always present (the client always names it).
  const size_t target_bytes = (region != 0 ? 1 + CodedOutputStream::VarintSize32(region) : 0) +
                              (epoch != 0 ? 1 + CodedOutputStream::VarintSize64(epoch) : 0);
  out->push_back(Key(1, kBytes));
  AppendVarint(target_bytes, out);
  AppendVarintField(1, region, out);
  AppendVarintField(2, epoch, out);
  AppendBytesField(2, key, out);
  if (value != nullptr) AppendBytesField(3, *value, out);
  AppendVarintField(4, meganode, out);
  AppendVarintField(5, want_range ? 1 : 0, out);
}

bool ParsePlainKeyRequest(std::string_view bytes, proto::KeyRequest* request) {
  request->Clear();
  Reader r(bytes);
  uint32_t seen = 0;
  while (!r.done()) {
    int number = 0, type = 0;
    if (!r.Key(&number, &type) || !FirstTime(&seen, number)) return false;
    uint64_t v = 0;
    std::string_view s;
    if (type == kVarint) {
      if (!r.Varint(&v)) return false;
      switch (number) {
        case 4:
          request->set_meganode(v);
          break;
        case 5:
          request->set_want_range(v != 0);
          break;
        case 6:
          request->set_with_meta(v != 0);
          break;
        default:
          return false;
      }
    } else if (type == kBytes) {
      if (!r.Bytes(&s)) return false;
      switch (number) {
        case 1:
          if (!ParseTarget(s, request->mutable_target())) return false;
          break;
        case 2:
          request->set_key(s.data(), s.size());
          break;
        case 3:
          request->set_value(s.data(), s.size());
          break;
        default:
          return false;
      }
    } else {
      return false;
    }
  }
  return true;
}

void AppendKeyReply(const proto::StoreReply& reply, std::string* out) {
  // Fields in number order, as protobuf writes them.
  AppendVarintField(2, reply.found() ? 1 : 0, out);
  AppendBytesField(3, reply.value(), out);
  AppendVarintField(6, reply.elsewhere(), out);
  AppendVarintField(8, reply.leaf(), out);
  AppendBytesField(9, reply.leaf_min(), out);
  AppendBytesField(10, reply.leaf_max(), out);
  AppendBytesField(11, reply.not_acknowledged(), out);
  AppendVarintField(12, reply.version(), out);
  AppendVarintField(13, reply.checksum(), out);
  AppendVarintField(14, reply.locked() ? 1 : 0, out);
}

bool ParseKeyReply(std::string_view bytes, proto::StoreReply* reply) {
  reply->Clear();
  Reader r(bytes);
  uint32_t seen = 0;
  while (!r.done()) {
    int number = 0, type = 0;
    if (!r.Key(&number, &type) || !FirstTime(&seen, number)) return false;
    uint64_t v = 0;
    std::string_view s;
    if (type == kVarint) {
      if (!r.Varint(&v)) return false;
      switch (number) {
        case 2:
          reply->set_found(v != 0);
          break;
        case 6:
          reply->set_elsewhere(v);
          break;
        case 8:
          reply->set_leaf(v);
          break;
        case 12:
          reply->set_version(v);
          break;
        case 13:
          reply->set_checksum(v);
          break;
        case 14:
          reply->set_locked(v != 0);
          break;
        default:
          return false;
      }
    } else if (type == kBytes) {
      if (!r.Bytes(&s)) return false;
      switch (number) {
        case 3:
          reply->set_value(s.data(), s.size());
          break;
        case 9:
          reply->set_leaf_min(s.data(), s.size());
          break;
        case 10:
          reply->set_leaf_max(s.data(), s.size());
          break;
        case 11:
          // A string field: protobuf checks its UTF-8 (proto3) and refuses the message if it is not. Left to it.
          return false;
        default:
          return false;
      }
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace cell::rpc
