// Membership: which servers are alive, and which server owns each region (the region table).
//
// Every pointer in Cell is (region id, offset); this table alone says where a region lives, so moving a region to
// another server rewrites one entry and no pointer. Implementations (in the spirit of RAMCloud's ExternalStorage):
//   InMemoryMembership   one process holds the table (the embedded single-server mode; a fake for unit tests)
//   (ZooKeeper)          the table in ZooKeeper, for clusters
//
// Epochs. Each region entry carries an epoch that grows by one at every change of owner. An owner change is a
// compare-and-set on the epoch, so two servers racing to take a dead server's region cannot both win, and a client
// that cached (owner, epoch) can tell a stale answer from a current one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cell/status.h"

namespace cell::membership {

struct ServerInfo {
  uint64_t id = 0;                               // nonzero, unique in the cluster
  std::map<std::string, std::string> addresses;  // transport -> URI, e.g. "tcp" -> "tcp://10.0.0.5:7000"
  uint64_t capacity_bytes = 0;                   // memory the server offers for regions

  friend bool operator==(const ServerInfo&, const ServerInfo&) = default;
};

struct RegionEntry {
  uint32_t region = 0;     // nonzero
  uint64_t owner = 0;      // server id; 0: no owner (its server died and nobody has taken it yet)
  uint64_t epoch = 0;      // 1 at creation, +1 at every change of the entry
  uint64_t log_epoch = 0;  // a node region's log directory: the one its owner at this epoch began (a takeover's);
                           // 0: the region's first (server/store_service.h, LogDir)

  friend bool operator==(const RegionEntry&, const RegionEntry&) = default;
};

// What changed, for watchers. Watchers run on an implementation thread; they must not block.
struct MembershipEvent {
  enum class Kind { kServerJoined, kServerLeft, kRegionChanged };
  Kind kind;
  uint64_t server = 0;  // kServerJoined, kServerLeft
  RegionEntry region;   // kRegionChanged: the new entry
};

// Reading the table: all a client needs. A client of a ZooKeeper cluster reads ZooKeeper directly
// (ZooKeeperMembership); a client of an embedded server reads it over RPC (client/remote_table.h).
class RegionTableReader {
 public:
  virtual ~RegionTableReader() = default;
  virtual StatusOr<std::vector<ServerInfo>> ListServers() = 0;
  // NotFound if the region was never created.
  virtual StatusOr<RegionEntry> GetRegion(uint32_t region) = 0;
  virtual StatusOr<std::vector<RegionEntry>> ListRegions() = 0;
  // The root region: the node region whose offset 0 holds the cluster's first meganode (and so the root pointer),
  // claimed once by the cluster's first server (ClaimRoot). NotFound before any server has claimed it.
  virtual StatusOr<uint32_t> RootRegion() = 0;
  // Whether server `id` is registered, read fresh (ZooKeeper: after a sync, so a yes means it was registered at some
  // moment after the call began). A client renews its one-sided reads' lease on a server with it (kReadLease).
  virtual StatusOr<bool> IsRegistered(uint64_t id) {
    CELL_ASSIGN_OR_RETURN(const std::vector<ServerInfo> servers, ListServers());
    for (const ServerInfo& s : servers) {
      if (s.id == id) return true;
    }
    return false;
  }
};

// One-sided reads' lease (docs/DESIGN.md, "One-sided reads and a deposed owner"). A client begins a one-sided read of
// a server only within this long of a fresh confirmation that the server is registered (IsRegistered), and a
// survivor takes over a region no sooner than this long after it found the region's owner's registration gone. So
// no client still reads a deposed owner's memory once the survivor takes writes. (Each side measures it on its own
// monotonic clock: their rates must agree to well within it.)
inline constexpr std::chrono::milliseconds kReadLease{1000};

// The whole interface: what servers use.
class Membership : public RegionTableReader {
 public:
  // Makes `self` a live server. InvalidArgument for id 0; FailedPrecondition if another live server has the id.
  virtual Status RegisterServer(const ServerInfo& self) = 0;
  // Removes server `id`, registered through this object, from the live servers (a clean shutdown; a crash does the
  // same through its session). NotFound if it is not registered; FailedPrecondition if another process registered it.
  virtual Status UnregisterServer(uint64_t id) = 0;

  // A region id no other call, from any process, has returned or will return.
  virtual StatusOr<uint32_t> AllocateRegionId() = 0;
  // Records region `region` (from AllocateRegionId) owned by `owner`, at epoch 1. FailedPrecondition if it exists.
  virtual StatusOr<RegionEntry> CreateRegion(uint32_t region, uint64_t owner) = 0;
  // Makes `region` the root region unless another has been claimed already; returns the root region either way (a
  // claim is made once in a cluster's life, so servers starting together agree on which of them formats the tree).
  virtual StatusOr<uint32_t> ClaimRoot(uint32_t region) = 0;
  // Sets the owner, and with `log_epoch` the log directory, if the region is still at `expected_epoch`, moving it to
  // expected_epoch + 1 (the log directory is kept otherwise). Aborted (with the current entry in the message) when
  // another change came first: re-read, decide again.
  virtual StatusOr<RegionEntry> ChangeOwner(uint32_t region, uint64_t expected_epoch, uint64_t new_owner,
                                            std::optional<uint64_t> log_epoch = std::nullopt) = 0;

  // Calls `watcher` after every change from now on, until the Membership is destroyed.
  virtual void Watch(std::function<void(const MembershipEvent&)> watcher) = 0;

  // Fencing. OK while the server registered through this object may serve its regions. FailedPrecondition once its
  // registration is gone (its ZooKeeper session expired: survivors may already own its regions): call Renew(),
  // RegisterServer() again and re-read the table before serving. Unavailable while it has lost touch with ZooKeeper
  // for most of a session timeout (it cannot know whether it still owns anything).
  virtual Status ServingStatus() = 0;
  // Starts a new session after an expiry (a no-op otherwise). The server must then register again.
  virtual Status Renew() = 0;
  // For a server shutting down: operations waiting out a lost connection give up now (Unavailable) instead of at
  // their timeout, and so do later ones that find the connection lost. Irreversible.
  virtual void Interrupt() {}
};

}  // namespace cell::membership
