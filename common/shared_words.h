// Access to memory that other threads (or a NIC, or another process) may read or write at the same time.
//
// Cell's readers never lock: they read node and extent bytes while a writer may be changing them, and detect a
// torn result afterwards (see btree/node_format.h). To keep that well-defined in the C++ memory model, every access
// to shared node or extent memory is a word-sized relaxed atomic load or store. On x86-64 and AArch64 these compile
// to plain loads and stores; they cost nothing but make the races benign by definition (and ThreadSanitizer agrees
// without suppressions). Private copies are ordinary memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cell {

inline uint64_t LoadSharedWord(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
inline void StoreSharedWord(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

// Copies `words` 8-byte words out of shared memory into private memory.
inline void CopyFromShared(uint64_t* dst, const uint64_t* src, size_t words) {
  for (size_t i = 0; i < words; ++i) dst[i] = LoadSharedWord(src + i);
}

// Copies `words` 8-byte words from private memory into shared memory.
inline void CopyToShared(uint64_t* dst, const uint64_t* src, size_t words) {
  for (size_t i = 0; i < words; ++i) StoreSharedWord(dst + i, src[i]);
}

// Copies `bytes` bytes starting at any address `src` inside shared memory whose words are all readable (the memory
// is 8-byte aligned and a multiple of 8 bytes long, as every region is) into private memory, with word loads only.
inline void CopyBytesFromShared(void* dst, const void* src, size_t bytes) {
  auto* out = static_cast<char*>(dst);
  auto addr = reinterpret_cast<uintptr_t>(src);
  while (bytes > 0) {
    const auto* word_ptr = reinterpret_cast<const uint64_t*>(addr & ~uintptr_t{7});
    const size_t skip = addr & 7;
    const size_t take = bytes < 8 - skip ? bytes : 8 - skip;
    const uint64_t word = LoadSharedWord(word_ptr);
    std::memcpy(out, reinterpret_cast<const char*>(&word) + skip, take);
    out += take;
    addr += take;
    bytes -= take;
  }
}

inline constexpr size_t WordsFor(size_t bytes) { return (bytes + 7) / 8; }

}  // namespace cell
