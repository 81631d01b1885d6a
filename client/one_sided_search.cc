// Client-side search: a get or scan that walks the tree with one-sided reads of its nodes (the server's CPU is not
// used), through the same traversal code the server runs (btree/global_reader.h). See store_client.h.
#include <fmt/format.h>

#include <ctime>
#include <future>
#include <optional>
#include <span>
#include <utility>

#include "btree/global_reader.h"
#include "btree/node_source.h"
#include "client/store_client.h"
#include "client/store_client_internal.h"
#include "common/key_limits.h"
#include "rpc/proto/store.pb.h"
#include "rpc/region_table.h"

namespace cell::client {

using cell::proto::StoreMethod;

namespace {
// Sorts the outcome of a client-side search: a failed read (its server gone, or a region not reachable now) and a
// search that kept meeting changes are tried again.
bool ShouldRetry(const Status& s) { return s.IsUnavailable() || s.IsAborted(); }
}  // namespace

class StoreClient::ReadRouter {
 public:
  // `connection`: the connection to `route`'s owner that the operation already holds (alive while it runs).
  ReadRouter(StoreClient* client, Deadline deadline, const Route& route, rpc::Connection& connection)
      : client_(client),
        deadline_(deadline),
        home_server_(route.owner().id),
        home_(&connection),
        home_in_place_(connection.reads_in_place()) {
    links_[0] = Link{route.entry.region, home_server_, home_};
    next_ = 1;
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
    const auto now = Clock::now();
    if (samples_taken_ == 0 && in_place_reads_ > 0) {
      samples_[samples_taken_++] = MicrosBetween(measure_begin_, now) / reads_;
    }
    if (samples_taken_ > 0) selector.OnReads(measured_server_, samples_.data(), samples_taken_, MicrosOf(now));
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
    // Only regions this search has read already, with no lookup, lease or error.
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
  StatusOr<Link*> LinkFor(uint32_t region) {
    for (Link& l : links_) {
      if (l.region == region && l.connection != nullptr) return &l;
    }
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
    return link;
  }

  // The kernel's last tick of steady_clock's clock (CLOCK_MONOTONIC): a few nanoseconds to read, never ahead of the
  // real time and behind it by at most the clock's resolution, which CoarseMargin covers.
  static std::chrono::steady_clock::time_point CoarseNow() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return std::chrono::steady_clock::time_point(std::chrono::seconds(ts.tv_sec) +
                                                 std::chrono::nanoseconds(ts.tv_nsec));
  }
  static std::chrono::nanoseconds CoarseMargin() {
    static const std::chrono::nanoseconds margin = [] {
      timespec res{0, 10'000'000};
      clock_getres(CLOCK_MONOTONIC_COARSE, &res);
      return 2 * (std::chrono::seconds(res.tv_sec) + std::chrono::nanoseconds(res.tv_nsec)) +
             std::chrono::milliseconds(1);
    }();
    return margin;
  }

  // Forgets every link to `server`.
  void Unlink(uint64_t server) {
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

  // A search reads a node per level and a record, nearly always in one or two regions: the link last read, while
  // its lease holds, answers without a lookup (InPlaceAgain: that case alone, the pointer or null, no Status made);
  // its region's mapping is asked for once per search.
  const uint64_t* InPlaceAgain(GlobalPtr p, size_t bytes) {
    const Link* link = last_;
    if (link == nullptr || link->region != p.region || !(CoarseNow() + CoarseMargin() < link->lease_until)) {
      return nullptr;
    }
    const uint64_t* at = Within(link->mapped, p, bytes);  // (an empty mapping holds nothing)
    if (at != nullptr && measure_) {
      ++reads_;
      in_place_reads_ += link->server == measured_server_;
    }
    return at;
  }
  StatusOr<const uint64_t*> InPlace(GlobalPtr p, size_t bytes) {
    Link* link = last_;
    if (link == nullptr || link->region != p.region || link->mapped.empty() ||
        !(CoarseNow() + CoarseMargin() < link->lease_until)) {
      CELL_ASSIGN_OR_RETURN(link, Leased(p));
      if (link->mapped.empty()) {
        auto region = link->connection->RegionInPlace(p.region);
        if (!region.ok()) return Failed(link, p, region.status());
        link->mapped = *region;
      }
      last_ = link;
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
  std::array<Link, 4> links_;
  Link* last_ = nullptr;  // the link InPlace read through last (a slot of links_; checked before every use)
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

Status StoreClient::GetClientSide(std::string_view key, std::string* value, Deadline deadline, uint64_t sample_server,
                                  btree::RecordMeta* meta, std::optional<GlobalPtr> cached) {
  // Routed to the server of the meganode it begins at (the key's cached leaf, else the root's): a search that
  // begins at a leaf needs no other server, the root's included (down, it may be taken over meanwhile).
  const GlobalPtr begin_at = cached ? *cached : paths_.Lookup(key);  // the first attempt's start; a retry looks again
  bool first = true;
  return Run(
      [&](rpc::Connection& connection, const Route& route, GlobalPtr, Deadline d) -> Attempt {
        auto root = Root();
        if (!root.ok()) return {root.status(), root.status().IsUnavailable() || root.status().IsDeadlineExceeded()};
        ReadRouter router(this, d, route, connection);
        if (sample_server != 0) router.Measure(sample_server);
        Status s = router.Run(nodes_.get(), [&](btree::NodeSource& source) {
          btree::GlobalReader reader(&source, GlobalPtr{*root, 0});
          GlobalPtr start = first ? begin_at : paths_.Lookup(key);
          first = false;
          const bool cached = !start.is_null();
          if (!cached) {
            std::lock_guard lock(mu_);
            start = root_meganode_;
          }
          if (start.is_null()) {
            auto root = reader.Root();
            if (root.ok()) {
              start = *root;
              std::lock_guard lock(mu_);
              root_meganode_ = start;
            }
          }
          Status s = reader.Get(key, value, start, meta);
          if (s.ok() || s.IsNotFound()) router.Report(*selector_, cached ? start.Pack() : 0);
          if ((s.ok() || s.IsNotFound()) && !(cached && reader.answered() == start)) {
            btree::MeganodeRange range;  // one more read, to begin at this leaf meganode next time
            if (reader.RangeOf(reader.answered(), &range).ok()) paths_.Insert(range);
          }
          if (reader.stats().restarts > 0) {
            std::lock_guard lock(mu_);
            root_meganode_ = GlobalPtr();  // the root has moved (or split): read it again next time
          }
          return s;
        });
        if (ShouldRetry(s)) return {s, true};
        if (s.IsNotFound()) return {Status::NotFound(fmt::format("no key '{}'", key)), false};
        return {s, false};
      },
      deadline, begin_at);
}

Status StoreClient::Scan(std::string_view start, std::string_view end, size_t limit,
                         std::vector<btree::KeyValue>* out) {
  return ScanRange(start, end, limit, btree::ScanMode{}, Side::kSelector, NewDeadline(), out);
}

Status StoreClient::ScanRange(std::string_view start, std::string_view end, size_t limit, btree::ScanMode mode,
                              Side side, Deadline deadline, std::vector<btree::KeyValue>* out) {
  if (limit == 0) return Status::OK();
  CELL_RETURN_IF_ERROR(CheckMayWait());
  if (start.size() > kMaxKeySize || end.size() > kMaxKeySize) {
    return Status::InvalidArgument(fmt::format("scan bounds are at most {} bytes", kMaxKeySize));
  }
  // A scan begins at the leaf meganode of its first key from the path cache, as a get does (null: the root), so that
  // it needs no meganode above it: those of a failed server, say. A reverse scan's first key is the greatest below
  // its end.
  std::string first(start);
  if (mode.reverse && !(end.empty() ? (first = btree::LastKey(), true) : btree::Predecessor(end, &first))) {
    return Status::OK();  // nothing lies below the end
  }
  const GlobalPtr cached = paths_.Lookup(first);
  uint64_t server = 0;
  const bool on_server = side == Side::kServer ||
                         (side == Side::kSelector && SearchOnServer(measure_ ? cached : GlobalPtr(), /*may_block=*/true,
                                                                    Clock::now(), &server, Decider::kScan));
  const auto begin = Clock::now();  // after the decision, which may have looked the region's owner up
  (on_server ? stats_.server_searches : stats_.client_searches).fetch_add(1, std::memory_order_relaxed);
  Status s = on_server ? ScanServerSide(start, end, limit, mode, cached, deadline, out)
                       : ScanClientSide(start, end, limit, mode, cached, deadline, out);
  if (server != 0 && s.ok()) {  // the scans' selector measures both sides (a client-side scan as one read)
    const auto now = Clock::now();
    const double us = MicrosBetween(begin, now);
    if (on_server) {
      scan_selector_->OnServerSearch(server, us, MicrosOf(now));
    } else {
      scan_selector_->OnRead(server, us, MicrosOf(now));
    }
  }
  return s;
}

Status StoreClient::ScanServerSide(std::string_view start, std::string_view end, size_t limit, btree::ScanMode mode,
                                   GlobalPtr cached, Deadline deadline, std::vector<btree::KeyValue>* out) {
  const size_t had = out->size();
  // What is left: [from, upper); a forward scan's pages move `from` up, a reverse scan's move `upper` down.
  std::string from(start), upper(end);
  GlobalPtr at = cached;  // the meganode the next page begins at (null: the root); one deadline for every page
  while (out->size() - had < limit) {
    GlobalPtr began;  // the meganode the page's last attempt began at (a redirect may have moved it)
    const uint32_t want = static_cast<uint32_t>(std::min<size_t>(limit - (out->size() - had), UINT32_MAX));
    cell::proto::StoreReply reply;
    CELL_RETURN_IF_ERROR(RunRequest(
        StoreMethod::STORE_SCAN, /*idempotent=*/true, /*follow=*/false, at, deadline,
        [&from, &upper, want, &began, mode](const Route& route, GlobalPtr begin, std::string* out) {
          began = begin;
          cell::proto::ScanRequest request;
          request.mutable_target()->set_region(route.entry.region);
          request.mutable_target()->set_epoch(route.entry.epoch);
          request.set_start(from);
          request.set_end(upper);
          request.set_limit(want);
          request.set_meganode(begin.Pack());
          request.set_with_meta(mode.report_locks);
          request.set_reverse(mode.reverse);
          request.set_keys_only(mode.keys_only);
          request.SerializeToString(out);
        },
        &reply));
    for (auto& kv : *reply.mutable_pairs()) {
      out->push_back(
          {std::move(*kv.mutable_key()), std::move(*kv.mutable_value()), kv.version(), kv.checksum(), kv.locked()});
    }
    if (!reply.more()) break;
    // The page ended (its size, or the range goes on at another server's meganode): go on from `resume` (a reverse
    // scan's resume is the new end, empty for none when it moved to another server before its first pair).
    const bool resume_ok = !reply.resume().empty() || (mode.reverse && reply.elsewhere() != 0);
    if (!resume_ok || (reply.pairs_size() == 0 && reply.elsewhere() == 0)) {
      return Status::Corruption("a scan page asked to go on but did not say where");
    }
    (mode.reverse ? upper : from) = reply.resume();
    at = reply.elsewhere() != 0 ? NextFrom(reply) : began;
  }
  return Status::OK();
}

Status StoreClient::WalkClientSide(GlobalPtr cached, Deadline deadline,
                                   const std::function<Status(btree::GlobalReader& reader, GlobalPtr begin)>& walk) {
  return Run(
      [&](rpc::Connection& connection, const Route& route, GlobalPtr begin, Deadline d) -> Attempt {
        auto root = Root();
        if (!root.ok()) return {root.status(), root.status().IsUnavailable() || root.status().IsDeadlineExceeded()};
        ReadRouter router(this, d, route, connection);
        Status s = router.Run(nodes_.get(), [&](btree::NodeSource& source) {
          btree::GlobalReader reader(&source, GlobalPtr{*root, 0});
          return walk(reader, begin);
        });
        return {s, ShouldRetry(s)};
      },
      deadline, cached);
}

Status StoreClient::ScanClientSide(std::string_view start, std::string_view end, size_t limit, btree::ScanMode mode,
                                   GlobalPtr cached, Deadline deadline, std::vector<btree::KeyValue>* out) {
  return WalkClientSide(cached, deadline, [&](btree::GlobalReader& reader, GlobalPtr begin) {
    std::vector<btree::KeyValue> pairs;
    Status s = reader.Scan(start, end, limit, &pairs, begin, mode);
    if (s.ok()) {
      for (auto& kv : pairs) out->push_back(std::move(kv));
    }
    return s;
  });
}

Status StoreClient::ApproximateSize(std::string_view start, std::string_view end, Side side, Deadline deadline,
                                    btree::SizeEstimate* out) {
  CELL_RETURN_IF_ERROR(CheckMayWait());
  if (start.size() > kMaxKeySize || end.size() > kMaxKeySize) {
    return Status::InvalidArgument(fmt::format("ApproximateSize's bounds are at most {} bytes", kMaxKeySize));
  }
  *out = btree::SizeEstimate{};
  GlobalPtr at = paths_.Lookup(start.empty() ? std::string_view("\0", 1) : start);
  uint64_t server = 0;
  if (side == Side::kClient ||
      (side == Side::kSelector &&
       !SearchOnServer(measure_ ? at : GlobalPtr(), /*may_block=*/true, Clock::now(), &server, Decider::kFollow))) {
    return WalkClientSide(at, deadline, [&](btree::GlobalReader& reader, GlobalPtr begin) {
      btree::SizeEstimate estimate;
      Status s = reader.ApproximateSize(start, end, &estimate, begin);
      if (s.ok()) *out = estimate;
      return s;
    });
  }
  // On the servers: each estimates the meganodes it holds, from where the last one stopped.
  std::string from(start);
  while (true) {
    cell::proto::StoreReply reply;
    CELL_RETURN_IF_ERROR(RunRequest(
        StoreMethod::STORE_APPROXIMATE_SIZE, /*idempotent=*/true, /*follow=*/false, at, deadline,
        [&from, end](const Route& route, GlobalPtr begin, std::string* out) {
          cell::proto::ScanRequest request;
          request.mutable_target()->set_region(route.entry.region);
          request.mutable_target()->set_epoch(route.entry.epoch);
          request.set_start(from);
          request.set_end(std::string(end));
          request.set_meganode(begin.Pack());
          request.SerializeToString(out);
        },
        &reply));
    out->keys += reply.size_keys();
    out->bytes += reply.size_bytes();
    if (!reply.more()) return Status::OK();
    if (reply.elsewhere() == 0 || reply.resume().empty()) {
      return Status::Corruption("a size estimate asked to go on but did not say where");
    }
    from = reply.resume();
    at = NextFrom(reply);
  }
}

Status StoreClient::GetWithMeta(std::string_view key, Side side, std::string* value, btree::RecordMeta* meta,
                                Deadline deadline) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, {}));
  CELL_RETURN_IF_ERROR(CheckMayWait());
  uint64_t server = 0;
  const bool on_server =
      side == Side::kServer ||
      (side == Side::kSelector && SearchOnServer(measure_ ? paths_.Lookup(key) : GlobalPtr(),
                                                 /*may_block=*/true, Clock::now(), &server, Decider::kFollow));
  *meta = btree::RecordMeta{};
  if (!on_server) {
    stats_.client_searches.fetch_add(1, std::memory_order_relaxed);
    return GetClientSide(key, value, deadline, 0, meta);
  }
  stats_.server_searches.fetch_add(1, std::memory_order_relaxed);
  cell::proto::StoreReply reply;
  CELL_RETURN_IF_ERROR(RunKeyStep(
      StoreMethod::STORE_GET, /*idempotent=*/true, key,
      [](cell::proto::KeyRequest* request) { request->set_with_meta(true); }, deadline, &reply));
  *value = std::move(*reply.mutable_value());
  *meta = btree::RecordMeta{reply.version(), reply.checksum(), reply.locked()};
  return Status::OK();
}

Status StoreClient::ScanWithMeta(std::string_view start, std::string_view end, size_t limit, Side side,
                                 std::vector<btree::KeyValue>* out, Deadline deadline) {
  return ScanRange(start, end, limit, btree::ScanMode{.report_locks = true}, side, deadline, out);
}

}  // namespace cell::client
