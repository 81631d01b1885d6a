// The client's engine behind cell::Client: finds the root region's owner through the region cache, keeps one
// connection per server, and runs each operation by server-side search (an RPC) or client-side search (the shared
// traversal code, btree/tree_reader.h, over one-sided reads), retrying through stale routes and failed servers until
// the operation's deadline.
//
// A request by RPC (a get, put or delete, or a page of a scan) is a RequestOp: a state machine whose steps run when a
// reply, a connection or a timer is ready, so that an attempt that must wait (a back-off, a connection to a paused
// server) holds no thread and delays no other operation. The synchronous calls wait on the same machine. Threads:
// one timer thread runs due retries; a connection is made on a thread of its own, one per server being connected
// to, and every operation waiting for it continues when it is made. Client-side searches and scans (one-sided reads,
// synchronous only) retry in the caller's thread (Run), under the same rules (Attempts).
#pragma once

#include <absl/container/inlined_vector.h>
#include <absl/functional/function_ref.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "btree/node_cache.h"
#include "btree/tree_reader.h"
#include "client/path_cache.h"
#include "client/region_cache.h"
#include "common/backoff.h"
#include "common/coarse_clock.h"
#include "common/task_scheduler.h"
#include "membership/membership.h"
#include "rpc/connection_cache.h"
#include "rpc/proto/store.pb.h"
#include "rpc/transport.h"
#include "selector/selector.h"

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
  int node_cache_levels = 4;                    // nodes at least this many levels above the leaves
  rpc::Key key;                                 // the client key every connection proves (empty: none)
};

class StoreClient {
 public:
  // How long setting up a connection (a transport's handshake and key proofs) may take before the operation retries.
  static constexpr std::chrono::seconds kConnectTimeout{2};
  struct Stats {
    std::atomic<uint64_t> server_searches{0};
    std::atomic<uint64_t> client_searches{0};
    std::atomic<uint64_t> in_place_searches{0};  // client-side searches (attempts) read in place, not copied
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
  // Asynchronous forms. A server-side operation is sent at once and completes on a transport thread, or, after a
  // stale route or a failed server, on the client's timer or connecting thread. A client-side search runs in the
  // calling thread and completes before GetAsync returns. Callbacks must not block (a synchronous call made in one
  // fails with FailedPrecondition).
  void GetAsync(std::string_view key, GetCallback done);
  void PutAsync(std::string_view key, std::string_view value, DoneCallback done);
  Status Delete(std::string_view key);
  void DeleteAsync(std::string_view key, DoneCallback done);
  // Client::CompareAndSwap (STORE_CAS at the key's server): FailedPrecondition, saying why, if the value differs.
  Status CompareAndSwap(std::string_view key, const std::optional<std::string>& expected,
                        const std::optional<std::string>& new_value);
  Status Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out);

  // For transactions (client/transaction.cc). `side`: which search reads (kSelector: as the selector decides).
  enum class Side { kSelector, kServer, kClient };
  using Deadline = std::chrono::steady_clock::time_point;
  // Get with its side and deadline (per-call options).
  Status Get(std::string_view key, std::string* value, Side side, Deadline deadline);
  // Gets of many keys at once: the result's [i] is keys[i]'s status, (*values)[i] its value (sized by the caller).
  std::vector<Status> MultiGet(const std::vector<std::string>& keys, std::vector<std::string>* values, Side side,
                               Deadline deadline);
  // A read that also says what a transaction validates by (meta: version, checksum), or that the key is locked by a
  // committing transaction (meta->locked, OK, no value) instead of waiting for it. OK, NotFound or an error.
  Status GetWithMeta(std::string_view key, Side side, std::string* value, btree::RecordMeta* meta, Deadline deadline);
  // A scan whose pairs carry their meta, locked keys included (as pairs with `locked`, no value).
  Status ScanWithMeta(std::string_view start, std::string_view end, size_t limit, Side side,
                      std::vector<btree::KeyValue>* out, Deadline deadline);
  // A scan as `mode` says (reverse, keys only, locks reported with meta), searched by `side`, appended to *out.
  Status ScanRange(std::string_view start, std::string_view end, size_t limit, btree::ScanMode mode, Side side,
                   Deadline deadline, std::vector<btree::KeyValue>* out);
  // An estimate of the keys in [start, end) and their bytes (btree::GlobalReader::ApproximateSize), by `side`.
  Status ApproximateSize(std::string_view start, std::string_view end, Side side, Deadline deadline,
                         btree::SizeEstimate* out);
  // The side a ReadOptions::search or TransactionOptions::search names: "" and "adaptive" the selector's.
  static StatusOr<Side> SideFor(std::string_view search);
  Deadline DeadlineFor(std::chrono::milliseconds timeout) const {
    return Clock::now() + (timeout.count() > 0 ? timeout : options_.timeout);
  }
  // A conditional write or a transaction's step (STORE_CAS, TXN_*) at `key`'s server, routed as a put is; `fill` sets
  // the request's fields beyond its target, key and start. `done` runs exactly once, with the reply when OK.
  using FillRequest = std::function<void(cell::proto::KeyRequest* request)>;
  using StepDone = std::function<void(const Status& status, cell::proto::StoreReply* reply)>;
  void StartKeyStep(uint16_t method, bool idempotent, std::string_view key, FillRequest fill, Deadline deadline,
                    StepDone done);
  Status RunKeyStep(uint16_t method, bool idempotent, std::string_view key, FillRequest fill, Deadline deadline,
                    cell::proto::StoreReply* reply);
  // One idempotent step per key, all at once, waited for: `fill(i, request)` sets key i's fields.
  struct StepResult {
    Status status;
    cell::proto::StoreReply reply;
  };
  std::vector<StepResult> RunKeySteps(uint16_t method, const std::vector<std::string>& keys,
                                      const std::function<void(size_t i, cell::proto::KeyRequest*)>& fill,
                                      Deadline deadline);
  std::chrono::milliseconds timeout() const { return options_.timeout; }

  const Stats& stats() const { return stats_; }
  // The leaf meganode the path cache holds for `key` (null if none), where the next operation on it begins: after a
  // Get of the key, the meganode (and so the region and server) holding it then. For tests that sort keys by server.
  GlobalPtr CachedLeaf(std::string_view key) { return paths_.Lookup(key); }
  // The servers this client holds a connection to: for tests that learn which servers an operation visited.
  std::vector<uint64_t> ConnectedServers();
  const btree::NodeCache* node_cache() const { return nodes_.get(); }
  const selector::Selector& selector() const { return *selector_; }
  // Each live server's STORE_STATS reply (server/proto/store.proto), serialized.
  StatusOr<std::vector<std::string>> ServerStats();

 private:
  using Clock = std::chrono::steady_clock;
  // What one attempt against a meganode's server came to.
  struct Attempt {
    Status status;                 // the operation's result when `retry` is false and `next` is null
    bool retry = false;            // the route was stale or the server unreachable: look up again and retry
    GlobalPtr next = GlobalPtr();  // the key's meganode is on another server: go on there
  };
  // An operation's attempts: where the next begins, and when. The one rule for Run and RequestOp.
  class Attempts {
   public:
    Attempts(Deadline deadline, GlobalPtr start, std::chrono::milliseconds timeout)
        : deadline_(deadline),
          at_(start),
          timeout_(timeout),
          backoff_(std::chrono::milliseconds(1), std::chrono::milliseconds(100), deadline) {}
    Deadline deadline() const { return deadline_; }
    GlobalPtr at() const { return at_; }  // the meganode the next attempt begins at (null: the root)
    // The key's meganode is `next`, on another server: OK to go on there at once (a walk only moves down or right,
    // so this ends), or, after 256 such hops, Aborted, to retry from the root.
    Status GoOn(GlobalPtr next);
    // The attempt failed with `why`, and may be retried: when the next may begin (exponential back-off from 1 ms to
    // 100 ms), or the final error if the deadline comes first (Unavailable if no server could be reached, else
    // DeadlineExceeded).
    StatusOr<Deadline> Retry(const Status& why);

   private:
    const Deadline deadline_;
    GlobalPtr at_;
    const std::chrono::milliseconds timeout_;  // for the final error's message
    int hops_ = 0;
    Backoff backoff_;
  };
  // `start`: the meganode the attempt begins at (null: the root, at the root region's owner).
  // Called only during Run (a reference: no copy, no allocation per operation).
  using Operation =
      absl::FunctionRef<Attempt(rpc::Connection& connection, const Route& route, GlobalPtr start, Deadline deadline)>;
  // Runs `op` in this thread against the owner of `start`'s region (the root region's if null), following it to
  // other servers' meganodes, until it no longer asks to retry or `deadline` passes (then DeadlineExceeded, or
  // Unavailable when no server could be reached). For client-side searches and scans.
  Status Run(Operation op, Deadline deadline, GlobalPtr start = GlobalPtr());
  // One-sided reads, each from the owner of the region it reads (client-side search).
  class ReadRouter;
  // The timeout from now, read off the coarse clock (common/coarse_clock.h): the time asked, or a few ms more.
  Deadline NewDeadline() const { return CoarseDeadline(options_.timeout); }

  // A request by RPC: a get, put or delete, or a scan's page (see the top of this file).
  struct RequestOp;
  // MultiGet's rounds of STORE_MULTI_GET requests (client/multi_get.cc).
  class MultiGetRounds;
  // Makes the request for an attempt at `route`'s owner, beginning at meganode `start` (null: the root), into *out
  // (which it replaces; a buffer the sending thread reuses, so that a request allocates nothing for its bytes).
  using BuildRequest = std::function<void(const Route& route, GlobalPtr start, std::string* out)>;
  // A key operation's request (KeyRequestFor): a get, put (`value`) or delete of `key`, or a transaction's step on it
  // (`fill` sets the step's fields). Kept in the operation as it is and made into bytes by Send, so that the most
  // common requests need no std::function of their own. `cached`: the key's leaf meganode in the path cache (null:
  // none). A get or delete of a key that is not there completes with NotFound ("no key '<key>'").
  struct KeyRequest {
    // The key's bytes, in the operation itself up to 64 bytes (most keys), so that a get allocates nothing for it.
    absl::InlinedVector<char, 64> key_bytes;
    std::optional<std::string> value;
    GlobalPtr cached;
    FillRequest fill;

    std::string_view key() const { return {key_bytes.data(), key_bytes.size()}; }
  };
  using Request = std::variant<KeyRequest, BuildRequest>;
  using RequestDone = std::function<void(const Status& status, cell::proto::StoreReply* reply)>;
  // What the caller is told: the reply, a get's value or only the status; the public calls' callbacks are kept as
  // given rather than wrapped in another std::function.
  using Completion = std::variant<RequestDone, GetCallback, DoneCallback>;
  // Starts one at `start`: `done` runs exactly once, with the reply (OK) or the final error. `follow`: a reply's
  // `elsewhere` is followed (key operations); otherwise it is the reply (a scan's page).
  void StartRequest(uint16_t method, bool idempotent, bool follow, GlobalPtr start, Deadline deadline, Request request,
                    Completion done);
  // The synchronous form: starts it and waits; *reply is the answer. Not on a thread that must complete it (a
  // transport's, or this client's: CheckMayWait).
  Status RunRequest(uint16_t method, bool idempotent, bool follow, GlobalPtr start, Deadline deadline, Request request,
                    cell::proto::StoreReply* reply);
  // Its steps: route and connect; send; sort the reply; wait for the next attempt.
  void Step(std::shared_ptr<RequestOp> op);
  // Sends the attempt Step routed (op->route) on `connection`.
  void Send(std::shared_ptr<RequestOp> op, rpc::Connection* connection);
  // The reply (or failure) of the attempt Send made, at op->route through op->connection.
  void OnReply(const std::shared_ptr<RequestOp>& op, const Status& status, std::string_view response);
  void Retry(const std::shared_ptr<RequestOp>& op, const Status& why);
  // A get, put (`value` not null) or delete of `key`, beginning at its leaf meganode in the path cache.
  void StartKeyOp(uint16_t method, bool idempotent, std::string_view key, const std::string_view* value,
                  Deadline deadline, Completion done);
  Status RunKey(uint16_t method, bool idempotent, std::string_view key, const std::string_view* value,
                Deadline deadline, cell::proto::StoreReply* reply);
  static KeyRequest KeyRequestFor(std::string_view key, const std::string_view* value, GlobalPtr cached,
                                  FillRequest fill = nullptr);
  // `request`'s bytes for an attempt at `route`'s owner, beginning at `start`, into *out.
  static void BuildKeyRequest(const KeyRequest& request, const Route& route, GlobalPtr start, std::string* out);
  // A scan's pages by RPC, from `cached` (the leaf meganode of the scan's first key, or null).
  Status ScanServerSide(std::string_view start, std::string_view end, size_t limit, btree::ScanMode mode,
                        GlobalPtr cached, Deadline deadline, std::vector<btree::KeyValue>* out);
  Status ScanClientSide(std::string_view start, std::string_view end, size_t limit, btree::ScanMode mode,
                        GlobalPtr cached, Deadline deadline, std::vector<btree::KeyValue>* out);
  // Runs `walk` over a GlobalReader of one-sided reads, beginning at `cached` (null: the root), retried as Run
  // retries; `walk` leaves its results in its caller's variables only when it returns OK.
  Status WalkClientSide(GlobalPtr cached, Deadline deadline,
                        const std::function<Status(btree::GlobalReader& reader, GlobalPtr begin)>& walk);
  Status GetServerSide(std::string_view key, std::string* value, Deadline deadline);
  // `sample_server`: not 0, time the reads from that server for the selector (the server the choice was made for).
  // `meta`: as for GetWithMeta (null: a locked key is retried until the deadline). `cached`: the path cache's
  // answer for the key when the caller has asked it already (else it is asked here).
  Status GetClientSide(std::string_view key, std::string* value, Deadline deadline, uint64_t sample_server = 0,
                       btree::RecordMeta* meta = nullptr, std::optional<GlobalPtr> cached = std::nullopt);

  // Runs `task` on the timer thread at `due` (at once, in this thread, if the client is closing: it then fails).
  // Runs `task` on the timer thread at `due`; once closing, at once on this thread (it fails as closing).
  void Schedule(Deadline due, std::function<void()> task);

  // The reply's `elsewhere` as the next meganode to go to (null: none; the first meganode means the root). Caches
  // the leaf meganode the reply names, if any.
  GlobalPtr NextFrom(const cell::proto::StoreReply& reply);

  // The connection to `server`: `done` (void(const StatusOr<std::shared_ptr<rpc::Connection>>&)) runs at once if a
  // healthy one is open; else on the thread that makes one (started for the first caller; later callers wait for the
  // same). PermissionDenied if the server refused the key (Dial says when); Unavailable if it could not be reached
  // within what is left of `deadline` and at most kConnectTimeout. `server` is shared (a Route's), so that the fast
  // path copies no addresses, and `done` becomes a std::function only off the fast path.
  template <typename DoneFn>
  void ConnectAsync(const std::shared_ptr<const membership::ServerInfo>& server, Deadline deadline, DoneFn&& done) {
    if (closing_.load(std::memory_order_acquire)) return done(Closing());
    // The cached connection first: the dial's closure (a copy of `server`) is made only when there is none.
    if (std::shared_ptr<rpc::Connection> cached = connections_.Cached(server->id)) {
      return done(StatusOr<std::shared_ptr<rpc::Connection>>(std::move(cached)));
    }
    connections_.GetAsync(
        server->id, [this, server, deadline] { return Dial(*server, deadline); }, std::forward<DoneFn>(done));
  }
  // The same, waited for (not on a transport thread).
  StatusOr<std::shared_ptr<rpc::Connection>> ConnectionTo(std::shared_ptr<const membership::ServerInfo> server,
                                                          Deadline deadline);
  // What ConnectAsync and ConnectionTo answer once the client is closing.
  static StatusOr<std::shared_ptr<rpc::Connection>> Closing();
  // Makes a connection to `server` (on a connecting thread of connections_), with the errors ConnectAsync gives. A
  // refusal of the key (either way) is PermissionDenied only until some server of the cluster has accepted it; after
  // that it is Unavailable (retried as an unreachable server): the address is no longer that server's (it died and
  // another process, another cluster's server, listens there now) or that one server runs with other keys.
  StatusOr<std::unique_ptr<rpc::Connection>> Dial(const membership::ServerInfo& server, Deadline deadline);
  // Drops `server`'s cached routes, and its connection if it is `failed` (any, if null). Not on `failed`'s own
  // threads (it may release the connection's last reference).
  void DropServer(uint64_t server, const rpc::Connection* failed);
  StoreClient(membership::RegionTableReader* table, const StoreClientOptions& options,
              std::unique_ptr<selector::Selector> selector, std::unique_ptr<selector::Selector> scan_selector);
  // Who decides an operation's side, and whether it reports its latency.
  enum class Decider {
    kGet,     // the selector; the operation reports its latency (a get)
    kFollow,  // the selector's split, with no report (MultiGets and estimates: their costs are not a get's)
    kScan,    // the scans' own selector; the scan reports its latency
  };
  // The choice for an operation beginning at meganode `start` (null: the root); *server is the server it was made for
  // (the start region's owner), to which measurements are reported; 0 if not known, and then nothing is measured.
  // `may_block`: the owner may be looked up (synchronous operations); otherwise only the cache is asked.
  bool SearchOnServer(GlobalPtr start, bool may_block, uint64_t* server, Decider decider = Decider::kGet);
  // True for one client-side search in options_.sample_one_in, counted per thread.
  bool SampleThisSearch() const {
    thread_local uint32_t count = 0;
    return ++count % static_cast<uint32_t>(std::max(options_.sample_one_in, 1)) == 0;
  }
  static uint64_t MicrosOf(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  }
  // The selectors' time (their decisions and their samples' times; latencies are measured on the precise clock): the
  // coarse clock (common/coarse_clock.h), which a get reads for its deadline anyway, for a fifth of a precise reading's
  // cost. A selector's windows age by the second and its load estimates by tens of milliseconds, against the clock's
  // few; the published split is refreshed once per tick of it rather than per ModelSelector::kRefreshUs.
  static uint64_t SelectorMicros() { return MicrosOf(CoarseNow()); }
  // Tells the selector a server-side search of `server` begun at `begin` has just been answered.
  void ReportServerSearch(uint64_t server, Clock::time_point begin);
  StatusOr<uint32_t> Root();

  membership::RegionTableReader* const table_;
  RegionCache cache_;
  PathCache paths_;
  const StoreClientOptions options_;
  std::unique_ptr<btree::NodeCache> nodes_;  // null: no node cache
  const std::unique_ptr<selector::Selector> selector_;
  // Scans' own: a scan's cost on each side is not a get's (it reads many leaves and records, and a page's reply is
  // big), and a workload of scans alone would otherwise never measure the sides (the split would stay where it began).
  // Each scan counts as one search; a client-side scan as one read (the whole scan), so the rule compares the two
  // sides' scan latencies.
  const std::unique_ptr<selector::Selector> scan_selector_;
  const bool measure_;  // the selector uses latencies: measure searches and reads
  const uint64_t id_;   // unique in the process, for state kept per thread (a read lease remembered)
  Stats stats_;
  std::atomic<uint32_t> root_{0};     // the root region, once known (it never changes); read without mu_
  std::atomic<bool> closing_{false};  // set under mu_; read without it too
  // Some server of the cluster accepted this client's key (and proved it holds it): from then on, an address that
  // refuses the key is not taken as a wrong key (Dial).
  std::atomic<bool> key_accepted_{false};
  std::mutex mu_;            // guards what follows
  GlobalPtr root_meganode_;  // cached for client-side searches (an old root is still a correct start)
  // One connection per server; its connecting threads are the client's own (MarkClientThread).
  rpc::ConnectionCache connections_;
  // Retries and steps due later; at stop, every remaining task runs at once (and fails as closing).
  TaskScheduler timers_;
};

}  // namespace cell::client
