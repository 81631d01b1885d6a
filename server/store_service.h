// The server's store: its regions (a node region holding meganodes, an extent region holding the records), created
// in the region table at start, and the store's requests (server/proto/store.proto) answered from them by the tree
// of meganodes (meganode/global_tree.h). The first server to start claims the root region and formats the cluster's
// first meganode; the others hold meganodes that splits place on them (MEGA_* requests, from server/peers.h). A
// request whose key's meganode is on another server is answered with that meganode (`elsewhere`).
//
// Ownership. A request names the region it addresses and the epoch at which the client believes this server owns
// it. The server answers only if it owns the region at that epoch or a later one and is not fenced; otherwise
// "wrong owner" with the epoch it knows (or Unavailable while fenced), so a client with a stale table retries
// elsewhere and never gets an answer from a server that may have lost the region.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "membership/membership.h"
#include "meganode/global_tree.h"
#include "rpc/transport.h"
#include "server/peers.h"

namespace cell::server {

struct StoreConfig {
  uint64_t meganode_bytes = uint64_t{64} << 20;      // one meganode
  uint32_t meganodes = 16;                           // the node region has room for this many
  std::chrono::milliseconds peer_timeout{5000};      // requests to other servers (meganode splits, separators)
  uint64_t extent_region_bytes = uint64_t{1} << 30;  // records (memory is committed as it is used)
  // On 2 MiB huge pages (a hugetlb memfd; the administrator must reserve them, vm.nr_hugepages): far fewer TLB
  // misses for client-side searches. Sizes must then be multiples of 2 MiB.
  bool huge_pages = false;
  // Experiments only (cell-server --search-cpu-us): every get, put, delete and scan searched here burns this many
  // more microseconds of its worker's CPU, as a slower CPU or a costlier search would. With the shm NIC model it lets
  // a two-core machine give the server's CPU and the "network" comparable capacities (docs/BENCHMARKS.md).
  double search_cpu_us = 0;
};

class StoreService {
 public:
  // Allocates two region ids, opens the store in memfd-backed memory (so shm clients can map it), and records both
  // regions in the table as owned by `server_id`. The node region is allocated first: the cluster's first server's
  // node region is its lowest region, the root.
  static StatusOr<std::unique_ptr<StoreService>> Open(const StoreConfig& config, membership::Membership* membership,
                                                      uint64_t server_id);

  // The regions clients may read one-sidedly (register them with every listener).
  std::vector<rpc::RegionRegistration> regions() const;
  uint32_t node_region() const { return node_region_; }
  bool holds_root() const { return store_->IsLocal(store_->first_meganode()); }

  static bool IsStoreMethod(uint16_t method);
  // Answers a store request; `serving` is false while the server is fenced.
  void Handle(uint16_t method, std::string_view request, rpc::Responder responder, bool serving);

 private:
  StoreService() = default;
  // The MEGA_* requests of other servers.
  void HandlePeer(uint16_t method, std::string_view request, rpc::Responder responder);

  double search_cpu_us_ = 0;
  std::unique_ptr<ServerPeers> peers_;  // outlives store_ (its background thread calls peers_)
  std::unique_ptr<meganode::GlobalTree> store_;
  uint64_t server_id_ = 0;
  uint32_t node_region_ = 0;
  uint32_t extent_region_ = 0;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> redirects_{0};
  uint64_t epoch_ = 0;  // the node region's epoch (its owner never changes yet; region takeover comes with the logs)
};

}  // namespace cell::server
