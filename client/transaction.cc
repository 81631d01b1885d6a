// Transactions at the client: optimistic execution (reads recorded with what validation needs, writes buffered), then
// the commit that coordinates the servers (docs/DESIGN.md, "Transactions"):
//   1. prepare: every written key is locked at its server, if it is as the transaction read it (TXN_PREPARE);
//   2. validate: every other key read, and every range scanned, is read again, unchanged and unlocked;
//   3. decide: the primary (the first written key) turns committed (TXN_DECIDE): the transaction has committed;
//   4. apply: every secondary takes its new value (TXN_APPLY, durable), then the primary.
// A conflict in 1 or 2 rolls the locks back (TXN_APPLY with commit false). A client that goes away leaves its locks
// to the servers' resolvers, which end them once they expire.
#include "client/transaction.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "btree/key.h"
#include "cell/client.h"
#include "client/paged_iterator.h"
#include "client/store_client_internal.h"
#include "common/key_limits.h"
#include "common/txn_check.h"
#include "common/wall_clock.h"
#include "rpc/proto/store.pb.h"

namespace cell::client {

namespace {

using proto::StoreMethod;
using Side = StoreClient::Side;
using Deadline = StoreClient::Deadline;

// How long a read waits for a key another transaction is committing before the transaction gives up (Aborted).
constexpr auto kLockWait = std::chrono::milliseconds(200);
// A lock expires this long after the transaction's deadline: the servers resolve it only then.
constexpr auto kLockGrace = std::chrono::seconds(1);

uint64_t NewTxid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t id = 0;
  while (id == 0) id = rng();
  return id;
}

std::string Quoted(std::string_view key) { return fmt::format("'{}'", key.substr(0, 64)); }

bool InRange(std::string_view key, std::string_view start, std::string_view end) {
  return btree::CompareKeys(key, start) >= 0 && (end.empty() || btree::CompareKeys(key, end) < 0);
}

class TransactionImpl final : public Transaction {
 public:
  TransactionImpl(StoreClient& store, const TransactionOptions& options, Side side)
      : store_(store),
        read_only_(options.read_only),
        side_(side),
        timeout_(options.timeout.count() > 0 ? options.timeout : store.timeout()),
        deadline_(std::chrono::steady_clock::now() + timeout_) {}
  ~TransactionImpl() override {
    if (state_ == State::kOpen) Rollback();
  }

  Status Get(std::string_view key, std::string* value) override;
  Status Scan(std::string_view start, std::string_view end, size_t limit,
              std::vector<std::pair<std::string, std::string>>* out) override {
    return ScanRange(start, end, limit, /*reverse=*/false, out);
  }
  Status ScanReverse(std::string_view start, std::string_view end, size_t limit,
                     std::vector<std::pair<std::string, std::string>>* out) override {
    return ScanRange(start, end, limit, /*reverse=*/true, out);
  }
  std::unique_ptr<Iterator> NewIterator(const IteratorOptions& options) override;
  Status Put(std::string_view key, std::string_view value) override { return Write(key, std::string(value)); }
  Status Delete(std::string_view key) override { return Write(key, std::nullopt); }
  Status Commit() override;
  void CommitAsync(std::function<void(const Status&)> done) override;
  void Rollback() override {
    state_ = State::kDone;
    writes_.clear();
  }
  const std::string& conflict_key() const override { return conflict_key_; }

  // A batch: writes only, no reads (Client::Write).
  Status Write(std::string_view key, std::optional<std::string> value);

 private:
  enum class State { kOpen, kDone };
  struct Read {
    bool found = false;
    uint64_t checksum = 0;
  };
  struct Range {
    std::string start, end;  // [start, end), end empty: no bound; a scan cut by its limit ends after its last pair
    std::map<std::string, uint64_t> seen;  // the store's keys in it, with their checksums
  };

  Status Usable() const {
    if (state_ != State::kOpen) return Status::FailedPrecondition("the transaction has committed or rolled back");
    if (std::chrono::steady_clock::now() >= deadline_) {
      return Status::DeadlineExceeded(fmt::format("the transaction's timeout ({} ms) has passed", timeout_.count()));
    }
    return Status::OK();
  }
  Status Conflict(std::string_view key, std::string_view why) {
    conflict_key_ = std::string(key);
    return Status::Aborted(fmt::format("transaction aborted: key {} {}; run it again", Quoted(key), why));
  }
  // A read of the store, waiting a little for a key another transaction is committing.
  Status ReadStore(std::string_view key, std::string* value, btree::RecordMeta* meta);
  Status ScanStore(std::string_view start, std::string_view end, size_t limit, bool reverse,
                   std::vector<btree::KeyValue>* out);
  // Scan and ScanReverse: the store's pairs with this transaction's writes over them, the range read recorded.
  Status ScanRange(std::string_view start, std::string_view end, size_t limit, bool reverse,
                   std::vector<std::pair<std::string, std::string>>* out);
  // Keeps a range read, after checking it agrees with every earlier read (else Aborted).
  Status RecordRange(Range range);
  // Step 2: reads of keys not written, and ranges, unchanged (own locks are the written keys, checked at prepare).
  Status Validate();
  // What the transaction read of a key it writes, for its prepare: 0 nothing, 1 absent, 2 the checksum.
  uint32_t Expectation(const std::string& key, uint64_t* checksum) const;
  // Aborted if the key was read before (a get, or a scan over it) as another version than (found, checksum).
  Status SameAsBefore(std::string_view key, bool found, uint64_t checksum);
  Status CommitWrites();
  // Step 1: locks every written key (the first, the primary, naming the others); OK, or why not (a conflict).
  Status PrepareAll(uint64_t txid, uint64_t expires, const std::vector<std::string>& keys);
  // Whether every key seems to be on one server (by the path cache); then CommitHere tries that server, which commits
  // it in one step or says *not_here (nothing done).
  bool OneServer();
  Status CommitHere(uint64_t txid, uint64_t expires, const std::vector<std::string>& keys, bool* not_here);
  // Step 4 of a decided commit: TXN_APPLY at every secondary, then (if all took it) at the primary.
  void ApplyCommitted(uint64_t txid, const std::vector<std::string>& keys);
  void RollBack(uint64_t txid, const std::vector<std::string>& keys);

  StoreClient& store_;
  const bool read_only_;
  const Side side_;
  const std::chrono::milliseconds timeout_;
  const Deadline deadline_;
  State state_ = State::kOpen;
  std::map<std::string, Read> reads_;
  std::vector<Range> ranges_;
  std::map<std::string, std::optional<std::string>> writes_;  // nullopt: delete
  size_t write_bytes_ = 0;
  size_t read_count_ = 0;
  std::string conflict_key_;
};

Status TransactionImpl::ReadStore(std::string_view key, std::string* value, btree::RecordMeta* meta) {
  const auto give_up = std::min(deadline_, std::chrono::steady_clock::now() + kLockWait);
  auto pause = std::chrono::microseconds(200);
  while (true) {
    Status s = store_.GetWithMeta(key, side_, value, meta, deadline_);
    if (!s.ok() || !meta->locked) return s;
    if (std::chrono::steady_clock::now() + pause >= give_up) return Conflict(key, "is locked by another transaction");
    std::this_thread::sleep_for(pause);  // a back-off while another transaction commits the key
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

Status TransactionImpl::Get(std::string_view key, std::string* value) {
  CELL_RETURN_IF_ERROR(Usable());
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, {}));
  if (auto w = writes_.find(std::string(key)); w != writes_.end()) {
    if (!w->second) return Status::NotFound(fmt::format("no key {} (this transaction deleted it)", Quoted(key)));
    *value = *w->second;
    return Status::OK();
  }
  if (++read_count_ > kMaxTransactionReads) {
    return Status::InvalidArgument(fmt::format("a transaction reads at most {} keys", kMaxTransactionReads));
  }
  btree::RecordMeta meta;
  Status s = ReadStore(key, value, &meta);
  if (!s.ok() && !s.IsNotFound()) return s;
  CELL_RETURN_IF_ERROR(SameAsBefore(key, s.ok(), s.ok() ? meta.checksum : 0));
  reads_.emplace(std::string(key), Read{s.ok(), s.ok() ? meta.checksum : 0});
  return s;
}

Status TransactionImpl::ScanStore(std::string_view start, std::string_view end, size_t limit, bool reverse,
                                  std::vector<btree::KeyValue>* out) {
  const auto give_up = std::min(deadline_, std::chrono::steady_clock::now() + kLockWait);
  auto pause = std::chrono::microseconds(200);
  while (true) {
    out->clear();
    CELL_RETURN_IF_ERROR(store_.ScanRange(start, end, limit, btree::ScanMode{.report_locks = true, .reverse = reverse},
                                          side_, deadline_, out));
    const auto locked = std::find_if(out->begin(), out->end(), [](const btree::KeyValue& kv) { return kv.locked; });
    if (locked == out->end()) return Status::OK();
    if (std::chrono::steady_clock::now() + pause >= give_up) {
      return Conflict(locked->key, "is locked by another transaction");
    }
    std::this_thread::sleep_for(pause);  // a back-off while another transaction commits the key
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

Status TransactionImpl::ScanRange(std::string_view start, std::string_view end, size_t limit, bool reverse,
                                  std::vector<std::pair<std::string, std::string>>* out) {
  CELL_RETURN_IF_ERROR(Usable());
  if (start.size() > kMaxKeySize || end.size() > kMaxKeySize) {
    return Status::InvalidArgument(fmt::format("scan bounds are at most {} bytes", kMaxKeySize));
  }
  if (limit == 0) return Status::OK();
  // Own deletes may hide store pairs: ask for that many more, so that `limit` pairs remain if the store has them.
  size_t hidden = 0;
  for (const auto& [k, v] : writes_) hidden += (!v && InRange(k, start, end)) ? 1 : 0;
  std::vector<btree::KeyValue> pairs;
  CELL_RETURN_IF_ERROR(ScanStore(start, end, limit + hidden, reverse, &pairs));
  read_count_ += pairs.size();
  if (read_count_ > kMaxTransactionReads) {
    return Status::InvalidArgument(fmt::format("a transaction reads at most {} keys", kMaxTransactionReads));
  }
  // The part of [start, end) the store's scan covered: all of it, or, cut short by the limit, up to its last pair
  // (forward: [start, last], reverse: [last, end)).
  Range range{std::string(start), std::string(end), {}};
  const bool store_cut = pairs.size() >= limit + hidden;
  if (store_cut && !pairs.empty()) {
    if (reverse) {
      range.start = pairs.back().key;
    } else {
      btree::Successor(pairs.back().key, &range.end);
    }
  }
  // The store's pairs with this transaction's writes over them, within what was covered.
  std::map<std::string, std::string> merged;
  for (auto& kv : pairs) merged.emplace(kv.key, std::move(kv.value));
  for (const auto& [k, v] : writes_) {
    if (!InRange(k, range.start, range.end)) continue;
    if (v) {
      merged[k] = *v;
    } else {
      merged.erase(k);
    }
  }
  // The first `limit` in the scan's order; a scan that returned `limit` pairs read only up to its last one.
  const size_t n = std::min(limit, merged.size());
  if (reverse) {
    auto it = merged.rbegin();
    for (size_t i = 0; i < n; ++i, ++it) out->emplace_back(it->first, it->second);
    if (n == limit && n > 0) range.start = std::prev(it)->first;
  } else {
    auto it = merged.begin();
    for (size_t i = 0; i < n; ++i, ++it) out->emplace_back(it->first, it->second);
    std::string after;
    if (n == limit && n > 0 && btree::Successor(std::prev(it)->first, &after)) {
      if (range.end.empty() || btree::CompareKeys(after, range.end) < 0) range.end = std::move(after);
    }
  }
  for (const auto& kv : pairs) {
    if (InRange(kv.key, range.start, range.end)) range.seen.emplace(kv.key, kv.checksum);
  }
  return RecordRange(std::move(range));
}

Status TransactionImpl::RecordRange(Range range) {
  // What this scan saw agrees with every earlier read of the same keys: those it saw, and those it saw absent.
  for (const auto& [k, checksum] : range.seen) CELL_RETURN_IF_ERROR(SameAsBefore(k, true, checksum));
  for (const auto& [k, read] : reads_) {
    if (read.found && InRange(k, range.start, range.end) && range.seen.count(k) == 0) {
      return Conflict(k, "changed between two reads of it (a read, then a scan)");
    }
  }
  for (const Range& earlier : ranges_) {
    for (const auto& [k, checksum] : earlier.seen) {
      if (InRange(k, range.start, range.end) && range.seen.count(k) == 0) {
        return Conflict(k, "changed between two scans of it");
      }
    }
  }
  ranges_.push_back(std::move(range));
  return Status::OK();
}

std::unique_ptr<Iterator> TransactionImpl::NewIterator(const IteratorOptions& options) {
  return NewPagedIterator(
      options,
      [this](std::string_view start, std::string_view end, size_t limit, bool reverse, Pairs* out) {
        return ScanRange(start, end, limit, reverse, out);
      },
      options.read.search.empty() && options.read.timeout.count() == 0
          ? Status::OK()
          : Status::InvalidArgument("a transaction's iterator reads as its transaction does: leave its ReadOptions "
                                    "empty (set TransactionOptions instead)"));
}

Status TransactionImpl::Write(std::string_view key, std::optional<std::string> value) {
  CELL_RETURN_IF_ERROR(Usable());
  if (read_only_) return Status::FailedPrecondition("a read-only transaction does not write");
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, value.value_or(std::string())));
  auto it = writes_.find(std::string(key));
  const size_t bytes = key.size() + (value ? value->size() : 0);
  if (it == writes_.end() && writes_.size() >= kMaxTransactionWrites) {
    return Status::InvalidArgument(fmt::format("a transaction writes at most {} keys", kMaxTransactionWrites));
  }
  const size_t before = it == writes_.end() ? 0 : key.size() + (it->second ? it->second->size() : 0);
  if (write_bytes_ - before + bytes > kMaxTransactionBytes) {
    return Status::InvalidArgument(
        fmt::format("a transaction writes at most {} bytes of keys and values", kMaxTransactionBytes));
  }
  write_bytes_ = write_bytes_ - before + bytes;
  writes_[std::string(key)] = std::move(value);
  return Status::OK();
}

Status TransactionImpl::SameAsBefore(std::string_view key, bool found, uint64_t checksum) {
  // A transaction must read one version of a key however often it reads it (a get, or a scan over it): a key that
  // changed between two of its reads means it saw two states (its commit would validate only the later one).
  const std::string k(key);
  if (auto r = reads_.find(k); r != reads_.end() && (r->second.found != found || r->second.checksum != checksum)) {
    return Conflict(key, "changed between two reads of it");
  }
  for (const Range& range : ranges_) {
    if (!InRange(key, range.start, range.end)) continue;
    const auto seen = range.seen.find(k);
    if ((seen != range.seen.end()) != found || (found && seen->second != checksum)) {
      return Conflict(key, "changed between two reads of it (a scan, then another read)");
    }
  }
  return Status::OK();
}

uint32_t TransactionImpl::Expectation(const std::string& key, uint64_t* checksum) const {
  if (auto r = reads_.find(key); r != reads_.end()) {
    *checksum = r->second.checksum;
    return r->second.found ? 2 : 1;
  }
  for (const Range& range : ranges_) {
    if (!InRange(key, range.start, range.end)) continue;
    if (auto seen = range.seen.find(key); seen != range.seen.end()) {
      *checksum = seen->second;
      return 2;
    }
    return 1;
  }
  return 0;
}

Status TransactionImpl::Validate() {
  for (const auto& [key, read] : reads_) {
    if (writes_.count(key) != 0) continue;  // checked by its prepare
    std::string value;
    btree::RecordMeta meta;
    Status s = store_.GetWithMeta(key, side_, &value, &meta, deadline_);
    if (!s.ok() && !s.IsNotFound()) return s;
    if (s.ok() && meta.locked) return Conflict(key, "is locked by another transaction");
    if (s.ok() != read.found || (s.ok() && meta.checksum != read.checksum)) {
      return Conflict(key, "was written since it was read");
    }
  }
  for (const Range& range : ranges_) {
    size_t own = 0;
    for (const auto& [k, v] : writes_) own += InRange(k, range.start, range.end) ? 1 : 0;
    std::vector<btree::KeyValue> now;
    CELL_RETURN_IF_ERROR(
        store_.ScanWithMeta(range.start, range.end, range.seen.size() + own + 1, side_, &now, deadline_));
    const auto changed = RangeChanged(range.seen, now, [this](const std::string& k) { return writes_.count(k) != 0; });
    if (changed) return Conflict(changed->key, changed->why);
  }
  return Status::OK();
}

void TransactionImpl::RollBack(uint64_t txid, const std::vector<std::string>& keys) {
  // Best effort: a lock left behind is rolled back by its server's resolver once it expires.
  store_.RunKeySteps(
      StoreMethod::TXN_APPLY, keys,
      [txid](size_t, proto::KeyRequest* r) {
        r->mutable_txn()->set_txid(txid);
        r->mutable_txn()->set_commit(false);
      },
      std::chrono::steady_clock::now() + store_.timeout());
}

Status TransactionImpl::PrepareAll(uint64_t txid, uint64_t expires, const std::vector<std::string>& keys) {
  std::vector<StoreClient::StepResult> prepared = store_.RunKeySteps(
      StoreMethod::TXN_PREPARE, keys,
      [&](size_t i, proto::KeyRequest* r) {
        proto::TxnStep* t = r->mutable_txn();
        t->set_txid(txid);
        uint64_t checksum = 0;
        t->set_expect(Expectation(keys[i], &checksum));
        t->set_checksum(checksum);
        const auto& value = writes_.at(keys[i]);
        t->set_put(value.has_value());
        if (value) r->set_value(*value);
        t->set_primary(keys[0]);
        t->set_expires_us(expires);
        if (i == 0) {
          for (size_t j = 1; j < keys.size(); ++j) t->add_secondaries(keys[j]);
        }
      },
      deadline_);
  Status failed;
  for (size_t i = 0; i < keys.size() && failed.ok(); ++i) {
    if (!prepared[i].status.ok()) {
      failed = prepared[i].status;
    } else if (!prepared[i].reply.conflict().empty()) {
      conflict_key_ = keys[i];
      failed = Status::Aborted(fmt::format("transaction aborted: {}; run it again", prepared[i].reply.conflict()));
    }
  }
  return failed;
}

Status TransactionImpl::CommitWrites() {
  const uint64_t txid = NewTxid();
  std::vector<std::string> keys;
  for (const auto& [k, v] : writes_) keys.push_back(k);  // in key order: the first is the primary
  const uint64_t expires =
      WallMicros() + static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                               deadline_ - std::chrono::steady_clock::now() + kLockGrace)
                                               .count());
  // All on one server (as far as the path cache knows): its server commits it in one step.
  if (OneServer()) {
    bool not_here = false;
    Status s = CommitHere(txid, expires, keys, &not_here);
    if (!not_here) return s;
  }
  // 1. Prepare.
  Status failed = PrepareAll(txid, expires, keys);
  // 2. Validate.
  if (failed.ok()) failed = Validate();
  if (failed.ok() && std::chrono::steady_clock::now() >= deadline_) {
    failed = Status::DeadlineExceeded(fmt::format("the transaction's timeout ({} ms) has passed", timeout_.count()));
  }
  if (!failed.ok()) {
    RollBack(txid, keys);
    return failed;
  }
  // 3. Decide.
  proto::StoreReply decided;
  Status s = store_.RunKeyStep(
      StoreMethod::TXN_DECIDE, /*idempotent=*/true, keys[0],
      [txid](proto::KeyRequest* r) { r->mutable_txn()->set_txid(txid); },
      std::chrono::steady_clock::now() + store_.timeout(), &decided);
  if (!s.ok()) {
    return Status::Unavailable(fmt::format(
        "the transaction's outcome is unknown (it may or may not have committed; its servers will finish it): {}",
        s.ToString()));
  }
  if (!decided.committed()) {
    RollBack(txid, keys);
    conflict_key_ = keys[0];
    return Status::Aborted("transaction aborted: its locks expired before it could commit; run it again");
  }
  // 4. Apply.
  ApplyCommitted(txid, keys);
  return Status::OK();
}

void TransactionImpl::ApplyCommitted(uint64_t txid, const std::vector<std::string>& keys) {
  // The secondaries (each durable when answered; a key not locked by the transaction any more is left alone), then
  // the primary. A failure leaves the locks to their servers' resolver, which finishes the commit.
  const auto apply = [txid](size_t, proto::KeyRequest* r) {
    r->mutable_txn()->set_txid(txid);
    r->mutable_txn()->set_commit(true);
  };
  const Deadline apply_deadline = std::chrono::steady_clock::now() + store_.timeout();
  std::vector<std::string> secondaries(keys.begin() + 1, keys.end());
  bool all = true;
  for (const StoreClient::StepResult& r :
       store_.RunKeySteps(StoreMethod::TXN_APPLY, secondaries, apply, apply_deadline)) {
    all = all && r.status.ok();
  }
  if (all) store_.RunKeySteps(StoreMethod::TXN_APPLY, {keys[0]}, apply, apply_deadline);
}

bool TransactionImpl::OneServer() {
  uint32_t region = 0;
  const auto same = [&](std::string_view key) {
    const GlobalPtr leaf = store_.CachedLeaf(key);
    if (leaf.is_null()) return true;  // not known: the server will say
    if (region == 0) region = leaf.region;
    return leaf.region == region;
  };
  for (const auto& [k, v] : writes_) {
    if (!same(k)) return false;
  }
  for (const auto& [k, r] : reads_) {
    if (!same(k)) return false;
  }
  for (const Range& range : ranges_) {
    if (!same(range.start)) return false;
  }
  return true;
}

Status TransactionImpl::CommitHere(uint64_t txid, uint64_t expires, const std::vector<std::string>& keys,
                                   bool* not_here) {
  proto::StoreReply reply;
  Status s = store_.RunKeyStep(
      StoreMethod::TXN_COMMIT_HERE, /*idempotent=*/false, keys[0],
      [&](proto::KeyRequest* r) {
        proto::TxnCommit* c = r->mutable_commit();
        c->set_txid(txid);
        c->set_expires_us(expires);
        for (const auto& [k, v] : writes_) {
          proto::TxnCommit::Write* w = c->add_writes();
          w->set_key(k);
          w->set_meganode(store_.CachedLeaf(k).Pack());
          uint64_t checksum = 0;
          w->set_expect(Expectation(k, &checksum));
          w->set_checksum(checksum);
          w->set_put(v.has_value());
          if (v) w->set_value(*v);
        }
        for (const auto& [k, read] : reads_) {
          if (writes_.count(k) != 0) continue;
          proto::TxnCommit::Read* out = c->add_reads();
          out->set_key(k);
          out->set_meganode(store_.CachedLeaf(k).Pack());
          out->set_found(read.found);
          out->set_checksum(read.checksum);
        }
        for (const Range& range : ranges_) {
          proto::TxnCommit::Range* out = c->add_ranges();
          out->set_start(range.start);
          out->set_end(range.end);
          out->set_meganode(store_.CachedLeaf(range.start).Pack());
          for (const auto& [k, checksum] : range.seen) {
            proto::KeyValue* kv = out->add_seen();
            kv->set_key(k);
            kv->set_checksum(checksum);
          }
        }
      },
      deadline_, &reply);
  *not_here = s.ok() && reply.not_here();
  if (!s.ok()) {
    if (s.IsUnavailable() || s.IsDeadlineExceeded()) {
      return Status::FromCode(s.code(), fmt::format("the transaction's outcome is unknown (it may or may not have "
                                                    "committed): {}",
                                                    s.message()));
    }
    return s;
  }
  if (!reply.conflict().empty()) {
    conflict_key_ = reply.conflict_key();
    // Not committed (the server decided so), so rolling back is safe; done now rather than left for the locks'
    // expiry, which writes of those keys would wait for.
    if (reply.rollback_left()) RollBack(txid, keys);
    return Status::Aborted(fmt::format("transaction aborted: {}; run it again", reply.conflict()));
  }
  if (*not_here) return Status::OK();
  if (!reply.committed()) return Status::Internal("a server answered a commit with no outcome");
  if (reply.apply_left()) ApplyCommitted(txid, keys);  // some keys could not take their values there and then
  return Status::OK();
}

Status TransactionImpl::Commit() {
  CELL_RETURN_IF_ERROR(Usable());
  CELL_RETURN_IF_ERROR(CheckMayWait());
  state_ = State::kDone;
  if (!writes_.empty()) return CommitWrites();
  // Read-only: one read is a consistent state by itself; more are validated.
  if (reads_.size() + ranges_.size() <= 1 && ranges_.empty()) return Status::OK();
  return Validate();
}

void TransactionImpl::CommitAsync(std::function<void(const Status&)> done) {
  // On a thread of its own: Commit waits for its steps' replies.
  std::thread([this, done = std::move(done)] { done(Commit()); }).detach();
}

}  // namespace

StatusOr<std::unique_ptr<Transaction>> NewTransaction(StoreClient& store, const TransactionOptions& options) {
  CELL_ASSIGN_OR_RETURN(const Side side, StoreClient::SideFor(options.search));
  if (options.timeout.count() < 0) return Status::InvalidArgument("a transaction's timeout is >= 0");
  return std::unique_ptr<Transaction>(std::make_unique<TransactionImpl>(store, options, side));
}

Status WriteBatchAtomically(StoreClient& store, const WriteBatch& batch) {
  if (batch.empty()) return Status::OK();
  TransactionImpl txn(store, TransactionOptions{}, Side::kServer);
  for (const WriteBatch::Op& op : batch.ops()) CELL_RETURN_IF_ERROR(txn.Write(op.key, op.value));
  return txn.Commit();
}

}  // namespace cell::client
