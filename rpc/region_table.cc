#include "rpc/region_table.h"

#include <fmt/format.h>

#include <mutex>

namespace cell::rpc {

Status ReadOutsideRegion(uint32_t id, uint64_t offset, uint64_t length, uint64_t size) {
  return Status::InvalidArgument(fmt::format(
      "one-sided read of [{}, {}) refused: it is not inside region {} ({} bytes)", offset, offset + length, id, size));
}

Status NotRegistered(uint32_t id) {
  return Status::Unavailable(fmt::format(
      "one-sided read refused: region {} is not registered on this server (not yet, or no longer); retry with the "
      "region table's owner",
      id));
}

Status RegionTable::Add(const RegionRegistration& region) {
  if (region.id == 0) return Status::InvalidArgument("region id 0 is reserved for the null pointer");
  if (region.base == nullptr || reinterpret_cast<uintptr_t>(region.base) % 8 != 0 || region.size % 8 != 0 ||
      region.size == 0) {
    return Status::InvalidArgument(
        fmt::format("region {}: base must be 8-byte aligned and size a positive multiple of 8", region.id));
  }
  std::unique_lock lock(mu_);
  for (const auto& r : regions_) {
    if (r.id == region.id) return Status::InvalidArgument(fmt::format("region {} is already registered", region.id));
  }
  regions_.push_back(region);
  return Status::OK();
}

StatusOr<const char*> RegionTable::Resolve(uint32_t id, uint64_t offset, uint64_t length) const {
  std::shared_lock lock(mu_);
  for (const auto& r : regions_) {
    if (r.id != id) continue;
    if (offset > r.size || length > r.size - offset) return ReadOutsideRegion(id, offset, length, r.size);
    return static_cast<const char*>(r.base) + offset;
  }
  return NotRegistered(id);
}

std::optional<RegionRegistration> RegionTable::Find(uint32_t id) const {
  std::shared_lock lock(mu_);
  for (const auto& r : regions_) {
    if (r.id == id) return r;
  }
  return std::nullopt;
}

std::vector<RegionRegistration> RegionTable::All() const {
  std::shared_lock lock(mu_);
  return regions_;
}

}  // namespace cell::rpc
