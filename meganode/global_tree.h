// GlobalTree: Cell's tree of meganodes, held by one process: meganodes carved from a node region, records in an
// extent region, searches that cross meganodes (btree/global_reader.h), and meganode splits (Cell's protocol).
//
// The first meganode (offset 0 of the node region) is the cluster's first meganode: its header names the root
// meganode. Leaf meganodes hold key -> record entries; internal meganodes hold separator -> child meganode entries
// (the leftmost child under the smallest key, "\0"). A meganode M that runs out of slots is split:
//   1. writers of M are held off (its split lock), readers are not;
//   2. the split key s is M's middle entry; a new meganode N, range [s, M's max), right link M's right sibling, gets
//      the entries >= s (records do not move: N's entries point to the same extents). N's split lock is taken too,
//      so that no writer changes N until step 4 is done;
//   3. M's header is published with max s and right link N: a search for k >= s that reads it moves right to N;
//   4. M's nodes are cut, level by level from the top: entries >= s dropped, max fence s, no right link (a reader
//      that meets such a node re-reads the header and moves right); nodes wholly >= s are published invalid and
//      their slots freed (a reader holding a pointer to one restarts from an ancestor, as for any stale pointer).
//      Until the cut reaches a node, readers may still see it whole: its content is current, because neither M nor
//      N takes writes yet. And since every node of M holding an entry >= s changes version before any write to N
//      can free a record, an in-place reader's version check never vouches for a record reused since;
//   5. writers are let into M and N again (those for k >= s find N), and the separator s -> N is inserted into the
//      parent meganode, which may split in turn; when the root splits, a new root meganode is made and the first
//      meganode's header is pointed at it.
// Thread-safe.
#pragma once

#include <pthread.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "btree/blink_tree.h"
#include "btree/global_reader.h"
#include "btree/node_source.h"
#include "meganode/extent_allocator.h"
#include "meganode/meganode.h"
#include "meganode/region.h"

namespace cell::meganode {

struct GlobalTreeOptions {
  uint64_t meganode_bytes = uint64_t{64} << 20;
  uint32_t meganodes = 16;                           // room for this many meganodes (the node region's size)
  uint64_t extent_region_bytes = uint64_t{1} << 30;  // records
  RegionBacking backing = RegionBacking::kAnonymous;
  uint32_t node_region_id = 1;
  uint32_t extent_region_id = 2;
};

// A meganode's split lock: shared by its writers, exclusive for a split. A waiting split holds back new writers (a
// writer-preferring pthread rwlock; glibc's default, and std::shared_mutex, let new readers pass a waiting writer,
// so a stream of updates could keep a full meganode from ever splitting). pthread's, so ThreadSanitizer sees it.
class SplitLock {
 public:
  SplitLock() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~SplitLock() { pthread_rwlock_destroy(&lock_); }
  SplitLock(const SplitLock&) = delete;
  SplitLock& operator=(const SplitLock&) = delete;
  void lock() { pthread_rwlock_wrlock(&lock_); }
  void unlock() { pthread_rwlock_unlock(&lock_); }
  void lock_shared() { pthread_rwlock_rdlock(&lock_); }
  void unlock_shared() { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

class GlobalTree {
 public:
  struct Stats {
    std::atomic<uint64_t> splits{0};       // meganode splits
    std::atomic<uint64_t> root_splits{0};  // of which the root's (a new root meganode)
  };

  static StatusOr<std::unique_ptr<GlobalTree>> Open(const GlobalTreeOptions& options);

  // As LocalStore: InvalidArgument for keys and values outside the limits; ResourceExhausted when the records or
  // the meganodes run out (nothing is changed then).
  Status Put(std::string_view key, std::string_view value);
  Status Get(std::string_view key, std::string* value);
  Status Delete(std::string_view key);
  Status Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out);

  // The cluster's first meganode (its header names the root).
  GlobalPtr first_meganode() const { return GlobalPtr{node_region_->id(), 0}; }
  const RegionSet& regions() const { return regions_; }
  const Region& node_region() const { return *node_region_; }
  const Region& extent_region() const { return *extent_region_; }
  size_t meganodes_in_use() const;
  uint64_t extent_bytes_used() const { return extents_->bytes_in_use(); }
  const Stats& stats() const { return stats_; }

  // Test seam: called by a split after it has published the left half's header and before it cuts the nodes (the
  // window in step 4), with the split key. It runs on the splitting thread, with the split locks held.
  void set_split_observer(std::function<void(const std::string& separator)> o) { split_observer_ = std::move(o); }

  // Checks every meganode (its local tree's invariants) and the meganodes' chains: at each level, left to right,
  // ranges that tile the key space and entries inside their meganode's range. Only while no writer runs.
  Status CheckInvariants() const;

 private:
  struct Mega {
    std::unique_ptr<Meganode> store;
    std::unique_ptr<btree::BLinkTree> tree;
    SplitLock split_mu;  // writers shared, a split exclusive
    uint64_t splits = 0;         // guarded by split_mu: how often this meganode has split
  };

  GlobalTree() = default;
  Mega* At(GlobalPtr meganode) const;
  StatusOr<Mega*> NewMeganode(const btree::MeganodeInfo& info);
  // Runs `write` on the meganode at `level` (0: leaf meganodes) covering `key`, under its split lock, splitting
  // meganodes that are full.
  Status Write(int level, std::string_view key, const std::function<Status(btree::BLinkTree&)>& write);
  // Splits `m` (at `level` among meganodes) unless it has split since the caller saw `seen_splits`; then inserts the
  // separator above.
  Status Split(Mega* m, int level, uint64_t seen_splits);
  Status InsertSeparator(int level, const std::string& separator, GlobalPtr child);
  void SetClusterRoot(GlobalPtr root);

  std::unique_ptr<Region> node_region_, extent_region_;
  RegionSet regions_;
  std::unique_ptr<ExtentAllocator> extents_;
  std::unique_ptr<btree::LocalNodeSource> source_;
  uint64_t meganode_bytes_ = 0;
  std::vector<std::unique_ptr<Mega>> megas_;  // by index in the node region; null: free
  mutable std::mutex megas_mu_;               // guards megas_ slots being filled
  std::mutex root_mu_;                        // one root split at a time
  Stats stats_;
  std::function<void(const std::string&)> split_observer_;
};

}  // namespace cell::meganode
