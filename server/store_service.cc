#include "server/store_service.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/log.h"
#include "logging/checkpoint.h"
#include "logging/env.h"
#include "rpc/proto/store.pb.h"

namespace cell::server {

using proto::StoreMethod;

namespace {
constexpr size_t kScanReplyBytes = size_t{4} << 20;
constexpr size_t kScanReplyPairs = 10000;
constexpr size_t kScanBatch = 64;

template <typename Request>
bool Parse(std::string_view bytes, Request* request, rpc::Responder& responder) {
  if (request->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return true;
  responder.Fail(Status::InvalidArgument(fmt::format("malformed store request ({} bytes)", bytes.size())));
  return false;
}
}  // namespace

namespace {
// <data_dir>/server-<id>.regions: "node <id>\nextent <id>\n", the regions this server made.
std::string RegionsFile(const std::string& data_dir, uint64_t server_id) {
  return fmt::format("{}/server-{}.regions", data_dir, server_id);
}
// <log dir>/MANIFEST: the regions' shapes, checked on every restart.
std::string Manifest(const StoreConfig& c, uint32_t node, uint32_t extent, bool root) {
  return fmt::format(
      "node_region {}\nextent_region {}\nmeganode_bytes {}\nmeganodes {}\nextent_region_bytes {}\n"
      "root {}\n",
      node, extent, c.meganode_bytes, c.meganodes, c.extent_region_bytes, root ? 1 : 0);
}

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

// Parses a log directory's MANIFEST (written by Manifest above).
StatusOr<std::map<std::string, uint64_t>> ParseManifest(const std::string& text, const std::string& path) {
  std::map<std::string, uint64_t> out;
  std::istringstream in(text);
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) out[key] = value;
  for (const char* k : {"node_region", "extent_region", "meganode_bytes", "meganodes", "extent_region_bytes", "root"}) {
    if (!out.contains(k)) return Status::Corruption(fmt::format("{} has no {}: '{}'", path, k, text));
  }
  return out;
}
}  // namespace

StatusOr<std::pair<uint32_t, uint32_t>> StoreService::RecordedRegions(const std::string& data_dir, uint64_t server_id) {
  const std::string path = RegionsFile(data_dir, server_id);
  CELL_ASSIGN_OR_RETURN(const std::string text, logging::ReadFileToString(logging::Env::Posix(), path));
  unsigned node = 0, extent = 0;
  if (std::sscanf(text.c_str(), "node %u\nextent %u", &node, &extent) != 2 || node == 0 || extent == 0) {
    return Status::Corruption(fmt::format("{} does not name two regions (\"node N\\nextent M\\n\"): '{}'", path, text));
  }
  return std::pair<uint32_t, uint32_t>{node, extent};
}

StatusOr<std::unique_ptr<StoreService>> StoreService::Open(const StoreConfig& config,
                                                           membership::Membership* membership, uint64_t server_id) {
  auto service = std::unique_ptr<StoreService>(new StoreService());
  service->server_id_ = server_id;
  service->search_cpu_us_ = config.search_cpu_us;
  logging::Env* env = config.env != nullptr ? config.env : logging::Env::Posix();
  service->env_ = env;
  if (!config.data_dir.empty()) {
    // One process per server id and data directory: two would append to one log.
    CELL_ASSIGN_OR_RETURN(service->lock_fd_,
                          LockFile(fmt::format("{}/server-{}.lock", config.data_dir, server_id),
                                   fmt::format("another process is server {} on this data directory", server_id)));
  }
  bool restart = false;
  uint64_t log_epoch = 0;
  const std::string regions_file = config.data_dir.empty() ? "" : RegionsFile(config.data_dir, server_id);
  if (!regions_file.empty() && env->FileExists(regions_file)) {
    CELL_ASSIGN_OR_RETURN(const auto recorded, RecordedRegions(config.data_dir, server_id));
    const auto [node, extent] = recorded;
    auto entry = membership->GetRegion(node);
    if (!entry.ok() && !entry.status().IsNotFound()) return entry.status();
    if (entry.ok() && entry->owner != server_id && entry->owner != 0) {
      // Taken over while this server was down: its regions and their log belong to the new owner. This server is
      // fenced from them and starts with new, empty ones.
      LogWarning("server {}: region {} is owned by server {} now (epoch {}); starting with new regions", server_id,
                 node, entry->owner, entry->epoch);
    } else if (entry.ok()) {
      // Claimed at a new epoch (a compare-and-set) before its log is read: a survivor that moved it first wins, and
      // this server starts new regions; one that tries after finds the epoch moved. The log is this server's own (the
      // table names only a directory its owner began), and no other process of this server id runs (the lock above).
      auto claimed = membership->ChangeOwner(node, entry->epoch, server_id);
      if (!claimed.ok() && !claimed.status().IsAborted()) return claimed.status();
      if (claimed.ok()) {
        auto extent_entry = membership->GetRegion(extent);
        if (extent_entry.ok() && extent_entry->owner != server_id) {
          (void)membership->ChangeOwner(extent, extent_entry->epoch, server_id);
        }
        restart = true;
        log_epoch = claimed->log_epoch;
      } else {
        LogWarning("server {}: region {} was taken over as this server restarted; starting with new regions", server_id,
                   node);
      }
    } else {
      restart = true;  // an embedded server's table began empty: the regions are created in it below
    }
    if (restart) {
      service->node_region_ = node;
      service->extent_region_ = extent;
    }
  }
  if (!restart) {
    CELL_ASSIGN_OR_RETURN(service->node_region_, membership->AllocateRegionId());
    CELL_ASSIGN_OR_RETURN(service->extent_region_, membership->AllocateRegionId());
  }
  // The first server of the cluster holds the root; the others learn where it is.
  CELL_ASSIGN_OR_RETURN(uint32_t root, membership->ClaimRoot(service->node_region_));
  const meganode::GlobalTreeOptions options = service->TreeOptions(config, membership, root);
  if (config.data_dir.empty()) {
    auto store = meganode::GlobalTree::Open(options);
    if (!store.ok()) {
      return Status::FromCode(
          store.status().code(),
          fmt::format("creating the store's regions ({} meganodes of {} B, {} B of extents): {}", config.meganodes,
                      config.meganode_bytes, config.extent_region_bytes, store.status().message()));
    }
    service->store_ = std::move(*store);
  } else {
    service->log_dir_ = LogDir(config.data_dir, service->node_region_, log_epoch);
    Status opened = service->OpenLogged(config, options, restart, service->log_dir_, logging::RecoverMode::kRepair);
    if (!opened.ok() && restart) {
      // A survivor may have taken the regions over meanwhile (it saw this server gone in the gap between its old
      // session's end and its new registration, and claimed first) and removed this log: the caller starts again, with
      // new regions.
      auto now = membership->GetRegion(service->node_region_);
      if (now.ok() && now->owner != server_id) {
        return Status::Aborted(fmt::format("region {} was given to server {} while server {} was recovering it ({})",
                                           service->node_region_, now->owner, server_id, opened.ToString()));
      }
    }
    CELL_RETURN_IF_ERROR(opened);
    if (!restart) {
      // Last: only a log that holds a whole first meganode is ever recovered (a first start that stops before this
      // leaves a directory a restart does not use).
      CELL_RETURN_IF_ERROR(logging::WriteFileAtomically(
          env, regions_file, fmt::format("node {}\nextent {}\n", service->node_region_, service->extent_region_)));
    }
  }
  // Only once the memory exists do the regions enter the table (a restart finds them there, unless the table was
  // lost with an embedded server).
  auto node = membership->GetRegion(service->node_region_);
  if (!restart || (!node.ok() && node.status().IsNotFound())) {
    node = membership->CreateRegion(service->node_region_, server_id);
    CELL_RETURN_IF_ERROR(node.status());
    CELL_RETURN_IF_ERROR(membership->CreateRegion(service->extent_region_, server_id).status());
  }
  CELL_RETURN_IF_ERROR(node.status());
  if (node->owner != server_id) {
    return Status::Aborted(fmt::format("region {} was given to server {} while server {} was recovering it",
                                       service->node_region_, node->owner, server_id));
  }
  service->epoch_ = node->epoch;
  if (service->log_ != nullptr) {
    service->checkpointer_ =
        std::thread([raw = service.get(), every = config.checkpoint_log_bytes] { raw->CheckpointLoop(every); });
  }
  return service;
}

meganode::GlobalTreeOptions StoreService::TreeOptions(const StoreConfig& config, membership::Membership* membership,
                                                      uint32_t root) {
  peers_ = std::make_unique<ServerPeers>(membership, server_id_, config.peer_timeout, config.peer_key);
  meganode::GlobalTreeOptions options;
  options.root = root == node_region_;
  options.first_meganode = GlobalPtr{root, 0};
  options.peers = peers_.get();
  options.meganode_bytes = config.meganode_bytes;
  options.meganodes = config.meganodes;
  options.extent_region_bytes = config.extent_region_bytes;
  options.backing = config.huge_pages ? meganode::RegionBacking::kHugetlb : meganode::RegionBacking::kMemfd;
  options.node_region_id = node_region_;
  options.extent_region_id = extent_region_;
  return options;
}

std::string StoreService::LogDir(const std::string& data_dir, uint32_t node_region, uint64_t log_epoch) {
  return log_epoch == 0 ? fmt::format("{}/regions-{}", data_dir, node_region)
                        : fmt::format("{}/regions-{}.{}", data_dir, node_region, log_epoch);
}

namespace {
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
    if (removing) LogWarning("removing the old log directory {}: {}", it->path().string(), removing.message());
  }
}
}  // namespace

StatusOr<std::unique_ptr<StoreService>> StoreService::Adopt(const StoreConfig& config,
                                                            membership::Membership* membership, uint64_t server_id,
                                                            const membership::RegionEntry& claimed) {
  if (config.data_dir.empty())
    return Status::FailedPrecondition("only a server with a --data-dir can take over regions");
  if (claimed.owner != server_id) {
    return Status::InvalidArgument(
        fmt::format("region {} is claimed by server {}, not {}", claimed.region, claimed.owner, server_id));
  }
  auto service = std::unique_ptr<StoreService>(new StoreService());
  service->server_id_ = server_id;
  service->search_cpu_us_ = config.search_cpu_us;
  service->env_ = config.env != nullptr ? config.env : logging::Env::Posix();
  const std::string from = LogDir(config.data_dir, claimed.region, claimed.log_epoch);
  const std::string to = LogDir(config.data_dir, claimed.region, claimed.epoch);
  const std::string manifest_path = from + "/MANIFEST";
  CELL_ASSIGN_OR_RETURN(const std::string text, logging::ReadFileToString(service->env_, manifest_path));
  CELL_ASSIGN_OR_RETURN(const auto manifest, ParseManifest(text, manifest_path));
  if (manifest.at("node_region") != claimed.region) {
    return Status::Corruption(fmt::format("{} describes region {}", manifest_path, manifest.at("node_region")));
  }
  // The new directory, named by this server's epoch (its compare-and-set's, so no other server writes there; one
  // left by an earlier attempt of this server at the same epoch is garbage).
  std::error_code error;
  std::filesystem::remove_all(to, error);
  if (error) return Status::Unavailable(fmt::format("clearing {}: {}", to, error.message()));
  CELL_RETURN_IF_ERROR(service->env_->CreateDirs(to));
  CELL_RETURN_IF_ERROR(logging::WriteFileAtomically(service->env_, to + "/MANIFEST", text));
  // The regions' shape is the dead server's, whatever this server's options say.
  StoreConfig adopted = config;
  adopted.meganode_bytes = manifest.at("meganode_bytes");
  adopted.meganodes = static_cast<uint32_t>(manifest.at("meganodes"));
  adopted.extent_region_bytes = manifest.at("extent_region_bytes");
  service->node_region_ = claimed.region;
  service->extent_region_ = static_cast<uint32_t>(manifest.at("extent_region"));
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
  service->checkpointer_ =
      std::thread([raw = service.get(), every = adopted.checkpoint_log_bytes] { raw->CheckpointLoop(every); });
  return service;
}

void StoreService::MarkLost(uint64_t owner, uint64_t epoch) {
  if (!lost_.exchange(true)) {
    LogError("server {}: region {} is owned by server {} at epoch {} now; this server no longer serves it", server_id_,
             node_region_, owner, epoch);
  }
}

uint32_t StoreService::RegionOf(uint16_t method, std::string_view request) {
  const auto parse = [&](auto* message) {
    return message->ParseFromArray(request.data(), static_cast<int>(request.size()));
  };
  switch (method) {
    case StoreMethod::STORE_GET:
    case StoreMethod::STORE_PUT:
    case StoreMethod::STORE_DELETE: {
      proto::KeyRequest r;
      return parse(&r) ? r.target().region() : 0;
    }
    case StoreMethod::STORE_SCAN: {
      proto::ScanRequest r;
      return parse(&r) ? r.target().region() : 0;
    }
    case StoreMethod::MEGA_FILL: {
      proto::MegaFill r;
      return parse(&r) ? GlobalPtr::Unpack(r.meganode()).region : 0;
    }
    case StoreMethod::MEGA_UNSEAL:
    case StoreMethod::MEGA_ABANDON: {
      proto::MegaRef r;
      return parse(&r) ? GlobalPtr::Unpack(r.meganode()).region : 0;
    }
    case StoreMethod::MEGA_INSERT_SEPARATOR: {
      proto::SeparatorRequest r;
      return parse(&r) ? GlobalPtr::Unpack(r.at()).region : 0;
    }
    default:
      return 0;
  }
}

Status StoreService::OpenLogged(const StoreConfig& config, meganode::GlobalTreeOptions options, bool restart,
                                const std::string& recover_from, logging::RecoverMode mode) {
  logging::Env* env = env_;
  CELL_RETURN_IF_ERROR(env->CreateDirs(log_dir_));
  const std::string manifest_path = log_dir_ + "/MANIFEST";
  const std::string manifest = Manifest(config, node_region_, extent_region_, options.root);
  if (restart) {
    auto found = logging::ReadFileToString(env, manifest_path);
    if (!found.ok()) {
      return Status::FromCode(found.status().code(), fmt::format("restarting with regions {} and {}: {}", node_region_,
                                                                 extent_region_, found.status().message()));
    }
    if (*found != manifest) {
      return Status::FailedPrecondition(
          fmt::format("{} describes regions of another shape than this server's options (--meganode-size, --meganodes, "
                      "--region-size must stay as they were): it holds\n{}but the options give\n{}",
                      manifest_path, *found, manifest));
    }
  } else {
    if (env->FileExists(log_dir_)) {
      CELL_ASSIGN_OR_RETURN(const std::vector<uint64_t> files, logging::RegionLog::Files(log_dir_, env));
      if (!files.empty()) {
        return Status::FailedPrecondition(fmt::format(
            "{} already holds a log, but region {} is new to this server: it is left by a first start that did not "
            "finish, or by another cluster; remove it if so",
            log_dir_, node_region_));
      }
    }
    CELL_RETURN_IF_ERROR(env->CreateDirs(log_dir_));
    CELL_RETURN_IF_ERROR(logging::WriteFileAtomically(env, manifest_path, manifest));
  }
  const logging::RegionLogOptions log_options{
      .durability = config.durability, .async_flush_interval = config.async_flush_interval, .env = env};
  logger_ = std::make_unique<RegionLogger>(nullptr, std::vector<uint32_t>{node_region_, extent_region_});
  options.write_sink = logger_.get();
  const auto start = std::chrono::steady_clock::now();
  if (restart) {
    options.restore = [&](meganode::Region& nodes, meganode::Region& extents) -> Status {
      const RegionMemory n{nodes.id(), nodes.Resolve(0, nodes.size()), nodes.size()};
      const RegionMemory e{extents.id(), extents.Resolve(0, extents.size()), extents.size()};
      std::map<uint64_t, std::string> splits;  // begun and not (yet) ended
      auto r = logging::Recover(
          recover_from, TreeCheckpointRegions(nodes, extents),
          [&](uint64_t, const logging::LogRecord& record) {
            if (record.kind == logging::LogRecord::Kind::kSplitBegin) {
              splits[record.split] = record.info;
            } else if (record.kind == logging::LogRecord::Kind::kSplitEnd) {
              splits.erase(record.split);
            }
            return ApplyLogRecord(record, n, e);
          },
          env, mode);
      if (!r.ok()) {
        return Status::FromCode(r.status().code(), fmt::format("recovering regions {} and {} from {}: {}", node_region_,
                                                               extent_region_, recover_from, r.status().message()));
      }
      recovery_.recovered = true;
      recovery_.checkpoint_lsn = r->checkpoint_lsn;
      recovery_.records_replayed = r->replay.records;
      recovery_.damage = r->replay.damage;
      recovery_.unfinished_splits = splits.size();
      for (const auto& [id, info] : splits) LogInfo("recovery: a split the crash interrupted: {}", info);
      CELL_ASSIGN_OR_RETURN(log_, logging::RegionLog::Open(log_dir_, r->next_lsn(), log_options));
      logger_->set_log(log_.get());
      return Status::OK();
    };
  } else {
    CELL_ASSIGN_OR_RETURN(log_, logging::RegionLog::Open(log_dir_, 1, log_options));
    logger_->set_log(log_.get());
  }
  auto store = meganode::GlobalTree::Open(options);
  if (!store.ok()) {
    return Status::FromCode(store.status().code(),
                            fmt::format("{} the store's regions ({} meganodes of {} B, {} B of extents): {}",
                                        restart ? "recovering" : "creating", config.meganodes, config.meganode_bytes,
                                        config.extent_region_bytes, store.status().message()));
  }
  store_ = std::move(*store);
  // The first meganode, or recovery's repairs, are durable before anything is served.
  CELL_RETURN_IF_ERROR(log_->Flush());
  if (restart) {
    recovery_.tree = store_->recovery();
    recovery_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto& t = recovery_.tree;
    LogInfo(
        "server {}: recovered regions {} and {} in {:.2f} s: checkpoint at lsn {}, {} log records replayed{}; "
        "{} meganodes, {} records ({} bytes); repaired: {} unfinished splits ({} right halves kept, {} orphans "
        "freed, {} nodes cut); {} sealed meganodes await their splitting server",
        server_id_, node_region_, extent_region_, recovery_.seconds, recovery_.checkpoint_lsn,
        recovery_.records_replayed, recovery_.damage.empty() ? "" : "; the log ended early: " + recovery_.damage,
        t.meganodes, t.records, t.record_bytes, recovery_.unfinished_splits, t.pending_kept, t.orphans_freed,
        t.nodes_cut, t.sealed);
  }
  return Status::OK();
}

StoreService::~StoreService() {
  {
    std::lock_guard lock(checkpoint_mu_);
    stopping_ = true;
  }
  checkpoint_cv_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
  store_.reset();  // before the log it writes to, and before the lock is released
  logger_.reset();
  log_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void StoreService::CheckpointLoop(uint64_t every_bytes) {
  uint64_t at_last = 0;
  int failures = 0;
  bool due = recovery_.records_replayed > 0;  // the next restart need not replay the same records again
  std::unique_lock lock(checkpoint_mu_);
  while (!stopping_) {
    if (!due) {
      checkpoint_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
      if (stopping_) break;
      due = log_->appended_bytes() - at_last >= every_bytes;
      if (!due) continue;
    }
    if (lost_.load(std::memory_order_acquire)) break;  // another server's regions now: their directory too
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    const uint64_t bytes = log_->appended_bytes();
    auto lsn = logging::TakeCheckpoint(log_dir_, log_.get(),
                                       TreeCheckpointRegions(store_->node_region(), store_->extent_region()), env_);
    if (lsn.ok()) {
      at_last = bytes;
      failures = 0;
      LogInfo("server {}: checkpoint at lsn {} in {:.2f} s", server_id_, *lsn,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    } else {
      // Backing off (1 s, 2 s, ... 5 min): a full disk or a failed log is not cured by copying the regions again.
      const auto wait = std::chrono::seconds(std::min(300, 1 << std::min(failures, 9)));
      ++failures;
      LogWarning("server {}: checkpoint failed (the log is kept; trying again in {} s): {}", server_id_, wait.count(),
                 lsn.status().ToString());
      lock.lock();
      checkpoint_cv_.wait_for(lock, wait, [&] { return stopping_; });
      lock.unlock();
    }
    due = false;
    lock.lock();
  }
}

Status StoreService::Commit(bool flush) {
  if (logger_ == nullptr) return Status::OK();
  Status s = logger_->Commit();
  if (s.ok() && flush) s = log_->Flush();
  return s.ok() ? s : NotLogged(s);
}

Status StoreService::NotLogged(const Status& s) const {
  // Not Unavailable: a retry cannot succeed (the log failed for good), so the client must not retry it.
  return Status::FailedPrecondition(fmt::format(
      "server {}: the write was made but could not be logged, and is not acknowledged: {} (the server takes no "
      "more writes until it is restarted and recovers)",
      server_id_, s.message()));
}

std::vector<rpc::RegionRegistration> StoreService::regions() const {
  std::vector<rpc::RegionRegistration> out;
  for (const meganode::Region* r : {&store_->node_region(), &store_->extent_region()}) {
    out.push_back({.id = r->id(), .base = r->base(), .size = r->size(), .fd = r->fd()});
  }
  return out;
}

void StoreService::HandlePeer(uint16_t method, std::string_view request, rpc::Responder responder) {
  proto::MegaReply reply;
  Status s;
  switch (method) {
    case StoreMethod::MEGA_CREATE: {
      proto::MegaCreate create;
      if (!Parse(request, &create, responder)) return;
      btree::MeganodeInfo info;
      info.min = create.info().min();
      info.max = create.info().max();
      info.right = GlobalPtr::Unpack(create.info().right());
      info.level = create.info().level();
      auto m = store_->CreateSealed(info, create.token());
      if (!m.ok()) return responder.Fail(m.status());
      reply.set_meganode(m->ptr.Pack());
      reply.set_generation(m->generation);
      break;
    }
    case StoreMethod::MEGA_FILL: {
      proto::MegaFill fill;
      if (!Parse(request, &fill, responder)) return;
      std::vector<meganode::MovedEntry> entries(fill.entries_size());
      for (int i = 0; i < fill.entries_size(); ++i) {
        entries[i].key = fill.entries(i).key();
        entries[i].value = fill.entries(i).value();
        entries[i].child = GlobalPtr::Unpack(fill.entries(i).child());
      }
      s = store_->Fill(meganode::RemoteMeganode{GlobalPtr::Unpack(fill.meganode()), fill.generation()}, entries);
      break;
    }
    case StoreMethod::MEGA_UNSEAL:
    case StoreMethod::MEGA_ABANDON: {
      proto::MegaRef ref;
      if (!Parse(request, &ref, responder)) return;
      const meganode::RemoteMeganode m{GlobalPtr::Unpack(ref.meganode()), ref.generation()};
      if (method == StoreMethod::MEGA_ABANDON && ref.token() != 0) {
        s = store_->AbandonCreated(ref.token());
      } else {
        s = method == StoreMethod::MEGA_UNSEAL ? store_->Unseal(m) : store_->Abandon(m);
      }
      break;
    }
    case StoreMethod::MEGA_INSERT_SEPARATOR: {
      proto::SeparatorRequest r;
      if (!Parse(request, &r, responder)) return;
      const GlobalPtr at = GlobalPtr::Unpack(r.at());
      if (!(at == store_->first_meganode()) && !store_->IsLocal(at)) {
        return responder.Fail(Status::FailedPrecondition(
            fmt::format("server {} does not hold meganode {}:{}", server_id_, at.region, at.offset)));
      }
      // The level, key and child are checked by the tree, against what it holds.
      s = store_->InsertSeparator(at, r.level(), r.separator(), GlobalPtr::Unpack(r.child()));
      break;
    }
    default:
      return responder.Fail(Status::InvalidArgument(fmt::format("unknown store method {}", method)));
  }
  if (s.ok()) s = Commit(/*flush=*/true);  // what the peer is told was done is durable, whatever the durability
  if (!s.ok()) return responder.Fail(s);
  responder.Reply(reply.SerializeAsString());
}

bool StoreService::IsStoreMethod(uint16_t method) {
  return method != StoreMethod::STORE_METHOD_NONE && proto::StoreMethod_IsValid(method);
}

bool StoreService::IsPeerMethod(uint16_t method) {
  return method == StoreMethod::MEGA_CREATE || method == StoreMethod::MEGA_FILL || method == StoreMethod::MEGA_UNSEAL ||
         method == StoreMethod::MEGA_ABANDON || method == StoreMethod::MEGA_INSERT_SEPARATOR;
}

std::string StoreService::NotAcknowledged(const Status& why) {
  proto::StoreReply reply;
  reply.set_not_acknowledged(why.message());
  return reply.SerializeAsString();
}

Status StoreService::MayAnswer(const std::function<Status()>* lease) const {
  if (lost_.load(std::memory_order_acquire)) {
    return Status::Unavailable(fmt::format("server {} no longer holds region {}; retry with the region table's owner",
                                           server_id_, node_region_));
  }
  if (lease == nullptr) return Status::OK();
  Status s = (*lease)();
  if (s.ok()) return s;
  return Status::Unavailable(
      fmt::format("server {} may not answer for region {} now ({}); retry", server_id_, node_region_, s.message()));
}

void StoreService::Handle(uint16_t method, std::string_view request, rpc::Responder responder, bool serving,
                          const std::function<Status()>* lease) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  if (method == StoreMethod::STORE_STATS) {
    proto::StoreStats stats;
    stats.set_server(server_id_);
    stats.set_meganodes(store_->meganodes_in_use());
    stats.set_meganode_splits(store_->stats().splits.load());
    stats.set_root_splits(store_->stats().root_splits.load());
    stats.set_requests(requests_.load(std::memory_order_relaxed));
    stats.set_extent_bytes_used(store_->extent_bytes_used());
    stats.set_remote_splits(store_->stats().remote_splits.load());
    stats.set_redirects(redirects_.load(std::memory_order_relaxed));
    stats.set_held_writes(store_->stats().held_writes.load());
    stats.set_node_bytes_used(store_->node_bytes_used());
    stats.set_node_bytes_free(store_->node_bytes_capacity() - store_->node_bytes_used());
    stats.set_extent_bytes_free(store_->extent_bytes_capacity() - store_->extent_bytes_used());
    stats.set_room_splits(store_->stats().room_splits.load());
    return responder.Reply(stats.SerializeAsString());
  }
  if (IsPeerMethod(method)) {
    if (!serving) {
      return responder.Fail(Status::Unavailable(fmt::format("server {} is not serving; retry", server_id_)));
    }
    if (lost_.load(std::memory_order_acquire)) {
      return responder.Fail(Status::Unavailable(fmt::format(
          "server {} no longer holds region {}; retry with the region table's owner", server_id_, node_region_)));
    }
    return HandlePeer(method, request, std::move(responder));
  }
  proto::KeyRequest key_request;
  proto::ScanRequest scan_request;
  const proto::Target* target = nullptr;
  if (method == StoreMethod::STORE_SCAN) {
    if (!Parse(request, &scan_request, responder)) return;
    target = &scan_request.target();
  } else {
    if (!Parse(request, &key_request, responder)) return;
    target = &key_request.target();
  }
  proto::StoreReply reply;
  const uint64_t packed_start = method == StoreMethod::STORE_SCAN ? scan_request.meganode() : key_request.meganode();
  const GlobalPtr start = GlobalPtr::Unpack(packed_start);
  if (packed_start != 0 && start.region != target->region()) {
    return responder.Fail(
        Status::InvalidArgument(fmt::format("the request begins at meganode {}:{}, outside its target region {}",
                                            start.region, start.offset, target->region())));
  }
  const uint64_t epoch = epoch_.load(std::memory_order_acquire);
  if (target->region() != node_region_ || target->epoch() > epoch || lost_.load(std::memory_order_acquire)) {
    reply.mutable_wrong_owner()->set_region(target->region());
    reply.mutable_wrong_owner()->set_epoch(target->region() == node_region_ ? epoch : 0);
    return responder.Reply(reply.SerializeAsString());
  }
  if (!serving) {
    return responder.Fail(Status::Unavailable(fmt::format(
        "server {} is not serving: it lost touch with the membership or is registering again; retry", server_id_)));
  }
  if (packed_start != 0 && !store_->IsMeganodeAddress(start)) {
    return responder.Fail(
        Status::InvalidArgument(fmt::format("the request begins at {}:{}, which is no meganode's address on server {}",
                                            start.region, start.offset, server_id_)));
  }
  if (method == StoreMethod::STORE_SCAN &&
      (scan_request.start().size() > kMaxKeySize || scan_request.end().size() > kMaxKeySize)) {
    return responder.Fail(
        Status::InvalidArgument(fmt::format("a scan's start and end keys are at most {} bytes (these are {} and {})",
                                            kMaxKeySize, scan_request.start().size(), scan_request.end().size())));
  }
  // The leaf meganode that answered, for the client's path cache, unless it is the one the client began at (and it
  // did not ask).
  btree::MeganodeRange range;
  const GlobalPtr known = key_request.want_range() ? GlobalPtr() : start;
  range.meganode = known;
  if (search_cpu_us_ > 0) {  // every method from here on searches the tree: get, put, delete, scan
    // Busy, not asleep: the time is the worker's CPU, so requests queue behind it as behind a real search.
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(search_cpu_us_);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
  switch (method) {
    case StoreMethod::STORE_GET: {
      std::string value;
      GlobalPtr elsewhere;
      Status s = store_->Get(key_request.key(), &value, start, &elsewhere, &range);
      if (!elsewhere.is_null()) {
        reply.set_elsewhere(elsewhere.Pack());
      } else if (s.ok()) {
        reply.set_found(true);
        reply.set_value(std::move(value));
      } else if (!s.IsNotFound()) {
        return responder.Fail(s);
      }
      break;
    }
    case StoreMethod::STORE_PUT: {
      GlobalPtr elsewhere;
      Status s = store_->Put(key_request.key(), key_request.value(), start, &elsewhere, &range);
      if (s.IsResourceExhausted() || s.IsUnavailable()) {
        s = Status::FromCode(s.code(), fmt::format("server {}: {}", server_id_, s.message()));
      }
      if (!s.ok()) return responder.Fail(s);
      if (!elsewhere.is_null()) reply.set_elsewhere(elsewhere.Pack());
      break;
    }
    case StoreMethod::STORE_DELETE: {
      GlobalPtr elsewhere;
      Status s = store_->Delete(key_request.key(), start, &elsewhere, &range);
      if (!elsewhere.is_null()) {
        reply.set_elsewhere(elsewhere.Pack());
      } else if (s.ok()) {
        reply.set_found(true);
      } else if (!s.IsNotFound()) {
        return responder.Fail(s);
      }
      break;
    }
    case StoreMethod::STORE_SCAN: {
      if (scan_request.limit() == 0) return responder.Fail(Status::InvalidArgument("a scan needs a limit > 0"));
      // One reply carries at most kScanReplyBytes of pairs (at least one) and kScanReplyPairs pairs; `more` tells the
      // client to go on after the last key. Read in small batches, so that big values are not read only to be cut.
      const size_t limit = std::min<size_t>(scan_request.limit(), kScanReplyPairs);
      std::string from = scan_request.start();
      size_t bytes = 0, pairs = 0;
      bool finished = false;
      GlobalPtr elsewhere;
      while (pairs < limit && bytes < kScanReplyBytes) {
        std::vector<btree::KeyValue> batch;
        const size_t want = std::min<size_t>(kScanBatch, limit - pairs);
        std::string resume;
        Status s = store_->Scan(from, scan_request.end(), want, &batch, start, &elsewhere, &resume);
        if (!s.ok()) return responder.Fail(s);
        for (auto& kv : batch) {
          bytes += kv.key.size() + kv.value.size();
          proto::KeyValue* out = reply.add_pairs();
          out->set_key(std::move(kv.key));
          out->set_value(std::move(kv.value));
          ++pairs;
        }
        if (!elsewhere.is_null()) {  // the rest of the range begins on another server
          from = std::move(resume);
          break;
        }
        if (batch.size() < want || !btree::Successor(reply.pairs(reply.pairs_size() - 1).key(), &from)) {
          finished = true;  // the range (or the key space) ran out
          break;
        }
      }
      if (!elsewhere.is_null() && pairs < scan_request.limit()) {
        reply.set_elsewhere(elsewhere.Pack());
        reply.set_more(true);
      } else {
        reply.set_more(!finished && pairs < scan_request.limit());
      }
      if (reply.more()) reply.set_resume(from);
      break;
    }
    default:
      return responder.Fail(Status::InvalidArgument(fmt::format("unknown store method {}", method)));
  }
  if (reply.elsewhere() != 0) redirects_.fetch_add(1, std::memory_order_relaxed);
  if (!range.meganode.is_null() && !(range.meganode == known)) {
    reply.set_leaf(range.meganode.Pack());
    reply.set_leaf_min(std::move(range.min));
    reply.set_leaf_max(std::move(range.max));
  }
  if (logger_ != nullptr && (method == StoreMethod::STORE_PUT || method == StoreMethod::STORE_DELETE)) {
    // Acknowledged only once durable (sync), or at once (async: on disk within the flush interval). The reply waits
    // for the fdatasync on the log's committer thread; this worker goes on to its next request (group commit).
    logger_->CommitThen(
        [this, lease, responder = std::move(responder), bytes = reply.SerializeAsString()](const Status& s) mutable {
          if (!s.ok()) return responder.Fail(NotLogged(s));
          // Acknowledged only under a lease that is still valid now that the write is durable: a server that was paused
          // meanwhile past its session may have been taken over, and its client must not count this write as done.
          if (Status may = MayAnswer(lease); !may.ok()) return responder.Reply(NotAcknowledged(may));
          responder.Reply(bytes);
        });
    return;
  }
  if (Status may = MayAnswer(lease); !may.ok()) {
    if (method == StoreMethod::STORE_PUT || method == StoreMethod::STORE_DELETE) {
      return responder.Reply(NotAcknowledged(may));  // made in memory already
    }
    return responder.Fail(may);
  }
  responder.Reply(reply.SerializeAsString());
}

}  // namespace cell::server
