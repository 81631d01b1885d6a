// A Cell server: joins the cluster's membership, listens on its transports and answers requests.
//
// One handler serves the table (embedded mode) and the store's requests (server/store_service.h), which are refused
// while !serving().
//
// Every background timer of the server is a task on a lane of one scheduler (common/task_scheduler.h) the server
// owns: the fencing check (every 200 ms), the takeover of dead servers' regions (every 250 ms), each StoreService's
// checkpoints, and with ZooKeeper the membership's lease renewal and table refresher. Each component stops its lanes
// before it frees what their tasks use; the scheduler outlives them all.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/task_scheduler.h"
#include "membership/membership.h"
#include "rpc/transport.h"
#include "server/store_service.h"
#include "server/table_service.h"

namespace cell::server {

struct ServerConfig {
  uint64_t id = 0;                      // 0: 1 with embedded membership; required with ZooKeeper
  std::vector<std::string> listen;      // transport URIs (port 0 picks a free port)
  std::string membership = "embedded";  // "embedded" or zk://host:port[,...][/root/cluster]
  std::string zk_auth;                  // "user:password" (digest); ZooKeeper only
  std::chrono::milliseconds zk_session_timeout{6000};
  uint64_t capacity_bytes = uint64_t{1} << 30;
  int workers = 1;
  std::vector<int> worker_cpus;  // pin worker i to worker_cpus[i % size]; empty: no pinning
  // How long a worker polls for requests after its last before it sleeps (rpc::ServerOptions::poll); 0: not at all.
  std::chrono::microseconds poll{0};
  std::string nic_model;  // shm: "reads_per_s=R,bytes_per_s=B,latency_us=L" (rpc/shm/nic_model.h)
  std::string data_dir;   // logs and checkpoints (StoreConfig::data_dir); empty: nothing is logged
  // Trust (docs/DESIGN.md, "Security"). Two key files, given together: connections with the client key may use the
  // store's and the table's methods, connections with the peer key also the requests servers send each other
  // (MEGA_*); anything else is refused. The server proves it holds the key to every client. Without them the
  // server accepts anyone, says so, and listens only on loopback addresses (and shm) unless `insecure`.
  std::string client_key_file;
  std::string peer_key_file;
  bool insecure = false;
  std::string shm_group;  // shm: a group whose members may connect too (the socket file 0660)
  StoreConfig store;
};

class CellServer final : public rpc::RpcHandler {
 public:
  // Opens the membership, starts the listeners, registers this server, creates or recovers the store's regions (the
  // first server to claim the root holds the first meganode), and starts the fencing watch.
  static StatusOr<std::unique_ptr<CellServer>> Start(const ServerConfig& config);
  ~CellServer() override;

  // The URIs actually bound (with real ports), one per --listen.
  const std::vector<std::string>& uris() const { return uris_; }
  uint64_t id() const { return config_.id; }
  membership::Membership& membership() { return *membership_; }
  const StoreService& store() const { return *store_; }
  StoreService& store() { return *store_; }
  // False while this server may not serve its regions: its ZooKeeper session expired (it is re-registering), or it
  // has lost touch with ZooKeeper. The store's request handlers refuse region requests then.
  bool serving() const { return serving_.load(std::memory_order_acquire); }

  // Leaves the membership (if registered and still in touch), interrupts membership operations in progress, and
  // stops the listeners. Bounded by one membership operation when ZooKeeper answers, and quick when it does not.
  // Idempotent.
  void Stop();

  void Handle(uint16_t method, std::string_view request, rpc::Responder responder) override;

  // The node regions this server serves: its own, and those it took over from dead servers.
  std::vector<uint32_t> node_regions() const;

  // Whether a connection that proved the key named `key_name` may call `method` ("client": the store's and the
  // table's methods; "peer": all). Always OK on a server without keys.
  static Status Authorize(bool keyed, uint16_t method, const std::string& key_name);

 private:
  explicit CellServer(const ServerConfig& config) : config_(config) {}
  // Start's steps, in order.
  // The client and peer keys from their files (none: a server for local development, on loopback addresses only).
  StatusOr<std::vector<rpc::Key>> ReadKeys();
  // The region table in this process ('embedded'), or in ZooKeeper (`keyed`: its znodes guarded by the peer key).
  Status OpenEmbeddedMembership();
  Status OpenZooKeeperMembership(bool keyed);
  // One listener per --listen URI, accepting connections that prove one of `keys` (any, without keys).
  Status Listen(const std::vector<rpc::Key>& keys);
  // Registers this server, waiting out a previous incarnation's registration until its session expires.
  Status Register();
  // Opens the store (StoreService::Open, started again if its regions were taken over meanwhile) and registers its
  // regions with the listeners for one-sided reads.
  Status OpenStore();
  // Serves, and starts the fencing check, the table watcher and (with a data directory) the takeover pass.
  void StartLoops();
  membership::ServerInfo Self() const;
  // The fencing lane's task, every 200 ms until Stop: exits if a region this server served is another's now;
  // otherwise CheckFencing, saying when serving stops or starts again.
  void Fence();
  // Checks ServingStatus; after a session expiry renews the session, registers again, re-reads the table and claims
  // what it still gives this server again (a compare-and-set) before serving.
  Status CheckFencing();
  // The takeover lane's task (with a data directory), every 250 ms after the last pass ended until Stop: TakeOver
  // while serving.
  void TakeOverPass();
  // Takes over the regions of dead servers that fall to this server (docs/DESIGN.md, "Takeover"), and serves them.
  Status TakeOver();
  // TakeOver's steps. Whether region `r` (not served here) is this server's to take over now: its owner is dead (or
  // it is this server's own, not served), it has a log, it falls to this server by region id, no failed attempt is
  // waiting out its back-off, and clients' read leases on its owner have run out.
  bool FallsToThisServer(const membership::RegionEntry& r, const std::vector<uint64_t>& live,
                         std::chrono::steady_clock::time_point now);
  // Claims `r` by compare-and-set, adopts its regions and serves them; OK if another server claimed it first or the
  // adoption failed (tried again later).
  Status TakeOverRegion(const membership::RegionEntry& r);
  // An adoption at `epoch` failed: backs off, and removes the log directory it began unless the table names it.
  void AdoptionFailed(uint32_t region, uint64_t epoch, const Status& why);
  // Moves an adopted node region's extent region to this server in the table.
  void MoveExtentRegion(uint32_t extent_region);
  // Serves an adopted service, and registers its regions with the listeners for one-sided reads.
  void Serve(std::unique_ptr<StoreService> adopted);
  bool stopping();
  // The table names `r`'s owner: a region this server serves that is another's now is refused, and the server exits.
  void OnRegionOwner(const membership::RegionEntry& r);
  // What the membership's watcher calls through: detached by Stop(), so that a late event reaches nothing freed.
  struct WatchState {
    std::mutex mu;
    CellServer* server = nullptr;
  };
  // The service holding node region `region` (its own for 0 or any region it does not hold).
  StoreService* ServiceFor(uint32_t region);
  // STORE_STATS's answer once regions were taken over: the own service's, with every region's transaction locks.
  std::string StoreStats();

  ServerConfig config_;
  rpc::Key peer_key_;  // what this server proves to other servers (empty: no keys)
  // The server's timers (docs/DESIGN.md, "Timers"). The lanes whose tasks may block for seconds: takeover (recovering
  // regions from a log), checkpoints (a lane per region pair served: its own and each taken over), lease renewal and
  // the table refresher (a ZooKeeper call, up to its operation timeout), and fencing itself after a session expiry.
  // The pool starts a thread whenever all of its threads are running a task, so a due task waits for a thread only
  // once kSchedulerThreads tasks block at once. 32 leaves fencing a thread while takeover, lease renewal, the
  // refresher and two lanes per region pair (checkpoints, and the tree's background work: remote splits, separators)
  // all block, with up to 14 region pairs served (13 taken over): far more than one server holds. Threads start only as
  // needed. Declared before every member whose lanes run on it (the membership, the services): destroyed after them.
  static constexpr size_t kSchedulerThreads = 32;
  TaskScheduler scheduler_{TaskScheduler::AtStop::kDrop, kSchedulerThreads};
  std::unique_ptr<membership::Membership> membership_;
  std::atomic<bool> serving_{false};
  // Set from finding the session expired until every region the table still gives this server is claimed again
  // (CheckFencing); nothing is answered meanwhile, though the new session's registration makes the lease OK.
  std::atomic<bool> reclaiming_{false};
  // What every store answer is checked against as it is sent (StoreService::Handle), and every request to another
  // server before it leaves (ServerPeers): the membership's lease, fresh, and no claim pending. Declared before the
  // services, whose background work asks it: destroyed after them.
  const std::function<Status()> lease_ = [this] {
    if (reclaiming_.load(std::memory_order_acquire)) {
      return Status::Unavailable(
          fmt::format("server {} is registering again after its session expired, and claiming its regions again; retry",
                      config_.id));
    }
    return membership_->ServingStatus();
  };
  std::unique_ptr<TableService> table_service_;  // embedded only: a ZooKeeper cluster's clients read ZooKeeper
  std::unique_ptr<StoreService> store_;          // set once, while starting (listeners up, and registered)
  std::atomic<bool> store_ready_{false};         // store_ is set and its regions registered with the listeners
  mutable std::shared_mutex adopted_mu_;
  std::vector<std::unique_ptr<StoreService>> adopted_;  // regions taken over; guarded by adopted_mu_
  std::atomic<bool> has_adopted_{false};                // adopted_ is not empty (set once, after the first push)
  std::unique_ptr<TaskScheduler::Lane> takeover_;       // with a data directory; stopped by Stop
  std::shared_ptr<WatchState> watch_;
  std::atomic<bool> lost_region_{false};
  // Adoptions that failed: when to try each region again, and how often it failed (takeover lane only).
  std::map<uint32_t, std::pair<std::chrono::steady_clock::time_point, int>> retry_at_;
  // Servers seen gone (not registered) while they own regions, and since when (takeover lane only).
  std::map<uint64_t, std::chrono::steady_clock::time_point> gone_since_;
  std::vector<std::unique_ptr<rpc::Server>> listeners_;
  std::vector<std::string> uris_;
  std::atomic<bool> registered_{false};  // set once RegisterServer succeeded: only then does Stop unregister

  std::mutex stop_mu_;
  bool stopping_ = false;                         // guarded by stop_mu_; the lanes' tasks do nothing once it is set
  bool stopped_ = false;                          // guarded by stop_mu_
  std::unique_ptr<TaskScheduler::Lane> fencing_;  // stopped by Stop
  Status fencing_said_ = Status::OK();            // what Fence last reported (fencing lane only)
};

}  // namespace cell::server
