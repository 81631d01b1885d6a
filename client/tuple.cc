// Tuples and their order-preserving encoding (include/cell/tuple.h, which defines the bytes): building and reading
// tuples, Pack and Unpack, Range, and the natural order Compare.
#include "cell/tuple.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <charconv>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cell/limits.h"

namespace cell {

// Pack, Unpack and Compare see a tuple's elements directly (a friend of Tuple); everything else uses the public API.
class TupleCodec {
 public:
  using Element = Tuple::Element;
  using Kind = Tuple::Kind;
  static const std::vector<Element>& Elements(const Tuple& t) { return t.elements_; }
  static Tuple& Append(Tuple& t, Kind kind, uint64_t word, std::string bytes = {},
                       std::shared_ptr<const Tuple> nested = nullptr) {
    Element& e = t.elements_.emplace_back();
    e.kind = kind;
    e.word = word;
    e.bytes = std::move(bytes);
    e.tuple = std::move(nested);
    return t;
  }
};

namespace {

using Element = TupleCodec::Element;
using Kind = TupleCodec::Kind;

// The type codes (tuple.h, ENCODING).
constexpr uint8_t kNullCode = 0x00;
constexpr uint8_t kBytesCode = 0x01;
constexpr uint8_t kTextCode = 0x02;
constexpr uint8_t kNestedCode = 0x05;
constexpr uint8_t kIntZeroCode = 0x14;  // an n-byte integer: 0x14 + n if positive, 0x14 - n if negative
constexpr uint8_t kDoubleCode = 0x21;
constexpr uint8_t kFalseCode = 0x26;
constexpr uint8_t kTrueCode = 0x27;
constexpr uint8_t kTerminator = 0x00;  // ends bytes, text and nested tuples
constexpr uint8_t kEscape = 0xff;      // after a 0x00: an escaped 0x00 byte (bytes, text) or a null (nested tuple)
constexpr uint64_t kSignBit = uint64_t{1} << 63;

// A double's bits transformed so that unsigned order is IEEE total order, and back.
uint64_t OrderedDoubleBits(uint64_t bits) { return (bits & kSignBit) ? ~bits : bits ^ kSignBit; }
uint64_t DoubleBitsFromOrdered(uint64_t ordered) { return (ordered & kSignBit) ? ordered ^ kSignBit : ~ordered; }

// The fewest bytes that hold v (v > 0): 1..8.
int ByteLength(uint64_t v) { return (64 - std::countl_zero(v) + 7) / 8; }
// n bytes of all ones (n in 1..8).
uint64_t ByteMask(int n) { return n == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * n)) - 1; }

void AppendBigEndian(uint64_t v, int n, std::string* out) {
  for (int i = n - 1; i >= 0; --i) out->push_back(static_cast<char>(v >> (8 * i)));
}

// A positive magnitude (code 0x14 + n), or a negative value's magnitude (code 0x14 - n, ones' complement body).
void AppendInteger(uint64_t magnitude, bool negative, std::string* out) {
  if (magnitude == 0) {
    out->push_back(static_cast<char>(kIntZeroCode));
    return;
  }
  int n = ByteLength(magnitude);
  out->push_back(static_cast<char>(negative ? kIntZeroCode - n : kIntZeroCode + n));
  AppendBigEndian(negative ? ByteMask(n) ^ magnitude : magnitude, n, out);
}

void AppendEscaped(uint8_t code, std::string_view bytes, std::string* out) {
  out->push_back(static_cast<char>(code));
  for (char c : bytes) {
    out->push_back(c);
    if (c == '\0') out->push_back(static_cast<char>(kEscape));
  }
  out->push_back(static_cast<char>(kTerminator));
}

void AppendElements(const Tuple& tuple, bool nested, std::string* out);

void AppendElement(const Element& e, bool nested, std::string* out) {
  switch (e.kind) {
    case Kind::kNull:
      out->push_back(static_cast<char>(kNullCode));
      if (nested) out->push_back(static_cast<char>(kEscape));
      return;
    case Kind::kBytes:
      return AppendEscaped(kBytesCode, e.bytes, out);
    case Kind::kText:
      return AppendEscaped(kTextCode, e.bytes, out);
    case Kind::kTuple:
      out->push_back(static_cast<char>(kNestedCode));
      AppendElements(*e.tuple, /*nested=*/true, out);
      out->push_back(static_cast<char>(kTerminator));
      return;
    case Kind::kInt: {
      int64_t v = static_cast<int64_t>(e.word);
      return AppendInteger(v < 0 ? uint64_t{0} - e.word : e.word, v < 0, out);
    }
    case Kind::kUnsigned:
      return AppendInteger(e.word, /*negative=*/false, out);
    case Kind::kDouble:
      out->push_back(static_cast<char>(kDoubleCode));
      return AppendBigEndian(OrderedDoubleBits(e.word), 8, out);
    case Kind::kBool:
      out->push_back(static_cast<char>(e.word != 0 ? kTrueCode : kFalseCode));
      return;
  }
}

void AppendElements(const Tuple& tuple, bool nested, std::string* out) {
  for (const Element& e : TupleCodec::Elements(tuple)) AppendElement(e, nested, out);
}

// Where a kind sorts among kinds (integers are one).
int KindRank(Kind kind) {
  switch (kind) {
    case Kind::kNull:
      return 0;
    case Kind::kBytes:
      return 1;
    case Kind::kText:
      return 2;
    case Kind::kTuple:
      return 3;
    case Kind::kInt:
    case Kind::kUnsigned:
      return 4;
    case Kind::kDouble:
      return 5;
    case Kind::kBool:
      return 6;
  }
  return 7;
}

template <typename T>
int ThreeWay(T a, T b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

int CompareElements(const Element& a, const Element& b) {
  if (int c = ThreeWay(KindRank(a.kind), KindRank(b.kind)); c != 0) return c;
  switch (a.kind) {
    case Kind::kNull:
      return 0;
    case Kind::kBytes:
    case Kind::kText:
      return ThreeWay(std::string_view(a.bytes).compare(b.bytes), 0);
    case Kind::kTuple:
      return Compare(*a.tuple, *b.tuple);
    case Kind::kInt:
    case Kind::kUnsigned:
      // A kUnsigned is above INT64_MAX, so above every kInt.
      if (a.kind != b.kind) return a.kind == Kind::kUnsigned ? 1 : -1;
      if (a.kind == Kind::kInt) return ThreeWay(static_cast<int64_t>(a.word), static_cast<int64_t>(b.word));
      return ThreeWay(a.word, b.word);
    case Kind::kDouble:
      return ThreeWay(OrderedDoubleBits(a.word), OrderedDoubleBits(b.word));
    case Kind::kBool:
      return ThreeWay(a.word, b.word);
  }
  return 0;
}

// Two lowercase hex digits.
std::string HexByte(uint8_t b) {
  const char* digits = "0123456789abcdef";
  return {digits[b >> 4], digits[b & 15]};
}

// Reads one encoding front to back; every error names the byte offset where the bad element starts.
class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}

  // Elements into *out up to the end of the input (depth 0) or the terminator of the nested tuple that started at
  // byte `start` (depth > 0).
  Status DecodeElements(int depth, size_t start, Tuple* out) {
    while (true) {
      if (pos_ == in_.size()) {
        if (depth == 0) return Status::OK();
        return Error("nested tuple is not terminated", start);
      }
      uint8_t code = Byte(pos_);
      if (depth > 0 && code == kTerminator) {
        if (pos_ + 1 < in_.size() && Byte(pos_ + 1) == kEscape) {
          pos_ += 2;
          out->AddNull();
          continue;
        }
        ++pos_;
        return Status::OK();
      }
      CELL_RETURN_IF_ERROR(DecodeElement(depth, out));
    }
  }

 private:
  uint8_t Byte(size_t i) const { return static_cast<uint8_t>(in_[i]); }

  Status Error(std::string_view what, size_t at) const {
    return Status::InvalidArgument("tuple encoding: " + std::string(what) + " at byte " + std::to_string(at) + " of " +
                                   std::to_string(in_.size()));
  }

  // The element whose type code is at pos_.
  Status DecodeElement(int depth, Tuple* out) {
    size_t start = pos_;
    uint8_t code = Byte(pos_++);
    if (code == kNullCode) {  // only at depth 0: DecodeElements reads 0x00 inside a nested tuple
      out->AddNull();
      return Status::OK();
    }
    if (code == kBytesCode || code == kTextCode) {
      std::string s;
      if (!DecodeEscaped(&s)) return Error(code == kBytesCode ? "unterminated bytes" : "unterminated text", start);
      TupleCodec::Append(*out, code == kBytesCode ? Kind::kBytes : Kind::kText, 0, std::move(s));
      return Status::OK();
    }
    if (code == kNestedCode) {
      if (depth >= kMaxTupleNesting) {
        return Error("nested tuple deeper than " + std::to_string(kMaxTupleNesting) + " levels", start);
      }
      Tuple nested;
      CELL_RETURN_IF_ERROR(DecodeElements(depth + 1, start, &nested));
      out->Add(std::move(nested));
      return Status::OK();
    }
    if (code >= kIntZeroCode - 8 && code <= kIntZeroCode + 8) return DecodeInteger(code, start, out);
    if (code == kDoubleCode) {
      if (in_.size() - pos_ < 8) return Error("truncated double (8 bytes needed)", start);
      uint64_t bits = DoubleBitsFromOrdered(ReadBigEndian(8));
      out->AddDouble(std::bit_cast<double>(bits));
      return Status::OK();
    }
    if (code == kFalseCode || code == kTrueCode) {
      out->AddBool(code == kTrueCode);
      return Status::OK();
    }
    return Error("unknown type code 0x" + HexByte(code), start);
  }

  uint64_t ReadBigEndian(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | Byte(pos_++);
    return v;
  }

  Status DecodeInteger(uint8_t code, size_t start, Tuple* out) {
    if (code == kIntZeroCode) {
      out->AddInt(0);
      return Status::OK();
    }
    bool negative = code < kIntZeroCode;
    int n = negative ? kIntZeroCode - code : code - kIntZeroCode;
    if (in_.size() - pos_ < static_cast<size_t>(n)) {
      return Error(
          "truncated integer (" + std::to_string(n) + " bytes needed, " + std::to_string(in_.size() - pos_) + " left)",
          start);
    }
    if (Byte(pos_) == (negative ? 0xff : 0x00)) return Error("integer with a redundant leading byte", start);
    uint64_t body = ReadBigEndian(n);
    if (!negative) {
      out->AddUnsigned(body);
      return Status::OK();
    }
    uint64_t magnitude = ByteMask(n) ^ body;
    if (magnitude > kSignBit) return Error("negative integer below INT64_MIN", start);
    out->AddInt(static_cast<int64_t>(uint64_t{0} - magnitude));
    return Status::OK();
  }

  // The body of bytes or text after its type code, through its terminator; false if there is none.
  bool DecodeEscaped(std::string* out) {
    while (pos_ < in_.size()) {
      const char* begin = in_.data() + pos_;
      const void* zero = std::memchr(begin, 0, in_.size() - pos_);
      if (zero == nullptr) break;
      size_t at = static_cast<const char*>(zero) - in_.data();
      out->append(begin, at - pos_);
      pos_ = at + 1;
      if (pos_ == in_.size() || Byte(pos_) != kEscape) return true;  // the terminator
      out->push_back('\0');
      ++pos_;
    }
    return false;
  }

  std::string_view in_;
  size_t pos_ = 0;
};

void AppendQuoted(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    uint8_t b = static_cast<uint8_t>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (b < 0x20 || b >= 0x7f) {
      *out += "\\x" + HexByte(b);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

void AppendReadable(const Tuple& tuple, std::string* out);

void AppendReadable(const Element& e, std::string* out) {
  switch (e.kind) {
    case Kind::kNull:
      *out += "null";
      return;
    case Kind::kBytes:
      out->push_back('b');
      return AppendQuoted(e.bytes, out);
    case Kind::kText:
      return AppendQuoted(e.bytes, out);
    case Kind::kTuple:
      return AppendReadable(*e.tuple, out);
    case Kind::kInt:
      *out += std::to_string(static_cast<int64_t>(e.word));
      return;
    case Kind::kUnsigned:
      *out += std::to_string(e.word);
      return;
    case Kind::kDouble: {
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), std::bit_cast<double>(e.word));
      out->append(buf, ec == std::errc() ? end - buf : 0);
      return;
    }
    case Kind::kBool:
      *out += e.word != 0 ? "true" : "false";
      return;
  }
}

void AppendReadable(const Tuple& tuple, std::string* out) {
  out->push_back('(');
  const std::vector<Element>& elements = TupleCodec::Elements(tuple);
  for (size_t i = 0; i < elements.size(); ++i) {
    if (i > 0) *out += ", ";
    AppendReadable(elements[i], out);
  }
  out->push_back(')');
}

std::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kBytes:
      return "bytes";
    case Kind::kText:
      return "text";
    case Kind::kTuple:
      return "a nested tuple";
    case Kind::kInt:
      return "an integer";
    case Kind::kUnsigned:
      return "an integer above INT64_MAX";
    case Kind::kDouble:
      return "a double";
    case Kind::kBool:
      return "a bool";
  }
  return "unknown";
}

// Element i of `elements` if it exists and is of one of the kinds given, else InvalidArgument saying what it is.
StatusOr<const Element*> ElementOf(const std::vector<Element>& elements, size_t i, std::string_view wanted, Kind kind,
                                   Kind other_kind) {
  if (i >= elements.size()) {
    return Status::InvalidArgument("tuple has no element " + std::to_string(i) + " (it has " +
                                   std::to_string(elements.size()) + ")");
  }
  const Element& e = elements[i];
  if (e.kind != kind && e.kind != other_kind) {
    return Status::InvalidArgument("tuple element " + std::to_string(i) + " is " + std::string(KindName(e.kind)) +
                                   ", not " + std::string(wanted));
  }
  return &e;
}

}  // namespace

Tuple& Tuple::AddNull() { return TupleCodec::Append(*this, Kind::kNull, 0); }

Tuple& Tuple::AddInt(int64_t value) { return TupleCodec::Append(*this, Kind::kInt, static_cast<uint64_t>(value)); }

Tuple& Tuple::AddUnsigned(uint64_t value) {
  return TupleCodec::Append(*this, value >= kSignBit ? Kind::kUnsigned : Kind::kInt, value);
}

Tuple& Tuple::AddDouble(double value) {
  return TupleCodec::Append(*this, Kind::kDouble, std::bit_cast<uint64_t>(value));
}

Tuple& Tuple::AddBool(bool value) { return TupleCodec::Append(*this, Kind::kBool, value ? 1 : 0); }

Tuple& Tuple::AddBytes(std::string_view bytes) {
  return TupleCodec::Append(*this, Kind::kBytes, 0, std::string(bytes));
}

Tuple& Tuple::AddText(std::string_view utf8) { return TupleCodec::Append(*this, Kind::kText, 0, std::string(utf8)); }

Tuple& Tuple::Add(const Tuple& nested) {
  return TupleCodec::Append(*this, Kind::kTuple, 0, {}, std::make_shared<const Tuple>(nested));
}

Tuple& Tuple::Add(Tuple&& nested) {
  return TupleCodec::Append(*this, Kind::kTuple, 0, {}, std::make_shared<const Tuple>(std::move(nested)));
}

Tuple::Kind Tuple::kind(size_t i) const {
  assert(i < elements_.size());
  return i < elements_.size() ? elements_[i].kind : Kind::kNull;
}

bool Tuple::IsNull(size_t i) const { return i < elements_.size() && elements_[i].kind == Kind::kNull; }

StatusOr<int64_t> Tuple::GetInt(size_t i) const {
  CELL_ASSIGN_OR_RETURN(const Element* e, ElementOf(elements_, i, "an integer in int64 range", Kind::kInt, Kind::kInt));
  return static_cast<int64_t>(e->word);
}

StatusOr<uint64_t> Tuple::GetUnsigned(size_t i) const {
  CELL_ASSIGN_OR_RETURN(const Element* e,
                        ElementOf(elements_, i, "a non-negative integer", Kind::kInt, Kind::kUnsigned));
  if (e->kind == Kind::kInt && static_cast<int64_t>(e->word) < 0) {
    return Status::InvalidArgument("tuple element " + std::to_string(i) + " is a negative integer, not " +
                                   "a non-negative integer");
  }
  return e->word;
}

StatusOr<double> Tuple::GetDouble(size_t i) const {
  CELL_ASSIGN_OR_RETURN(const Element* e, ElementOf(elements_, i, "a double", Kind::kDouble, Kind::kDouble));
  return std::bit_cast<double>(e->word);
}

StatusOr<bool> Tuple::GetBool(size_t i) const {
  CELL_ASSIGN_OR_RETURN(const Element* e, ElementOf(elements_, i, "a bool", Kind::kBool, Kind::kBool));
  return e->word != 0;
}

StatusOr<std::string_view> Tuple::GetBytes(size_t i) const {
  CELL_ASSIGN_OR_RETURN(const Element* e, ElementOf(elements_, i, "bytes", Kind::kBytes, Kind::kBytes));
  return std::string_view(e->bytes);
}

StatusOr<std::string_view> Tuple::GetText(size_t i) const {
  CELL_ASSIGN_OR_RETURN(const Element* e, ElementOf(elements_, i, "text", Kind::kText, Kind::kText));
  return std::string_view(e->bytes);
}

StatusOr<Tuple> Tuple::GetTuple(size_t i) const {
  CELL_ASSIGN_OR_RETURN(const Element* e, ElementOf(elements_, i, "a nested tuple", Kind::kTuple, Kind::kTuple));
  return *e->tuple;
}

std::string Tuple::ToString() const {
  std::string out;
  AppendReadable(*this, &out);
  return out;
}

int Compare(const Tuple& a, const Tuple& b) {
  const std::vector<Element>& x = TupleCodec::Elements(a);
  const std::vector<Element>& y = TupleCodec::Elements(b);
  size_t n = std::min(x.size(), y.size());
  for (size_t i = 0; i < n; ++i) {
    if (int c = CompareElements(x[i], y[i]); c != 0) return c;
  }
  return ThreeWay(x.size(), y.size());
}

std::string Pack(const Tuple& tuple) {
  std::string out;
  AppendElements(tuple, /*nested=*/false, &out);
  return out;
}

StatusOr<std::string> PackKey(const Tuple& tuple) {
  std::string key = Pack(tuple);
  if (key.size() < kMinKeySize || key.size() > kMaxKeySize) {
    return Status::InvalidArgument("tuple " + tuple.ToString().substr(0, 200) + " packs to " +
                                   std::to_string(key.size()) + " bytes; keys must be " + std::to_string(kMinKeySize) +
                                   ".." + std::to_string(kMaxKeySize) + " bytes");
  }
  return key;
}

Status Unpack(std::string_view bytes, Tuple* out) {
  Tuple tuple;
  CELL_RETURN_IF_ERROR(Decoder(bytes).DecodeElements(/*depth=*/0, /*start=*/0, &tuple));
  *out = std::move(tuple);
  return Status::OK();
}

std::pair<std::string, std::string> Range(const Tuple& prefix) {
  std::string begin = Pack(prefix);
  std::string end = begin;
  begin.push_back(static_cast<char>(0x00));
  end.push_back(static_cast<char>(0xff));
  return {std::move(begin), std::move(end)};
}

}  // namespace cell
