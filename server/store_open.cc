// How a StoreService comes to hold its regions: StoreService::Open's cases (a fresh start, a restart from this
// server's own log, a restart into a table that began empty) and StoreService::Adopt (a takeover of a dead server's
// regions), with the locks, table entries and log directories each needs. Opening the log and recovering the regions
// from it is server/store_recovery.cc.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/diagnostics.h"
#include "logging/checkpoint.h"
#include "logging/env.h"
#include "server/store_files.h"
#include "server/store_service.h"

namespace cell::server {

namespace {
// Takes an exclusive flock on `path` (created if missing): the fd, or FailedPrecondition naming `who` holds it.
StatusOr<int> LockFile(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Unavailable(fmt::format("opening {}: {}", path, std::strerror(errno)));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return Status::FailedPrecondition(what.empty() ? fmt::format("{} is locked", path)
                                                   : fmt::format("{} is locked: {}", path, what));
  }
  return fd;
}

// Removes the log directories of `node_region` older than the one at `log_epoch` (the plain one, and .N for N below
// it): garbage once the table names that one. Best effort. (A deposed owner that calls this late cannot touch the
// directory the table names now: its epoch is higher.)
void RemoveOlderLogDirs(const std::string& data_dir, uint32_t node_region, uint64_t log_epoch) {
  const std::string plain = fmt::format("regions-{}", node_region);
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator(data_dir, error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    uint64_t epoch = 0;
    if (name != plain) {
      if (!name.starts_with(plain + ".")) continue;
      const char* first = name.data() + plain.size() + 1;
      const auto [end, ec] = std::from_chars(first, name.data() + name.size(), epoch);
      if (ec != std::errc() || end != name.data() + name.size()) continue;
    }
    if (epoch >= log_epoch) continue;
    std::error_code removing;
    std::filesystem::remove_all(it->path(), removing);
    if (removing) diag::Warning("removing the old log directory {}: {}", it->path().string(), removing.message());
  }
  if (error)
    diag::Warning("listing {} for old log directories of region {}: {}", data_dir, node_region, error.message());
}

// Reads the MANIFEST of a log directory of `node_region`, checking that it describes that region.
StatusOr<disk::Manifest> ReadManifest(logging::Env* env, const std::string& log_dir, uint32_t node_region) {
  const std::string path = ManifestPath(log_dir);
  CELL_ASSIGN_OR_RETURN(const std::string text, logging::ReadFileToString(env, path));
  CELL_ASSIGN_OR_RETURN(disk::Manifest manifest, ParseManifest(text, path));
  if (manifest.node_region() != node_region) {
    return Status::Corruption(fmt::format("{} describes region {}", path, manifest.node_region()));
  }
  return manifest;
}
}  // namespace

StatusOr<std::pair<uint32_t, uint32_t>> StoreService::RecordedRegions(const std::string& data_dir, uint64_t server_id) {
  const std::string path = RegionsFilePath(data_dir, server_id);
  CELL_ASSIGN_OR_RETURN(const std::string text, logging::ReadFileToString(logging::Env::Posix(), path));
  CELL_ASSIGN_OR_RETURN(const disk::RecordedRegions regions, ParseRecordedRegions(text, path));
  return std::pair<uint32_t, uint32_t>{regions.node_region(), regions.extent_region()};
}

namespace {
// The memory this process may use: the machine's, or its cgroup's limit if lower (a container's).
uint64_t UsableMemory() {
  uint64_t bytes = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
  std::ifstream limit("/sys/fs/cgroup/memory.max");  // cgroup v2; "max" when unlimited
  uint64_t cgroup = 0;
  if (limit >> cgroup && cgroup > 0) bytes = std::min(bytes, cgroup);
  return bytes;
}

// Fills the sizes `config` leaves at 0 for a fresh start. Records get 3/8 of the usable memory (whole GiB, at least
// 1) and the node region as much room: Cell's shapes take about as many node bytes as record bytes per key
// (docs/BENCHMARKS.md, "Scale"), so both fill together, with a quarter of the memory left to the rest. Regions
// commit memory only as they are used, so this bounds what one server may hold rather than taking it; servers
// sharing a machine share it as they fill. Where memory is taken when the regions are made (huge pages, reserved
// beforehand; RDMA registration, which pins the regions), unset sizes stay small (1 GiB, 16 meganodes): give the
// sizes the machine can spare.
void MachineSized(StoreConfig* config) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  const bool taken_at_once = config->huge_pages || config->rdma_registered;
  if (config->meganode_bytes == 0) config->meganode_bytes = uint64_t{64} << 20;
  if (config->extent_region_bytes == 0) {
    config->extent_region_bytes = taken_at_once ? kGiB : std::max(kGiB, UsableMemory() / 8 * 3 / kGiB * kGiB);
  }
  if (config->meganodes == 0) {
    const uint64_t room = taken_at_once ? 16 : config->extent_region_bytes / config->meganode_bytes;
    config->meganodes = static_cast<uint32_t>(std::clamp<uint64_t>(room, 16, 65536));
  }
}

// Fills the sizes `config` leaves at 0 for a restart, from the MANIFEST in `log_dir`.
Status SizedAsRecorded(logging::Env* env, const std::string& log_dir, uint32_t node_region, StoreConfig* config) {
  if (config->meganode_bytes != 0 && config->meganodes != 0 && config->extent_region_bytes != 0) return Status::OK();
  CELL_ASSIGN_OR_RETURN(const disk::Manifest manifest, ReadManifest(env, log_dir, node_region));
  if (config->meganode_bytes == 0) config->meganode_bytes = manifest.meganode_bytes();
  if (config->meganodes == 0) config->meganodes = manifest.meganodes();
  if (config->extent_region_bytes == 0) config->extent_region_bytes = manifest.extent_region_bytes();
  return Status::OK();
}
}  // namespace

std::unique_ptr<StoreService> StoreService::NewService(const StoreConfig& config, uint64_t server_id) {
  auto service = std::unique_ptr<StoreService>(new StoreService());
  service->server_id_ = server_id;
  service->search_cpu_us_ = config.search_cpu_us;
  service->env_ = config.env != nullptr ? config.env : logging::Env::Posix();
  return service;
}

StatusOr<std::unique_ptr<StoreService>> StoreService::Open(const StoreConfig& config_in,
                                                           membership::Membership* membership, uint64_t server_id) {
  // The cases, told apart by PlanOpen before anything is made:
  //  - Fresh start (no data_dir; no server-<id>.regions; or the recorded regions are another server's now, taken
  //    over while this server was down or as it restarted): new region ids, an empty store and a new log; the
  //    regions file is written last, so that only a log holding a whole first meganode is ever recovered.
  //  - Restart from this server's own log (the table still gives it the recorded regions): claimed at a new epoch by
  //    compare-and-set *before* the log is read, so of this server and a survivor taking them exactly one wins;
  //    recovered in place, the log's damaged tail repaired. Aborted if a survivor took them while they were being
  //    recovered: the caller starts again, and then makes a fresh start.
  //  - Restart into an empty table (an embedded server: its table lived in its process): recovered in place, then
  //    entered in the table again.
  // Every case ends with the regions in the table, owned by this server at the epoch it serves them at. (Adoption of
  // a dead server's regions is Adopt, below.)
  auto service = NewService(config_in, server_id);
  if (!config_in.data_dir.empty()) {
    // One process per server id and data directory: two would append to one log.
    CELL_ASSIGN_OR_RETURN(service->lock_fd_,
                          LockFile(fmt::format("{}/server-{}.lock", config_in.data_dir, server_id),
                                   fmt::format("another process is server {} on this data directory", server_id)));
  }
  CELL_ASSIGN_OR_RETURN(const OpenPlan plan, PlanOpen(config_in, membership, server_id, service->env_));
  StoreConfig config = config_in;
  if (plan.kind == OpenPlan::Case::kFreshStart) {
    MachineSized(&config);
  } else {
    CELL_RETURN_IF_ERROR(SizedAsRecorded(service->env_, LogDir(config.data_dir, plan.node_region, plan.log_epoch),
                                         plan.node_region, &config));
  }
  if (plan.kind == OpenPlan::Case::kFreshStart) {
    CELL_ASSIGN_OR_RETURN(service->node_region_, membership->AllocateRegionId());
    CELL_ASSIGN_OR_RETURN(service->extent_region_, membership->AllocateRegionId());
  } else {
    service->node_region_ = plan.node_region;
    service->extent_region_ = plan.extent_region;
  }
  // The first server of the cluster holds the root; the others learn where it is.
  CELL_ASSIGN_OR_RETURN(uint32_t root, membership->ClaimRoot(service->node_region_));
  const meganode::GlobalTreeOptions options = service->TreeOptions(config, membership, root);
  if (plan.kind == OpenPlan::Case::kFreshStart) {
    CELL_RETURN_IF_ERROR(service->StartFresh(config, options));
  } else {
    CELL_RETURN_IF_ERROR(service->RestartFromOwnLog(config, options, membership, plan.log_epoch));
  }
  CELL_RETURN_IF_ERROR(service->EnterTable(membership, plan.kind == OpenPlan::Case::kFreshStart));
  if (service->log_ != nullptr) service->StartCheckpointer(config);
  return service;
}

StatusOr<StoreService::OpenPlan> StoreService::PlanOpen(const StoreConfig& config, membership::Membership* membership,
                                                        uint64_t server_id, logging::Env* env) {
  const OpenPlan fresh;
  if (config.data_dir.empty() || !env->FileExists(RegionsFilePath(config.data_dir, server_id))) return fresh;
  CELL_ASSIGN_OR_RETURN(const auto recorded, RecordedRegions(config.data_dir, server_id));
  const auto [node, extent] = recorded;
  auto entry = membership->GetRegion(node);
  if (!entry.ok() && !entry.status().IsNotFound()) return entry.status();
  if (!entry.ok()) {
    // An embedded server's table began empty: the regions are entered in it once recovered (EnterTable).
    return OpenPlan{.kind = OpenPlan::Case::kRestartIntoEmptyTable, .node_region = node, .extent_region = extent};
  }
  if (entry->owner != server_id && entry->owner != 0) {
    // Taken over while this server was down: its regions and their log belong to the new owner. This server is
    // fenced from them and starts with new, empty ones.
    diag::Warning("server {}: region {} is owned by server {} now (epoch {}); starting with new regions", server_id,
                  node, entry->owner, entry->epoch);
    return fresh;
  }
  return ClaimRecordedRegions(membership, server_id, *entry, extent);
}

StatusOr<StoreService::OpenPlan> StoreService::ClaimRecordedRegions(membership::Membership* membership,
                                                                    uint64_t server_id,
                                                                    const membership::RegionEntry& node,
                                                                    uint32_t extent) {
  // Claimed at a new epoch (a compare-and-set) before its log is read: a survivor that moved it first wins, and this
  // server starts new regions; one that tries after finds the epoch moved. The log is this server's own (the table
  // names only a directory its owner began), and no other process of this server id runs (Open's lock).
  auto claimed = membership->ChangeOwner(node.region, node.epoch, server_id);
  if (!claimed.ok() && !claimed.status().IsAborted()) return claimed.status();
  if (!claimed.ok()) {
    diag::Warning("server {}: region {} was taken over as this server restarted; starting with new regions", server_id,
                  node.region);
    return OpenPlan{};
  }
  CELL_RETURN_IF_ERROR(ClaimExtentRegion(membership, server_id, extent));
  return OpenPlan{.kind = OpenPlan::Case::kRestart,
                  .node_region = node.region,
                  .extent_region = extent,
                  .log_epoch = claimed->log_epoch};
}

Status StoreService::ClaimExtentRegion(membership::Membership* membership, uint64_t server_id, uint32_t extent) {
  auto entry = membership->GetRegion(extent);
  if (!entry.ok() && entry.status().IsNotFound()) {
    // Nothing to move: the table lacks the entry, and only a fresh start creates one (EnterTable).
    diag::Warning("server {}: its extent region {} has no entry in the region table", server_id, extent);
    return Status::OK();
  }
  if (!entry.ok() || entry->owner == server_id) return entry.status();
  auto moved = membership->ChangeOwner(extent, entry->epoch, server_id);
  if (moved.ok()) return Status::OK();
  // Aborted (the entry changed meanwhile) makes the caller start again, and decide again from the table.
  return Status::FromCode(moved.status().code(), fmt::format("server {}: claiming its extent region {}: {}", server_id,
                                                             extent, moved.status().message()));
}

Status StoreService::StartFresh(const StoreConfig& config, const meganode::GlobalTreeOptions& options) {
  if (config.data_dir.empty()) {
    auto store = meganode::GlobalTree::Open(options);
    if (!store.ok()) {
      return Status::FromCode(
          store.status().code(),
          fmt::format("creating the store's regions ({} meganodes of {} B, {} B of extents): {}", config.meganodes,
                      config.meganode_bytes, config.extent_region_bytes, store.status().message()));
    }
    store_ = std::move(*store);
    return Status::OK();
  }
  log_dir_ = LogDir(config.data_dir, node_region_, /*log_epoch=*/0);
  CELL_RETURN_IF_ERROR(OpenLogged(config, options, /*restart=*/false, log_dir_, logging::RecoverMode::kRepair));
  // Last: only a log that holds a whole first meganode is ever recovered (a first start that stops before this
  // leaves a directory a restart does not use).
  return logging::WriteFileAtomically(env_, RegionsFilePath(config.data_dir, server_id_),
                                      FormatRecordedRegions(node_region_, extent_region_));
}

Status StoreService::RestartFromOwnLog(const StoreConfig& config, const meganode::GlobalTreeOptions& options,
                                       membership::Membership* membership, uint64_t log_epoch) {
  log_dir_ = LogDir(config.data_dir, node_region_, log_epoch);
  Status opened = OpenLogged(config, options, /*restart=*/true, log_dir_, logging::RecoverMode::kRepair);
  if (opened.ok()) return opened;
  // A survivor may have taken the regions over meanwhile (it saw this server gone in the gap between its old
  // session's end and its new registration, and claimed first) and removed this log: the caller starts again, with
  // new regions.
  auto now = membership->GetRegion(node_region_);
  if (now.ok() && now->owner != server_id_) {
    return Status::Aborted(fmt::format("region {} was given to server {} while server {} was recovering it ({})",
                                       node_region_, now->owner, server_id_, opened.ToString()));
  }
  if (!now.ok()) {
    diag::Warning("server {}: reading region {}'s owner after its recovery failed: {}", server_id_, node_region_,
                  now.status().ToString());
  }
  return opened;
}

Status StoreService::EnterTable(membership::Membership* membership, bool fresh_start) {
  // Only once the memory exists do the regions enter the table (a restart finds them there, unless the table was
  // lost with an embedded server).
  auto node = membership->GetRegion(node_region_);
  if (fresh_start || (!node.ok() && node.status().IsNotFound())) {
    node = membership->CreateRegion(node_region_, server_id_);
    CELL_RETURN_IF_ERROR(node.status());
    CELL_RETURN_IF_ERROR(membership->CreateRegion(extent_region_, server_id_).status());
  }
  CELL_RETURN_IF_ERROR(node.status());
  if (node->owner != server_id_) {
    return Status::Aborted(fmt::format("region {} was given to server {} while server {} was recovering it",
                                       node_region_, node->owner, server_id_));
  }
  epoch_ = node->epoch;
  return Status::OK();
}

StatusOr<std::unique_ptr<StoreService>> StoreService::Adopt(const StoreConfig& config,
                                                            membership::Membership* membership, uint64_t server_id,
                                                            const membership::RegionEntry& claimed) {
  if (config.data_dir.empty())
    return Status::FailedPrecondition("only a server with a --data-dir can take over regions");
  if (claimed.owner != server_id) {
    return Status::InvalidArgument(
        fmt::format("region {} is claimed by server {}, not {}", claimed.region, claimed.owner, server_id));
  }
  auto service = NewService(config, server_id);
  const std::string from = LogDir(config.data_dir, claimed.region, claimed.log_epoch);
  const std::string to = LogDir(config.data_dir, claimed.region, claimed.epoch);
  CELL_ASSIGN_OR_RETURN(const disk::Manifest manifest, ReadManifest(service->env_, from, claimed.region));
  // The new directory, named by this server's epoch (its compare-and-set's, so no other server writes there; one
  // left by an earlier attempt of this server at the same epoch is garbage).
  std::error_code error;
  std::filesystem::remove_all(to, error);
  if (error) return Status::Unavailable(fmt::format("clearing {}: {}", to, error.message()));
  CELL_RETURN_IF_ERROR(service->env_->CreateDirs(to));
  CELL_RETURN_IF_ERROR(logging::WriteFileAtomically(service->env_, ManifestPath(to), FormatManifest(manifest)));
  // The regions' shape is the dead server's, whatever this server's options say.
  StoreConfig adopted = config;
  adopted.meganode_bytes = manifest.meganode_bytes();
  adopted.meganodes = manifest.meganodes();
  adopted.extent_region_bytes = manifest.extent_region_bytes();
  service->node_region_ = claimed.region;
  service->extent_region_ = manifest.extent_region();
  CELL_ASSIGN_OR_RETURN(const uint32_t root, membership->RootRegion());
  const meganode::GlobalTreeOptions options = service->TreeOptions(adopted, membership, root);
  service->log_dir_ = to;
  // The old log is read, never written: its owner may be paused rather than dead, and append to it when it resumes
  // (nothing it appends then is acknowledged, DESIGN "Ownership").
  CELL_RETURN_IF_ERROR(service->OpenLogged(adopted, options, /*restart=*/true, from, logging::RecoverMode::kReadOnly));
  // The new directory holds the whole regions before the table names it.
  CELL_RETURN_IF_ERROR(
      logging::TakeCheckpoint(to, service->log_.get(),
                              TreeCheckpointRegions(service->store_->node_region(), service->store_->extent_region()),
                              service->env_)
          .status());
  // Published by a compare-and-set: if the regions were taken from this server meanwhile (it was cut off while it
  // recovered them), it never serves them.
  CELL_ASSIGN_OR_RETURN(const membership::RegionEntry published,
                        membership->ChangeOwner(claimed.region, claimed.epoch, server_id, claimed.epoch));
  service->epoch_ = published.epoch;
  RemoveOlderLogDirs(config.data_dir, claimed.region, claimed.epoch);
  service->recovery_.records_replayed = 0;  // (the checkpoint above holds them)
  service->StartCheckpointer(adopted);
  return service;
}

}  // namespace cell::server
