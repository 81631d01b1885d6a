#include "client/region_cache.h"

#include <fmt/format.h>

#include <algorithm>

namespace cell::client {

Route RegionCache::HitLocked(uint32_t region, const membership::RegionEntry& entry,
                             const std::shared_ptr<const membership::ServerInfo>& server) {
  ++stats_.hits;
  return remembered_.Remember(region, Route{entry, server});
}

uint64_t RegionCache::CachedOwner(uint32_t region) {
  if (const Route* r = remembered_.Find(region)) return r->entry.owner;
  std::lock_guard lock(mu_);
  const auto r = regions_.find(region);
  if (r == regions_.end()) return 0;
  const auto s = servers_.find(r->second.owner);
  if (s == servers_.end()) return 0;
  return HitLocked(region, r->second, s->second).entry.owner;
}

StatusOr<Route> RegionCache::Lookup(uint32_t region) {
  if (const Route* r = remembered_.Find(region)) return *r;
  uint64_t floor = 0;
  {
    std::lock_guard lock(mu_);
    const auto r = regions_.find(region);
    if (r != regions_.end()) {
      const auto s = servers_.find(r->second.owner);
      if (s != servers_.end()) return HitLocked(region, r->second, s->second);
    }
    const auto k = known_epochs_.find(region);
    if (k != known_epochs_.end()) floor = k->second;
  }
  // A miss: read the region's entry (and, if its owner is unknown, the live servers) without holding the lock.
  CELL_ASSIGN_OR_RETURN(const membership::RegionEntry entry, ReadEntryNoOlderThan(region, floor));
  if (entry.owner == 0) {
    return Status::Unavailable(fmt::format(
        "region {} has no owner at the moment (epoch {}): its server failed and no survivor has taken it over yet",
        region, entry.epoch));
  }
  std::shared_ptr<const membership::ServerInfo> owner;
  {
    std::lock_guard lock(mu_);
    const auto s = servers_.find(entry.owner);
    if (s != servers_.end()) owner = s->second;
  }
  if (!owner) {
    auto servers = table_->ListServers();
    std::lock_guard lock(mu_);
    ++stats_.table_reads;
    if (!servers.ok()) return servers.status();
    remembered_.Changed();
    servers_.clear();
    for (const auto& s : *servers) {
      auto shared = std::make_shared<const membership::ServerInfo>(s);
      servers_[s.id] = shared;
      if (s.id == entry.owner) owner = shared;
    }
  }
  if (!owner) {
    return Status::Unavailable(fmt::format(
        "region {} belongs to server {} (epoch {}), which is not live: it may have failed and its regions not yet "
        "been taken over",
        region, entry.owner, entry.epoch));
  }
  std::lock_guard lock(mu_);
  // Epochs only grow: never cache (or return) an entry older than one already seen, which another thread may have
  // cached or learnt of (OnWrongOwner) while this one read the table.
  uint64_t& known = known_epochs_[region];
  if (entry.epoch < known) {
    const auto r = regions_.find(region);
    if (r != regions_.end()) {
      const auto s = servers_.find(r->second.owner);
      if (s != servers_.end()) return Route{r->second, s->second};
    }
    return Status::Unavailable(fmt::format(
        "region {} moved while it was being looked up (epoch {} read, {} seen); retry", region, entry.epoch, known));
  }
  known = entry.epoch;
  remembered_.Changed();
  regions_[region] = entry;
  return Route{entry, owner};
}

StatusOr<membership::RegionEntry> RegionCache::ReadEntryNoOlderThan(uint32_t region, uint64_t floor) {
  // A read older than an epoch already seen (a lagging ZooKeeper follower, or a read that raced a move) is read again.
  for (int attempt = 0;; ++attempt) {
    auto fresh = table_->GetRegion(region);
    {
      std::lock_guard lock(mu_);
      ++stats_.table_reads;
      const auto k = known_epochs_.find(region);
      if (k != known_epochs_.end()) floor = std::max(floor, k->second);
    }
    if (!fresh.ok()) return fresh.status();
    if (fresh->epoch >= floor) return *fresh;
    if (attempt == kStaleTableRetries) {
      return Status::Unavailable(fmt::format(
          "the region table is behind: it gives region {} at epoch {}, but epoch {} was already seen; retry", region,
          fresh->epoch, floor));
    }
  }
}

void RegionCache::OnWrongOwner(uint32_t region, uint64_t server, uint64_t server_epoch) {
  std::lock_guard lock(mu_);
  uint64_t& known = known_epochs_[region];
  const auto r = regions_.find(region);
  // Already moved past what that server knows, to another server: the entry is newer than the complaint.
  if (r != regions_.end() && r->second.epoch > server_epoch && r->second.owner != server) return;
  known = std::max(known, server_epoch);
  if (r == regions_.end()) return;
  remembered_.Changed();
  regions_.erase(r);
  ++stats_.invalidations;
}

StatusOr<std::chrono::steady_clock::time_point> RegionCache::ReadLease(uint64_t server) {
  {
    std::lock_guard lock(mu_);
    auto it = leases_.find(server);
    if (it != leases_.end() && std::chrono::steady_clock::now() < it->second) return it->second;
    ++stats_.lease_renewals;
  }
  // The lease runs from before the question: the answer describes the table at some moment after this one.
  const auto asked = std::chrono::steady_clock::now();
  CELL_ASSIGN_OR_RETURN(const bool registered, table_->IsRegistered(server));
  if (!registered) {
    OnServerUnreachable(server);
    return Status::Unavailable(
        fmt::format("server {} is no longer registered: its regions are moving to another server; retry", server));
  }
  std::lock_guard lock(mu_);
  auto& until = leases_[server];
  until = std::max(until, asked + membership::kReadLease);
  return until;
}

void RegionCache::OnServerUnreachable(uint64_t server) {
  std::lock_guard lock(mu_);
  remembered_.Changed();
  servers_.erase(server);
  leases_.erase(server);
  for (auto r = regions_.begin(); r != regions_.end();) {
    if (r->second.owner == server) {
      r = regions_.erase(r);
      ++stats_.invalidations;
    } else {
      ++r;
    }
  }
}

RegionCache::Stats RegionCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace cell::client
