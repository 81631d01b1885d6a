// LocalStore: a sorted key-value store in one meganode and one extent region of this process's memory.
//
// The building block a Cell server serves from, and what the local benchmark and demo use: keys live in the
// meganode's B-link tree, each leaf entry pointing to an extent record (key, value, checksum) in the extent region.
// Thread-safe: any number of threads may read and write at once. Not logged: it has no write sink
// (btree/write_sink.h); the server's store is GlobalTree, whose writes are.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "btree/blink_tree.h"
#include "btree/node_source.h"
#include "btree/tree_reader.h"
#include "cell/limits.h"
#include "meganode/extent_allocator.h"
#include "meganode/meganode.h"
#include "meganode/region.h"

namespace cell::meganode {

struct LocalStoreOptions {
  uint64_t meganode_bytes = uint64_t{64} << 20;      // one meganode; its node region is this size too
  uint64_t extent_region_bytes = uint64_t{1} << 30;  // key-value records
  // Anonymous memory gets transparent huge pages (far fewer TLB misses); kMemfd when regions must be shared.
  RegionBacking backing = RegionBacking::kAnonymous;
  uint32_t node_region_id = 1;
  uint32_t extent_region_id = 2;
};

class LocalStore {
 public:
  static StatusOr<std::unique_ptr<LocalStore>> Open(const LocalStoreOptions& options);

  // Inserts or replaces. InvalidArgument for an empty or oversized key or an oversized value; ResourceExhausted
  // when the meganode or the extent region is full (nothing is changed then).
  Status Put(std::string_view key, std::string_view value);
  Status Get(std::string_view key, std::string* value) const;
  Status Delete(std::string_view key);
  // Up to `limit` pairs with start <= key < end (empty end: no bound), in order.
  Status Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out) const;

  btree::BLinkTree& tree() { return *tree_; }
  Meganode& meganode() { return *meganode_; }
  ExtentAllocator& extents() { return *extents_; }
  const RegionSet& regions() const { return regions_; }
  const Region& node_region() const { return *node_region_; }
  const Region& extent_region() const { return *extent_region_; }
  btree::NodeSource& local_source() const { return *source_; }
  GlobalPtr meganode_ptr() const { return meganode_->meganode(); }

 private:
  LocalStore() = default;
  std::unique_ptr<Region> node_region_, extent_region_;
  RegionSet regions_;
  std::unique_ptr<Meganode> meganode_;
  std::unique_ptr<ExtentAllocator> extents_;
  std::unique_ptr<btree::LocalNodeSource> source_;
  std::unique_ptr<btree::BLinkTree> tree_;
};

}  // namespace cell::meganode
