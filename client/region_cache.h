// The client's cache of the region table: region -> (owner, epoch) and server -> addresses.
//
// A lookup that hits costs no lock (the thread's remembered routes) or one; a miss reads the table (ZooKeeper, or the
// embedded server). Entries are dropped, and so re-read at their next lookup, when:
//   - a server answers "wrong owner" for a region (OnWrongOwner): it no longer owns it, or does not yet;
//   - a connection to a server fails (OnServerUnreachable): its regions may be moving to survivors, and a restarted
//     server may listen at new addresses.
// A stale entry can therefore cost a request to the wrong server and a retry, never a wrong answer: a server checks
// that it owns the region (at the epoch the table gives it) before it answers for it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "common/thread_memo.h"
#include "membership/membership.h"

namespace cell::client {

struct Route {
  membership::RegionEntry entry;  // region, owner, epoch
  // The owner's id and addresses, shared with the cache (a lookup copies no addresses).
  std::shared_ptr<const membership::ServerInfo> server;
  const membership::ServerInfo& owner() const { return *server; }
};

class RegionCache {
 public:
  struct Stats {
    uint64_t hits = 0;         // lookups answered from the cache under its lock (not from a thread's remembered routes)
    uint64_t table_reads = 0;  // GetRegion and ListServers calls on the table
    uint64_t invalidations = 0;
    uint64_t lease_renewals = 0;  // IsRegistered calls on the table (one-sided reads' leases)
  };

  // `table` must outlive the cache. Thread-safe.
  explicit RegionCache(membership::RegionTableReader* table) : table_(table) {}

  // Where `region` lives. NotFound if the table has no such region; Unavailable if it has no owner at the moment, or
  // its owner is not a live server (it failed and its regions are not yet taken over), or the table lags an epoch
  // already seen: retry later. Errors reading the table are returned as they are (Unavailable, DeadlineExceeded).
  // Never returns an entry older than one it returned before, or than an epoch named to OnWrongOwner.
  StatusOr<Route> Lookup(uint32_t region);

  // The owner of `region` if the cache holds it (no copy of the server's addresses); 0 on a miss (use Lookup).
  uint64_t CachedOwner(uint32_t region);
  // Moves on with every change of what the cache answers (routes, owners, servers, leases dropped): an owner read
  // while this was g is still the cache's answer while this is still g.
  uint64_t generation() const { return remembered_.generation(); }

  // Server `server` answered that it does not own `region` (it knows the region at `server_epoch`). Drops the cached
  // entry unless it is already newer than what that server knows and names another owner.
  void OnWrongOwner(uint32_t region, uint64_t server, uint64_t server_epoch);

  // A connection to `server` failed: drops its addresses, its read lease and every region it owned in the cache.
  void OnServerUnreachable(uint64_t server);

  // One-sided reads' lease on `server` (membership::kReadLease): the time until which a one-sided read of it may
  // begin. When the one held has run out, it is renewed by a fresh read of the table (the server still registered);
  // Unavailable, with the server's routes dropped, once it is not (its regions are moving to a survivor: retry).
  StatusOr<std::chrono::steady_clock::time_point> ReadLease(uint64_t server);

  Stats stats() const;

 private:
  // Reads `region`'s entry from the table (not under mu_), again while it is older than `floor` or than an epoch seen
  // meanwhile, up to kStaleTableRetries times; then Unavailable.
  StatusOr<membership::RegionEntry> ReadEntryNoOlderThan(uint32_t region, uint64_t floor);
  // A hit, under mu_: the route, which the calling thread also remembers until the cache changes.
  Route HitLocked(uint32_t region, const membership::RegionEntry& entry,
                  const std::shared_ptr<const membership::ServerInfo>& server);

  membership::RegionTableReader* const table_;
  mutable std::mutex mu_;  // guards what follows; never held while reading the table
  std::map<uint32_t, membership::RegionEntry> regions_;
  std::map<uint64_t, std::shared_ptr<const membership::ServerInfo>> servers_;
  // The highest epoch seen for each region (cached, or named in a complaint); kept after the entry is dropped, so
  // the cache never goes back to an older entry. A few bytes per region ever looked up.
  std::map<uint32_t, uint64_t> known_epochs_;
  std::map<uint64_t, std::chrono::steady_clock::time_point> leases_;  // server -> read lease's end
  Stats stats_;
  // The calling thread's routes from hits (no lock): Changed under mu_ by every change of regions_ or servers_.
  ThreadMemo<uint32_t, Route> remembered_;
  static constexpr int kStaleTableRetries = 3;
};

}  // namespace cell::client
