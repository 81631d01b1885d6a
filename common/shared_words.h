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

inline constexpr size_t WordsFor(size_t bytes) { return (bytes + 7) / 8; }

}  // namespace cell
