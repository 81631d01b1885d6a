// LocalStore: meganode tree + extent records (see local_store.h).
#include "meganode/local_store.h"

#include <atomic>

#include "btree/record_format.h"
#include "common/shared_words.h"

namespace cell::meganode {

StatusOr<std::unique_ptr<LocalStore>> LocalStore::Open(const LocalStoreOptions& options) {
  std::unique_ptr<LocalStore> s(new LocalStore());
  auto node_region = Region::Create(options.node_region_id, options.meganode_bytes, options.backing);
  if (!node_region.ok()) return node_region.status();
  s->node_region_ = std::move(node_region).value();
  auto extent_region = Region::Create(options.extent_region_id, options.extent_region_bytes, options.backing);
  if (!extent_region.ok()) return extent_region.status();
  s->extent_region_ = std::move(extent_region).value();
  s->regions_.Add(s->node_region_.get());
  s->regions_.Add(s->extent_region_.get());

  auto mega = Meganode::Create(s->node_region_.get(), 0, options.meganode_bytes);
  if (!mega.ok()) return mega.status();
  s->meganode_ = std::move(mega).value();
  auto extents = ExtentAllocator::Create(s->extent_region_.get(), 0, options.extent_region_bytes);
  if (!extents.ok()) return extents.status();
  s->extents_ = std::move(extents).value();

  CELL_RETURN_IF_ERROR(btree::BLinkTree::Format(s->meganode_.get(), btree::MeganodeInfo{}));
  s->source_ = std::make_unique<btree::LocalNodeSource>(&s->regions_);
  s->tree_ = std::make_unique<btree::BLinkTree>(s->meganode_.get(), s->source_.get());
  return s;
}

Status LocalStore::Put(std::string_view key, std::string_view value) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, value));
  thread_local std::vector<uint64_t> record;
  uint64_t checksum = btree::EncodeRecord(key, value, &record);
  auto extent = extents_->Allocate(record.size() * 8);
  if (!extent.ok()) return extent.status();
  // The block may have held a record that an in-place reader is still copying. This release fence, after Allocate
  // and before the new bytes are stored, lets such a reader prove its copy by re-checking the leaf version instead
  // of the checksum (argument in TreeReader::ReadRecord): a reader that loads any of these bytes and then issues an
  // acquire fence sees every write that happened before this fence, including (through the allocator's mutex, Free
  // before this Allocate) the lock of the leaf that dropped the old entry. Required of every extent writer; see
  // extent_allocator.h.
  std::atomic_thread_fence(std::memory_order_release);
  CopyToShared(regions_.Resolve(*extent, record.size() * 8), record.data(), record.size());
  btree::LeafValue entry{*extent, static_cast<uint32_t>(btree::RecordLength(key.size(), value.size())), checksum};
  std::optional<btree::LeafValue> replaced;
  Status s = tree_->Put(key, entry, &replaced);
  if (!s.ok()) {
    extents_->Free(*extent);
    return s;
  }
  // Readers that still hold the old entry detect the freed (and perhaps reused) record: copying readers by its
  // checksum, in-place readers by the leaf version (this Put changed it before the block is freed).
  if (replaced) return extents_->Free(replaced->ptr);
  return Status::OK();
}

Status LocalStore::Get(std::string_view key, std::string* value) const { return tree_->Reader().Get(key, value); }

Status LocalStore::Delete(std::string_view key) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, {}));
  btree::LeafValue removed;
  CELL_RETURN_IF_ERROR(tree_->Delete(key, &removed));
  return extents_->Free(removed.ptr);
}

Status LocalStore::Scan(std::string_view start, std::string_view end, size_t limit,
                        std::vector<btree::KeyValue>* out) const {
  return tree_->Reader().Scan(start, end, limit, out);
}

}  // namespace cell::meganode
