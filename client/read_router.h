// StoreClient::ReadRouter: where a client-side search's reads go (client/one_sided_search.cc runs the searches). It
// routes each read to the owner of the region read, under a read lease on that server (docs/DESIGN.md, "One-sided
// reads and a deposed owner"), in place when the operation's own connection can (shm without a NIC model), else as
// copies; it remembers per thread the links its searches made through their operation's connection, and times the
// reads for the selector. Internal to the client: included by one_sided_search.cc alone.
#pragma once

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <ctime>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "btree/node_source.h"
#include "client/store_client.h"
#include "client/store_client_internal.h"
#include "common/coarse_clock.h"
#include "rpc/region_table.h"

namespace cell::client {

class StoreClient::ReadRouter {
 public:
  // `connection`: the connection to `route`'s owner that the operation already holds (alive while it runs).
  ReadRouter(StoreClient* client, Deadline deadline, const Route& route, rpc::Connection& connection)
      : client_(client),
        deadline_(deadline),
        home_server_(route.owner().id),
        home_(&connection),
        home_in_place_(connection.reads_in_place()),
        generation_(client->cache_.generation()) {
    if (home_in_place_) Recall();
    if (LinkIn(route.entry.region) == nullptr) {
      links_[next_++ % links_.size()] = Link{route.entry.region, home_server_, home_};
    }
  }

  // Runs `search` (Status(btree::NodeSource&)) over the source this search reads through: in place when the
  // operation's own connection can (shm without a NIC model: validated by node versions, as the server's own
  // searches are), else copies (each checked by its checksum, and kept in `cache`). A search in place that needs a
  // server reached only by copies runs again over copies.
  template <class Search>
  Status Run(btree::NodeCache* cache, Search&& search) {
    if (home_in_place_) {
      InPlaceMemory memory(this);
      btree::LocalNodeSource source(&memory, kMaxYields);
      Status s = search(static_cast<btree::NodeSource&>(source));
      client_->stats_.in_place_searches.fetch_add(1, std::memory_order_relaxed);
      if (s.ok() || memory.why().ok()) return s;
      if (memory.why().code() != Status::Code::kFailedPrecondition)
        return memory.why();  // else: a server reached by copies
    }
    btree::CopyingNodeSource source([this](GlobalPtr p, size_t words, uint64_t* dst) { return Read(p, words, dst); },
                                    cache);
    return search(static_cast<btree::NodeSource&>(source));
  }

  // For the selector: from now on, time each read from `server` and count all reads.
  void Measure(uint64_t server) {
    measure_ = true;
    measured_server_ = server;
    measure_begin_ = std::chrono::steady_clock::now();
  }
  // Tells the selector what this search's reads from that server took, and how many reads it made in all (a
  // traversal from `meganode`). Reads in place are not timed one by one (the memory is touched after the read
  // returns): each counts as an equal share of the whole search's time.
  void Report(selector::Selector& selector, uint64_t meganode) {
    if (!measure_ || reads_ == 0) return;
    if (samples_taken_ == 0 && in_place_reads_ > 0) {
      samples_[samples_taken_++] = MicrosBetween(measure_begin_, Clock::now()) / reads_;
    }
    if (samples_taken_ > 0) selector.OnReads(measured_server_, samples_.data(), samples_taken_, SelectorMicros());
    selector.OnTraversal(meganode, reads_);
  }

 private:
  // How long a read in place waits for a node's writer (yields) before the search gives up and is tried again.
  static constexpr int kMaxYields = 100000;

  // What a LocalNodeSource reads through: the regions of the servers this search reaches, in place.
  class InPlaceMemory final : public btree::LocalMemory {
   public:
    explicit InPlaceMemory(ReadRouter* router) : router_(router) {}
    const uint64_t* Readable(GlobalPtr p, size_t bytes) const override {
      if (const uint64_t* at = router_->InPlaceAgain(p, bytes)) return at;
      auto at = router_->InPlace(p, bytes);
      if (at.ok()) return *at;
      why_ = at.status();
      return nullptr;
    }
    // Only regions this search holds a link to (read already, or recalled), with no lookup, lease or error: a
    // prefetch hint, through which nothing is read.
    const uint64_t* Peek(GlobalPtr p, size_t bytes) const override { return router_->Peek(p, bytes); }
    // Why the last region could not be read in place (OK if none failed).
    const Status& why() const { return why_; }

   private:
    ReadRouter* const router_;
    mutable Status why_;
  };

  // The connection to `region`'s owner: from the few this search has used (node and extent regions, a server or
  // two), else looked up.
  struct Link {
    uint32_t region = 0;
    uint64_t server = 0;
    rpc::Connection* connection = nullptr;                // kept alive by the operation (its own) or by pinned_
    std::chrono::steady_clock::time_point lease_until{};  // reads of `server` may begin until then (ReadLease)
    std::span<const char> mapped{};                       // in place: the region, once asked (RegionInPlace)
  };
  Link* LinkIn(uint32_t region) {
    for (Link& l : links_) {
      if (l.region == region && l.connection != nullptr) return &l;
    }
    return nullptr;
  }
  StatusOr<Link*> LinkFor(uint32_t region) {
    if (Link* l = LinkIn(region)) return l;
    // Most reads are of the operation's own server's regions (its node and extent regions): no lookup of addresses.
    if (home_ != nullptr && client_->cache_.CachedOwner(region) == home_server_) {
      Link& slot = links_[next_++ % links_.size()];
      slot = Link{region, home_server_, home_};
      return &slot;
    }
    auto route = client_->cache_.Lookup(region);
    if (!route.ok()) {
      return route.status().IsNotFound()
                 ? Status::Corruption(fmt::format("a pointer names region {}, which does not exist", region))
                 : route.status();
    }
    // Under a lease first (Read): no connection is made to a server that is no longer registered.
    auto lease = client_->cache_.ReadLease(route->owner().id);
    if (!lease.ok()) {
      return Status::Unavailable(
          fmt::format("reading from server {}: {}", route->owner().id, lease.status().message()));
    }
    auto connection = client_->ConnectionTo(route->server, deadline_);
    if (!connection.ok()) {
      client_->DropServer(route->owner().id, nullptr);
      return connection.status();
    }
    Link& slot = links_[next_++ % links_.size()];
    rpc::Connection* raw = connection->get();
    pinned_.push_back(std::move(*connection));
    slot = Link{region, route->owner().id, raw, *lease};
    return &slot;
  }

  // The link that reads `p`, under a lease on its server (docs/DESIGN.md, "One-sided reads and a deposed owner"): a
  // server that lost its registration may be paused or cut off and deposed, and its memory older than a survivor's
  // writes. Checked against the coarse clock (a search makes a read per node): a lease is taken to end its margin
  // early. The lease of the server last read is remembered per thread, so a search need not ask the client's cache;
  // it stays in force to its end even if the client meanwhile found the server unreachable, as a lease is a promise
  // bounded in time (that, not its revocation, is what makes reads under it safe).
  StatusOr<Link*> Leased(GlobalPtr p) {
    CELL_ASSIGN_OR_RETURN(Link * link, LinkFor(p.region));
    struct Memo {
      uint64_t client = 0, server = 0;
      std::chrono::steady_clock::time_point until{};
    };
    thread_local Memo memo;
    const auto now = CoarseNow() + CoarseMargin();
    if (now < link->lease_until) return link;
    if (memo.client == client_->id_ && memo.server == link->server && now < memo.until) {
      link->lease_until = memo.until;
      Remember(*link);
      return link;
    }
    auto lease = client_->cache_.ReadLease(link->server);
    if (!lease.ok()) {
      const uint64_t server = link->server;
      Unlink(server);
      if (memo.server == server) memo = Memo{};
      return Status::Unavailable(fmt::format("reading from server {}: {}", server, lease.status().message()));
    }
    link->lease_until = *lease;
    memo = Memo{client_->id_, link->server, *lease};
    Remember(*link);
    return link;
  }

  // What a lease check adds to the coarse clock (common/coarse_clock.h): more than it can lag the real time.
  static std::chrono::nanoseconds CoarseMargin() { return 2 * CoarseResolution() + std::chrono::milliseconds(1); }

  // What a thread's searches in place remember of the links they made through their operation's own connection, for
  // the next search through it: nearly every search reads the same two regions (its server's node and extent
  // regions) through the same connection, and would otherwise look each one's owner, lease and mapping up again. A
  // remembered link is what LinkFor and RegionInPlace would answer again while
  //  - the connection is the same one (its serial; the operation holds it, and a mapping lives as long as its
  //    connection),
  //  - the client's region cache has not changed since (its generation): the region's owner is still the server the
  //    operation was routed to, which is all LinkFor asks of the cache;
  // and its lease is checked before every read, as any link's is.
  struct HomeLinks {
    uint64_t client = 0;
    uint64_t connection = 0;  // the connection's serial
    uint64_t generation = 0;  // the region cache's, when the search that remembered them began
    uint64_t server = 0;
    std::array<Link, 2> links{};  // Link::connection is the connection itself
    size_t next = 0;
  };
  // Out of line, so that a caller takes the thread's address once (in libcell.so each derivation is a call).
  [[gnu::noinline]] static HomeLinks& ThisThreadsLinks() {
    thread_local HomeLinks links;
    return links;
  }
  bool Remembers(const HomeLinks& m) const {
    return m.client == client_->id_ && home_ != nullptr && m.connection == home_->serial() &&
           m.generation == generation_ && m.server == home_server_;
  }
  // At the start of a search: the links remembered for this connection, if they still hold.
  void Recall() {
    const HomeLinks& m = ThisThreadsLinks();
    if (!Remembers(m)) return;
    for (const Link& l : m.links) {
      if (l.connection != home_ || l.mapped.empty()) continue;
      Link* slot = &links_[next_++ % links_.size()];
      *slot = l;
      before_last_ = std::exchange(last_, slot);  // so that the first reads need no lookup (their leases checked)
    }
  }
  // A link through the operation's own connection, just mapped or with its lease just renewed: remembered for the
  // next search (in place of the one for the same region, else of an empty or the older slot).
  // The owner is asked again here, after generation_ was read: the link for the route's own region was made from the
  // route the operation looked up before this search began, which a change since may have corrected (remembered under
  // generation_, it would outlive that correction).
  void Remember(const Link& link) {
    if (home_ == nullptr || link.connection != home_ || link.mapped.empty()) return;
    if (client_->cache_.CachedOwner(link.region) != home_server_) return;
    HomeLinks& m = ThisThreadsLinks();
    if (!Remembers(m)) m = HomeLinks{client_->id_, home_->serial(), generation_, home_server_};
    Link* slot = nullptr;
    for (Link& l : m.links) {
      if (l.region == link.region) slot = &l;
    }
    for (Link& l : m.links) {
      if (slot == nullptr && l.connection == nullptr) slot = &l;
    }
    if (slot == nullptr) slot = &m.links[m.next++ % m.links.size()];
    *slot = link;
  }

  // Forgets every link to `server`.
  void Unlink(uint64_t server) {
    HomeLinks& m = ThisThreadsLinks();
    if (m.client == client_->id_ && m.server == server) m = HomeLinks{};
    for (Link& l : links_) {
      if (l.server == server) {
        if (l.connection == home_) home_ = nullptr;
        l = Link{};
      }
    }
  }

  // What a read of `p` through `link` that failed with `s` means: a dead connection drops its server, a region the
  // server does not serve makes the route be read again; both are Unavailable (the operation retries).
  Status Failed(Link* link, GlobalPtr p, const Status& s) {
    const uint64_t server = link->server;
    if (!link->connection->health().ok()) {
      client_->DropServer(server, link->connection);
      Unlink(server);
      return Status::Unavailable(fmt::format("reading from server {}: {}", server, s.message()));
    }
    if (s.IsUnavailable()) {
      // The server does not serve the region (yet: a takeover is registering it; or any more): the route is re-read
      // from the table before the operation retries.
      client_->cache_.OnWrongOwner(p.region, server, 0);
      for (Link& l : links_) {
        if (l.region == p.region) l = Link{};
      }
      // (OnWrongOwner leaves the cache, and so its generation, alone when it already names another owner.)
      HomeLinks& m = ThisThreadsLinks();
      for (Link& l : m.links) {
        if (m.client == client_->id_ && l.region == p.region) l = Link{};
      }
      return Status::Unavailable(fmt::format("reading region {} from server {}: {}", p.region, server, s.message()));
    }
    return s;
  }

  Status Read(GlobalPtr p, size_t words, uint64_t* dst) {
    CELL_ASSIGN_OR_RETURN(Link * link, Leased(p));
    const auto now = measure_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    Status s = rpc::ReadSync(*link->connection, p, static_cast<uint32_t>(words * 8), dst);
    if (!s.ok()) return Failed(link, p, s);
    if (measure_) {
      ++reads_;
      if (link->server == measured_server_ && samples_taken_ < samples_.size()) {
        samples_[samples_taken_++] =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - now).count();
      }
    }
    return s;
  }

  // `bytes` at `p` in `mapped`, or null if they are not all inside it.
  static const uint64_t* Within(std::span<const char> mapped, GlobalPtr p, size_t bytes) {
    if (p.offset > mapped.size() || bytes > mapped.size() - p.offset) return nullptr;
    return reinterpret_cast<const uint64_t*>(mapped.data() + p.offset);
  }

  const uint64_t* Peek(GlobalPtr p, size_t bytes) {
    for (const Link& l : links_) {
      if (l.region == p.region && l.connection != nullptr) return Within(l.mapped, p, bytes);
    }
    return nullptr;
  }

  // A search reads a node per level and a record, nearly always in two regions (nodes, then records): the two links
  // last read, while their leases hold, answer without a lookup (InPlaceAgain: that case alone, the pointer or null,
  // no Status made); a region's mapping is asked for once per search, or not at all when recalled.
  const uint64_t* InPlaceAgain(GlobalPtr p, size_t bytes) {
    const Link* link = last_;
    if (link == nullptr || link->region != p.region) {
      link = before_last_;
      if (link == nullptr || link->region != p.region) return nullptr;
    }
    if (!(CoarseNow() + CoarseMargin() < link->lease_until)) return nullptr;
    const uint64_t* at = Within(link->mapped, p, bytes);  // (an empty mapping holds nothing)
    if (at != nullptr && measure_) {
      ++reads_;
      in_place_reads_ += link->server == measured_server_;
    }
    return at;
  }
  // Out of line: the common case, InPlaceAgain, then needs no room for this one's state.
  [[gnu::noinline]] StatusOr<const uint64_t*> InPlace(GlobalPtr p, size_t bytes) {
    Link* link = last_;
    if (link == nullptr || link->region != p.region || link->mapped.empty() ||
        !(CoarseNow() + CoarseMargin() < link->lease_until)) {
      CELL_ASSIGN_OR_RETURN(link, Leased(p));
      if (link->mapped.empty()) {
        auto region = link->connection->RegionInPlace(p.region);
        if (!region.ok()) return Failed(link, p, region.status());
        link->mapped = *region;
        Remember(*link);
      }
      if (link != last_) before_last_ = std::exchange(last_, link);
    }
    const uint64_t* at = Within(link->mapped, p, bytes);
    if (at == nullptr) return rpc::ReadOutsideRegion(p.region, p.offset, bytes, link->mapped.size());
    if (measure_) {
      ++reads_;
      in_place_reads_ += link->server == measured_server_;
    }
    return at;
  }

  StoreClient* const client_;
  const Deadline deadline_;
  const uint64_t home_server_;
  rpc::Connection* home_;
  const bool home_in_place_;
  const uint64_t generation_;  // the region cache's, when the search began
  std::array<Link, 4> links_;
  // The links InPlace read through last, and before that (slots of links_; checked before every use).
  Link* last_ = nullptr;
  Link* before_last_ = nullptr;
  // Every connection a search has read through, kept to its end (a dropped link must not unmap what it still reads
  // in place); the operation's own connection is kept by the operation.
  std::vector<std::shared_ptr<rpc::Connection>> pinned_;
  size_t next_ = 0;
  bool measure_ = false;
  uint64_t measured_server_ = 0;
  std::chrono::steady_clock::time_point measure_begin_;
  int reads_ = 0;
  int in_place_reads_ = 0;
  std::array<double, 32> samples_;
  size_t samples_taken_ = 0;
};

}  // namespace cell::client
