// The one checksum of nodes and extent records: XXH3-64. xxHash's x86 build picks its widest vector code (SSE2,
// AVX2 or AVX-512) at run time through its *_dispatch entry points; the value is the same on every path. Without
// them (other architectures) the plain entry point is used.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
#define XXH_DISPATCH_DISABLE_REPLACE 1  // call the *_dispatch functions by name, below
#include <xxh_x86dispatch.h>
#define CELL_XXH3_DISPATCH 1
#else
#include <xxhash.h>
#endif

namespace cell::btree {

// XXH3-64 with a seed (seed 0 is plain XXH3-64, as xxHash documents).
inline uint64_t Checksum64(const void* bytes, size_t length, uint64_t seed = 0) {
#ifdef CELL_XXH3_DISPATCH
  return XXH3_64bits_withSeed_dispatch(bytes, length, seed);
#else
  return XXH3_64bits_withSeed(bytes, length, seed);
#endif
}

}  // namespace cell::btree
