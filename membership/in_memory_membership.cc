#include "membership/in_memory_membership.h"

#include <fmt/format.h>

#include "common/global_ptr.h"

namespace cell::membership {

Status InMemoryMembership::RegisterServer(const ServerInfo& self) {
  std::lock_guard order(watchers_mu_);  // changes and their notifications in one order
  if (self.id == 0) return Status::InvalidArgument("server id 0 is reserved");
  {
    std::lock_guard lock(mu_);
    if (servers_.contains(self.id)) {
      return Status::FailedPrecondition(fmt::format("server {} is already registered", self.id));
    }
    servers_[self.id] = self;
    registered_ = self.id;
  }
  Notify(MembershipEvent{MembershipEvent::Kind::kServerJoined, self.id, {}});
  return Status::OK();
}

Status InMemoryMembership::UnregisterServer(uint64_t id) {
  std::lock_guard order(watchers_mu_);  // changes and their notifications in one order
  {
    std::lock_guard lock(mu_);
    if (servers_.erase(id) == 0) return Status::NotFound(fmt::format("server {} is not registered", id));
    if (registered_ == id) registered_ = 0;
  }
  Notify(MembershipEvent{MembershipEvent::Kind::kServerLeft, id, {}});
  return Status::OK();
}

StatusOr<std::vector<ServerInfo>> InMemoryMembership::ListServers() {
  std::lock_guard lock(mu_);
  std::vector<ServerInfo> out;
  for (const auto& [id, info] : servers_) out.push_back(info);
  return out;
}

StatusOr<uint32_t> InMemoryMembership::AllocateRegionId() {
  std::lock_guard lock(mu_);
  if (next_region_ > GlobalPtr::kMaxRegionId) {
    return Status::ResourceExhausted(fmt::format("all {} region ids are used", GlobalPtr::kMaxRegionId));
  }
  return next_region_++;
}

StatusOr<RegionEntry> InMemoryMembership::CreateRegion(uint32_t region, uint64_t owner) {
  std::lock_guard order(watchers_mu_);  // changes and their notifications in one order
  RegionEntry entry{region, owner, 1};
  {
    std::lock_guard lock(mu_);
    if (region == 0 || region >= next_region_) {
      return Status::InvalidArgument(fmt::format("region {} was not allocated by AllocateRegionId", region));
    }
    if (regions_.contains(region)) {
      return Status::FailedPrecondition(fmt::format("region {} already exists", region));
    }
    regions_[region] = entry;
  }
  Notify(MembershipEvent{MembershipEvent::Kind::kRegionChanged, 0, entry});
  return entry;
}

StatusOr<RegionEntry> InMemoryMembership::GetRegion(uint32_t region) {
  std::lock_guard lock(mu_);
  auto it = regions_.find(region);
  if (it == regions_.end()) return Status::NotFound(fmt::format("region {} does not exist", region));
  return it->second;
}

StatusOr<std::vector<RegionEntry>> InMemoryMembership::ListRegions() {
  std::lock_guard lock(mu_);
  std::vector<RegionEntry> out;
  for (const auto& [id, entry] : regions_) out.push_back(entry);
  return out;
}

StatusOr<RegionEntry> InMemoryMembership::ChangeOwner(uint32_t region, uint64_t expected_epoch, uint64_t new_owner,
                                                      std::optional<uint64_t> log_epoch) {
  std::lock_guard order(watchers_mu_);  // changes and their notifications in one order
  RegionEntry entry;
  {
    std::lock_guard lock(mu_);
    auto it = regions_.find(region);
    if (it == regions_.end()) return Status::NotFound(fmt::format("region {} does not exist", region));
    if (it->second.epoch != expected_epoch) {
      return Status::Aborted(fmt::format("region {} is at epoch {} (owner {}), not {}: re-read and decide again",
                                         region, it->second.epoch, it->second.owner, expected_epoch));
    }
    it->second.owner = new_owner;
    it->second.epoch = expected_epoch + 1;
    if (log_epoch.has_value()) it->second.log_epoch = *log_epoch;
    entry = it->second;
  }
  Notify(MembershipEvent{MembershipEvent::Kind::kRegionChanged, 0, entry});
  return entry;
}

StatusOr<uint32_t> InMemoryMembership::RootRegion() {
  std::lock_guard lock(mu_);
  if (root_ == 0) return Status::NotFound("no server has claimed the root region yet");
  return root_;
}

StatusOr<uint32_t> InMemoryMembership::ClaimRoot(uint32_t region) {
  if (region == 0) return Status::InvalidArgument("region id 0 cannot be the root");
  std::lock_guard lock(mu_);
  if (root_ == 0) root_ = region;
  return root_;
}

Status InMemoryMembership::ServingStatus() {
  std::lock_guard lock(mu_);
  if (registered_ == 0) return Status::FailedPrecondition("no server is registered through this membership");
  return Status::OK();
}

void InMemoryMembership::Watch(std::function<void(const MembershipEvent&)> watcher) {
  std::lock_guard lock(watchers_mu_);
  watchers_.push_back(std::move(watcher));
}

void InMemoryMembership::Notify(const MembershipEvent& event) {
  for (const auto& w : watchers_) w(event);
}

}  // namespace cell::membership
