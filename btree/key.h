// SearchKey: a key prepared for fast comparison against keys stored in nodes.
//
// Keys are ordered bytewise (memcmp order; a proper prefix sorts first). Nodes store a key as raw bytes padded with
// zeros to whole 8-byte words. Comparing two such keys word by word, each word read as a big-endian integer, and then
// by length gives exactly memcmp order: zero padding only ever ties with real zero bytes, and every tie is broken by
// length, where the longer key is the greater. A SearchKey holds its words already byte-swapped, so the usual
// comparison (the first 8 bytes decide) is one load, one bswap and one integer compare.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "cell/limits.h"
#include "common/key_limits.h"

namespace cell::btree {

inline constexpr uint32_t kMaxKeyWords = (kMaxKeySize + 7) / 8;  // 32

// The first 8 bytes of `key`, zero padded, as stored in a node (raw byte order).
inline uint64_t RawWordAt(std::string_view key, size_t word) {
  uint64_t w = 0;
  size_t start = word * 8;
  if (start < key.size()) std::memcpy(&w, key.data() + start, std::min<size_t>(8, key.size() - start));
  return w;
}

// A stored raw word as a comparable integer.
inline uint64_t OrderWord(uint64_t raw) { return __builtin_bswap64(raw); }

class SearchKey {
 public:
  // `key` must be at most kMaxKeySize bytes (callers validate first); the SearchKey refers to key's bytes.
  explicit SearchKey(std::string_view key) : bytes_(key) {
    size_ = static_cast<uint32_t>(key.size() > kMaxKeySize ? kMaxKeySize : key.size());
    words_ = (size_ + 7) / 8;
    const uint32_t whole = size_ / 8;
    for (uint32_t i = 0; i < whole; ++i) {
      uint64_t raw;
      std::memcpy(&raw, key.data() + 8 * i, 8);
      w_[i] = OrderWord(raw);
    }
    if (whole < words_) {  // the last word, zero padded
      uint64_t raw = 0;
      std::memcpy(&raw, key.data() + 8 * whole, size_ % 8);
      w_[whole] = OrderWord(raw);
    }
    if (words_ == 0) w_[0] = 0;
  }

  std::string_view bytes() const { return bytes_; }
  uint32_t size() const { return size_; }
  uint32_t words() const { return words_; }
  // Word i (i < words(), or 0 for an empty key) as a comparable integer.
  uint64_t word(uint32_t i) const { return w_[i]; }

 private:
  std::string_view bytes_;
  uint32_t size_ = 0;
  uint32_t words_ = 0;
  uint64_t w_[kMaxKeyWords];
};

// memcmp order with a proper prefix first; negative, zero or positive.
inline int CompareKeys(std::string_view a, std::string_view b) {
  int c = std::memcmp(a.data(), b.data(), std::min(a.size(), b.size()));
  if (c != 0) return c;
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

// The smallest valid key after `key` (keys are 1..kMaxKeySize bytes): key + "\0", or, for a key of the maximum
// length, the key with trailing 0xff bytes dropped and the last byte incremented. False if `key` is the last key.
inline bool Successor(const std::string& key, std::string* out) {
  if (key.size() < kMaxKeySize) {
    *out = key + std::string(1, '\0');
    return true;
  }
  *out = key;
  while (!out->empty() && static_cast<unsigned char>(out->back()) == 0xff) out->pop_back();
  if (out->empty()) return false;
  out->back() = static_cast<char>(static_cast<unsigned char>(out->back()) + 1);
  return true;
}

// The largest valid key before `key` (the inverse of Successor): `key` without its last byte if that byte is 0,
// else the key with its last byte decremented and 0xff bytes appended up to kMaxKeySize. False if no key is smaller
// (`key` is "\0" or empty). Reverse scans descend to it: the leaf covering it holds every key just below `key`.
inline bool Predecessor(std::string_view key, std::string* out) {
  if (key.empty() || key.size() > kMaxKeySize) return false;
  if (key.back() == '\0') {
    if (key.size() == 1) return false;
    out->assign(key.substr(0, key.size() - 1));
    return true;
  }
  out->assign(key);
  out->back() = static_cast<char>(static_cast<unsigned char>(out->back()) - 1);
  out->resize(kMaxKeySize, static_cast<char>(0xff));
  return true;
}

// The largest valid key: kMaxKeySize bytes of 0xff.
inline std::string LastKey() { return std::string(kMaxKeySize, static_cast<char>(0xff)); }

// The shortest key s with left < s <= right (requires left < right): right cut just after the first byte where
// the two differ. Used as the separator when a leaf splits (suffix truncation), so inner nodes hold short keys.
inline std::string ShortestSeparator(std::string_view left, std::string_view right) {
  size_t i = 0;
  while (i < left.size() && i < right.size() && left[i] == right[i]) ++i;
  return std::string(right.substr(0, i + 1));
}

}  // namespace cell::btree
