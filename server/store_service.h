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
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/task_scheduler.h"
#include "logging/region_log.h"
#include "meganode/global_tree.h"
#include "membership/membership.h"
#include "rpc/transport.h"
#include "server/peers.h"
#include "server/region_logger.h"

namespace google::protobuf {
class MessageLite;
}  // namespace google::protobuf

namespace cell::proto {
class StoreReply;
class StoreStats;
}  // namespace cell::proto

namespace cell::server {

namespace disk {
class Manifest;
}  // namespace disk

struct StoreConfig {
  // The regions' shape. A size left at 0 (cell-server leaves those it is not given) is chosen at Open: a restart's
  // from the MANIFEST of its log (a restart need not repeat the sizes, and cannot change them); a fresh start's by
  // MachineSized (server/store_open.cc): 64 MiB meganodes, records in 3/8 of the machine's memory and as much node
  // room, committed only as used.
  uint64_t meganode_bytes = uint64_t{64} << 20;      // one meganode
  uint32_t meganodes = 16;                           // the node region has room for this many
  std::chrono::milliseconds peer_timeout{5000};      // requests to other servers (meganode splits, separators)
  rpc::Key peer_key;                                 // what this server proves to other servers (empty: none)
  uint64_t extent_region_bytes = uint64_t{1} << 30;  // records (memory is committed as it is used)
  // On 2 MiB huge pages (a hugetlb memfd; the administrator must reserve them, vm.nr_hugepages): far fewer TLB
  // misses for client-side searches. Sizes must then be multiples of 2 MiB.
  bool huge_pages = false;
  // The regions are registered for RDMA (a verbs listener), which pins them whole when made: like huge pages, sizes
  // left unset then stay small (MachineSized).
  bool rdma_registered = false;
  // Experiments only (cell-server --search-cpu-us): every get, put, delete and scan searched here burns this many
  // more microseconds of its worker's CPU, as a slower CPU or a costlier search would. With the shm NIC model it lets
  // a two-core machine give the server's CPU and the "network" comparable capacities (docs/BENCHMARKS.md).
  double search_cpu_us = 0;

  // Durability (docs/DESIGN.md, "Durability"). With a data_dir, every write to the regions goes to a write-ahead log
  // in a directory there (StoreService::LogDir), with checkpoints, and a restarted server recovers its regions from
  // them (<data_dir>/server-<id>.regions names them). Empty: nothing is logged; a restart loses everything.
  std::string data_dir;
  // kSync: a write is acknowledged once its records are on disk (fdatasync, shared by concurrent writes). kAsync:
  // acknowledged at once, on disk within async_flush_interval plus one fdatasync.
  logging::Durability durability = logging::Durability::kSync;
  std::chrono::milliseconds async_flush_interval{10};
  // A checkpoint is taken (in the background) once the log has grown since the last one by this much, or by as many
  // bytes as the regions held at the last one, whichever is more. A checkpoint copies all that the regions hold, so
  // the second bound keeps the copying in proportion to what is written (a large load would otherwise copy the
  // store back to back), as Redis's auto-aof-rewrite-percentage 100 does; a restart then replays a log about as
  // large as the store at most.
  uint64_t checkpoint_log_bytes = uint64_t{256} << 20;
  // The file operations of the log and checkpoints (tests inject faults and power losses); null: POSIX. Not owned.
  logging::Env* env = nullptr;
  // The server's scheduler: the service's checkpoints, and its tree's background work, run on lanes of it. Null: on
  // schedulers of their own (a thread each). Not owned; it must outlive the service.
  TaskScheduler* scheduler = nullptr;
  // The server's lease (null: always OK): the tree's resolver of transaction locks acts only while it says OK
  // (GlobalTreeOptions::lease).
  const std::function<Status()>* lease = nullptr;
};

// What a restart recovered (all zeros on a first start).
struct StoreRecovery {
  bool recovered = false;
  uint64_t checkpoint_lsn = 0;     // the checkpoint loaded (0: none)
  uint64_t records_replayed = 0;   // log records after it
  std::string damage;              // what ended the log early (empty: it ended cleanly)
  uint64_t unfinished_splits = 0;  // splits the log shows begun and not ended
  meganode::TreeRecovery tree;     // what the tree's rebuild found and repaired
  double seconds = 0;
};

// Parses a request's bytes into *request; false once `responder` has been told they are malformed.
bool ParseStoreRequest(std::string_view bytes, google::protobuf::MessageLite* request, rpc::Responder& responder);

class StoreService {
 public:
  // Allocates two region ids, opens the store in memfd-backed memory (so shm clients can map it), and records both
  // regions in the table as owned by `server_id`. The node region is allocated first: the cluster's first server's
  // node region is its lowest region, the root.
  // With config.data_dir and a record of this server's regions there (server-<id>.regions), the regions are claimed
  // in the table at a new epoch and recovered from the log the table names; unless another server owns them now:
  // then new ones are made. Aborted if a survivor took them over while they were being recovered (start again).
  static StatusOr<std::unique_ptr<StoreService>> Open(const StoreConfig& config, membership::Membership* membership,
                                                      uint64_t server_id);
  // Takes over regions of a server that died or lost its session (docs/DESIGN.md, "Takeover"). `claimed` is the
  // node region's entry after this server made itself the owner by a compare-and-set. The log the entry names is
  // read without changing it (its old owner may only be paused); the regions go on in a new log directory, named
  // by claimed.epoch, which holds a checkpoint of them before the table names it (a second compare-and-set); then
  // the other log directories of the regions are removed, and the regions are served at the table's epoch.
  static StatusOr<std::unique_ptr<StoreService>> Adopt(const StoreConfig& config, membership::Membership* membership,
                                                       uint64_t server_id, const membership::RegionEntry& claimed);
  // Where a node region's log, checkpoints and MANIFEST (the regions' shape and extent region) are, on storage every
  // server of the cluster reads: <data_dir>/regions-<node region> for the log its first server began, and
  // <data_dir>/regions-<node region>.<epoch> for the one a takeover at that epoch began (RegionEntry::log_epoch).
  static std::string LogDir(const std::string& data_dir, uint32_t node_region, uint64_t log_epoch);
  ~StoreService();
  uint32_t extent_region() const { return extent_region_; }
  // The table gave the regions to another server: from now on every request for them is refused ("wrong owner"),
  // until the process ends (a server that finds this exits, server/cell_server.h).
  void MarkLost(uint64_t owner, uint64_t epoch);
  // The server claimed the node region again at `epoch` (after its session expired, server/cell_server.h).
  void set_epoch(uint64_t epoch) { epoch_.store(epoch, std::memory_order_release); }
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  // The node region a store request addresses (0: none, or not parsable): a server holding several region pairs
  // routes by it.
  static uint32_t RegionOf(uint16_t method, std::string_view request);
  const StoreRecovery& recovery() const { return recovery_; }
  // The node and extent regions this server recorded in data_dir (server-<id>.regions) when it made them; NotFound if
  // it never did.
  static StatusOr<std::pair<uint32_t, uint32_t>> RecordedRegions(const std::string& data_dir, uint64_t server_id);

  // The regions clients may read one-sidedly (register them with every listener).
  std::vector<rpc::RegionRegistration> regions() const;
  uint32_t node_region() const { return node_region_; }
  bool holds_root() const { return store_->IsLocal(store_->first_meganode()); }

  static bool IsStoreMethod(uint16_t method);
  // The tree's full consistency check (meganode/global_tree.h); only while no request is being served.
  Status CheckInvariants() const { return store_->CheckInvariants(); }
  size_t meganodes_in_use() const { return store_->meganodes_in_use(); }
  // The transaction locks this service's tree lists for its resolver, and those the resolver ended (StoreStats).
  size_t txn_locks() const { return store_->txn_locks(); }
  uint64_t txn_resolved() const { return store_->stats().txn_resolved.load(); }
  // The proto::StoreStats of this service's regions, and serialized (STORE_STATS; a server that took regions over
  // adds their services' transaction locks: CellServer::Handle).
  proto::StoreStats StatsMessage() const;
  std::string Stats() const;
  // For tests: a fault on the replies of this server's calls to its peers (ServerPeers::set_reply_fault).
  void set_peer_reply_fault(std::function<Status(uint16_t method)> fault) { peers_->set_reply_fault(std::move(fault)); }
  // For tests: what this service asks of other servers through.
  ServerPeers& peers_for_test() { return *peers_; }
  // The requests servers send each other (MEGA_*): only connections with the peer key may make them.
  static bool IsPeerMethod(uint16_t method);
  // Answers a store request; `serving` is false while the server is fenced. `lease` (null: none) is asked again as
  // each answer is sent (a write's once it is durable): an answer goes out only while it says OK, so a server paused
  // or cut off past its lease never acknowledges a write or answers a read that a survivor's writes may have
  // overtaken (docs/DESIGN.md, "Ownership").
  void Handle(uint16_t method, std::string_view request, rpc::Responder responder, bool serving,
              const std::function<Status()>* lease = nullptr);

 private:
  StoreService() = default;
  // A service with the config's settings, holding nothing yet.
  static std::unique_ptr<StoreService> NewService(const StoreConfig& config, uint64_t server_id);

  // Open's cases (server/store_open.cc), told apart by PlanOpen before anything is made.
  struct OpenPlan {
    enum class Case {
      kFreshStart,             // new regions, a new log
      kRestart,                // this server's recorded regions, claimed at a new epoch, recovered from its log
      kRestartIntoEmptyTable,  // the recorded regions, recovered, entered in a table that began empty (embedded)
    };
    Case kind = Case::kFreshStart;
    uint32_t node_region = 0;  // the recorded regions (restarts only)
    uint32_t extent_region = 0;
    uint64_t log_epoch = 0;  // the node region's log directory, as the table names it (RegionEntry::log_epoch)
  };
  static StatusOr<OpenPlan> PlanOpen(const StoreConfig& config, membership::Membership* membership, uint64_t server_id,
                                     logging::Env* env);
  // Claims the recorded regions (the node region's entry is `node`) at a new epoch: a restart, or a fresh start if a
  // survivor claimed them first.
  static StatusOr<OpenPlan> ClaimRecordedRegions(membership::Membership* membership, uint64_t server_id,
                                                 const membership::RegionEntry& node, uint32_t extent);
  // Moves the extent region to this server in the table, as its node region was.
  static Status ClaimExtentRegion(membership::Membership* membership, uint64_t server_id, uint32_t extent);
  // A fresh start: an empty store on new regions (in memory only, or with a new log and the regions file).
  Status StartFresh(const StoreConfig& config, const meganode::GlobalTreeOptions& options);
  // A restart: the regions recovered from this server's own log, at the log directory the table names.
  Status RestartFromOwnLog(const StoreConfig& config, const meganode::GlobalTreeOptions& options,
                           membership::Membership* membership, uint64_t log_epoch);
  // Enters the regions in the table (a fresh start, or a table that lost them) and takes the epoch to serve at.
  Status EnterTable(membership::Membership* membership, bool fresh_start);

  // A parsed get, put, delete or scan (server/store_handlers.cc).
  struct StoreRequest;
  // Whether this server may search for `r` now; if not, `responder` has been answered (wrong owner, or an error).
  bool Admit(const StoreRequest& r, bool serving, rpc::Responder& responder);
  // Searches the tree for `r`, filling in `reply` and the leaf meganode's `range`.
  Status Answer(const StoreRequest& r, proto::StoreReply* reply, btree::MeganodeRange* range);
  // Sends `reply` if `lease` still allows it once the request's writes are durable (a write's waits for its commit).
  void SendUnderLease(uint16_t method, std::string_view reply, const std::function<Status()>* lease,
                      rpc::Responder responder);
  // Refuses what `lease` no longer allows (and regions lost meanwhile): Unavailable, for the client to retry.
  Status MayAnswer(const std::function<Status()>* lease) const;
  // The reply to a write made here but refused by MayAnswer at answer time: not acknowledged, and not to be retried
  // as if never made (StoreReply::not_acknowledged).
  static std::string NotAcknowledged(const Status& why);
  // The MEGA_* requests of other servers, answered under `lease` (null: none) as every answer is.
  void HandlePeer(uint16_t method, std::string_view request, rpc::Responder responder,
                  const std::function<Status()>* lease);
  // The tree's options for this service's regions (its peers made here).
  meganode::GlobalTreeOptions TreeOptions(const StoreConfig& config, membership::Membership* membership, uint32_t root);
  // Opens the log in log_dir_ and the tree on the regions: new ones (first start), or recovered (restart) from the
  // log in `recover_from` (log_dir_ itself, or the old owner's after a takeover), treated as `mode` says.
  Status OpenLogged(const StoreConfig& config, meganode::GlobalTreeOptions options, bool restart,
                    const std::string& recover_from, logging::RecoverMode mode);
  // A restart's check that log_dir_'s MANIFEST describes regions of the shape `expected` (the options may not change
  // it).
  Status CheckManifest(const disk::Manifest& expected) const;
  // A first start's new log directory: refused if it holds a log already; its MANIFEST written.
  Status BeginLogDir(const disk::Manifest& manifest) const;
  // The tree's restore step on a restart or takeover: the regions' memory rebuilt from the checkpoint and log in
  // `recover_from`, then the log in log_dir_ opened after its last record.
  Status RecoverRegions(meganode::Region& nodes, meganode::Region& extents, const std::string& recover_from,
                        logging::RecoverMode mode, const logging::RegionLogOptions& log_options);
  // Logs what a recovery found and repaired.
  void LogRecovery() const;
  // Starts the checkpoints (Checkpoint, on the checkpointer lane of `config`'s scheduler or of the service's own).
  void StartCheckpointer(const StoreConfig& config);
  // Waits until this thread's writes are durable as the durability option asks (OK at once without a log); with
  // `flush`, on disk whatever the option (a peer's request: another server builds on the answer).
  Status Commit(bool flush = false);
  // The error a write gets when its records could not be made durable.
  Status NotLogged(const Status& s) const;
  // The checkpointer lane's task, every second until the service is destroyed: takes a checkpoint if the log has
  // grown by checkpoint_every_, and by checkpoint_held_, since the last one (or once after a recovery that replayed
  // records), and backs off after a failure.
  void Checkpoint();

  double search_cpu_us_ = 0;
  std::unique_ptr<ServerPeers> peers_;  // outlives store_ (its background thread calls peers_)
  logging::Env* env_ = nullptr;
  int lock_fd_ = -1;  // <data_dir>/server-<id>.lock, held (flock) while this service lives (not by Adopt)
  std::atomic<bool> lost_{false};
  std::string log_dir_;
  std::unique_ptr<logging::RegionLog> log_;  // outlives store_ and logger_ (they write to it)
  std::unique_ptr<RegionLogger> logger_;     // outlives store_ (its write sink)
  std::unique_ptr<meganode::GlobalTree> store_;
  StoreRecovery recovery_;
  std::unique_ptr<TaskScheduler> own_scheduler_;  // without StoreConfig::scheduler
  // Checkpoints; stopped (destroyed) before what its tasks use: the log, the tree and their files.
  std::unique_ptr<TaskScheduler::Lane> checkpointer_;
  // The checkpointer lane's own (its tasks run one at a time): what Checkpoint keeps from one run to the next.
  uint64_t checkpoint_every_ = 0;
  uint64_t checkpoint_at_last_ = 0;  // the log's appended bytes when the last checkpoint began
  uint64_t checkpoint_held_ = 0;     // the regions' bytes in use when the last checkpoint began
  bool checkpoint_due_ = false;      // take one at the next run whatever the log's growth
  int checkpoint_failures_ = 0;      // in a row
  uint64_t server_id_ = 0;
  uint32_t node_region_ = 0;
  uint32_t extent_region_ = 0;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> redirects_{0};
  // The node region's epoch when this service took it (created, restarted or adopted) or last claimed it again.
  std::atomic<uint64_t> epoch_{0};
};

}  // namespace cell::server
