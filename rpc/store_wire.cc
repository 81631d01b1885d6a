// The store's hottest messages by hand (see store_wire.h). Protobuf's wire format: each field is a key (its number
// << 3 | its wire type: 0 varint, 2 length-delimited), then a varint or a length and that many bytes. Every field
// here has a number below 16, so its key is one byte.
#include "rpc/store_wire.h"

#include <google/protobuf/io/coded_stream.h>

#include <cstring>

namespace cell::rpc {
namespace {

using google::protobuf::io::CodedOutputStream;

constexpr int kVarint = 0, kBytes = 2;
// The fields of a message, each written once a Sizer has measured them all: one resize of the output, no append
// per field. Each writes nothing for a field at its default, as proto3 does.
class Sizer {
 public:
  void Varint(uint64_t v) { bytes += CodedOutputStream::VarintSize64(v); }
  void VarintField(int, uint64_t v) {
    if (v != 0) bytes += 1 + CodedOutputStream::VarintSize64(v);
  }
  void BytesField(int, std::string_view v) {
    if (!v.empty()) bytes += 1 + CodedOutputStream::VarintSize64(v.size()) + v.size();
  }
  void Key(int, int) { ++bytes; }
  size_t bytes = 0;
};
class Writer {
 public:
  Writer(size_t bytes, std::string* out) {
    const size_t at = out->size();
    out->resize(at + bytes);
    p_ = reinterpret_cast<uint8_t*>(out->data() + at);
  }
  void Varint(uint64_t v) { p_ = CodedOutputStream::WriteVarint64ToArray(v, p_); }
  void VarintField(int number, uint64_t v) {
    if (v == 0) return;
    Key(number, kVarint);
    Varint(v);
  }
  void BytesField(int number, std::string_view v) {
    if (v.empty()) return;
    Key(number, kBytes);
    Varint(v.size());
    std::memcpy(p_, v.data(), v.size());
    p_ += v.size();
  }
  void Key(int number, int wire_type) { *p_++ = static_cast<uint8_t>(number << 3 | wire_type); }

 private:
  uint8_t* p_;
};
// Measures what `fields` (a function of a Sizer or Writer) writes, then writes it at the end of *out.
template <typename Fields>
void Append(Fields fields, std::string* out) {
  Sizer sizer;
  fields(sizer);
  Writer writer(sizer.bytes, out);
  fields(writer);
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
  // A length, then that many bytes. Protobuf reads a length of at most 5 bytes, the 5th below 8, and at most
  // INT32_MAX - 16.
  bool Bytes(std::string_view* v) {
    uint64_t n = 0;
    for (int i = 0;; ++i) {
      if (p_ == end_ || i == 5) return false;
      const uint8_t b = static_cast<uint8_t>(*p_++);
      if (i == 4 && b >= 8) return false;
      n |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) break;
    }
    if (n > static_cast<uint64_t>(end_ - p_) || n > INT32_MAX - 16) return false;
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

// Reads `bytes` field by field: each varint to on_varint(number, value), each length-delimited field to
// on_bytes(number, bytes). False at any other wire type, at a field seen before, or where either returns false.
template <typename OnVarint, typename OnBytes>
bool ForEachField(std::string_view bytes, OnVarint on_varint, OnBytes on_bytes) {
  Reader r(bytes);
  uint32_t seen = 0;
  while (!r.done()) {
    int number = 0, type = 0;
    if (!r.Key(&number, &type) || !FirstTime(&seen, number)) return false;
    uint64_t v = 0;
    std::string_view s;
    if (type == kVarint) {
      if (!r.Varint(&v) || !on_varint(number, v)) return false;
    } else if (type != kBytes || !r.Bytes(&s) || !on_bytes(number, s)) {
      return false;
    }
  }
  return true;
}

bool ParseTarget(std::string_view bytes, proto::Target* target) {
  return ForEachField(
      bytes,
      [&](int number, uint64_t v) {
        if (number == 1) target->set_region(static_cast<uint32_t>(v));  // protobuf keeps a uint32's low 32 bits
        if (number == 2) target->set_epoch(v);
        return number == 1 || number == 2;
      },
      [](int, std::string_view) { return false; });
}

}  // namespace

void AppendPlainKeyRequest(uint32_t region, uint64_t epoch, std::string_view key, const std::string* value,
                           uint64_t meganode, bool want_range, std::string* out) {
  // Fields in number order, as protobuf writes them. The target is always present (the client always names it).
  Sizer target;
  target.VarintField(1, region);
  target.VarintField(2, epoch);
  Append(
      [&](auto& w) {
        w.Key(1, kBytes);
        w.Varint(target.bytes);
        w.VarintField(1, region);
        w.VarintField(2, epoch);
        w.BytesField(2, key);
        if (value != nullptr) w.BytesField(3, *value);
        w.VarintField(4, meganode);
        w.VarintField(5, want_range ? 1 : 0);
      },
      out);
}

// The parsers below assign strings through mutable_*(): a message reused from one request to the next then keeps
// their memory. (This protobuf's set_*(data, size) builds a temporary std::string first: an allocation and a copy
// more for every key or value over 15 bytes.)
bool ParsePlainKeyRequest(std::string_view bytes, proto::KeyRequest* request) {
  request->Clear();
  return ForEachField(
      bytes,
      [&](int number, uint64_t v) {
        switch (number) {
          case 4:
            request->set_meganode(v);
            return true;
          case 5:
            request->set_want_range(v != 0);
            return true;
          case 6:
            request->set_with_meta(v != 0);
            return true;
          default:
            return false;
        }
      },
      [&](int number, std::string_view s) {
        switch (number) {
          case 1:
            return ParseTarget(s, request->mutable_target());
          case 2:
            request->mutable_key()->assign(s.data(), s.size());
            return true;
          case 3:
            request->mutable_value()->assign(s.data(), s.size());
            return true;
          default:
            return false;
        }
      });
}

void AppendKeyReply(const proto::StoreReply& reply, std::string* out) {
  // Fields in number order, as protobuf writes them.
  Append(
      [&](auto& w) {
        w.VarintField(2, reply.found() ? 1 : 0);
        w.BytesField(3, reply.value());
        w.VarintField(6, reply.elsewhere());
        w.VarintField(8, reply.leaf());
        w.BytesField(9, reply.leaf_min());
        w.BytesField(10, reply.leaf_max());
        w.BytesField(11, reply.not_acknowledged());
        w.VarintField(12, reply.version());
        w.VarintField(13, reply.checksum());
        w.VarintField(14, reply.locked() ? 1 : 0);
      },
      out);
}

bool ParseKeyReply(std::string_view bytes, proto::StoreReply* reply) {
  reply->Clear();
  return ForEachField(
      bytes,
      [&](int number, uint64_t v) {
        switch (number) {
          case 2:
            reply->set_found(v != 0);
            return true;
          case 6:
            reply->set_elsewhere(v);
            return true;
          case 8:
            reply->set_leaf(v);
            return true;
          case 12:
            reply->set_version(v);
            return true;
          case 13:
            reply->set_checksum(v);
            return true;
          case 14:
            reply->set_locked(v != 0);
            return true;
          default:
            return false;
        }
      },
      [&](int number, std::string_view s) {
        switch (number) {
          case 3:
            reply->mutable_value()->assign(s.data(), s.size());
            return true;
          case 9:
            reply->mutable_leaf_min()->assign(s.data(), s.size());
            return true;
          case 10:
            reply->mutable_leaf_max()->assign(s.data(), s.size());
            return true;
          default:  // 11, not_acknowledged, is a string: protobuf checks its UTF-8 (proto3). Left to it.
            return false;
        }
      });
}

}  // namespace cell::rpc
