#include "server/store_service.h"

#include <fmt/format.h>

#include <chrono>

#include "server/proto/store.pb.h"

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

StatusOr<std::unique_ptr<StoreService>> StoreService::Open(const StoreConfig& config,
                                                           membership::Membership* membership, uint64_t server_id) {
  auto service = std::unique_ptr<StoreService>(new StoreService());
  service->server_id_ = server_id;
  service->search_cpu_us_ = config.search_cpu_us;
  CELL_ASSIGN_OR_RETURN(service->node_region_, membership->AllocateRegionId());
  CELL_ASSIGN_OR_RETURN(service->extent_region_, membership->AllocateRegionId());
  // The first server of the cluster holds the root; the others learn where it is.
  CELL_ASSIGN_OR_RETURN(uint32_t root, membership->ClaimRoot(service->node_region_));
  service->peers_ = std::make_unique<ServerPeers>(membership, server_id, config.peer_timeout);
  meganode::GlobalTreeOptions options;
  options.root = root == service->node_region_;
  options.first_meganode = GlobalPtr{root, 0};
  options.peers = service->peers_.get();
  options.meganode_bytes = config.meganode_bytes;
  options.meganodes = config.meganodes;
  options.extent_region_bytes = config.extent_region_bytes;
  options.backing = config.huge_pages ? meganode::RegionBacking::kHugetlb : meganode::RegionBacking::kMemfd;
  options.node_region_id = service->node_region_;
  options.extent_region_id = service->extent_region_;
  auto store = meganode::GlobalTree::Open(options);
  if (!store.ok()) {
    return Status::FromCode(store.status().code(),
                            fmt::format("creating the store's regions ({} meganodes of {} B, {} B of extents): {}",
                                        config.meganodes, config.meganode_bytes, config.extent_region_bytes,
                                        store.status().message()));
  }
  service->store_ = std::move(*store);
  // Only once the memory exists do the regions enter the table.
  CELL_ASSIGN_OR_RETURN(membership::RegionEntry node, membership->CreateRegion(service->node_region_, server_id));
  CELL_RETURN_IF_ERROR(membership->CreateRegion(service->extent_region_, server_id).status());
  service->epoch_ = node.epoch;
  return service;
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
      auto m = store_->CreateSealed(info);
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
      s = method == StoreMethod::MEGA_UNSEAL ? store_->Unseal(m) : store_->Abandon(m);
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
      if (r.level() < 1 || r.separator().empty()) {
        return responder.Fail(Status::InvalidArgument("a separator needs a level >= 1 and a key"));
      }
      s = store_->InsertSeparator(at, r.level(), r.separator(), GlobalPtr::Unpack(r.child()));
      break;
    }
    default:
      return responder.Fail(Status::InvalidArgument(fmt::format("unknown store method {}", method)));
  }
  if (!s.ok()) return responder.Fail(s);
  responder.Reply(reply.SerializeAsString());
}

bool StoreService::IsStoreMethod(uint16_t method) {
  return method != StoreMethod::STORE_METHOD_NONE && proto::StoreMethod_IsValid(method);
}


void StoreService::Handle(uint16_t method, std::string_view request, rpc::Responder responder, bool serving) {
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
    return responder.Reply(stats.SerializeAsString());
  }
  if (method == StoreMethod::MEGA_CREATE || method == StoreMethod::MEGA_FILL || method == StoreMethod::MEGA_UNSEAL ||
      method == StoreMethod::MEGA_ABANDON || method == StoreMethod::MEGA_INSERT_SEPARATOR) {
    if (!serving) {
      return responder.Fail(Status::Unavailable(fmt::format("server {} is not serving; retry", server_id_)));
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
    return responder.Fail(Status::InvalidArgument(fmt::format(
        "the request begins at meganode {}:{}, outside its target region {}", start.region, start.offset,
        target->region())));
  }
  if (target->region() != node_region_ || target->epoch() > epoch_) {
    reply.mutable_wrong_owner()->set_region(target->region());
    reply.mutable_wrong_owner()->set_epoch(target->region() == node_region_ ? epoch_ : 0);
    return responder.Reply(reply.SerializeAsString());
  }
  if (!serving) {
    return responder.Fail(Status::Unavailable(fmt::format(
        "server {} is not serving: it lost touch with the membership or is registering again; retry", server_id_)));
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
  responder.Reply(reply.SerializeAsString());
}

}  // namespace cell::server
