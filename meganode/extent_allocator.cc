// Buddy allocation of extents (see extent_allocator.h).
#include "meganode/extent_allocator.h"

#include <cstdlib>

namespace cell::meganode {

StatusOr<std::unique_ptr<ExtentAllocator>> ExtentAllocator::Create(Region* region, uint64_t offset, uint64_t bytes) {
  if (offset % kMinBlock != 0 || bytes % kMinBlock != 0 || bytes == 0) {
    return Status::InvalidArgument("extent area offset and size must be multiples of 32 bytes");
  }
  if (region->Resolve(offset, bytes) == nullptr) {
    return Status::InvalidArgument("extent area does not fit region " + std::to_string(region->id()));
  }
  std::unique_ptr<ExtentAllocator> a(new ExtentAllocator(region, offset, bytes));
  if (a->ctrl_ == nullptr) return Status::ResourceExhausted("no memory for the extent allocator's control bytes");
  return a;
}

ExtentAllocator::ExtentAllocator(Region* region, uint64_t offset, uint64_t bytes)
    : region_(region), offset_(offset), bytes_(bytes) {
  // calloc of a large block maps fresh zero pages: the control bytes cost memory only as they are used.
  ctrl_ = static_cast<uint8_t*>(std::calloc(bytes / kMinBlock, 1));
  while ((kMinBlock << (max_order_ + 1)) <= bytes && max_order_ + 1 < 63) ++max_order_;
  // Cover the area with maximal aligned blocks, largest first.
  uint64_t rel = 0;
  for (int order = max_order_; order >= 0 && ctrl_ != nullptr; --order) {
    uint64_t size = kMinBlock << order;
    while (rel + size <= bytes && rel % size == 0) {
      PushFree(rel, order);
      rel += size;
    }
  }
}

ExtentAllocator::~ExtentAllocator() { std::free(ctrl_); }

void ExtentAllocator::PushFree(uint64_t rel, int order) {
  free_[order].insert(rel);
  ctrl_[rel / kMinBlock] = kFreeHead | static_cast<uint8_t>(order);
}

void ExtentAllocator::Unlink(uint64_t rel, int order) {
  free_[order].erase(rel);
  ctrl_[rel / kMinBlock] = 0;
}

uint64_t ExtentAllocator::BlockSizeFor(uint64_t bytes) const {
  uint64_t size = kMinBlock;
  int order = 0;
  while (size < bytes) {
    size <<= 1;
    ++order;
  }
  return order > max_order_ ? 0 : size;
}

StatusOr<GlobalPtr> ExtentAllocator::Allocate(uint64_t bytes) {
  uint64_t size = BlockSizeFor(bytes);
  if (size == 0) {
    return Status::ResourceExhausted("extent of " + std::to_string(bytes) + " bytes is larger than the extent area (" +
                                     std::to_string(bytes_) + " bytes)");
  }
  int order = __builtin_ctzll(size / kMinBlock);
  std::lock_guard<std::mutex> lock(mu_);
  int o = order;
  while (o <= max_order_ && free_[o].empty()) ++o;
  if (o > max_order_) {
    return Status::ResourceExhausted("extent region " + std::to_string(region_->id()) + " full: no free block of " +
                                     std::to_string(size) + " bytes (" + std::to_string(in_use_) + " of " +
                                     std::to_string(bytes_) + " bytes in use)");
  }
  uint64_t rel = *free_[o].begin();
  Unlink(rel, o);
  while (o > order) {  // split, keeping the lower half
    --o;
    PushFree(rel + (kMinBlock << o), o);
  }
  ctrl_[rel / kMinBlock] = kUsedHead | static_cast<uint8_t>(order);
  in_use_ += size;
  return GlobalPtr{region_->id(), offset_ + rel};
}

Status ExtentAllocator::Free(GlobalPtr ptr) {
  if (ptr.region != region_->id() || ptr.offset < offset_ || ptr.offset - offset_ >= bytes_ ||
      (ptr.offset - offset_) % kMinBlock != 0) {
    return Status::InvalidArgument("extent pointer is not in this extent area");
  }
  uint64_t rel = ptr.offset - offset_;
  std::lock_guard<std::mutex> lock(mu_);
  uint8_t c = ctrl_[rel / kMinBlock];
  if ((c & kUsedHead) == 0) return Status::InvalidArgument("extent pointer is not an allocated block");
  int order = c & kOrderMask;
  in_use_ -= kMinBlock << order;
  ctrl_[rel / kMinBlock] = 0;
  while (order < max_order_) {
    uint64_t buddy = rel ^ (kMinBlock << order);
    if (buddy + (kMinBlock << order) > bytes_) break;
    if (ctrl_[buddy / kMinBlock] != (kFreeHead | order)) break;
    Unlink(buddy, order);
    rel = rel < buddy ? rel : buddy;
    ++order;
  }
  PushFree(rel, order);
  return Status::OK();
}

Status ExtentAllocator::MarkUsed(GlobalPtr ptr, uint64_t bytes) {
  const uint64_t size = BlockSizeFor(bytes);
  if (ptr.region != region_->id() || ptr.offset < offset_ || ptr.offset - offset_ >= bytes_ || size == 0 ||
      (ptr.offset - offset_) % size != 0) {
    return Status::InvalidArgument("record pointer " + std::to_string(ptr.region) + ":" + std::to_string(ptr.offset) +
                                   " of " + std::to_string(bytes) + " bytes is not a block of this extent area");
  }
  const uint64_t rel = ptr.offset - offset_;
  const int order = __builtin_ctzll(size / kMinBlock);
  std::lock_guard<std::mutex> lock(mu_);
  // The free block holding it: the only candidates are the blocks of each order at or above its own that contain it.
  int o = order;
  uint64_t head = rel;
  for (; o <= max_order_; ++o) {
    head = rel & ~((kMinBlock << o) - 1);
    if (ctrl_[head / kMinBlock] == (kFreeHead | o)) break;
  }
  if (o > max_order_) {
    return Status::Corruption("record block " + std::to_string(ptr.region) + ":" + std::to_string(ptr.offset) +
                              " overlaps another record's block");
  }
  Unlink(head, o);
  while (o > order) {  // split, keeping the half that holds it
    --o;
    const uint64_t half = kMinBlock << o;
    if (rel >= head + half) {
      PushFree(head, o);
      head += half;
    } else {
      PushFree(head + half, o);
    }
  }
  ctrl_[rel / kMinBlock] = kUsedHead | static_cast<uint8_t>(order);
  in_use_ += size;
  return Status::OK();
}

uint64_t ExtentAllocator::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

}  // namespace cell::meganode
