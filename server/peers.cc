#include "server/peers.h"

#include <fmt/format.h>

#include <algorithm>

#include "btree/record_format.h"
#include "common/diagnostics.h"
#include "rpc/proto/store.pb.h"

namespace cell::server {

using proto::StoreMethod;

namespace {
constexpr size_t kFillBytes = size_t{4} << 20;  // one MEGA_FILL request carries about this much
}  // namespace

StatusOr<std::vector<membership::ServerInfo>> ServerPeers::Others(bool fresh) {
  {
    std::lock_guard lock(mu_);
    // (None known is asked again at once: a server that just joined may be what a full server waits for.)
    if (!fresh && !others_.empty() && std::chrono::steady_clock::now() - others_read_ < std::chrono::seconds(1)) {
      return others_;
    }
  }
  CELL_ASSIGN_OR_RETURN(auto servers, membership_->ListServers());
  std::vector<membership::ServerInfo> others;
  for (auto& s : servers) {
    if (s.id != self_) others.push_back(std::move(s));
  }
  std::lock_guard lock(mu_);
  others_ = others;
  others_read_ = std::chrono::steady_clock::now();
  return others;
}

bool ServerPeers::HavePeers() {
  RetryAbandons();  // (the tree's background thread asks about once a second)
  auto others = Others(false);
  return others.ok() && !others->empty();
}

StatusOr<std::shared_ptr<rpc::Connection>> ServerPeers::ConnectionTo(const membership::ServerInfo& server) {
  return connections_.Get(server.id, [this, server]() -> StatusOr<std::unique_ptr<rpc::Connection>> {
    rpc::ConnectOptions options;
    options.connect_timeout = timeout_;
    options.call_timeout = timeout_;
    options.key = key_;
    auto connection = rpc::ConnectFirst(server.addresses, {"shm", "verbs", "tcp"}, options);
    if (connection.ok()) return connection;
    return Status::Unavailable(fmt::format("cannot reach server {}: {}", server.id, connection.status().message()));
  });
}

StatusOr<std::shared_ptr<rpc::Connection>> ServerPeers::OwnerOf(uint32_t region) {
  CELL_ASSIGN_OR_RETURN(membership::RegionEntry entry, membership_->GetRegion(region));
  CELL_ASSIGN_OR_RETURN(auto servers, membership_->ListServers());
  for (const auto& s : servers) {
    if (s.id == entry.owner) return ConnectionTo(s);
  }
  return Status::Unavailable(fmt::format("region {}'s owner, server {}, is not live", region, entry.owner));
}

void ServerPeers::set_reply_fault(std::function<Status(uint16_t method)> fault) {
  std::lock_guard lock(mu_);
  reply_fault_ = std::move(fault);
}

Status ServerPeers::MayAct() const {
  if (!may_act_) return Status::OK();
  Status s = may_act_();
  if (s.ok()) return s;
  return Status::FromCode(s.code(), fmt::format("server {} asks nothing of other servers now: {}", self_, s.message()));
}

StatusOr<meganode::RemoteMeganode> ServerPeers::Call(rpc::Connection& connection, uint16_t method,
                                                     const std::string& request) {
  if (method != StoreMethod::MEGA_ABANDON) CELL_RETURN_IF_ERROR(MayAct());  // as late as it can be: as it leaves
  CELL_ASSIGN_OR_RETURN(
      std::string bytes,
      rpc::CallSync(connection, method, request, std::chrono::duration_cast<std::chrono::microseconds>(timeout_)));
  std::function<Status(uint16_t)> fault;
  {
    std::lock_guard lock(mu_);
    fault = reply_fault_;
  }
  if (fault) CELL_RETURN_IF_ERROR(fault(method));
  proto::MegaReply reply;
  if (!reply.ParseFromString(bytes)) return Status::Corruption("malformed reply from a peer server");
  return meganode::RemoteMeganode{GlobalPtr::Unpack(reply.meganode()), reply.generation()};
}

StatusOr<meganode::RemoteMeganode> ServerPeers::CreateMeganode(const btree::MeganodeInfo& info,
                                                               const std::vector<meganode::MovedEntry>& entries) {
  CELL_RETURN_IF_ERROR(MayAct());  // (before a server is chosen; each request checks again)
  CELL_ASSIGN_OR_RETURN(auto others, Others(false));
  if (others.empty()) return Status::Unavailable("no other live server to place a meganode on");
  uint64_t record_bytes = 0;  // what the entries' records will take there (a leaf meganode's)
  for (const auto& e : entries) record_bytes += btree::RecordLength(e.key.size(), e.value.size());
  Status last = Status::ResourceExhausted(
      fmt::format("none of the {} other live servers has a free meganode and {} bytes of record memory", others.size(),
                  record_bytes));
  // The servers with the most free capacity first; a full or unreachable one is skipped.
  for (const membership::ServerInfo* server : ByFreeCapacity(others, info.level == 0 ? record_bytes : 0)) {
    auto connection = ConnectionTo(*server);
    if (!connection.ok()) {
      last = connection.status();
      continue;
    }
    proto::MegaCreate create;
    create.set_token(NewToken());
    create.mutable_info()->set_min(info.min);
    create.mutable_info()->set_max(info.max);
    create.mutable_info()->set_right(info.right.Pack());
    create.mutable_info()->set_level(info.level);
    auto meganode = Call(**connection, StoreMethod::MEGA_CREATE, create.SerializeAsString());
    if (!meganode.ok()) {
      last = meganode.status();
      // Its reply may be what was lost (a timeout, a connection that failed): the peer may hold a sealed meganode
      // this server cannot name. Abandoned by token (a late create with it is refused there).
      if (meganode.status().IsUnavailable() || meganode.status().IsDeadlineExceeded()) {
        AbandonCreated(*server, create.token());
      }
      continue;
    }
    Status filled = Status::OK();
    for (size_t i = 0; i < entries.size() && filled.ok();) {
      proto::MegaFill fill;
      fill.set_meganode(meganode->ptr.Pack());
      fill.set_generation(meganode->generation);
      size_t bytes = 0;
      for (; i < entries.size() && (bytes == 0 || bytes + entries[i].value.size() < kFillBytes); ++i) {
        proto::MovedEntry* e = fill.add_entries();
        e->set_key(entries[i].key);
        e->set_value(entries[i].value);
        e->set_child(entries[i].child.Pack());
        e->set_version(entries[i].version);
        e->set_locked(entries[i].locked);
        bytes += entries[i].key.size() + entries[i].value.size() + 16;
      }
      filled = Call(**connection, StoreMethod::MEGA_FILL, fill.SerializeAsString()).status();
    }
    if (filled.ok()) return *meganode;
    last = filled;
    Abandon(*meganode);
  }
  return Status::FromCode(last.code(), "no other server could take a meganode: " + last.message());
}

std::vector<const membership::ServerInfo*> ServerPeers::ByFreeCapacity(
    const std::vector<membership::ServerInfo>& servers, uint64_t record_bytes) {
  std::vector<std::pair<double, const membership::ServerInfo*>> ranked;
  for (const auto& server : servers) {
    auto connection = ConnectionTo(server);
    if (!connection.ok()) continue;
    auto bytes = rpc::CallSync(**connection, StoreMethod::STORE_STATS, "",
                               std::chrono::duration_cast<std::chrono::microseconds>(timeout_));
    proto::StoreStats stats;
    if (!bytes.ok() || !stats.ParseFromString(*bytes)) continue;
    // Whole meganodes free, and room for the records (with the buddy allocator's rounding, up to twice the bytes).
    if (stats.node_bytes_free() == 0 || stats.extent_bytes_free() < 2 * record_bytes) continue;
    const auto fraction = [](uint64_t free, uint64_t used) {
      return free + used == 0 ? 0.0 : static_cast<double>(free) / static_cast<double>(free + used);
    };
    ranked.emplace_back(std::min(fraction(stats.node_bytes_free(), stats.node_bytes_used()),
                                 fraction(stats.extent_bytes_free(), stats.extent_bytes_used())),
                        &server);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<const membership::ServerInfo*> out;
  for (const auto& [room, server] : ranked) out.push_back(server);
  return out;
}

Status ServerPeers::Unseal(const meganode::RemoteMeganode& meganode) {
  CELL_ASSIGN_OR_RETURN(auto connection, OwnerOf(meganode.ptr.region));
  proto::MegaRef ref;
  ref.set_meganode(meganode.ptr.Pack());
  ref.set_generation(meganode.generation);
  return Call(*connection, StoreMethod::MEGA_UNSEAL, ref.SerializeAsString()).status();
}

uint64_t ServerPeers::NewToken() {
  std::lock_guard lock(mu_);
  uint64_t token = 0;
  while (token == 0) token = token_rng_();
  return token;
}

bool ServerPeers::TryAbandonCreated(const membership::ServerInfo& server, uint64_t token) {
  auto connection = ConnectionTo(server);  // a fresh one if the create's failed
  if (!connection.ok()) return false;
  proto::MegaRef ref;
  ref.set_token(token);
  return Call(**connection, StoreMethod::MEGA_ABANDON, ref.SerializeAsString()).ok();
}

void ServerPeers::AbandonCreated(const membership::ServerInfo& server, uint64_t token) {
  if (TryAbandonCreated(server, token)) return;
  std::lock_guard lock(mu_);
  pending_abandons_.emplace_back(server.id, token);  // tried again by RetryAbandons
}

void ServerPeers::RetryAbandons() {
  std::vector<std::pair<uint64_t, uint64_t>> pending;
  {
    std::lock_guard lock(mu_);
    pending.swap(pending_abandons_);
  }
  if (pending.empty()) return;
  auto others = Others(true);
  if (!others.ok()) {
    std::lock_guard lock(mu_);
    pending_abandons_.insert(pending_abandons_.end(), pending.begin(), pending.end());
    return;
  }
  for (const auto& owed : pending) {
    const uint64_t server = owed.first, token = owed.second;
    const auto it = std::find_if(others->begin(), others->end(), [server](const auto& s) { return s.id == server; });
    if (it == others->end()) {
      // Gone: a meganode it made for this create stays sealed in its regions, wherever they are recovered.
      diag::Warning("server {} left before it could be told to abandon an unanswered meganode create", server);
      continue;
    }
    if (!TryAbandonCreated(*it, token)) {
      std::lock_guard lock(mu_);
      pending_abandons_.emplace_back(server, token);
    }
  }
}

void ServerPeers::Abandon(const meganode::RemoteMeganode& meganode) {
  auto connection = OwnerOf(meganode.ptr.region);
  if (!connection.ok()) return;  // its server is gone, and the meganode with it
  proto::MegaRef ref;
  ref.set_meganode(meganode.ptr.Pack());
  ref.set_generation(meganode.generation);
  // Best effort, and only logged: the splitting tree has no way to act on a failure (Peers::Abandon returns nothing),
  // and the meganode, never published, holds no key anyone can reach; it stays sealed in its server's regions.
  auto abandoned = Call(**connection, StoreMethod::MEGA_ABANDON, ref.SerializeAsString());
  if (!abandoned.ok()) {
    diag::Warning("server {}: abandoning meganode {}:{} on its server: {}", self_, meganode.ptr.region,
                  meganode.ptr.offset, abandoned.status().ToString());
  }
}

Status ServerPeers::InsertSeparator(GlobalPtr at, int level, const std::string& separator, GlobalPtr child) {
  CELL_ASSIGN_OR_RETURN(auto connection, OwnerOf(at.region));
  proto::SeparatorRequest request;
  request.set_at(at.Pack());
  request.set_level(level);
  request.set_separator(separator);
  request.set_child(child.Pack());
  return Call(*connection, StoreMethod::MEGA_INSERT_SEPARATOR, request.SerializeAsString()).status();
}

}  // namespace cell::server

namespace cell::server {

Status ServerPeers::KeyCall(GlobalPtr start, uint16_t method, std::string_view key, uint64_t txid, bool commit,
                            proto::StoreReply* reply) {
  GlobalPtr at = start;
  for (int hop = 0; hop < 64; ++hop) {
    CELL_RETURN_IF_ERROR(MayAct());
    CELL_ASSIGN_OR_RETURN(membership::RegionEntry entry, membership_->GetRegion(at.region));
    CELL_ASSIGN_OR_RETURN(auto connection, OwnerOf(at.region));
    proto::KeyRequest request;
    request.mutable_target()->set_region(at.region);
    request.mutable_target()->set_epoch(entry.epoch);
    request.set_key(std::string(key));
    request.set_meganode(at.Pack());
    request.mutable_txn()->set_txid(txid);
    request.mutable_txn()->set_commit(commit);
    CELL_ASSIGN_OR_RETURN(std::string bytes,
                          rpc::CallSync(*connection, method, request.SerializeAsString(),
                                        std::chrono::duration_cast<std::chrono::microseconds>(timeout_)));
    reply->Clear();
    if (!reply->ParseFromString(bytes)) return Status::Corruption("malformed reply from a peer server");
    if (reply->has_wrong_owner()) return Status::Unavailable(fmt::format("region {} is moving; retry", at.region));
    if (reply->elsewhere() == 0) return Status::OK();
    at = GlobalPtr::Unpack(reply->elsewhere());
  }
  return Status::Aborted(fmt::format("a request for key '{}' was sent on more than 64 times", key.substr(0, 64)));
}

StatusOr<meganode::TxnOutcome> ServerPeers::TxnStatus(GlobalPtr start, std::string_view key, uint64_t txid) {
  proto::StoreReply reply;
  CELL_RETURN_IF_ERROR(KeyCall(start, StoreMethod::TXN_STATUS, key, txid, false, &reply));
  if (reply.txn_outcome() > 2) return Status::Corruption("a peer answered an unknown transaction outcome");
  return static_cast<meganode::TxnOutcome>(reply.txn_outcome());
}

Status ServerPeers::TxnApply(GlobalPtr start, std::string_view key, uint64_t txid, bool commit) {
  proto::StoreReply reply;
  return KeyCall(start, StoreMethod::TXN_APPLY, key, txid, commit, &reply);
}

}  // namespace cell::server
