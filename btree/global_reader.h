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

// A meganode and its key range [min, max) (empty: -infinity, +infinity), as read at some moment: a meganode's min
// never changes and its max only shrinks, so a range once read stays a correct start for its keys (path caches).
struct MeganodeRange {
  GlobalPtr meganode;
  std::string min, max;
};

class GlobalReader {
 public:
  struct Stats {
    uint64_t meganodes = 0;  // meganode visits
    uint64_t rights = 0;     // moves to a right sibling meganode
    uint64_t restarts = 0;   // stale pointers: back to the root
  };

  // `first_meganode`: the cluster's first meganode (offset 0 of the root region), whose header names the root.
  // `only_region`: the walk enters only meganodes of this region (a server's own node region) and stops before any
  // other; 0 for a source that reaches every meganode (a client's).
  GlobalReader(NodeSource* source, GlobalPtr first_meganode, uint32_t only_region = 0)
      : source_(source), first_(first_meganode), only_region_(only_region) {}

  // A walk that would enter a meganode it may not reach stops instead, returning OK with exited() true and exit()
  // naming that meganode (the first meganode, when it had to start again from a root it cannot read): whoever holds
  // it goes on from there. Each call below clears it.

  // `start`: a meganode to begin at instead of the root (a cached root or path entry; null: the root). Any meganode
  // is a correct start for a key it covers or that lies to its right: an old root still is, after a root split.
  // `meta`: as for TreeReader::Find (without it, a locked key gives Unavailable).
  Status Get(std::string_view key, std::string* value, GlobalPtr start = GlobalPtr(), RecordMeta* meta = nullptr);
  // Up to `limit` pairs with start <= key < end (empty end: no bound), in key order (descending with mode.reverse),
  // across meganodes, beginning at meganode `from_meganode` (null: the root). After an exit, resume_key() is where the
  // scan goes on: its start (forward) or its exclusive end (reverse; empty: no bound). `mode`: as for TreeReader.
  Status Scan(std::string_view start, std::string_view end, size_t limit, std::vector<KeyValue>* out,
              GlobalPtr from_meganode = GlobalPtr(), ScanMode mode = {});
  // Adds to *out an estimate of the keys in [start, end) (empty end: no bound) and their bytes: TreeReader::Estimate
  // in each leaf meganode the range overlaps, left to right, beginning at `from_meganode` (null: the root). After an
  // exit, resume_key() is the start of what is left.
  Status ApproximateSize(std::string_view start, std::string_view end, SizeEstimate* out,
                         GlobalPtr from_meganode = GlobalPtr());
  // The meganode at `level` (0: a leaf meganode) whose range holds `key`, beginning at `start` (null: the root, or,
  // without a path to fill, the first meganode when it holds the key at that level, as Get);
  // path[l] is the meganode passed at level l (path must have room for every level; unvisited levels are left null).
  Status Locate(std::string_view key, int level, GlobalPtr* meganode, std::vector<GlobalPtr>* path,
                GlobalPtr start = GlobalPtr());
  // The root meganode now.
  StatusOr<GlobalPtr> Root();
  // The meganode where the last Get answered (found or not), or the last Locate ended.
  GlobalPtr answered() const { return answered_; }
  // Reads `meganode`'s range.
  Status RangeOf(GlobalPtr meganode, MeganodeRange* range);

  bool exited() const { return !exit_.is_null(); }
  GlobalPtr exit() const { return exit_; }
  const std::string& resume_key() const { return resume_; }
  const Stats& stats() const { return stats_; }

 private:
  bool Reaches(GlobalPtr m) const { return only_region_ == 0 || m.region == only_region_; }
  // True if the walk stops before `m` (or has stopped already, in Restart): exit_ names where it goes on.
  bool StopsAt(GlobalPtr m) {
    if (exited()) return true;
    if (Reaches(m)) return false;
    exit_ = m;
    return true;
  }
  // The root, or (with exit_ set) nothing when the first meganode is out of reach.
  Status Restart(GlobalPtr* m);
  Status ScanReverse(std::string_view start, std::string_view end, size_t limit, std::vector<KeyValue>* out,
                     GlobalPtr from_meganode, ScanMode mode);

  NodeSource* source_;
  GlobalPtr first_;
  uint32_t only_region_;
  GlobalPtr exit_;
  GlobalPtr answered_;
  std::string resume_;
  Stats stats_;
};

}  // namespace cell::btree
