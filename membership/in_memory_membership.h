// The region table and live servers held in this process: the embedded single-server mode (no ZooKeeper), and the
// fake that unit tests of the layers above use. Thread-safe. Watchers run on the thread that made the change, one
// change at a time in the order the changes took effect; they may read the membership but not change it.
#pragma once

#include <map>
#include <mutex>
#include <vector>

#include "membership/membership.h"

namespace cell::membership {

class InMemoryMembership final : public Membership {
 public:
  InMemoryMembership() = default;
  // A table that hands out region ids from `first_region_id` on: an embedded server restarted on its data directory
  // (the table does not outlive the process) must not hand out the ids its recovered regions have. Ids below it count
  // as allocated.
  explicit InMemoryMembership(uint32_t first_region_id) : next_region_(first_region_id < 1 ? 1 : first_region_id) {}

  Status RegisterServer(const ServerInfo& self) override;
  Status UnregisterServer(uint64_t id) override;
  StatusOr<std::vector<ServerInfo>> ListServers() override;
  StatusOr<uint32_t> AllocateRegionId() override;
  StatusOr<RegionEntry> CreateRegion(uint32_t region, uint64_t owner) override;
  StatusOr<RegionEntry> GetRegion(uint32_t region) override;
  StatusOr<std::vector<RegionEntry>> ListRegions() override;
  StatusOr<RegionEntry> ChangeOwner(uint32_t region, uint64_t expected_epoch, uint64_t new_owner,
                                    std::optional<uint64_t> log_epoch = std::nullopt) override;
  StatusOr<uint32_t> RootRegion() override;
  StatusOr<uint32_t> ClaimRoot(uint32_t region) override;
  void Watch(std::function<void(const MembershipEvent&)> watcher) override;
  // In one process nothing expires: a registered server may serve until it unregisters.
  Status ServingStatus() override;
  Status Renew() override { return Status::OK(); }

 private:
  void Notify(const MembershipEvent& event);  // with watchers_mu_ held and mu_ not

  std::mutex mu_;
  std::map<uint64_t, ServerInfo> servers_;
  std::map<uint32_t, RegionEntry> regions_;
  uint32_t root_ = 0;  // 0: not claimed yet
  uint32_t next_region_ = 1;
  uint64_t registered_ = 0;  // the server registered through this object
  std::mutex watchers_mu_;   // taken first by every change and held until its watchers have run: one order for all
  std::vector<std::function<void(const MembershipEvent&)>> watchers_;
};

}  // namespace cell::membership
