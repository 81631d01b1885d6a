// ExtentAllocator: a buddy allocator for key-value records in an extent region (in the manner of SQLite's mem5,
// which Cell used).
//
// Blocks are 32 << order bytes, aligned to their size relative to the managed area's start. A control byte per
// 32-byte unit marks block heads (free or allocated, and the order); free blocks are kept in per-order ordered sets
// outside the region, lowest address first (so allocation stays compact), and the allocator never writes region
// memory: touching it would fault in (and, with huge pages, zero) memory nobody asked for. Freeing merges a block
// with its buddy while the buddy is free and of the same order. Waste is below 50% per record, about 25% for
// uniformly spread sizes.
//
// Freed memory may still be read by a reader holding an old leaf entry. A copying reader detects the reuse by the
// record checksum; an in-place reader by the leaf version (TreeReader::ReadRecord), which rests on two things:
//   - Free happens before any later Allocate that hands out the same memory (both take mu_); keep that ordering if
//     this allocator ever goes lock-free or per-thread.
//   - Whoever writes a block it got from Allocate issues a release fence after Allocate and before its first store
//     to the block (GlobalTree::WriteRecord is the writer of extent memory). Any new writer of extent memory must
//     do the same, or in-place reads may accept a torn or reused record.
#pragma once

#include <absl/container/btree_set.h>

#include <cstdint>
#include <memory>
#include <mutex>

#include "cell/status.h"
#include "common/global_ptr.h"
#include "meganode/region.h"

namespace cell::meganode {

class ExtentAllocator {
 public:
  static constexpr uint64_t kMinBlock = 32;

  // Manages [offset, offset + bytes) of `region`; both multiples of kMinBlock.
  static StatusOr<std::unique_ptr<ExtentAllocator>> Create(Region* region, uint64_t offset, uint64_t bytes);
  ~ExtentAllocator();

  // A block of at least `bytes` bytes (8-byte aligned, at least 32 bytes), or ResourceExhausted.
  StatusOr<GlobalPtr> Allocate(uint64_t bytes);
  // Returns a block from Allocate. Pointers that are not allocated block heads are refused with an error.
  Status Free(GlobalPtr ptr);
  // Recovery: marks the block a record of `bytes` bytes at `ptr` was given (as Allocate would have handed it out) as
  // allocated. InvalidArgument for a pointer outside the area or not aligned to its block; Corruption if the block
  // overlaps one already marked (two records in one block).
  Status MarkUsed(GlobalPtr ptr, uint64_t bytes);

  uint64_t capacity() const { return bytes_; }
  uint64_t bytes_in_use() const;
  // The block size Allocate would hand out for `bytes` (0 if it can never be satisfied).
  uint64_t BlockSizeFor(uint64_t bytes) const;

 private:
  static constexpr uint8_t kFreeHead = 0x80;
  static constexpr uint8_t kUsedHead = 0x40;
  static constexpr uint8_t kOrderMask = 0x3f;

  ExtentAllocator(Region* region, uint64_t offset, uint64_t bytes);
  void PushFree(uint64_t rel, int order);
  void Unlink(uint64_t rel, int order);

  Region* region_;
  uint64_t offset_;
  uint64_t bytes_;
  int max_order_ = 0;
  uint8_t* ctrl_ = nullptr;  // one byte per kMinBlock unit
  mutable std::mutex mu_;
  absl::btree_set<uint64_t> free_[64];  // free blocks (relative offsets) per order
  uint64_t in_use_ = 0;
};

}  // namespace cell::meganode
