// The region table and live servers in ZooKeeper (C client, libzookeeper-mt).
//
// Znode layout under <root>/<cluster> (default /cell/default):
//   servers/<id>            ephemeral; "capacity=<bytes>\n<transport>=<uri>\n..." (one line per transport)
//   regions/<id, 8 digits>  persistent; "owner=<server id>\nepoch=<n>\n"
//   region-ids/id-<seq>     persistent-sequential, deleted at once: the parent's sequence counter hands out
//                           region ids (seq + 1), unique across the cluster however many servers allocate at once
// Owner changes are versioned writes (zoo_set with the version read), so the epoch compare-and-set holds across
// processes. Entries that do not parse are reported (Corruption, naming the znode), never trusted.
//
// Fencing. A server may serve only while ZooKeeper still holds its ephemeral servers/<id>: once its session expires,
// survivors may take its regions. A lease renewal task confirms the znode (and that this session owns it) every third
// of the session timeout; ServingStatus() refuses when the last confirmation is older than two thirds of it (a server
// cut off from ZooKeeper, or stopped, cannot hear its own expiry, so it stops before the ensemble can expire it), and
// for good once the session has expired, until Renew() and RegisterServer().
//
// Two background tasks, each on a lane of its own (common/task_scheduler.h): the lease renewal, and the refresher that
// re-reads the table after a watch fires. Both may block on ZooKeeper (up to the operation timeout), each without
// holding up the other. The lanes are on ZooKeeperOptions::scheduler (a server's), or on a scheduler of this object's
// own; the destructor stops them before it closes the session.
//
// Authentication (ZooKeeperOptions::auth): with a digest identity, the cluster's znodes get the ACL "the creating
// identity may do anything, anyone may read", so only the cluster's identity can register servers, allocate ids or
// change owners; a client without it can read the table, and its writes fail with FailedPrecondition naming
// --zk-auth.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/task_scheduler.h"
#include "membership/membership.h"

struct _zhandle;
struct ACL_vector;

namespace cell::membership {

struct ZooKeeperOptions {
  std::string connect;  // "host:port,host:port,..."
  std::string root = "/cell";
  std::string cluster = "default";
  std::chrono::milliseconds session_timeout{6000};
  std::chrono::milliseconds operation_timeout{10000};  // how long an operation retries through connection loss
  // "user:password" (--zk-auth): the session authenticates with ZooKeeper's digest scheme, and the znodes it creates
  // for the cluster are writable only by that identity (everyone may read). Empty: no authentication, open ACLs.
  std::string auth;
  // Servers create the layout's znodes if missing; a reader (a client) creates nothing, and Open fails with NotFound
  // when the cluster's znodes do not exist (a mistyped path is an error, not an empty cluster).
  bool create_layout = true;
  // Runs the lease renewal and the refresher, each on a lane of its own; null: a scheduler of the membership's own
  // (two threads). Not owned; it must outlive the membership.
  TaskScheduler* scheduler = nullptr;
};

// Parses a cluster URI "zk://host:port[,host:port...][/root/cluster]" (the form of --membership and --cluster) into
// options: the path names the cluster's znode, its last component the cluster and the rest the root; without a path,
// /cell/default. Other fields keep their defaults. InvalidArgument, with an example, for anything else.
StatusOr<ZooKeeperOptions> ParseZooKeeperUri(std::string_view uri);

class ZooKeeperMembership final : public Membership {
 public:
  // Connects (waiting up to operation_timeout) and creates the layout's parent znodes if missing.
  static StatusOr<std::unique_ptr<ZooKeeperMembership>> Open(const ZooKeeperOptions& options);
  ~ZooKeeperMembership() override;

  Status RegisterServer(const ServerInfo& self) override;
  Status UnregisterServer(uint64_t id) override;
  StatusOr<std::vector<ServerInfo>> ListServers() override;
  StatusOr<bool> IsRegistered(uint64_t id) override;
  StatusOr<uint32_t> AllocateRegionId() override;
  StatusOr<RegionEntry> CreateRegion(uint32_t region, uint64_t owner) override;
  StatusOr<RegionEntry> GetRegion(uint32_t region) override;
  StatusOr<std::vector<RegionEntry>> ListRegions() override;
  StatusOr<RegionEntry> ChangeOwner(uint32_t region, uint64_t expected_epoch, uint64_t new_owner,
                                    std::optional<uint64_t> log_epoch = std::nullopt) override;
  StatusOr<uint32_t> RootRegion() override;
  StatusOr<uint32_t> ClaimRoot(uint32_t region) override;
  void Watch(std::function<void(const MembershipEvent&)> watcher) override;
  Status ServingStatus() override;
  Status Renew() override;
  void Interrupt() override;

  // Parsing of znode contents, exposed for tests of malformed entries.
  static StatusOr<RegionEntry> ParseRegion(uint32_t region, std::string_view data, std::string_view path);
  static StatusOr<ServerInfo> ParseServer(uint64_t id, std::string_view data, std::string_view path);

  // Called by the ZooKeeper client's event thread.
  void OnSessionEvent(int state);
  void OnWatchFired();

 private:
  explicit ZooKeeperMembership(const ZooKeeperOptions& options);
  std::string Path(std::string_view child) const;
  // Runs `op` (a zoo_* call returning a ZooKeeper error code) until it succeeds, fails for good, or the operation
  // timeout passes; connection loss is retried (the client reconnects by itself).
  int Retry(const std::function<int()>& op, bool* retried = nullptr);
  Status Error(int rc, std::string_view what) const;
  StatusOr<std::string> ReadNode(const std::string& path, bool watch, int* version);
  StatusOr<std::vector<std::string>> Children(const std::string& path, bool watch);
  // Reads the live servers and the region table, arming watches on both; false if ZooKeeper could not be read.
  bool ReadState(std::map<uint64_t, ServerInfo>* servers, std::map<uint32_t, RegionEntry>* regions);
  // The refresher lane's task, posted when a watch fires (OnWatchFired): re-reads and tells watchers what changed
  // since the last read; after a failed read, tries again in 200 ms (a `retry`) or when the connection is back,
  // whichever is first.
  void Refresh(bool retry);
  // Posts Refresh to run now, if a read is wanted and watched and none posted so is still to run.
  void PostRefresh();
  // The lease lane's task, every third of the session timeout: confirms the registration, or finds it gone.
  void RenewLease();
  Status Connect();  // a new session; waits until it is connected (and authenticated, with options_.auth)
  const ::ACL_vector* Acl() const;  // for the znodes this object creates

  const ZooKeeperOptions options_;
  std::unique_ptr<TaskScheduler> own_scheduler_;  // without options_.scheduler
  // Stopped by the destructor before the handle is closed. (Made before the session, whose events post to them.)
  std::unique_ptr<TaskScheduler::Lane> refresher_;
  std::unique_ptr<TaskScheduler::Lane> lease_;
  std::shared_mutex handle_mu_;  // shared by every call on zh_; exclusive to replace it (Renew)
  _zhandle* zh_ = nullptr;

  std::mutex state_mu_;
  std::condition_variable state_cv_;
  int state_ = 0;
  bool interrupted_ = false;  // Interrupt(): retries and connects give up at once

  std::mutex lease_mu_;                              // guards what follows
  uint64_t registered_ = 0;                          // the server registered through this object, 0: none
  bool expired_ = false;                             // its session expired: fenced until Renew and RegisterServer
  std::chrono::steady_clock::time_point confirmed_;  // when ZooKeeper last confirmed the registration

  std::mutex watch_mu_;  // guards what follows
  bool dirty_ = false;
  bool refresh_posted_ = false;  // a Refresh posted to run now has not begun yet
  bool retry_posted_ = false;    // a Refresh posted to retry a failed read has not begun yet
  bool have_baseline_ = false;
  std::vector<std::function<void(const MembershipEvent&)>> watchers_;
  std::map<uint64_t, ServerInfo> seen_servers_;
  std::map<uint32_t, RegionEntry> seen_regions_;
};

}  // namespace cell::membership
