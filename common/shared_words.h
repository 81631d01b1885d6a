// Access to memory that other threads (or a NIC, or another process) may read or write at the same time.
//
// Cell's readers never lock: they read node and extent bytes while a writer may be changing them, and detect a
// torn result afterwards (see btree/node_format.h). To keep that well-defined in the C++ memory model, every access
// to shared node or extent memory is a word-sized relaxed atomic load or store. On x86-64 and AArch64 these compile
// to plain loads and stores; they cost nothing but make the races benign by definition (and ThreadSanitizer agrees
// without suppressions). Private copies are ordinary memory.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace cell {

inline uint64_t LoadSharedWord(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
inline void StoreSharedWord(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

// Copies `words` 8-byte words out of shared memory into private memory.
inline void CopyFromShared(uint64_t* dst, const uint64_t* src, size_t words) {
  const size_t whole = words & ~size_t{3};
  for (size_t i = 0; i < whole; i += 4) {  // four at a time: the loop's own work is most of a short copy's
    const uint64_t a = LoadSharedWord(src + i), b = LoadSharedWord(src + i + 1);
    const uint64_t c = LoadSharedWord(src + i + 2), d = LoadSharedWord(src + i + 3);
    dst[i] = a;
    dst[i + 1] = b;
    dst[i + 2] = c;
    dst[i + 3] = d;
  }
  for (size_t i = whole; i < words; ++i) dst[i] = LoadSharedWord(src + i);
}

// Copies `words` 8-byte words from private memory into shared memory.
inline void CopyToShared(uint64_t* dst, const uint64_t* src, size_t words) {
  const size_t whole = words & ~size_t{3};
  for (size_t i = 0; i < whole; i += 4) {  // four at a time, as CopyFromShared
    StoreSharedWord(dst + i, src[i]);
    StoreSharedWord(dst + i + 1, src[i + 1]);
    StoreSharedWord(dst + i + 2, src[i + 2]);
    StoreSharedWord(dst + i + 3, src[i + 3]);
  }
  for (size_t i = whole; i < words; ++i) StoreSharedWord(dst + i, src[i]);
}

namespace shared_words_internal {
// Copies n <= 8 bytes: two 4-byte moves (overlapping below 8), or up to three single bytes; no variable-length
// memcpy, which costs more than the copy at these sizes.
inline void CopyUpTo8(char* dst, const char* src, size_t n) {
  if (n >= 4) {
    uint32_t a, b;
    std::memcpy(&a, src, 4);
    std::memcpy(&b, src + n - 4, 4);
    std::memcpy(dst, &a, 4);
    std::memcpy(dst + n - 4, &b, 4);
  } else if (n > 0) {
    const char first = src[0], middle = src[n / 2], last = src[n - 1];
    dst[0] = first;
    dst[n / 2] = middle;
    dst[n - 1] = last;
  }
}
}  // namespace shared_words_internal

// Copies `bytes` bytes starting at any address `src` inside shared memory whose words are all readable (the memory
// is 8-byte aligned and a multiple of 8 bytes long, as every region is) into private memory, with word loads only:
// the word holding the first byte, then whole words, then the word holding the last byte.
inline void CopyBytesFromShared(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  auto* out = static_cast<char*>(dst);
  const auto addr = reinterpret_cast<uintptr_t>(src);
  const auto* p = reinterpret_cast<const uint64_t*>(addr & ~uintptr_t{7});
  const size_t skip = addr & 7;
  const size_t head = bytes < 8 - skip ? bytes : 8 - skip;
  uint64_t word = LoadSharedWord(p++);
  shared_words_internal::CopyUpTo8(out, reinterpret_cast<const char*>(&word) + skip, head);
  out += head;
  bytes -= head;
  for (; bytes >= 32; bytes -= 32, out += 32, p += 4) {  // four at a time, as CopyFromShared
    const uint64_t a = LoadSharedWord(p), b = LoadSharedWord(p + 1), c = LoadSharedWord(p + 2),
                   d = LoadSharedWord(p + 3);
    std::memcpy(out, &a, 8);
    std::memcpy(out + 8, &b, 8);
    std::memcpy(out + 16, &c, 8);
    std::memcpy(out + 24, &d, 8);
  }
  for (; bytes >= 8; bytes -= 8, out += 8) {
    word = LoadSharedWord(p++);
    std::memcpy(out, &word, 8);
  }
  if (bytes > 0) {
    word = LoadSharedWord(p);
    shared_words_internal::CopyUpTo8(out, reinterpret_cast<const char*>(&word), bytes);
  }
}

// True if the `bytes.size()` bytes at the start of the shared words `src` are `bytes` (word loads only; the bytes
// after them in the last word are not compared). Little-endian: a word's first byte is its lowest.
inline bool SharedBytesEqual(const uint64_t* src, std::string_view bytes) {
  static_assert(std::endian::native == std::endian::little);
  const char* at = bytes.data();
  size_t n = bytes.size();
  for (; n >= 8; n -= 8, at += 8, ++src) {
    uint64_t word;
    std::memcpy(&word, at, 8);
    if (LoadSharedWord(src) != word) return false;
  }
  if (n == 0) return true;
  uint64_t tail = 0;
  shared_words_internal::CopyUpTo8(reinterpret_cast<char*>(&tail), at, n);
  return (LoadSharedWord(src) & ((uint64_t{1} << (8 * n)) - 1)) == tail;
}

inline constexpr size_t WordsFor(size_t bytes) { return (bytes + 7) / 8; }

}  // namespace cell
