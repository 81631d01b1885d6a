// NodeCache: copies of the upper levels of the tree, kept by a client between searches (Cell's client cache), so that
// a client-side search reads fewer nodes over the network.
//
// Only nodes at least `min_height` levels above the leaves are kept: a tree node of a leaf meganode at local level
// >= min_height; a leaf meganode's header when its local root is at least min_height - 1 (the header sits one level
// above its root); every node and header of an internal meganode (each sits above a whole leaf meganode's tree). Leaves
// and records are never cached. Bounded in bytes; when full, a shard drops a copy not used since the last pass of its
// CLOCK hand (LRU's usual approximation: a hit sets a bit instead of moving the entry, so a hit touches one slot and
// no list). Sharded, thread-safe.
//
// A cached copy may be stale. The traversal (btree/tree_reader.h) treats a stale copy like a stale pointer, and tells
// its source to forget what misled it (NodeSource::Forget): the nodes on its path when it restarts, the node above
// when it must move right, a meganode's header when a node turns out to be cut. An old copy is otherwise a correct
// place to continue: nodes' min keys never change, their max keys only shrink, and a search moves right when it must
// (checking that each node it moves to begins where the last one ended, since slots are used again).
#pragma once

#include <absl/container/flat_hash_map.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "btree/node_format.h"
#include "common/global_ptr.h"

namespace cell::btree {

class NodeCache {
 public:
  struct Stats {
    std::atomic<uint64_t> hits{0};
    std::atomic<uint64_t> misses{0};
    std::atomic<uint64_t> forgotten{0};  // copies dropped because they misled a search
  };

  NodeCache(size_t capacity_bytes, int min_height);

  // Copies the cached node at `ptr` into dst (kNodeWords words); false if it is not cached.
  bool Lookup(GlobalPtr ptr, uint64_t* dst);
  // Keeps a copy that passed CheckCopy, if the node qualifies (see above).
  void Offer(GlobalPtr ptr, const uint64_t* words);
  void Forget(GlobalPtr ptr);
  // Whether a node with these words would be kept.
  bool Qualifies(const uint64_t* words) const;

  size_t size() const;
  const Stats& stats() const { return stats_; }

 private:
  struct Shard {
    std::mutex mu;
    absl::flat_hash_map<uint64_t, uint32_t> index;       // packed pointer -> slot
    std::deque<std::array<uint64_t, kNodeWords>> nodes;  // slot -> copy; grows to per_shard_ slots, never moves
    std::vector<uint64_t> keys;                          // slot -> packed pointer, 0 when free
    std::vector<uint8_t> used;                           // slot -> hit since the hand last passed it
    std::vector<uint32_t> free;                          // slots emptied by Forget
    uint32_t hand = 0;
  };
  // A slot for a new copy: a free one, a new one below the bound, or the CLOCK hand's victim. Under s.mu.
  uint32_t TakeSlot(Shard& s);
  static constexpr size_t kShards = 16;
  Shard& ShardOf(uint64_t key) const { return shards_[(key * 0x9E3779B97F4A7C15ull) >> 60]; }

  const size_t per_shard_;  // entries
  const int min_height_;
  mutable std::array<Shard, kShards> shards_;
  Stats stats_;
};

}  // namespace cell::btree
