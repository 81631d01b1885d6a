// The parts of a StoreService every request and every way of opening it share: the tree's options, the log
// directory's name, routing a request to its region, the lease check an answer passes as it is sent, and the wait
// for a write's durability. How a service is opened is server/store_open.cc (with its log, server/store_recovery.cc);
// how requests are answered, server/store_handlers.cc.
#include "server/store_service.h"

#include <fmt/format.h>
#include <unistd.h>

#include "common/diagnostics.h"
#include "rpc/proto/store.pb.h"

namespace cell::server {

using proto::StoreMethod;

meganode::GlobalTreeOptions StoreService::TreeOptions(const StoreConfig& config, membership::Membership* membership,
                                                      uint32_t root) {
  // What this server asks of others, and what its resolver of transaction locks does here, pass the check its
  // answers pass: the lease, and the region not lost.
  const std::function<Status()>* lease = config.lease;
  const auto may_act = [this, lease] { return MayAnswer(lease); };
  peers_ = std::make_unique<ServerPeers>(membership, server_id_, config.peer_timeout, config.peer_key, may_act);
  meganode::GlobalTreeOptions options;
  options.root = root == node_region_;
  options.first_meganode = GlobalPtr{root, 0};
  options.peers = peers_.get();
  options.scheduler = config.scheduler;  // the tree's background work on a lane of the server's scheduler
  if (lease != nullptr) options.lease = may_act;
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

void StoreService::MarkLost(uint64_t owner, uint64_t epoch) {
  if (!lost_.exchange(true)) {
    diag::Error("server {}: region {} is owned by server {} at epoch {} now; this server no longer serves it",
                server_id_, node_region_, owner, epoch);
  }
}

uint32_t StoreService::RegionOf(uint16_t method, std::string_view request) {
  const auto parse = [&](auto* message) {
    return message->ParseFromArray(request.data(), static_cast<int>(request.size()));
  };
  switch (method) {
    case StoreMethod::STORE_SCAN:
    case StoreMethod::STORE_APPROXIMATE_SIZE: {
      proto::ScanRequest r;
      return parse(&r) ? r.target().region() : 0;
    }
    case StoreMethod::STORE_MULTI_GET: {
      proto::MultiGetRequest r;
      return parse(&r) ? r.target().region() : 0;
    }
    case StoreMethod::STORE_STATS:
      return 0;
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
    case StoreMethod::MEGA_CREATE:
      return 0;
    default: {
      // Every other store method (get, put, delete, compare-and-swap, the transaction steps) is a KeyRequest, as
      // StoreRequest::Parse reads it.
      proto::KeyRequest r;
      return parse(&r) ? r.target().region() : 0;
    }
  }
}

StoreService::~StoreService() {
  // Waits for a checkpoint being taken, and drops the next (Stop, not reset: the running task posts its successor
  // through checkpointer_).
  if (checkpointer_ != nullptr) checkpointer_->Stop();
  store_.reset();  // before the log it writes to, and before the lock is released
  logger_.reset();
  log_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);
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

}  // namespace cell::server
