// Meganode: a slice of a node region (64 MiB by default) holding one local B-link tree of 1 KB nodes.
//
// Slot 0 is the meganode header (root slot and level); slots 1.. are tree nodes. Slots come from a bump pointer
// and a free list. A first split (of a leaf) may only take slots while a reserve of 4 * (height + 1) slots stays
// free; splits that continue a cascade may use the reserve, so a cascade that has started can finish. A full
// meganode therefore refuses inserts that need a new leaf with ResourceExhausted and is never left half-split.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "btree/node_store.h"
#include "meganode/region.h"

namespace cell::meganode {

class Meganode final : public btree::NodeStore {
 public:
  // A meganode over [offset, offset + bytes) of `region`: offset and bytes multiples of 1 KiB, at least 8 slots.
  static StatusOr<std::unique_ptr<Meganode>> Create(Region* region, uint64_t offset, uint64_t bytes);

  GlobalPtr meganode() const override { return GlobalPtr{region_->id(), offset_}; }
  uint32_t num_slots() const override { return num_slots_; }
  uint64_t* SlotWords(uint32_t slot) override {
    return slot < num_slots_ ? reinterpret_cast<uint64_t*>(base_ + uint64_t{slot} * btree::kNodeSize) : nullptr;
  }
  Status AllocateSlots(uint32_t n, bool continuing, uint32_t* out) override;
  void FreeSlots(const uint32_t* slots, uint32_t n) override;
  void OnRootLevel(int level) override { root_level_.store(level, std::memory_order_relaxed); }

  // Recovery: the slots `used` hold the meganode's nodes (the header, slot 0, always); every other is free.
  void Restore(const std::vector<uint32_t>& used, int root_level);

  uint32_t free_slots() const;
  // Three quarters of the slots a first split may take are in use.
  bool MostlyFull() const;
  uint64_t bytes() const { return uint64_t{num_slots_} * btree::kNodeSize; }

 private:
  Meganode(Region* region, uint64_t offset, uint32_t num_slots)
      : region_(region), offset_(offset), base_(region->base() + offset), num_slots_(num_slots) {}
  uint32_t Reserve() const { return 4 * (root_level_.load(std::memory_order_relaxed) + 2); }

  Region* region_;
  uint64_t offset_;
  char* base_;
  uint32_t num_slots_;
  std::atomic<int> root_level_{0};
  mutable std::mutex mu_;
  uint32_t next_unused_ = 1;  // slot 0 is the header
  std::vector<uint32_t> free_list_;
};

}  // namespace cell::meganode
