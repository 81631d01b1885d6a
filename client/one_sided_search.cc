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
#include "client/read_router.h"
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
                         (side == Side::kSelector &&
                          SearchOnServer(measure_ ? cached : GlobalPtr(), /*may_block=*/true, &server, Decider::kScan));
  const auto begin = Clock::now();  // after the decision, which may have looked the region's owner up
  (on_server ? stats_.server_searches : stats_.client_searches).fetch_add(1, std::memory_order_relaxed);
  Status s = on_server ? ScanServerSide(start, end, limit, mode, cached, deadline, out)
                       : ScanClientSide(start, end, limit, mode, cached, deadline, out);
  if (server != 0 && s.ok()) {  // the scans' selector measures both sides (a client-side scan as one read)
    const double us = MicrosBetween(begin, Clock::now());
    if (on_server) {
      scan_selector_->OnServerSearch(server, us, SelectorMicros());
    } else {
      scan_selector_->OnRead(server, us, SelectorMicros());
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
       !SearchOnServer(measure_ ? at : GlobalPtr(), /*may_block=*/true, &server, Decider::kFollow))) {
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
  const bool on_server = side == Side::kServer ||
                         (side == Side::kSelector && SearchOnServer(measure_ ? paths_.Lookup(key) : GlobalPtr(),
                                                                    /*may_block=*/true, &server, Decider::kFollow));
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
