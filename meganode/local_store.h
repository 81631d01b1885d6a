// LocalStore: a sorted key-value store in this process's memory: a GlobalTree (meganode/global_tree.h) with room
// for one meganode by default, no peers, and no write sink (not logged).
//
// The one front end of Cell's tree is GlobalTree, the tree cell-server runs; LocalStore only opens one and forwards
// Put/Get/Delete/Scan to it, so what uses it runs the server's code: the local benchmark (cell-btree-bench), the demo
// (cell-local-demo), and the tests of one meganode's B-link tree, which also reach that meganode's BLinkTree and
// node store through the accessors below. With `meganodes` = 1 a full meganode cannot split (there is no room for a
// second one) and refuses inserts with ResourceExhausted, changing nothing; with more, it splits as a server's does.
// Thread-safe: any number of threads may read and write at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "btree/blink_tree.h"
#include "btree/tree_reader.h"
#include "meganode/global_tree.h"
#include "meganode/meganode.h"
#include "meganode/region.h"

namespace cell::meganode {

struct LocalStoreOptions {
  uint64_t meganode_bytes = uint64_t{64} << 20;      // each meganode
  uint32_t meganodes = 1;                            // room for this many (the node region is meganodes x that size)
  uint64_t extent_region_bytes = uint64_t{1} << 30;  // key-value records
  // Anonymous memory gets transparent huge pages (far fewer TLB misses); kMemfd when regions must be shared.
  RegionBacking backing = RegionBacking::kAnonymous;
  uint32_t node_region_id = 1;
  uint32_t extent_region_id = 2;
};

class LocalStore {
 public:
  static StatusOr<std::unique_ptr<LocalStore>> Open(const LocalStoreOptions& options);

  // GlobalTree's: InvalidArgument for an empty or oversized key or an oversized value; ResourceExhausted when the
  // meganodes or the extent region are full (nothing is changed then).
  Status Put(std::string_view key, std::string_view value) { return tree_->Put(key, value); }
  Status Get(std::string_view key, std::string* value) const { return tree_->Get(key, value); }
  Status Delete(std::string_view key) { return tree_->Delete(key); }
  // Up to `limit` pairs with start <= key < end (empty end: no bound), in order.
  Status Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out) const {
    return tree_->Scan(start, end, limit, out);
  }

  // The first meganode (the only one unless `meganodes` > 1 and it has split): its local B-link tree, its node store
  // and its pointer.
  btree::BLinkTree& tree() { return *first_tree_; }
  Meganode& meganode() { return *first_meganode_; }
  GlobalPtr meganode_ptr() const { return tree_->first_meganode(); }
  const RegionSet& regions() const { return tree_->regions(); }
  uint64_t extent_bytes_used() const { return tree_->extent_bytes_used(); }

 private:
  LocalStore() = default;
  std::unique_ptr<GlobalTree> tree_;
  btree::BLinkTree* first_tree_ = nullptr;
  Meganode* first_meganode_ = nullptr;
};

}  // namespace cell::meganode
