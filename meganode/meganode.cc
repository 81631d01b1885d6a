// Meganode slot allocation (see meganode.h).
#include "meganode/meganode.h"

#include <algorithm>

namespace cell::meganode {

StatusOr<std::unique_ptr<Meganode>> Meganode::Create(Region* region, uint64_t offset, uint64_t bytes) {
  if (offset % btree::kNodeSize != 0 || bytes % btree::kNodeSize != 0 || bytes < 8 * btree::kNodeSize) {
    return Status::InvalidArgument("meganode offset and size must be multiples of 1 KiB and the size at least 8 KiB");
  }
  if (region->Resolve(offset, bytes) == nullptr) {
    return Status::InvalidArgument("meganode of " + std::to_string(bytes) + " bytes at offset " +
                                   std::to_string(offset) + " does not fit region " + std::to_string(region->id()));
  }
  uint64_t slots = bytes / btree::kNodeSize;
  if (slots > UINT32_MAX) return Status::InvalidArgument("meganode larger than 4 TiB");
  return std::unique_ptr<Meganode>(new Meganode(region, offset, static_cast<uint32_t>(slots)));
}

void Meganode::Restore(const std::vector<uint32_t>& used, int root_level) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<bool> in_use(num_slots_, false);
  in_use[0] = true;
  uint32_t top = 0;
  for (uint32_t s : used) {
    if (s < num_slots_) {
      in_use[s] = true;
      top = std::max(top, s);
    }
  }
  next_unused_ = top + 1;
  free_list_.clear();
  for (uint32_t s = next_unused_ - 1; s >= 1; --s) {  // highest first: the lowest are handed out first
    if (!in_use[s]) free_list_.push_back(s);
  }
  root_level_.store(root_level, std::memory_order_relaxed);
}

uint32_t Meganode::free_slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(free_list_.size()) + (num_slots_ - next_unused_);
}

bool Meganode::MostlyFull() const {
  const uint32_t reserve = Reserve();
  if (num_slots_ <= reserve) return true;
  return free_slots() <= reserve + (num_slots_ - reserve) / 4;
}

Status Meganode::AllocateSlots(uint32_t n, bool continuing, uint32_t* out) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t available = free_list_.size() + (num_slots_ - next_unused_);
  uint64_t needed = n + (continuing ? 0 : Reserve());
  if (available < needed) {
    return Status::ResourceExhausted("meganode full: " + std::to_string(available) + " of " +
                                     std::to_string(num_slots_) + " node slots free, " + std::to_string(n) +
                                     " needed plus a reserve of " + std::to_string(continuing ? 0 : Reserve()) +
                                     " (the meganode must be split)");
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (!free_list_.empty()) {
      out[i] = free_list_.back();
      free_list_.pop_back();
    } else {
      out[i] = next_unused_++;
    }
  }
  return Status::OK();
}

void Meganode::FreeSlots(const uint32_t* slots, uint32_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t i = 0; i < n; ++i) free_list_.push_back(slots[i]);
}

}  // namespace cell::meganode
