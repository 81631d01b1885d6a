// Tuples: typed, composite keys (a table id, an index id, columns) packed into byte strings whose memcmp order is the
// tuples' natural order, after FoundationDB's tuple layer (its type codes and bytes, for the kinds Cell has).
//
//   cell::Tuple row = cell::Tuple().Add(7).AddText("users").Add(42);     // table 7, index "users", column 42
//   auto key = cell::PackKey(row);                                        // StatusOr: checked against key limits
//   auto [begin, end] = cell::Range(cell::Tuple().Add(7).AddText("users"));  // every key of that index, scannable
//   cell::Tuple back;
//   cell::Status s = cell::Unpack(*key, &back);                           // back == row
//
// ELEMENTS. A tuple is an ordered list of elements, each of one kind: null, bytes (any bytes), text (the caller's
// UTF-8; stored and compared as bytes, never validated or normalized), a nested tuple, an integer (any value from
// INT64_MIN to UINT64_MAX: kInt for a value that fits in int64_t, kUnsigned only for a value above INT64_MAX, whichever
// method added it), a double (its exact 64 bits, so -0.0, +0.0 and each NaN payload are distinct values), or a bool.
//
// ORDER (Compare, and the memcmp order of the packed bytes, which is the same). Element by element; a tuple that is a
// proper prefix of another sorts first. Elements of different kinds sort by kind:
//     null < bytes < text < nested tuple < integer < double < false < true
// Integers, signed or not, compare by value (int64 -1 < 0 < uint64 2^63). Doubles in IEEE 754 total order:
//     -NaN < -inf < ... < -denormals < -0.0 < +0.0 < +denormals < ... < +inf < +NaN
// (NaNs by payload: a larger payload is further from zero). Bytes and text bytewise, as memcmp with a proper prefix
// first; nested tuples recursively. Two tuples are equal (==) exactly when Compare says 0.
//
// ENCODING. A tuple packs to its elements' encodings, concatenated (the empty tuple to no bytes), so
// Pack(a followed by b's elements) == Pack(a) + Pack(b). An element is a type code, then a body:
//
//   code        kind              body
//   0x00        null              none; inside a nested tuple the null is 0x00 0xff (a bare 0x00 ends a nested tuple)
//   0x01        bytes             the bytes, each 0x00 written 0x00 0xff, then a terminating 0x00
//   0x02        text              as bytes: its UTF-8 bytes escaped, then 0x00
//   0x05        nested tuple      its elements' encodings (nested nulls as 0x00 0xff), then a terminating 0x00
//   0x0c..0x13  negative integer  n = 0x14 - code bytes (8..1): the ones' complement of |v| in n bytes, big-endian
//   0x14        zero              none
//   0x15..0x1c  positive integer  n = code - 0x14 bytes (1..8): v big-endian
//   0x21        double            8 bytes big-endian: the IEEE 754 bits with all bits flipped if the sign bit is set,
//                                 else with only the sign bit flipped
//   0x26, 0x27  false, true       none
//
// An integer takes the fewest bytes its magnitude needs (no leading 0x00 byte in a positive body, no leading 0xff in a
// negative one), so more bytes mean a larger magnitude, and the code orders sign and length before the body orders
// magnitude. The double transform turns IEEE total order into unsigned order. A terminator 0x00 is always followed by
// a type code (at most 0x27), another terminator, or the end, never by 0xff: so "the string (or nested tuple) ends
// here" sorts below "a 0x00 byte (or a null) follows here", and below any longer continuation. These are the bytes
// FoundationDB's tuple layer gives the same values.
//
// CANONICAL. Each tuple has exactly one encoding, and Unpack accepts nothing else: when Unpack(bytes, &t) succeeds,
// Pack(t) == bytes. It fails with InvalidArgument, naming the byte offset, on a type code not in the table (also
// FoundationDB's others: big integers 0x0b/0x1d, floats 0x20, UUIDs, versionstamps), a body cut short (truncated
// integer or double), bytes, text or a nested tuple without their terminator (also one ending in an escape), an
// integer with a redundant leading byte, a negative integer below INT64_MIN, and nesting deeper than
// kMaxTupleNesting. Trailing bytes after a complete element are read as the next element, so garbage fails as an
// unknown type code or a truncated element. A proper prefix of a valid encoding either fails so, or it ends after a
// complete top-level element or just after a 0x00 that then reads as a terminator (an escaped 0x00 in bytes or text,
// a null in a top-level nested tuple) and is the encoding of another tuple, one that sorts before the whole.
//
// ROUND TRIP. Unpack(Pack(t)) == t, kinds included, for every tuple nested at most kMaxTupleNesting levels deep (the
// integer kind follows the value, so it survives: AddUnsigned(5) is already a kInt).
//
// KEYS. Pack does not check the store's key limits: a key is 1..kMaxKeySize = 255 bytes (cell/limits.h) and the store
// refuses any other key with InvalidArgument; PackKey checks a tuple against them.
#pragma once

#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "cell/status.h"

namespace cell {

class Tuple;
// <0, 0 or >0 as a sorts before, with or after b in the order above (the memcmp order of Pack(a) and Pack(b)).
int Compare(const Tuple& a, const Tuple& b);

namespace tuple_internal {
// The types Tuple::Add takes as integers (not bool, not characters) and as doubles.
template <typename T>
concept Integer =
    std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> && !std::is_same_v<T, wchar_t> &&
    !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> && !std::is_same_v<T, char32_t>;
template <typename T>
concept Real = std::is_same_v<T, double> || std::is_same_v<T, float>;
}  // namespace tuple_internal

// Unpack refuses tuples nested deeper than this below the top level (a key of 255 bytes nests at most 127 deep).
inline constexpr int kMaxTupleNesting = 128;

class Tuple {
 public:
  // In the order kinds sort in (kInt and kUnsigned are one kind there, integers).
  enum class Kind : uint8_t { kNull, kBytes, kText, kTuple, kInt, kUnsigned, kDouble, kBool };

  Tuple() = default;

  // Builders: each appends one element and returns *this, to chain.
  Tuple& AddNull();
  Tuple& AddInt(int64_t value);
  Tuple& AddUnsigned(uint64_t value);  // kind kInt when value <= INT64_MAX
  Tuple& AddDouble(double value);
  Tuple& AddBool(bool value);
  Tuple& AddBytes(std::string_view bytes);
  Tuple& AddText(std::string_view utf8);
  Tuple& Add(const Tuple& nested);
  Tuple& Add(Tuple&& nested);
  // Add(x) for the unsurprising x: a signed integer type as AddInt, an unsigned one as AddUnsigned, bool as AddBool,
  // double or float as AddDouble. Characters, enums and strings are refused at compile time: a string is bytes or
  // text (say which with AddBytes or AddText), and a char is neither a number nor a string here.
  template <tuple_internal::Integer T>
  Tuple& Add(T value) {
    if constexpr (std::is_signed_v<T>) {
      return AddInt(value);
    } else {
      return AddUnsigned(value);
    }
  }
  template <std::same_as<bool> T>
  Tuple& Add(T value) {
    return AddBool(value);
  }
  template <tuple_internal::Real T>
  Tuple& Add(T value) {
    return AddDouble(value);
  }
  Tuple& Add(const char*) = delete;       // bytes or text? AddBytes or AddText
  Tuple& Add(std::string_view) = delete;  // bytes or text? AddBytes or AddText

  size_t size() const { return elements_.size(); }
  bool empty() const { return elements_.empty(); }
  // The kind of element i; i must be < size() (asserted in debug builds; kNull past the end otherwise).
  Kind kind(size_t i) const;
  // Whether element i exists and is null.
  bool IsNull(size_t i) const;

  // Getters: element i's value, or InvalidArgument (saying which element and what it is) when i >= size() or the
  // element is of another kind. No conversions, except that integers are one kind read in two ranges: GetUnsigned
  // reads any non-negative integer, GetInt any integer that fits in int64_t (so never a kUnsigned).
  StatusOr<int64_t> GetInt(size_t i) const;
  StatusOr<uint64_t> GetUnsigned(size_t i) const;
  StatusOr<double> GetDouble(size_t i) const;
  StatusOr<bool> GetBool(size_t i) const;
  // The view points into this tuple: valid until the tuple is next changed or destroyed.
  StatusOr<std::string_view> GetBytes(size_t i) const;
  StatusOr<std::string_view> GetText(size_t i) const;
  StatusOr<Tuple> GetTuple(size_t i) const;  // a copy

  // A readable form for messages and tests: (null, b"\x00a", "text", (1, -2), 18446744073709551615, 1.5, true).
  std::string ToString() const;

  friend bool operator==(const Tuple& a, const Tuple& b) { return Compare(a, b) == 0; }
  friend std::strong_ordering operator<=>(const Tuple& a, const Tuple& b) { return Compare(a, b) <=> 0; }

 private:
  friend class TupleCodec;  // client/tuple.cc: Pack, Unpack and Compare read and build elements directly
  struct Element {
    Kind kind = Kind::kNull;
    uint64_t word = 0;                   // kInt: the int64_t's bits; kUnsigned: the value; kDouble: its bits
    std::string bytes;                   // kBytes, kText
    std::shared_ptr<const Tuple> tuple;  // kTuple (immutable once added, so copies may share it)
  };
  std::vector<Element> elements_;
};

// The tuple's encoding (ENCODING above). Never fails; checks no key limit (PackKey does).
std::string Pack(const Tuple& tuple);
// Pack, or InvalidArgument when the encoding is no valid key: the empty tuple (0 bytes), or more than 255 bytes.
StatusOr<std::string> PackKey(const Tuple& tuple);
// Decodes a whole encoding into *out (replacing its contents). InvalidArgument, naming the byte offset, for input
// that is not the canonical encoding of a tuple (CANONICAL above); *out is then unchanged.
Status Unpack(std::string_view bytes, Tuple* out);
// The half-open range [begin, end) of the encodings of exactly the tuples that start with `prefix` and are strictly
// longer: Pack(prefix) + 0x00 and Pack(prefix) + 0xff. The prefix's own encoding sorts just below begin, outside.
// Range(Tuple()) holds every non-empty tuple. The bounds are one byte longer than Pack(prefix): if that is already 255
// bytes, no key lies inside (each would be longer than 255 bytes), and a scan would refuse the bounds.
std::pair<std::string, std::string> Range(const Tuple& prefix);

}  // namespace cell
