#include "server/store_service.h"

#include <fmt/format.h>

#include "server/proto/store.pb.h"

namespace cell::server {

using proto::StoreMethod;

namespace {
constexpr size_t kScanReplyBytes = size_t{4} << 20;
constexpr size_t kScanReplyPairs = 10000;
constexpr size_t kScanBatch = 64;
}  // namespace

StatusOr<std::unique_ptr<StoreService>> StoreService::Open(const StoreConfig& config,
                                                           membership::Membership* membership, uint64_t server_id) {
  auto service = std::unique_ptr<StoreService>(new StoreService());
  service->server_id_ = server_id;
  CELL_ASSIGN_OR_RETURN(service->node_region_, membership->AllocateRegionId());
  CELL_ASSIGN_OR_RETURN(service->extent_region_, membership->AllocateRegionId());
  meganode::GlobalTreeOptions options;
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

bool StoreService::IsStoreMethod(uint16_t method) {
  return method != StoreMethod::STORE_METHOD_NONE && proto::StoreMethod_IsValid(method);
}

namespace {
template <typename Request>
bool Parse(std::string_view bytes, Request* request, rpc::Responder& responder) {
  if (request->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return true;
  responder.Fail(Status::InvalidArgument(fmt::format("malformed store request ({} bytes)", bytes.size())));
  return false;
}
}  // namespace

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
    return responder.Reply(stats.SerializeAsString());
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
  if (target->region() != node_region_ || target->epoch() > epoch_) {
    reply.mutable_wrong_owner()->set_region(target->region());
    reply.mutable_wrong_owner()->set_epoch(target->region() == node_region_ ? epoch_ : 0);
    return responder.Reply(reply.SerializeAsString());
  }
  if (!serving) {
    return responder.Fail(Status::Unavailable(fmt::format(
        "server {} is not serving: it lost touch with the membership or is registering again; retry", server_id_)));
  }
  switch (method) {
    case StoreMethod::STORE_GET: {
      std::string value;
      Status s = store_->Get(key_request.key(), &value);
      if (s.ok()) {
        reply.set_found(true);
        reply.set_value(std::move(value));
      } else if (!s.IsNotFound()) {
        return responder.Fail(s);
      }
      break;
    }
    case StoreMethod::STORE_PUT: {
      Status s = store_->Put(key_request.key(), key_request.value());
      if (!s.ok()) return responder.Fail(s);
      break;
    }
    case StoreMethod::STORE_DELETE: {
      Status s = store_->Delete(key_request.key());
      if (s.ok()) {
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
      while (pairs < limit && bytes < kScanReplyBytes) {
        std::vector<btree::KeyValue> batch;
        const size_t want = std::min<size_t>(kScanBatch, limit - pairs);
        Status s = store_->Scan(from, scan_request.end(), want, &batch);
        if (!s.ok()) return responder.Fail(s);
        for (auto& kv : batch) {
          bytes += kv.key.size() + kv.value.size();
          proto::KeyValue* out = reply.add_pairs();
          out->set_key(std::move(kv.key));
          out->set_value(std::move(kv.value));
          ++pairs;
        }
        if (batch.size() < want || !btree::Successor(reply.pairs(reply.pairs_size() - 1).key(), &from)) {
          finished = true;  // the range (or the key space) ran out
          break;
        }
      }
      reply.set_more(!finished && pairs < scan_request.limit());
      break;
    }
    default:
      return responder.Fail(Status::InvalidArgument(fmt::format("unknown store method {}", method)));
  }
  responder.Reply(reply.SerializeAsString());
}

}  // namespace cell::server
