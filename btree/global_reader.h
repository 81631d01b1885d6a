// GlobalReader: search and scan of the whole tree of meganodes, over any NodeSource.
//
// The walk across meganodes, written once: the server runs it over its own memory (LocalNodeSource), a client over
// one-sided reads (a copying source). It starts at the cluster's root meganode, named in the header of the cluster's
// first meganode, and goes meganode by meganode: down into the child an internal meganode names, right when a key
// lies at or above a meganode's max (B-link style, after a split), and back to the root when a pointer was stale.
// Within a meganode it is TreeReader's walk.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "btree/tree_reader.h"

namespace cell::btree {

class GlobalReader {
 public:
  struct Stats {
    uint64_t meganodes = 0;   // meganode visits
    uint64_t rights = 0;      // moves to a right sibling meganode
    uint64_t restarts = 0;    // stale pointers: back to the root
  };

  // `first_meganode`: the cluster's first meganode (offset 0 of the lowest region), whose header names the root.
  GlobalReader(NodeSource* source, GlobalPtr first_meganode) : source_(source), first_(first_meganode) {}

  // `start`: a meganode to begin at instead of the root (a cached root or path entry; null: the root). Any meganode
  // is a correct start for a key it covers or that lies to its right: an old root still is, after a root split.
  Status Get(std::string_view key, std::string* value, GlobalPtr start = GlobalPtr());
  // Up to `limit` pairs with start <= key < end (empty end: no bound), in key order, across meganodes.
  Status Scan(std::string_view start, std::string_view end, size_t limit, std::vector<KeyValue>* out);
  // The meganode at `level` (0: a leaf meganode) whose range holds `key`; path[l] is the meganode passed at level l
  // (path must have room for every level; unvisited levels are left null).
  Status Locate(std::string_view key, int level, GlobalPtr* meganode, std::vector<GlobalPtr>* path);
  // The root meganode now.
  StatusOr<GlobalPtr> Root();

  const Stats& stats() const { return stats_; }

 private:
  NodeSource* source_;
  GlobalPtr first_;
  Stats stats_;
};

}  // namespace cell::btree
