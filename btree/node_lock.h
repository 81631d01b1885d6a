// The per-node seqlock that writers take (protocol in btree/node_format.h, "WRITE PROTOCOL").
//
// Memory ordering, after Boehm ("Can seqlocks get along with programming language memory models?", 2012): the
// writer's CAS to an odd version is followed by a release fence, so a reader whose relaxed load sees any of the
// writer's data stores, and then issues an acquire fence, must see the odd (or a later) version on its re-check.
// The final release store of the even version publishes the data to readers that load it with acquire.
#pragma once

#include <cstdint>
#include <thread>

#include "btree/node_format.h"
#include "common/shared_words.h"

namespace cell::btree {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Waits while a writer holds the node; returns the (even) version seen, loaded with acquire order.
inline uint64_t WaitStableVersion(const uint64_t* node) {
  for (int spins = 0;; ++spins) {
    uint64_t v = __atomic_load_n(node, __ATOMIC_ACQUIRE);
    if ((v & 1) == 0) return v;
    if (spins < 64)
      CpuRelax();
    else
      std::this_thread::yield();
  }
}

// WaitStableVersion, giving up after `max_yields` yields: false if a writer still holds the node. *waited: whether
// the first load found it held.
inline bool WaitStableVersionFor(const uint64_t* node, int max_yields, uint64_t* version, bool* waited) {
  for (int spins = 0; spins < 64 + max_yields; ++spins) {
    uint64_t v = __atomic_load_n(node, __ATOMIC_ACQUIRE);
    if ((v & 1) == 0) {
      *version = v;
      *waited = spins > 0;
      return true;
    }
    if (spins < 64)
      CpuRelax();
    else
      std::this_thread::yield();
  }
  return false;
}

// Takes the node's lock; returns the odd version now stored.
inline uint64_t LockNode(uint64_t* node) {
  for (;;) {
    uint64_t v = WaitStableVersion(node);
    if (__atomic_compare_exchange_n(node, &v, v + 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      __atomic_thread_fence(__ATOMIC_RELEASE);
      return v + 1;
    }
  }
}

// Releases a lock taken by LockNode without changing the node.
inline void UnlockUnchanged(uint64_t* node, uint64_t locked) { __atomic_store_n(node, locked - 1, __ATOMIC_RELEASE); }

// Publishes `image`, already sealed with version locked + 1, as the node's new state and releases the lock.
inline void PublishSealedAndUnlock(uint64_t* node, const NodeImage& image, uint64_t locked) {
  CopyToShared(node + 1, image.w + 1, kNodeWords - 1);
  __atomic_store_n(node, locked + 1, __ATOMIC_RELEASE);
}

// Publishes `image` as the node's new state and releases the lock (the version becomes locked + 1).
inline void PublishAndUnlock(uint64_t* node, NodeImage* image, uint64_t locked) {
  image->Seal(locked + 1);
  PublishSealedAndUnlock(node, *image, locked);
}

// Copies a locked node into a private image (the lock keeps writers out; readers do not write).
inline void LoadLocked(const uint64_t* node, NodeImage* image) { CopyFromShared(image->w, node, kNodeWords); }

}  // namespace cell::btree
