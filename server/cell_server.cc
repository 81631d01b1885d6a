#include "server/cell_server.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <shared_mutex>
#include <thread>

#include "common/backoff.h"
#include "common/diagnostics.h"
#include "membership/in_memory_membership.h"
#include "membership/zookeeper_membership.h"
#include "rpc/proto/store.pb.h"

namespace cell::server {

namespace {
constexpr std::chrono::milliseconds kFencingPeriod{200};
constexpr std::chrono::milliseconds kTakeoverPeriod{250};

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1" || host == "[::1]";
}

std::string_view SchemeName(rpc::Endpoint::Scheme scheme) {
  switch (scheme) {
    case rpc::Endpoint::Scheme::kTcp:
      return "tcp";
    case rpc::Endpoint::Scheme::kShm:
      return "shm";
    case rpc::Endpoint::Scheme::kVerbs:
      return "verbs";
  }
  return "unknown";
}
}  // namespace

Status CellServer::Authorize(bool keyed, uint16_t method, const std::string& key_name) {
  if (!keyed || key_name == rpc::kPeerKeyName || !StoreService::IsPeerMethod(method)) return Status::OK();
  return Status::PermissionDenied(
      fmt::format("{} is a request between servers and needs the peer key; this connection proved the {} key",
                  proto::StoreMethod_Name(static_cast<proto::StoreMethod>(method)), key_name));
}

StatusOr<std::unique_ptr<CellServer>> CellServer::Start(const ServerConfig& config) {
  // In this order: the keys (a server meant to be secured must never start open), the membership, the listeners,
  // the registration, then the store (its regions are claimed and recovered only once the server is registered), and
  // last the loops that watch for fencing and take over dead servers' regions.
  auto server = std::unique_ptr<CellServer>(new CellServer(config));
  if (config.listen.empty()) return Status::InvalidArgument("give at least one --listen URI");
  if (config.workers < 1) return Status::InvalidArgument(fmt::format("--workers must be >= 1, not {}", config.workers));
  CELL_ASSIGN_OR_RETURN(const std::vector<rpc::Key> keys, server->ReadKeys());
  if (config.membership == "embedded") {
    CELL_RETURN_IF_ERROR(server->OpenEmbeddedMembership());
  } else {
    CELL_RETURN_IF_ERROR(server->OpenZooKeeperMembership(/*keyed=*/!keys.empty()));
  }
  CELL_RETURN_IF_ERROR(server->Listen(keys));
  CELL_RETURN_IF_ERROR(server->Register());
  CELL_RETURN_IF_ERROR(server->OpenStore());
  server->StartLoops();
  return server;
}

StatusOr<std::vector<rpc::Key>> CellServer::ReadKeys() {
  if (config_.client_key_file.empty() != config_.peer_key_file.empty()) {
    return Status::InvalidArgument(
        "--client-key-file and --peer-key-file go together: give both (make them with `cellctl keygen FILE`), or "
        "neither for a server that accepts anyone (local development)");
  }
  if (!config_.client_key_file.empty()) {
    CELL_ASSIGN_OR_RETURN(rpc::Key client, rpc::ReadKeyFile(config_.client_key_file, rpc::kClientKeyName));
    CELL_ASSIGN_OR_RETURN(peer_key_, rpc::ReadKeyFile(config_.peer_key_file, rpc::kPeerKeyName));
    if (client.secret == peer_key_.secret) {
      return Status::InvalidArgument(
          "the client key and the peer key are the same, so every client could act as a server: make two keys "
          "(`cellctl keygen FILE`)");
    }
    return std::vector<rpc::Key>{std::move(client), peer_key_};
  }
  for (const std::string& uri : config_.listen) {
    CELL_ASSIGN_OR_RETURN(rpc::Endpoint endpoint, rpc::Endpoint::Parse(uri));
    if (endpoint.scheme == rpc::Endpoint::Scheme::kShm || IsLoopback(endpoint.host) || config_.insecure) continue;
    return Status::InvalidArgument(fmt::format(
        "--listen={}: refusing to listen on a non-loopback address without keys: anyone who could reach it could "
        "read, change and delete every key. Give --client-key-file and --peer-key-file (make them with `cellctl "
        "keygen FILE`), or --insecure to accept anyone anyway",
        uri));
  }
  diag::Warning(
      "server {}: NO KEYS: this server accepts every request from anyone who can reach it, the requests "
      "servers send each other included. For local development only: give --client-key-file and "
      "--peer-key-file",
      config_.id == 0 ? uint64_t{1} : config_.id);
  return std::vector<rpc::Key>{};
}

Status CellServer::OpenEmbeddedMembership() {
  if (!config_.zk_auth.empty()) return Status::InvalidArgument("--zk-auth applies only to --membership=zk://...");
  if (config_.id == 0) config_.id = 1;
  // The table lives in this process only: a restart on a data directory must not hand out its regions' ids again.
  uint32_t first_id = 1;
  if (!config_.data_dir.empty()) {
    auto recorded = StoreService::RecordedRegions(config_.data_dir, config_.id);
    if (recorded.ok()) {
      first_id = std::max(recorded->first, recorded->second) + 1;
    } else if (!recorded.status().IsNotFound()) {
      return recorded.status();  // a regions file this server cannot read: its regions' ids are unknown
    }
  }
  membership_ = std::make_unique<membership::InMemoryMembership>(first_id);
  table_service_ = std::make_unique<TableService>(membership_.get());
  return Status::OK();
}

Status CellServer::OpenZooKeeperMembership(bool keyed) {
  if (config_.membership.substr(0, 5) != "zk://") {
    return Status::InvalidArgument(
        fmt::format("--membership must be 'embedded' or zk://host:port[,host:port...][/root/cluster], not '{}'",
                    config_.membership));
  }
  if (config_.id == 0) {
    return Status::InvalidArgument("--id is required with ZooKeeper membership: a nonzero id unique in the cluster");
  }
  CELL_ASSIGN_OR_RETURN(membership::ZooKeeperOptions zk, membership::ParseZooKeeperUri(config_.membership));
  zk.auth = config_.zk_auth;
  if (zk.auth.empty() && keyed) {
    // The cluster's znodes become writable only by holders of the peer key (DESIGN, "Security").
    zk.auth = "cell-peer:" + rpc::DeriveSecret(peer_key_, "zookeeper digest");
  }
  zk.session_timeout = config_.zk_session_timeout;
  zk.scheduler = &scheduler_;  // its lease renewal and refresher
  CELL_ASSIGN_OR_RETURN(membership_, membership::ZooKeeperMembership::Open(zk));
  return Status::OK();
}

Status CellServer::Listen(const std::vector<rpc::Key>& keys) {
  rpc::ServerOptions options;
  options.workers = config_.workers;
  options.worker_cpus = config_.worker_cpus;
  options.poll = config_.poll;
  options.nic_model = config_.nic_model;
  options.keys = keys;
  options.authorize = [keyed = !keys.empty()](uint16_t method, const std::string& key_name) {
    return Authorize(keyed, method, key_name);
  };
  options.shm_group = config_.shm_group;
  std::map<std::string, std::string> seen;
  for (const std::string& uri : config_.listen) {
    CELL_ASSIGN_OR_RETURN(rpc::Endpoint endpoint, rpc::Endpoint::Parse(uri));
    const std::string scheme(SchemeName(endpoint.scheme));
    if (seen.count(scheme) != 0) {
      return Status::InvalidArgument(
          fmt::format("--listen names two {} URIs ({} and {}); give one per transport", scheme, seen[scheme], uri));
    }
    auto listener = rpc::Listen(uri, options, this);
    if (!listener.ok()) {
      return Status::FromCode(listener.status().code(),
                              fmt::format("--listen={}: {}", uri, listener.status().message()));
    }
    seen[scheme] = (*listener)->uri();
    uris_.push_back((*listener)->uri());
    listeners_.push_back(std::move(*listener));
  }
  return Status::OK();
}

Status CellServer::Register() {
  // Registered before its regions are claimed and recovered, so that survivors, which take only dead servers'
  // regions, leave them alone meanwhile (store requests get Unavailable until then). A server restarted after a crash
  // may find its previous incarnation still registered, until that one's ZooKeeper session expires: wait for it (a
  // little longer than a session timeout), and no longer.
  Backoff poll(std::chrono::milliseconds(100), std::chrono::milliseconds(100),
               std::chrono::steady_clock::now() + config_.zk_session_timeout * 2);
  for (;;) {
    Status s = membership_->RegisterServer(Self());
    if (s.ok()) break;
    const std::optional<Backoff::Clock::time_point> next = poll.Next();
    if (s.code() != Status::Code::kFailedPrecondition || !next) return s;
    std::this_thread::sleep_until(*next);  // polling ZooKeeper for the old session's end
  }
  registered_ = true;
  return Status::OK();
}

Status CellServer::OpenStore() {
  StoreConfig store = config_.store;
  store.data_dir = config_.data_dir;
  store.peer_key = peer_key_;
  store.scheduler = &scheduler_;
  store.lease = &lease_;
  for (const std::string& uri : config_.listen) {
    auto endpoint = rpc::Endpoint::Parse(uri);
    if (endpoint.ok() && endpoint->scheme == rpc::Endpoint::Scheme::kVerbs) store.rdma_registered = true;
  }
  if (store.data_dir.empty()) {
    diag::Warning("server {}: no --data-dir: writes are not logged, and a restart loses the data", config_.id);
  }
  for (int attempt = 1;; ++attempt) {
    auto opened = StoreService::Open(store, membership_.get(), config_.id);
    if (opened.ok()) {
      store_ = std::move(*opened);
      break;
    }
    // Taken over while it recovered its regions (in the gap between its old session's end and its registration, a
    // survivor saw it dead): the next attempt finds them another's and starts with new ones.
    if (!opened.status().IsAborted() || attempt == 3) return opened.status();
    diag::Warning("server {}: {}; starting again", config_.id, opened.status().ToString());
  }
  for (auto& listener : listeners_) {
    for (const rpc::RegionRegistration& region : store_->regions()) {
      CELL_RETURN_IF_ERROR(listener->RegisterRegion(region));
    }
  }
  store_ready_.store(true, std::memory_order_release);
  return Status::OK();
}

void CellServer::StartLoops() {
  serving_ = true;
  fencing_ = std::make_unique<TaskScheduler::Lane>(scheduler_);
  fencing_->PostAfter(kFencingPeriod, [this] { Fence(); });
  // Regions this server holds that the table gives to another server are refused from then on (and the server
  // exits, Fence). The watcher outlives nothing it uses: Stop() detaches it first.
  watch_ = std::make_shared<WatchState>();
  watch_->server = this;
  membership_->Watch([watch = watch_](const membership::MembershipEvent& e) {
    if (e.kind != membership::MembershipEvent::Kind::kRegionChanged) return;
    std::lock_guard lock(watch->mu);
    if (watch->server != nullptr) watch->server->OnRegionOwner(e.region);
  });
  if (!config_.data_dir.empty()) {
    takeover_ = std::make_unique<TaskScheduler::Lane>(scheduler_);
    takeover_->PostAfter(kTakeoverPeriod, [this] { TakeOverPass(); });
  }
}

void CellServer::OnRegionOwner(const membership::RegionEntry& r) {
  if (r.owner == config_.id) return;
  std::shared_lock lock(adopted_mu_);
  std::vector<StoreService*> held{store_.get()};
  for (auto& s : adopted_) held.push_back(s.get());
  for (StoreService* s : held) {
    if (s->node_region() == r.region) {
      s->MarkLost(r.owner, r.epoch);
      lost_region_.store(true);
    }
  }
}

void CellServer::Fence() {
  if (stopping()) return;
  if (lost_region_.load()) {
    // Its regions are another server's now (it was cut off longer than its session): serving on would split the
    // brain, and letting go of the regions' memory under its listeners is not safe. Its supervisor restarts it,
    // and it starts with new regions.
    diag::Error(
        "server {}: a region it served was given to another server while it was cut off from the membership; "
        "exiting (restart it: it starts with new regions)",
        config_.id);
    std::fflush(nullptr);
    std::_Exit(2);
  }
  Status now = CheckFencing();
  if (now.code() != fencing_said_.code()) {
    if (now.ok()) {
      diag::Info("server {}: serving again", config_.id);
    } else {
      diag::Warning("server {}: not serving: {}", config_.id, now.ToString());
    }
    fencing_said_ = now;
  }
  fencing_->PostAfter(kFencingPeriod, [this] { Fence(); });
}

CellServer::~CellServer() { Stop(); }

membership::ServerInfo CellServer::Self() const {
  membership::ServerInfo self;
  self.id = config_.id;
  self.capacity_bytes = config_.capacity_bytes;
  for (const std::string& uri : uris_) {
    auto endpoint = rpc::Endpoint::Parse(uri);
    if (endpoint.ok()) self.addresses[std::string(SchemeName(endpoint->scheme))] = uri;
  }
  return self;
}

Status CellServer::CheckFencing() {
  Status serving = membership_->ServingStatus();
  if (serving.code() != Status::Code::kFailedPrecondition && !reclaiming_.load(std::memory_order_acquire)) {
    serving_.store(serving.ok(), std::memory_order_release);
    return serving;
  }
  if (serving.code() == Status::Code::kFailedPrecondition) {
    // Our session expired: survivors may own our regions now. Nothing is answered (lease_ says so) until this server
    // has registered again and claimed what the table still gives it; an attempt that fails part way is taken up
    // again at the next check.
    reclaiming_.store(true, std::memory_order_release);
    if (serving_.exchange(false)) diag::Warning("server {}: fenced: {}", config_.id, serving.ToString());
    registered_ = false;
    CELL_RETURN_IF_ERROR(membership_->Renew());
    CELL_RETURN_IF_ERROR(membership_->RegisterServer(Self()));
    registered_ = true;
  }
  CELL_ASSIGN_OR_RETURN(auto regions, membership_->ListRegions());
  size_t owned = 0;
  for (const auto& r : regions) {
    owned += r.owner == config_.id ? 1 : 0;
    OnRegionOwner(r);  // a change missed while cut off
  }
  // What the table still gives it is claimed again at a new epoch before anything is served: a survivor that saw this
  // server gone may be about to take a region (a compare-and-set at the epoch it read). Exactly one of the two wins;
  // if the survivor does, this server learns it here and serves nothing.
  for (const uint32_t region : node_regions()) {
    for (const auto& r : regions) {
      if (r.region != region || r.owner != config_.id) continue;
      auto claimed = membership_->ChangeOwner(region, r.epoch, config_.id);
      if (claimed.ok()) {
        ServiceFor(region)->set_epoch(claimed->epoch);
      } else if (claimed.status().IsAborted()) {
        auto now = membership_->GetRegion(region);
        // Unknown who holds it now: nothing is served, and the next check (200 ms on) reads the table again.
        if (!now.ok()) return now.status();
        OnRegionOwner(*now);
        if (!lost_region_.load()) return claimed.status();  // (changed by this server itself: decide again)
      } else {
        return claimed.status();
      }
    }
  }
  if (lost_region_.load()) return Status::FailedPrecondition("a region this server served belongs to another now");
  reclaiming_.store(false, std::memory_order_release);
  serving = membership_->ServingStatus();
  if (serving.ok()) {
    serving_.store(true, std::memory_order_release);
    diag::Info("server {}: registered again after fencing; it owns {} of {} regions", config_.id, owned,
               regions.size());
  }
  return serving;
}

void CellServer::Stop() {
  {
    std::lock_guard lock(stop_mu_);
    if (stopped_) return;
    stopped_ = stopping_ = true;  // from here the lanes' tasks do nothing (and post nothing again)
  }
  if (watch_ != nullptr) {
    std::lock_guard lock(watch_->mu);
    watch_->server = nullptr;
  }
  serving_ = false;
  if (membership_ != nullptr) {
    // Unregister only a registration of ours that is still live; a fenced server's node is already gone, and one
    // cut off from ZooKeeper could only wait for a timeout (its session will expire by itself).
    if (registered_ && membership_->ServingStatus().ok()) {
      Status s = membership_->UnregisterServer(config_.id);
      if (!s.ok()) diag::Warning("server {}: leaving the membership: {}", config_.id, s.ToString());
    }
    membership_->Interrupt();
  }
  // A check or a takeover under way ends first: its membership calls give up now (Interrupt), and a takeover looks
  // at stopping() between regions.
  if (fencing_ != nullptr) fencing_->Stop();
  if (takeover_ != nullptr) takeover_->Stop();
  for (auto& listener : listeners_) listener->Stop();
}

void CellServer::TakeOverPass() {
  if (stopping()) return;
  if (serving()) {
    if (Status s = TakeOver(); !s.ok()) diag::Warning("server {}: taking over regions: {}", config_.id, s.ToString());
  }
  takeover_->PostAfter(kTakeoverPeriod, [this] { TakeOverPass(); });
}

bool CellServer::stopping() {
  std::lock_guard lock(stop_mu_);
  return stopping_;
}

Status CellServer::TakeOver() {
  // The regions first, then the live servers: a server claims its regions only once it is registered (again), and
  // ZooKeeper shows one session's reads in order, so a claim seen here comes with its server seen live below, and a
  // region is never taken at an epoch its live owner claimed.
  CELL_ASSIGN_OR_RETURN(const auto regions, membership_->ListRegions());
  CELL_ASSIGN_OR_RETURN(const auto servers, membership_->ListServers());
  std::vector<uint64_t> live;
  for (const auto& s : servers) live.push_back(s.id);
  std::sort(live.begin(), live.end());
  if (live.empty()) return Status::OK();
  const auto now = std::chrono::steady_clock::now();
  for (auto it = gone_since_.begin(); it != gone_since_.end();) {
    it = std::binary_search(live.begin(), live.end(), it->first) ? gone_since_.erase(it) : std::next(it);
  }
  const std::vector<uint32_t> held = node_regions();
  for (const membership::RegionEntry& r : regions) {
    if (std::find(held.begin(), held.end(), r.region) != held.end()) continue;
    if (!FallsToThisServer(r, live, now)) continue;
    if (stopping()) return Status::OK();
    CELL_RETURN_IF_ERROR(TakeOverRegion(r));
  }
  return Status::OK();
}

bool CellServer::FallsToThisServer(const membership::RegionEntry& r, const std::vector<uint64_t>& live,
                                   std::chrono::steady_clock::time_point now) {
  const bool dead = r.owner == 0 || !std::binary_search(live.begin(), live.end(), r.owner);
  // A dead server's, or ours and not served (an adoption that failed); only node regions (those with a log
  // directory) are taken over, with their extent regions.
  if (!dead && r.owner != config_.id) return false;
  std::error_code error;  // (a MANIFEST that cannot be seen now is looked for again at the next pass)
  const std::string log_dir = StoreService::LogDir(config_.data_dir, r.region, r.log_epoch);
  if (!std::filesystem::exists(log_dir + "/MANIFEST", error)) return false;
  // The dead server's regions fall to one survivor, by region id: the others leave them alone.
  if (r.owner != config_.id && live[r.region % live.size()] != config_.id) return false;
  if (auto it = retry_at_.find(r.region); it != retry_at_.end() && now < it->second.first) return false;
  if (r.owner != config_.id && r.owner != 0) {
    // Not before clients' leases on its one-sided reads have run out (membership::kReadLease), counted from when
    // this server first saw it gone.
    const auto gone = gone_since_.try_emplace(r.owner, now).first->second;
    if (now - gone < membership::kReadLease) return false;
  }
  return true;
}

Status CellServer::TakeOverRegion(const membership::RegionEntry& r) {
  // Claimed first, at a new epoch: a compare-and-set, so of two survivors one wins, and the old owner, if it was
  // only paused, finds the epoch moved when it claims its regions again and serves nothing. Its lease lapsed before
  // its session expired, so everything it acknowledged is in the log now (DESIGN, "Ownership").
  auto mine = membership_->ChangeOwner(r.region, r.epoch, config_.id);
  if (!mine.ok()) {
    if (!mine.status().IsAborted()) return mine.status();
    return Status::OK();  // another server changed it first: decide again next time
  }
  diag::Info("server {}: taking over region {} from {} server {} (epoch {}, log {})", config_.id, r.region,
             r.owner == config_.id ? "this" : "dead", r.owner, mine->epoch,
             StoreService::LogDir(config_.data_dir, r.region, r.log_epoch));
  const auto start = std::chrono::steady_clock::now();
  StoreConfig store = config_.store;
  store.data_dir = config_.data_dir;
  store.peer_key = peer_key_;  // its splits and separators go to other servers too
  store.scheduler = &scheduler_;
  store.lease = &lease_;
  auto adopted = StoreService::Adopt(store, membership_.get(), config_.id, *mine);
  if (!adopted.ok()) {
    AdoptionFailed(r.region, mine->epoch, adopted.status());
    return Status::OK();
  }
  retry_at_.erase(r.region);
  MoveExtentRegion((*adopted)->extent_region());
  Serve(std::move(*adopted));
  diag::Info("server {}: serving region {} (taken over) after {:.2f} s of recovery", config_.id, r.region,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return Status::OK();
}

void CellServer::AdoptionFailed(uint32_t region, uint64_t epoch, const Status& why) {
  // Backing off (1 s, 2 s, ... 1 min): each attempt replays the whole log.
  auto& [at, failures] = retry_at_[region];
  at = std::chrono::steady_clock::now() + std::chrono::seconds(std::min(60, 1 << std::min(failures, 6)));
  ++failures;
  diag::Error("server {}: cannot serve region {}, which it owns: {}; trying again later", config_.id, region,
              why.ToString());
  // The log directory the attempt began (a checkpoint of the regions, possibly) is garbage unless the table
  // names it (a publish whose answer was lost): the next attempt begins another, at its own epoch.
  auto entry = membership_->GetRegion(region);
  if (!entry.ok()) {
    // Unknown whether the table names it: kept (it is garbage at worst, removed by the next adoption that succeeds).
    diag::Warning("server {}: reading region {} after a failed takeover: {}", config_.id, region,
                  entry.status().ToString());
    return;
  }
  if (entry->log_epoch == epoch) return;
  const std::string dir = StoreService::LogDir(config_.data_dir, region, epoch);
  std::error_code removing;
  std::filesystem::remove_all(dir, removing);
  if (removing) diag::Warning("server {}: removing {}: {}", config_.id, dir, removing.message());
}

void CellServer::MoveExtentRegion(uint32_t extent_region) {
  // Its extent region goes with it. (Left as it is if that fails: the node region is served either way.)
  auto extent = membership_->GetRegion(extent_region);
  if (!extent.ok()) {
    diag::Warning("server {}: reading extent region {}: {}", config_.id, extent_region, extent.status().ToString());
    return;
  }
  if (extent->owner == config_.id) return;
  auto moved = membership_->ChangeOwner(extent->region, extent->epoch, config_.id);
  if (!moved.ok()) {
    diag::Warning("server {}: moving extent region {}: {}", config_.id, extent->region, moved.status().ToString());
  }
}

void CellServer::Serve(std::unique_ptr<StoreService> adopted) {
  StoreService* service = adopted.get();
  {
    std::unique_lock lock_services(adopted_mu_);
    adopted_.push_back(std::move(adopted));  // kept until the server ends: its memory may be registered below
    has_adopted_.store(true, std::memory_order_release);
  }
  for (auto& listener : listeners_) {
    for (const rpc::RegionRegistration& region : service->regions()) {
      if (Status s = listener->RegisterRegion(region); !s.ok()) {
        diag::Warning("server {}: region {} is served by RPC, but not for one-sided reads on {}: {}", config_.id,
                      region.id, listener->uri(), s.ToString());
      }
    }
  }
}

std::vector<uint32_t> CellServer::node_regions() const {
  std::shared_lock lock(adopted_mu_);
  std::vector<uint32_t> out{store_->node_region()};
  for (const auto& s : adopted_) out.push_back(s->node_region());
  return out;
}

StoreService* CellServer::ServiceFor(uint32_t region) {
  std::shared_lock lock(adopted_mu_);
  for (const auto& s : adopted_) {
    if (s->node_region() == region) return s.get();
  }
  return store_.get();
}

std::string CellServer::StoreStats() {
  // The server's own regions' figures, and the transaction locks of every region it holds: the resolvers of the
  // regions it took over end theirs too, and a client waiting for a cluster's locks to go must see them.
  proto::StoreStats stats = store_->StatsMessage();
  std::shared_lock lock(adopted_mu_);
  for (const auto& s : adopted_) {
    stats.set_txn_locks(stats.txn_locks() + s->txn_locks());
    stats.set_txn_resolved(stats.txn_resolved() + s->txn_resolved());
  }
  return stats.SerializeAsString();
}

void CellServer::Handle(uint16_t method, std::string_view request, rpc::Responder responder) {
  if (StoreService::IsStoreMethod(method)) {
    if (!store_ready_.load(std::memory_order_acquire)) {
      return responder.Fail(Status::Unavailable(
          fmt::format("server {} is starting: its regions are being made or recovered; retry", config_.id)));
    }
    const bool more = has_adopted_.load(std::memory_order_acquire);  // no lock per request
    if (method == proto::StoreMethod::STORE_STATS && more) return responder.Reply(StoreStats());
    // Peer requests that name a meganode go to the service holding it (MEGA_CREATE names none: this server's own).
    const bool peer = StoreService::IsPeerMethod(method) && method != proto::StoreMethod::MEGA_CREATE;
    StoreService* service = store_.get();
    if (more || peer) {
      const uint32_t region = StoreService::RegionOf(method, request);
      service = ServiceFor(region);
      if (peer && region != 0 && service->node_region() != region) {
        // Not ours (yet: its takeover may be under way here): the peer retries after re-reading the table.
        return responder.Fail(Status::Unavailable(fmt::format(
            "server {} does not hold region {} (now); retry with the region table's owner", config_.id, region)));
      }
    }
    return service->Handle(method, request, std::move(responder), serving(), &lease_);
  }
  if (TableService::IsTableMethod(method)) {
    if (table_service_ == nullptr) {
      return responder.Fail(Status::FailedPrecondition(
          fmt::format("server {} keeps no region table: its cluster's table is in ZooKeeper ({}); read it there",
                      config_.id, config_.membership)));
    }
    return table_service_->Handle(method, request, std::move(responder));
  }
  responder.Fail(Status::InvalidArgument(fmt::format("server {}: unknown RPC method {}", config_.id, method)));
}

}  // namespace cell::server
