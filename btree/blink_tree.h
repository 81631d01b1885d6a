// BLinkTree: the writers of one meganode's B-link tree (Sagiv's algorithms), run by the server that holds it.
//
// Searches are lock-free (TreeReader). A writer locks at most one node at a time:
//   Put:    lock the leaf that covers the key (moving right under one lock at a time), insert or replace, publish.
//   Split:  a full node's entries are partitioned (two halves, or more pieces if long keys demand it); the new right
//           siblings are written first, unreachable, then the old node is published with its lower part and a right
//           link to them, and unlocked. Only then is each separator inserted into the parent level, as a separate
//           step that may split the parent in turn, up to a new root. Between the two steps a reader that arrives
//           through the parent simply follows the right link.
//   Delete: remove the entry from its leaf under the leaf's lock; nodes are never merged.
// Leaf separators are suffix-truncated (btree/key.h), so inner nodes hold short keys and the tree stays shallow.
//
// Running out of slots never corrupts the tree: a first split (of a leaf) that cannot get its slots fails with
// ResourceExhausted before changing anything, and leaves the meganode's reserve (see Meganode) for the splits that a
// cascade must finish. If a cascade still cannot get a slot, the separator is left out: the tree stays correct
// (readers reach the new node by its left sibling's right link) and missing_separators counts it.
#pragma once

#include <absl/functional/function_ref.h>

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "btree/node_lock.h"
#include "btree/node_store.h"
#include "btree/tree_reader.h"

namespace cell::btree {

class BLinkTree {
 public:
  struct Stats {
    std::atomic<uint64_t> splits{0};
    std::atomic<uint64_t> root_splits{0};
    std::atomic<uint64_t> missing_separators{0};
  };
  // What CheckInvariants found.
  struct Shape {
    int height = 0;  // levels, leaves included
    uint64_t nodes = 0;
    uint64_t leaves = 0;
    uint64_t entries = 0;  // level-0 entries
    std::vector<uint64_t> nodes_per_level;
  };

  // Writes an empty tree into a fresh meganode: the header at slot 0 (saying `info`), an empty root leaf.
  static Status Format(NodeStore* store, const MeganodeInfo& info);

  // `local` must read the same memory as `store` (a LocalNodeSource).
  BLinkTree(NodeStore* store, NodeSource* local);

  // What Update does with a key's level-0 entry, decided under its leaf's lock.
  struct LeafChange {
    enum class Op { kKeep, kSet, kRemove };
    Op op = Op::kKeep;
    LeafValue value;  // kSet: the entry's new value (inserted if the key is absent)
  };
  // Locks the leaf covering `key` and calls `decide` with the key's entry (null: absent) while holding the lock; does
  // what it says and publishes, or, if it returns an error, changes nothing and returns the error. *old: the entry
  // before (nullopt: absent). `decide` runs exactly once, unless the leaf is full and splitting it fails (then the
  // error is returned and nothing changed). It must not block: the leaf's readers wait for the lock's holder.
  Status Update(std::string_view key, absl::FunctionRef<StatusOr<LeafChange>(const LeafValue* current)> decide,
                std::optional<LeafValue>* old);
  // Inserts key -> value, or replaces the value if the key is present (*replaced then holds the old one).
  Status Put(std::string_view key, const LeafValue& value, std::optional<LeafValue>* replaced);
  // Removes key; *removed holds its value. NotFound if absent.
  Status Delete(std::string_view key, LeafValue* removed);

  // A reader over the server's own memory.
  TreeReader Reader() const { return TreeReader(local_, store_->meganode()); }
  // Checks every structural invariant (fences chain along each level, keys sorted and inside their node's fences,
  // parents agree with children). Only while no writer runs.
  Status CheckInvariants(Shape* shape) const;

  const Stats& stats() const { return stats_; }
  NodeStore* store() const { return store_; }

 private:
  struct Locked {
    uint32_t slot = 0;
    uint64_t* words = nullptr;
    uint64_t version = 0;  // odd: the lock is held
    NodeImage image;
  };

  // Locks the node at `level` covering k. With have_hint, starts at `slot`; otherwise descends from the root
  // (refreshing `path`). Moves right and re-descends as needed; returns holding the lock.
  Status LockCovering(const SearchKey& k, int level, uint32_t slot, bool have_hint, Path* path, Locked* out);
  // Splits the locked node whose new entries are `entries`; releases the lock; inserts separators above.
  Status Split(Locked* node, std::vector<NodeEntry> entries, Path* path, bool continuing);
  // Inserts separator -> child at `level` (the parent level of a split).
  void InsertSeparator(int level, const std::string& separator, uint32_t child, Path* path);
  // Makes a new root at `level` over the old root and `child`, unless the tree already has that level.
  Status GrowRoot(int level, const std::string& separator, uint32_t child, bool* grown);
  void Publish(uint32_t slot, uint64_t locked, NodeImage* image);
  void Publish(Locked* node) { Publish(node->slot, node->version, &node->image); }
  void Unlock(Locked* node) { UnlockUnchanged(node->words, node->version); }

  NodeStore* store_;
  NodeSource* local_;
  uint8_t node_flags_ = kFlagValid;
  Stats stats_;
};

// How a node's entries are cut into pieces that each fit a node: starts[i] is the first entry of piece i
// (starts[0] == 0), separators[i-1] the key between pieces i-1 and i. Two balanced halves when they fit, more
// pieces only when long keys and fences leave no two-way cut. False if even that fails (cannot happen for keys
// of at most kMaxKeySize bytes).
// With exact_leaf_separators, a level-0 cut's separator is the right piece's first key (no suffix truncation).
bool PartitionEntries(const std::vector<NodeEntry>& entries, int level, std::string_view min, std::string_view max,
                      std::vector<size_t>* starts, std::vector<std::string>* separators,
                      bool exact_leaf_separators = false);

}  // namespace cell::btree
