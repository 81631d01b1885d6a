// The regions a server has registered for one-sided reads, and the bounds check every read passes.
#pragma once

#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <vector>

#include "cell/status.h"
#include "rpc/transport.h"

namespace cell::rpc {

class RegionTable {
 public:
  // Registers `region`. InvalidArgument for id 0, a misaligned base or size, or an id already registered.
  Status Add(const RegionRegistration& region);
  // The address of [offset, offset + length) in region `id`; InvalidArgument, saying which rule the read broke, if
  // the region is not registered or the range is not inside it.
  StatusOr<const char*> Resolve(uint32_t id, uint64_t offset, uint64_t length) const;
  std::optional<RegionRegistration> Find(uint32_t id) const;
  std::vector<RegionRegistration> All() const;

 private:
  mutable std::shared_mutex mu_;
  std::vector<RegionRegistration> regions_;  // a handful per server: a linear scan beats a map
};

// The message for a read of [offset, offset + length) that falls outside a region of `size` bytes.
Status ReadOutsideRegion(uint32_t id, uint64_t offset, uint64_t length, uint64_t size);
// The refusal of a read of a region this server does not serve (not yet: its takeover is under way; or no longer):
// Unavailable, since the region table will name the server that does, and a retry there can succeed.
Status NotRegistered(uint32_t id);

}  // namespace cell::rpc
