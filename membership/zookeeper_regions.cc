// The region table in ZooKeeper, ZooKeeperMembership's side of it: region ids handed out by a sequence counter, region
// entries created, read, listed and moved by an epoch compare-and-set, and the root region claimed once. Every write
// is create-once or versioned, so it holds across processes. The znode layout is in zookeeper_membership.h, the text
// of the entries in zookeeper_format.h.
#include <fmt/format.h>
#include <zookeeper/zookeeper.h>

#include <map>
#include <string>
#include <vector>

#include "common/global_ptr.h"
#include "membership/zookeeper_format.h"
#include "membership/zookeeper_membership.h"

namespace cell::membership {

using znode::FormatRegion;
using znode::FormatRoot;
using znode::ParseNumber;
using znode::ParseRoot;
using znode::RegionName;

StatusOr<uint32_t> ZooKeeperMembership::AllocateRegionId() {
  const std::string prefix = Path("region-ids/id-");
  char created[512];
  const int rc =
      Retry([&] { return zoo_create(zh_, prefix.c_str(), "", 0, Acl(), ZOO_SEQUENCE, created, sizeof(created)); });
  if (rc != ZOK) return Error(rc, "allocating a region id");
  const std::string_view name(created);
  uint64_t seq = 0;
  if (name.size() <= prefix.size() || !ParseNumber(name.substr(prefix.size()), &seq)) {
    return Status::Internal(fmt::format("unexpected sequential znode name {}", name));
  }
  (void)Retry([&] { return zoo_delete(zh_, created, -1); });  // the counter lives in the parent
  if (seq + 1 > GlobalPtr::kMaxRegionId) {
    return Status::ResourceExhausted(fmt::format("all {} region ids are used", GlobalPtr::kMaxRegionId));
  }
  return static_cast<uint32_t>(seq + 1);
}

StatusOr<RegionEntry> ZooKeeperMembership::CreateRegion(uint32_t region, uint64_t owner) {
  if (region == 0 || region > GlobalPtr::kMaxRegionId) {
    return Status::InvalidArgument(fmt::format("region id {} is out of range", region));
  }
  // Ids come from the parent's sequence counter: one above it was never handed out.
  Stat stat{};
  char unused[1];
  int length = 0;
  const std::string ids = Path("region-ids");
  if (const int rc = Retry([&] { return zoo_get(zh_, ids.c_str(), 0, unused, &length, &stat); }); rc != ZOK) {
    return Error(rc, "reading the region id counter");
  }
  if (static_cast<int64_t>(region) > static_cast<int64_t>(stat.cversion)) {
    return Status::InvalidArgument(fmt::format("region {} was not allocated by AllocateRegionId", region));
  }
  const RegionEntry entry{region, owner, 1};
  const std::string data = FormatRegion(entry);
  const std::string path = Path("regions/" + RegionName(region));
  bool retried = false;
  const int rc = Retry(
      [&] { return zoo_create(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), Acl(), 0, nullptr, 0); },
      &retried);
  if (rc == ZNODEEXISTS) {
    auto now = GetRegion(region);
    if (retried && now.ok() && *now == entry) return entry;  // our create went through before the connection broke
    return Status::FailedPrecondition(fmt::format("region {} already exists", region));
  }
  if (rc != ZOK) return Error(rc, fmt::format("creating region {}", region));
  return entry;
}

StatusOr<RegionEntry> ZooKeeperMembership::GetRegion(uint32_t region) {
  const std::string path = Path("regions/" + RegionName(region));
  auto data = ReadNode(path, false, nullptr);
  if (data.status().IsNotFound()) return Status::NotFound(fmt::format("region {} does not exist", region));
  if (!data.ok()) return data.status();
  return ParseRegion(region, *data, path);
}

StatusOr<std::vector<RegionEntry>> ZooKeeperMembership::ListRegions() {
  auto names = Children(Path("regions"), false);
  if (!names.ok()) return names.status();
  std::map<uint32_t, RegionEntry> regions;
  for (const std::string& name : *names) {
    uint32_t id = 0;
    if (!ParseNumber(std::string_view(name), &id) || id == 0) {
      return Status::Corruption(
          fmt::format("region znode {} is not named by a region id; not trusting it", Path("regions/" + name)));
    }
    auto entry = GetRegion(id);
    if (entry.status().IsNotFound()) continue;
    if (!entry.ok()) return entry.status();
    regions[id] = *entry;
  }
  std::vector<RegionEntry> out;
  for (auto& [id, e] : regions) out.push_back(e);
  return out;
}

StatusOr<RegionEntry> ZooKeeperMembership::ChangeOwner(uint32_t region, uint64_t expected_epoch, uint64_t new_owner,
                                                       std::optional<uint64_t> log_epoch) {
  const std::string path = Path("regions/" + RegionName(region));
  int version = 0;
  auto data = ReadNode(path, false, &version);
  if (data.status().IsNotFound()) return Status::NotFound(fmt::format("region {} does not exist", region));
  if (!data.ok()) return data.status();
  auto current = ParseRegion(region, *data, path);
  if (!current.ok()) return current.status();
  auto stale = [&](const RegionEntry& now) {
    return Status::Aborted(fmt::format("region {} is at epoch {} (owner {}), not {}: re-read and decide again", region,
                                       now.epoch, now.owner, expected_epoch));
  };
  if (current->epoch != expected_epoch) return stale(*current);
  const RegionEntry next{region, new_owner, expected_epoch + 1, log_epoch.value_or(current->log_epoch)};
  const std::string update = FormatRegion(next);
  bool retried = false;
  const int rc = Retry(
      [&] { return zoo_set(zh_, path.c_str(), update.data(), static_cast<int>(update.size()), version); }, &retried);
  if (rc == ZOK) return next;
  if (rc == ZBADVERSION) {
    auto now = GetRegion(region);
    if (!now.ok()) return now.status();
    if (retried && *now == next) return next;  // our write landed before the connection broke
    return stale(*now);
  }
  return Error(rc, fmt::format("changing the owner of region {}", region));
}

// The root znode holds "region=<id>\n", created once (the first claim wins).
StatusOr<uint32_t> ZooKeeperMembership::RootRegion() {
  const std::string path = Path("root");
  auto data = ReadNode(path, false, nullptr);
  if (data.status().IsNotFound()) return Status::NotFound("no server has claimed the root region yet");
  if (!data.ok()) return data.status();
  uint32_t region = 0;
  if (!ParseRoot(*data, &region)) {
    return Status::Corruption(fmt::format("znode {} does not name a region: '{}'", path, *data));
  }
  return region;
}

StatusOr<uint32_t> ZooKeeperMembership::ClaimRoot(uint32_t region) {
  if (region == 0 || region > GlobalPtr::kMaxRegionId) {
    return Status::InvalidArgument(fmt::format("region id {} cannot be the root", region));
  }
  const std::string path = Path("root");
  const std::string data = FormatRoot(region);
  const int rc = Retry(
      [&] { return zoo_create(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), Acl(), 0, nullptr, 0); });
  if (rc != ZOK && rc != ZNODEEXISTS) return Error(rc, fmt::format("claiming region {} as the root", region));
  return RootRegion();  // ours, or the earlier claim (also ours if a retried create had gone through)
}

}  // namespace cell::membership
