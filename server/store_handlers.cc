// How a StoreService answers requests: the store's own (get, put, delete, scan, stats) from clients, each checked
// against the region and epoch it names before the tree is searched (the MEGA_* requests of other servers are passed
// to HandlePeer, peer_handlers.cc). Every answer passes the lease check as it is sent (StoreService::MayAnswer;
// docs/DESIGN.md, "Ownership").
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <string_view>

#include "btree/key.h"
#include "cell/limits.h"
#include "common/key_limits.h"
#include "common/lent.h"
#include "rpc/proto/store.pb.h"
#include "rpc/store_wire.h"
#include "server/store_service.h"

namespace cell::server {

using proto::StoreMethod;

bool ParseStoreRequest(std::string_view bytes, google::protobuf::MessageLite* request, rpc::Responder& responder) {
  if (request->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return true;
  responder.Fail(Status::InvalidArgument(fmt::format("malformed store request ({} bytes)", bytes.size())));
  return false;
}

namespace {
constexpr size_t kScanReplyBytes = size_t{4} << 20;
constexpr size_t kScanReplyPairs = 10000;
constexpr size_t kScanBatch = 64;
constexpr int kMultiGetKeys = 10000;

bool IsWrite(uint16_t method) {
  switch (method) {
    case StoreMethod::STORE_PUT:
    case StoreMethod::STORE_DELETE:
    case StoreMethod::STORE_CAS:
    case StoreMethod::TXN_PREPARE:
    case StoreMethod::TXN_DECIDE:
    case StoreMethod::TXN_APPLY:
    case StoreMethod::TXN_COMMIT_HERE:
      return true;
    default:
      return false;
  }
}

// Busy, not asleep: the time is the worker's CPU, so requests queue behind it as behind a real search.
void BurnCpu(double microseconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(microseconds);
  while (std::chrono::steady_clock::now() < until) {
  }
}

Status AnswerGet(meganode::GlobalTree& tree, const proto::KeyRequest& request, GlobalPtr start,
                 proto::StoreReply* reply, btree::MeganodeRange* range) {
  // Read straight into the reply (a worker's reply message keeps its value's memory: StoreService::Handle).
  std::string* value = reply->mutable_value();
  GlobalPtr elsewhere;
  btree::RecordMeta meta;
  Status s = tree.Get(request.key(), value, start, &elsewhere, range, request.with_meta() ? &meta : nullptr);
  if (elsewhere.is_null() && s.ok()) {
    reply->set_found(true);
    reply->set_version(meta.version);
    reply->set_checksum(meta.checksum);
    reply->set_locked(meta.locked);
    return Status::OK();
  }
  value->clear();
  if (!elsewhere.is_null()) {
    reply->set_elsewhere(elsewhere.Pack());
  } else if (!s.IsNotFound()) {
    return s;
  }
  return Status::OK();
}

// Each key as AnswerGet would, until the reply holds kScanReplyBytes of values (the rest: `later`). A key's own failure
// (a bad start, a lock) is its result's error; the others are still answered.
Status AnswerMultiGet(meganode::GlobalTree& tree, const proto::MultiGetRequest& request, proto::StoreReply* reply) {
  if (request.keys_size() != request.meganodes_size() || request.keys_size() > kMultiGetKeys) {
    return Status::InvalidArgument(fmt::format("a multi-get sends as many meganodes as keys, at most {} ({} and {})",
                                               kMultiGetKeys, request.keys_size(), request.meganodes_size()));
  }
  size_t bytes = 0;
  for (int i = 0; i < request.keys_size(); ++i) {
    proto::GetResult* out = reply->add_gets();
    if (bytes >= kScanReplyBytes) {
      out->set_later(true);
      continue;
    }
    const std::string& key = request.keys(i);
    const GlobalPtr start = GlobalPtr::Unpack(request.meganodes(i));
    Status s = CheckKeyValue(key, {});
    if (s.ok() && request.meganodes(i) != 0 &&
        (start.region != request.target().region() || !tree.IsMeganodeAddress(start))) {
      s = Status::InvalidArgument(fmt::format("key {} begins at {}:{}, no meganode of region {}", i, start.region,
                                              start.offset, request.target().region()));
    }
    std::string value;
    GlobalPtr elsewhere;
    btree::MeganodeRange range;
    range.meganode = start;
    if (s.ok()) s = tree.Get(key, &value, start, &elsewhere, &range);
    if (!elsewhere.is_null()) {
      out->set_elsewhere(elsewhere.Pack());
    } else if (s.ok()) {
      bytes += key.size() + value.size();
      out->set_found(true);
      out->set_value(std::move(value));
    } else if (!s.IsNotFound()) {
      out->set_error(s.ToString());
    }
    if (!range.meganode.is_null() && !(range.meganode == start)) {
      out->set_leaf(range.meganode.Pack());
      out->set_leaf_min(std::move(range.min));
      out->set_leaf_max(std::move(range.max));
    }
  }
  return Status::OK();
}

Status AnswerPut(meganode::GlobalTree& tree, uint64_t server_id, const proto::KeyRequest& request, GlobalPtr start,
                 proto::StoreReply* reply, btree::MeganodeRange* range) {
  GlobalPtr elsewhere;
  Status s = tree.Put(request.key(), request.value(), start, &elsewhere, range);
  if (s.IsResourceExhausted() || s.IsUnavailable()) {
    s = Status::FromCode(s.code(), fmt::format("server {}: {}", server_id, s.message()));
  }
  if (!s.ok()) return s;
  if (!elsewhere.is_null()) reply->set_elsewhere(elsewhere.Pack());
  return Status::OK();
}

Status AnswerDelete(meganode::GlobalTree& tree, const proto::KeyRequest& request, GlobalPtr start,
                    proto::StoreReply* reply, btree::MeganodeRange* range) {
  GlobalPtr elsewhere;
  Status s = tree.Delete(request.key(), start, &elsewhere, range);
  if (!elsewhere.is_null()) {
    reply->set_elsewhere(elsewhere.Pack());
  } else if (s.ok()) {
    reply->set_found(true);
  } else if (!s.IsNotFound()) {
    return s;
  }
  return Status::OK();
}

// A transaction whose keys are all here (TXN_COMMIT_HERE). Every field is checked before anything is done.
Status AnswerCommitHere(meganode::GlobalTree& tree, const proto::KeyRequest& request, GlobalPtr start,
                        proto::StoreReply* reply) {
  const proto::TxnCommit& c = request.commit();
  if (c.writes_size() == 0 || c.writes(0).key() != request.key() || c.txid() == 0) {
    return Status::InvalidArgument("a transaction committed here names its first written key, and a nonzero id");
  }
  // A walk begins at a meganode of this server the client named, else at the root.
  const auto begin = [&](uint64_t packed) {
    const GlobalPtr p = GlobalPtr::Unpack(packed);
    return packed != 0 && tree.IsMeganodeAddress(p) ? p : GlobalPtr();
  };
  meganode::HereTxn t;
  t.txid = c.txid();
  t.expires_us = c.expires_us();
  for (const auto& w : c.writes()) {
    if (w.expect() > 2) return Status::InvalidArgument(fmt::format("unknown expectation {}", w.expect()));
    if (!t.writes.empty() && btree::CompareKeys(t.writes.back().key, w.key()) >= 0) {
      return Status::InvalidArgument("a transaction's writes come in key order, each key once");
    }
    t.writes.push_back({w.key(), begin(w.meganode()), static_cast<meganode::TxnPrepareRequest::Expect>(w.expect()),
                        w.checksum(), w.put(), w.value()});
  }
  t.writes[0].start = start;
  for (const auto& r : c.reads()) t.reads.push_back({r.key(), begin(r.meganode()), r.found(), r.checksum()});
  for (const auto& r : c.ranges()) {
    if (r.start().size() > kMaxKeySize || r.end().size() > kMaxKeySize) {
      return Status::InvalidArgument(fmt::format("a range's bounds are at most {} bytes", kMaxKeySize));
    }
    meganode::HereTxn::Range range{r.start(), r.end(), begin(r.meganode()), {}};
    for (const auto& kv : r.seen()) range.seen.emplace(kv.key(), kv.checksum());
    t.ranges.push_back(std::move(range));
  }
  std::string conflict_key;
  bool apply_left = false, rollback_left = false;
  Status s = tree.CommitHere(t, &conflict_key, &apply_left, &rollback_left);
  if (s.ok()) {
    reply->set_committed(true);
    reply->set_apply_left(apply_left);
  } else if (s.IsAborted()) {
    reply->set_conflict(s.message());
    reply->set_conflict_key(conflict_key);
    reply->set_rollback_left(rollback_left);
  } else if (s.code() == Status::Code::kFailedPrecondition) {
    reply->set_not_here(true);
  } else {
    return s;
  }
  return Status::OK();
}

// A conditional write or a transaction's step: the outcome a client acts on (a conflict) goes in the reply; errors
// (a locked key: Unavailable, retried) are the RPC's.
Status AnswerTxn(meganode::GlobalTree& tree, uint16_t method, const proto::KeyRequest& request, GlobalPtr start,
                 proto::StoreReply* reply, btree::MeganodeRange* range) {
  GlobalPtr elsewhere;
  const proto::TxnStep& txn = request.txn();
  Status s;
  switch (method) {
    case StoreMethod::STORE_CAS: {
      std::optional<std::string_view> expected, value;
      if (!request.expect_absent()) expected = request.expected();
      if (!request.delete_()) value = request.value();
      s = tree.CompareAndSwap(request.key(), expected, value, start, &elsewhere, range);
      if (s.code() == Status::Code::kFailedPrecondition) {
        reply->set_conflict(s.message());
        s = Status::OK();
      }
      break;
    }
    case StoreMethod::TXN_PREPARE: {
      if (txn.expect() > 2) return Status::InvalidArgument(fmt::format("unknown expectation {}", txn.expect()));
      meganode::TxnPrepareRequest r;
      r.key = request.key();
      r.expect = static_cast<meganode::TxnPrepareRequest::Expect>(txn.expect());
      r.checksum = txn.checksum();
      r.lock.txid = txn.txid();
      r.lock.expires_us = txn.expires_us();
      r.lock.put = txn.put();
      if (txn.put()) r.lock.new_value = request.value();
      r.lock.primary = txn.primary();
      r.lock.secondaries.assign(txn.secondaries().begin(), txn.secondaries().end());
      s = tree.TxnPrepare(r, start, &elsewhere, range);
      if (s.IsAborted()) {
        reply->set_conflict(s.message());
        s = Status::OK();
      }
      break;
    }
    case StoreMethod::TXN_DECIDE: {
      bool committed = false;
      s = tree.TxnDecide(request.key(), txn.txid(), start, &elsewhere, &committed, range);
      reply->set_committed(committed);
      break;
    }
    case StoreMethod::TXN_APPLY:
      s = tree.TxnApply(request.key(), txn.txid(), txn.commit(), start, &elsewhere, range);
      break;
    case StoreMethod::TXN_STATUS: {
      meganode::TxnOutcome outcome = meganode::TxnOutcome::kNotLocked;
      s = tree.TxnStatus(request.key(), txn.txid(), start, &elsewhere, &outcome);
      reply->set_txn_outcome(static_cast<uint32_t>(outcome));
      break;
    }
    default:
      return Status::InvalidArgument(fmt::format("unknown store method {}", method));
  }
  if (!s.ok()) return s;
  if (!elsewhere.is_null()) reply->set_elsewhere(elsewhere.Pack());
  return Status::OK();
}

Status AnswerScan(meganode::GlobalTree& tree, const proto::ScanRequest& request, GlobalPtr start,
                  proto::StoreReply* reply) {
  if (request.limit() == 0) return Status::InvalidArgument("a scan needs a limit > 0");
  // One reply carries at most kScanReplyBytes of pairs (at least one) and kScanReplyPairs pairs; `more` tells the
  // client to go on after the last key. Read in small batches, so that big values are not read only to be cut.
  const size_t limit = std::min<size_t>(request.limit(), kScanReplyPairs);
  const bool reverse = request.reverse();
  const btree::ScanMode mode{.report_locks = request.with_meta(), .keys_only = request.keys_only(), .reverse = reverse};
  // What is left: [from, upper) (upper empty: no bound). A forward scan moves `from` up, a reverse one `upper` down.
  std::string from = request.start(), upper = request.end();
  size_t bytes = 0, pairs = 0;
  bool finished = false;
  GlobalPtr elsewhere;
  while (pairs < limit && bytes < kScanReplyBytes) {
    std::vector<btree::KeyValue> batch;
    const size_t want = std::min<size_t>(kScanBatch, limit - pairs);
    std::string resume;
    CELL_RETURN_IF_ERROR(tree.Scan(from, upper, want, &batch, start, &elsewhere, &resume, mode));
    for (auto& kv : batch) {
      bytes += kv.key.size() + kv.value.size();
      proto::KeyValue* out = reply->add_pairs();
      out->set_key(std::move(kv.key));
      out->set_value(std::move(kv.value));
      if (request.with_meta()) {
        out->set_version(kv.version);
        out->set_checksum(kv.checksum);
        out->set_locked(kv.locked);
      }
      ++pairs;
    }
    if (!elsewhere.is_null()) {  // the rest of the range begins on another server
      (reverse ? upper : from) = std::move(resume);
      break;
    }
    if (batch.size() < want) {
      finished = true;  // the range ran out
      break;
    }
    const std::string& last = reply->pairs(reply->pairs_size() - 1).key();
    if (reverse) {
      upper = last;
    } else if (!btree::Successor(last, &from)) {
      finished = true;  // the key space ran out
      break;
    }
  }
  if (!elsewhere.is_null() && pairs < request.limit()) {
    reply->set_elsewhere(elsewhere.Pack());
    reply->set_more(true);
  } else {
    reply->set_more(!finished && pairs < request.limit());
  }
  if (reply->more()) reply->set_resume(reverse ? upper : from);
  return Status::OK();
}
Status AnswerApproximateSize(meganode::GlobalTree& tree, const proto::ScanRequest& request, GlobalPtr start,
                             proto::StoreReply* reply) {
  btree::SizeEstimate estimate;
  GlobalPtr elsewhere;
  std::string resume;
  CELL_RETURN_IF_ERROR(tree.ApproximateSize(request.start(), request.end(), &estimate, start, &elsewhere, &resume));
  reply->set_size_keys(estimate.keys);
  reply->set_size_bytes(estimate.bytes);
  if (!elsewhere.is_null()) {  // the rest of the range begins on another server
    reply->set_elsewhere(elsewhere.Pack());
    reply->set_more(true);
    reply->set_resume(std::move(resume));
  }
  return Status::OK();
}

// The users of a worker's lent objects (common/lent.h).
struct RequestTag;
struct ReplyTag;
struct ReplyBytesTag;
}  // namespace

// A get, put, delete or scan, parsed.
struct StoreService::StoreRequest {
  uint16_t method = 0;
  proto::KeyRequest key_request;  // get, put, delete
  proto::ScanRequest scan_request;
  proto::MultiGetRequest multi_get;
  const proto::Target* target = nullptr;
  uint64_t packed_start = 0;  // the meganode the client begins at (0: the tree's first)
  GlobalPtr start;
  bool want_range = false;  // a key request's

  // Sets every field above that `method` uses (a worker reuses its StoreRequest: StoreService::Handle).
  bool Parse(std::string_view request, rpc::Responder& responder) {
    packed_start = 0;
    want_range = false;
    if (method == StoreMethod::STORE_SCAN || method == StoreMethod::STORE_APPROXIMATE_SIZE) {
      if (!ParseStoreRequest(request, &scan_request, responder)) return false;
      target = &scan_request.target();
      packed_start = scan_request.meganode();
    } else if (method == StoreMethod::STORE_MULTI_GET) {
      if (!ParseStoreRequest(request, &multi_get, responder)) return false;
      target = &multi_get.target();  // each key names its own start
    } else {
      // A plain get, put or delete is read by hand (rpc/store_wire.h); anything more by protobuf.
      if (!rpc::ParsePlainKeyRequest(request, &key_request) && !ParseStoreRequest(request, &key_request, responder)) {
        return false;
      }
      target = &key_request.target();
      packed_start = key_request.meganode();
      want_range = key_request.want_range();
    }
    start = GlobalPtr::Unpack(packed_start);
    return true;
  }
};

void StoreService::Handle(uint16_t method, std::string_view request, rpc::Responder responder, bool serving,
                          const std::function<Status()>* lease) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  if (method == StoreMethod::STORE_STATS) return responder.Reply(Stats());
  if (IsPeerMethod(method)) {
    if (!serving) {
      return responder.Fail(Status::Unavailable(fmt::format("server {} is not serving; retry", server_id_)));
    }
    if (lost_.load(std::memory_order_acquire)) {
      return responder.Fail(Status::Unavailable(fmt::format(
          "server {} no longer holds region {}; retry with the region table's owner", server_id_, node_region_)));
    }
    return HandlePeer(method, request, std::move(responder), lease);
  }
  // This worker's request, reply and reply bytes (common/lent.h): their strings keep their memory from one request to
  // the next, and a large one is made afresh after it. Scans and multi-gets, whose repeated fields would keep their
  // elements, use fresh messages.
  const bool keyed = method != StoreMethod::STORE_SCAN && method != StoreMethod::STORE_APPROXIMATE_SIZE &&
                     method != StoreMethod::STORE_MULTI_GET;
  Lent<StoreRequest, RequestTag> lent_request(keyed);
  StoreRequest& r = *lent_request;
  if (request.size() > kLentKeepBytes) lent_request.Shrink();
  r.method = method;
  if (!r.Parse(request, responder) || !Admit(r, serving, responder)) return;
  // The leaf meganode that answered, for the client's path cache, unless it is the one the client began at (and it
  // did not ask).
  btree::MeganodeRange range;
  const GlobalPtr known = r.want_range ? GlobalPtr() : r.start;
  range.meganode = known;
  if (search_cpu_us_ > 0) BurnCpu(search_cpu_us_);  // every method from here on searches the tree
  Lent<proto::StoreReply, ReplyTag> lent_reply(keyed);
  proto::StoreReply& reply = *lent_reply;
  reply.Clear();
  if (Status s = Answer(r, &reply, &range); !s.ok()) return responder.Fail(s);
  if (reply.elsewhere() != 0) redirects_.fetch_add(1, std::memory_order_relaxed);
  if (!range.meganode.is_null() && !(range.meganode == known)) {
    reply.set_leaf(range.meganode.Pack());
    reply.set_leaf_min(std::move(range.min));
    reply.set_leaf_max(std::move(range.max));
  }
  Lent<std::string, ReplyBytesTag> bytes;
  if (method == StoreMethod::STORE_GET || method == StoreMethod::STORE_PUT || method == StoreMethod::STORE_DELETE) {
    bytes->clear();
    rpc::AppendKeyReply(reply, &*bytes);  // their answers set only a key reply's fields (rpc/store_wire.h)
  } else {
    reply.SerializeToString(&*bytes);
  }
  if (bytes->size() > kLentKeepBytes) {
    lent_reply.Shrink();
    bytes.Shrink();
  }
  SendUnderLease(method, *bytes, lease, std::move(responder));
}

std::string StoreService::Stats() const { return StatsMessage().SerializeAsString(); }

proto::StoreStats StoreService::StatsMessage() const {
  proto::StoreStats stats;
  stats.set_server(server_id_);
  stats.set_meganodes(store_->meganodes_in_use());
  stats.set_meganode_splits(store_->stats().splits.load());
  stats.set_root_splits(store_->stats().root_splits.load());
  stats.set_requests(requests_.load(std::memory_order_relaxed));
  stats.set_extent_bytes_used(store_->extent_bytes_used());
  stats.set_remote_splits(store_->stats().remote_splits.load());
  stats.set_redirects(redirects_.load(std::memory_order_relaxed));
  stats.set_held_writes(store_->stats().held_writes.load());
  stats.set_node_bytes_used(store_->node_bytes_used());
  stats.set_node_bytes_free(store_->node_bytes_capacity() - store_->node_bytes_used());
  stats.set_extent_bytes_free(store_->extent_bytes_capacity() - store_->extent_bytes_used());
  stats.set_room_splits(store_->stats().room_splits.load());
  stats.set_txn_locks(store_->txn_locks());
  stats.set_txn_resolved(store_->stats().txn_resolved.load());
  return stats;
}

bool StoreService::Admit(const StoreRequest& r, bool serving, rpc::Responder& responder) {
  const proto::Target& target = *r.target;
  if (r.packed_start != 0 && r.start.region != target.region()) {
    responder.Fail(
        Status::InvalidArgument(fmt::format("the request begins at meganode {}:{}, outside its target region {}",
                                            r.start.region, r.start.offset, target.region())));
    return false;
  }
  const uint64_t epoch = epoch_.load(std::memory_order_acquire);
  if (target.region() != node_region_ || target.epoch() > epoch || lost_.load(std::memory_order_acquire)) {
    proto::StoreReply reply;
    reply.mutable_wrong_owner()->set_region(target.region());
    reply.mutable_wrong_owner()->set_epoch(target.region() == node_region_ ? epoch : 0);
    responder.Reply(reply.SerializeAsString());
    return false;
  }
  Status refused;
  if (!serving) {
    refused = Status::Unavailable(fmt::format(
        "server {} is not serving: it lost touch with the membership or is registering again; retry", server_id_));
  } else if (r.packed_start != 0 && !store_->IsMeganodeAddress(r.start)) {
    refused =
        Status::InvalidArgument(fmt::format("the request begins at {}:{}, which is no meganode's address on server {}",
                                            r.start.region, r.start.offset, server_id_));
  } else if ((r.method == StoreMethod::STORE_SCAN || r.method == StoreMethod::STORE_APPROXIMATE_SIZE) &&
             (r.scan_request.start().size() > kMaxKeySize || r.scan_request.end().size() > kMaxKeySize)) {
    refused =
        Status::InvalidArgument(fmt::format("a scan's start and end keys are at most {} bytes (these are {} and {})",
                                            kMaxKeySize, r.scan_request.start().size(), r.scan_request.end().size()));
  }
  if (refused.ok()) return true;
  responder.Fail(refused);
  return false;
}

Status StoreService::Answer(const StoreRequest& r, proto::StoreReply* reply, btree::MeganodeRange* range) {
  switch (r.method) {
    case StoreMethod::STORE_GET:
      return AnswerGet(*store_, r.key_request, r.start, reply, range);
    case StoreMethod::STORE_PUT:
      return AnswerPut(*store_, server_id_, r.key_request, r.start, reply, range);
    case StoreMethod::STORE_DELETE:
      return AnswerDelete(*store_, r.key_request, r.start, reply, range);
    case StoreMethod::STORE_SCAN:
      return AnswerScan(*store_, r.scan_request, r.start, reply);
    case StoreMethod::STORE_MULTI_GET:
      return AnswerMultiGet(*store_, r.multi_get, reply);
    case StoreMethod::STORE_APPROXIMATE_SIZE:
      return AnswerApproximateSize(*store_, r.scan_request, r.start, reply);
    case StoreMethod::STORE_CAS:
    case StoreMethod::TXN_PREPARE:
    case StoreMethod::TXN_DECIDE:
    case StoreMethod::TXN_APPLY:
    case StoreMethod::TXN_STATUS:
      return AnswerTxn(*store_, r.method, r.key_request, r.start, reply, range);
    case StoreMethod::TXN_COMMIT_HERE:
      return AnswerCommitHere(*store_, r.key_request, r.start, reply);
    default:
      return Status::InvalidArgument(fmt::format("unknown store method {}", r.method));
  }
}

void StoreService::SendUnderLease(uint16_t method, std::string_view reply, const std::function<Status()>* lease,
                                  rpc::Responder responder) {
  if (logger_ != nullptr && method == StoreMethod::TXN_APPLY) {
    // Durable before it is answered, whatever the durability: the transaction's primary is released only after every
    // secondary's apply is durable (a lost one would read as "aborted" after a crash).
    if (Status s = Commit(/*flush=*/true); !s.ok()) return responder.Fail(NotLogged(s));
  }
  if (logger_ != nullptr && IsWrite(method)) {
    // Acknowledged only once durable (sync), or at once (async: on disk within the flush interval). The reply waits
    // for the fdatasync on the log's committer thread; this worker goes on to its next request (group commit).
    logger_->CommitThen(
        [this, lease, responder = std::move(responder), bytes = std::string(reply)](const Status& s) mutable {
          if (!s.ok()) return responder.Fail(NotLogged(s));
          // Acknowledged only under a lease that is still valid now that the write is durable: a server that was paused
          // meanwhile past its session may have been taken over, and its client must not count this write as done.
          if (Status may = MayAnswer(lease); !may.ok()) return responder.Reply(NotAcknowledged(may));
          responder.Reply(bytes);
        });
    return;
  }
  if (Status may = MayAnswer(lease); !may.ok()) {
    if (IsWrite(method)) return responder.Reply(NotAcknowledged(may));  // made in memory already
    return responder.Fail(may);
  }
  responder.Reply(reply);
}

}  // namespace cell::server
