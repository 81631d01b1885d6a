// The client's engine behind cell::Client: finds the root region's owner through the region cache, keeps one
// connection per server, and runs each operation by server-side search (an RPC) or client-side search (the shared
// traversal code, btree/tree_reader.h, over one-sided reads), retrying through stale routes and failed servers until
// the operation's deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "btree/node_cache.h"
#include "btree/tree_reader.h"
#include "client/path_cache.h"
#include "client/region_cache.h"
#include "membership/membership.h"
#include "rpc/transport.h"
#include "selector/selector.h"
#include "server/proto/store.pb.h"

namespace cell::client {

struct StoreClientOptions {
  std::chrono::milliseconds timeout{5000};
  std::string search = "server";       // the selector's policy (selector/selector.h: MakeSelector)
  selector::SelectorOptions selector;  // its constants (adaptive, dex)
  // Client-side searches whose reads are timed for the selector: one in this many (timing every read costs about a
  // tenth of a search over shm). Server-side searches are always timed (one clock pair per round trip).
  int sample_one_in = 8;
  std::vector<std::string> transports = {"shm", "verbs", "tcp"};
  size_t node_cache_bytes = size_t{128} << 20;  // client-side search's cache of upper-level nodes (0: none)
  int node_cache_levels = 4;                     // nodes at least this many levels above the leaves
  rpc::Key key;                                  // the client key every connection proves (empty: none)
};

class StoreClient {
 public:
  // How long setting up a connection (a transport's handshake and key proofs) may take before the operation retries.
  static constexpr std::chrono::seconds kConnectTimeout{2};
  struct Stats {
    std::atomic<uint64_t> server_searches{0};
    std::atomic<uint64_t> client_searches{0};
    std::atomic<uint64_t> retries{0};  // wrong owner, failed connection or unavailable region, then tried again
  };

  using GetCallback = std::function<void(const Status& status, std::string_view value)>;
  using DoneCallback = std::function<void(const Status& status)>;

  // `table` must outlive the client. InvalidArgument for a search mode MakeSelector does not know.
  static StatusOr<std::unique_ptr<StoreClient>> Create(membership::RegionTableReader* table,
                                                       const StoreClientOptions& options);
  // Outstanding asynchronous operations complete (Unavailable if they had not finished) before it returns.
  ~StoreClient();

  Status Get(std::string_view key, std::string* value);
  Status Put(std::string_view key, std::string_view value);
  // Asynchronous forms. A server-side operation is sent at once and completes on a transport thread; one that meets
  // a stale route or a failed server is retried on the client's retry thread. A client-side search runs in the
  // calling thread and completes before GetAsync returns. Callbacks must not block.
  void GetAsync(std::string_view key, GetCallback done);
  void PutAsync(std::string_view key, std::string_view value, DoneCallback done);
  Status Delete(std::string_view key);
  void DeleteAsync(std::string_view key, DoneCallback done);
  Status Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out);

  const Stats& stats() const { return stats_; }
  // The leaf meganode the path cache holds for `key` (null if none), where the next operation on it begins: after a
  // Get of the key, the meganode (and so the region and server) holding it then. For tests that sort keys by server.
  GlobalPtr CachedLeaf(std::string_view key) { return paths_.Lookup(key); }
  const btree::NodeCache* node_cache() const { return nodes_.get(); }
  const selector::Selector& selector() const { return *selector_; }
  // Each live server's STORE_STATS reply (server/proto/store.proto), serialized.
  StatusOr<std::vector<std::string>> ServerStats();

 private:
  // What one attempt against a meganode's server came to.
  struct Attempt {
    Status status;             // the operation's result when `retry` is false and `next` is null
    bool retry = false;        // the route was stale or the server unreachable: look up again and retry
    GlobalPtr next = GlobalPtr();  // the key's meganode is on another server: go on there
  };
  using Deadline = std::chrono::steady_clock::time_point;
  // `start`: the meganode the attempt begins at (null: the root, at the root region's owner).
  using Operation =
      std::function<Attempt(rpc::Connection& connection, const Route& route, GlobalPtr start, Deadline deadline)>;
  // Runs `op` against the owner of `start`'s region (the root region's if null), following it to other servers'
  // meganodes, until it no longer asks to retry or `deadline` passes (then DeadlineExceeded, or Unavailable when
  // no server could be reached).
  Status Run(const Operation& op, Deadline deadline, GlobalPtr start = GlobalPtr());
  // One-sided reads, each from the owner of the region it reads (client-side search).
  class ReadRouter;
  Deadline NewDeadline() const { return std::chrono::steady_clock::now() + options_.timeout; }
  // A get, put (`value` not null) or delete of `key` by RPC, followed to the server holding its meganode; *reply is
  // the answer.
  Status RunKey(uint16_t method, bool idempotent, std::string_view key, const std::string_view* value,
                Deadline deadline, server::proto::StoreReply* reply);
  Status GetServerSide(std::string_view key, std::string* value, Deadline deadline);
  // `sample_server`: not 0, time the reads from that server for the selector (the server the choice was made for).
  Status GetClientSide(std::string_view key, std::string* value, Deadline deadline, uint64_t sample_server = 0);
  Status PutUntil(std::string_view key, std::string_view value, Deadline deadline);
  Status DeleteUntil(std::string_view key, Deadline deadline);
  // The asynchronous first attempt of a server-side request: `build` makes the request for the route; `finish`
  // receives the reply (OK) or a final error. Anything that calls for a retry runs `retry` on the retry thread.
  void CallAsync(uint16_t method, bool idempotent, Deadline deadline, GlobalPtr start,
                 const std::function<std::string(const Route&, GlobalPtr start)>& build,
                 std::function<void(const Status&, server::proto::StoreReply* reply)> finish,
                 std::function<void()> retry);
  void PostRetry(std::function<void()> task);
  void RetryLoop();
  // A server-side request: sends, and sorts the reply into result / wrong owner / unreachable.
  // `idempotent`: may be sent again after its connection died (a write may have been applied: it is not).
  Attempt Call(rpc::Connection& connection, const Route& route, Deadline deadline, bool idempotent, uint16_t method,
               const std::string& request,
               server::proto::StoreReply* reply);
  // The reply's `elsewhere` as the next meganode to go to (null: none; the first meganode means the root). Caches
  // the leaf meganode the reply names, if any.
  GlobalPtr NextFrom(const server::proto::StoreReply& reply);
  StatusOr<std::shared_ptr<rpc::Connection>> ConnectionTo(const membership::ServerInfo& server, Deadline deadline);
  // Drops `server`'s cached routes, and its connection if it is `failed` (any, if null).
  void Forget(uint64_t server, const rpc::Connection* failed);
  StoreClient(membership::RegionTableReader* table, const StoreClientOptions& options,
              std::unique_ptr<selector::Selector> selector);
  // The selector's choice for an operation beginning at meganode `start` (null: the root); *server is the server it
  // was made for (the start region's owner), to which measurements are reported; 0 if not known, and then nothing
  // is measured. `may_block`: the owner may be looked up (synchronous operations); otherwise only the cache is asked.
  bool SearchOnServer(GlobalPtr start, bool may_block, uint64_t* server);
  // True for one client-side search in options_.sample_one_in, counted per thread.
  bool SampleThisSearch() const {
    thread_local uint32_t count = 0;
    return ++count % static_cast<uint32_t>(std::max(options_.sample_one_in, 1)) == 0;
  }
  static uint64_t NowUs() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  StatusOr<uint32_t> Root();

  membership::RegionTableReader* const table_;
  RegionCache cache_;
  PathCache paths_;
  const StoreClientOptions options_;
  std::unique_ptr<btree::NodeCache> nodes_;  // null: no node cache
  const std::unique_ptr<selector::Selector> selector_;
  const bool measure_;  // the selector uses latencies: measure searches and reads
  Stats stats_;
  std::atomic<uint32_t> root_{0};    // the root region, once known (it never changes); read without mu_
  std::atomic<bool> closing_{false};  // set under mu_ (the retry thread waits on it); read without it too
  std::mutex mu_;  // guards what follows
  std::map<uint64_t, std::shared_ptr<rpc::Connection>> connections_;
  GlobalPtr root_meganode_;  // cached for client-side searches (an old root is still a correct start)
  std::condition_variable retry_cv_;
  std::vector<std::function<void()>> retries_;  // tasks for the retry thread
  std::thread retry_thread_;
};

}  // namespace cell::client
