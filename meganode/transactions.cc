// A transaction's steps at the key's server: lock, decide, apply, and the resolver that ends the locks of
// transactions whose client went away (txn_lock.h; the protocol in docs/DESIGN.md, "Transactions"). Every step is one
// change of the key's leaf entry under its leaf's lock (ChangeEntry), so it is logged, checkpointed and recovered like
// any write, and serialized with every other write of the key.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "btree/record_format.h"
#include "common/diagnostics.h"
#include "common/key_limits.h"
#include "common/txn_check.h"
#include "common/wall_clock.h"
#include "meganode/global_tree.h"

namespace cell::meganode {

using btree::LeafValue;
using Change = btree::BLinkTree::LeafChange;

namespace {
constexpr auto kResolveEvery = std::chrono::milliseconds(100);
// The longest a lock may live before its server resolves it, whatever expiry its client asked for: no client can lock
// a key for longer.
constexpr uint64_t kMaxLockLifeUs = 120'000'000;

std::string Quoted(std::string_view key) { return fmt::format("'{}'", key.substr(0, 64)); }
}  // namespace

LeafValue GlobalTree::PublishLock(GlobalPtr extent, std::string_view key, const TxnLock& lock) {
  thread_local std::vector<uint64_t> record;
  const std::string payload = EncodeTxnLock(lock);
  const uint64_t checksum = btree::EncodeLockRecord(key, payload, &record);
  WriteRecord(extent, record);
  return LeafValue{extent, static_cast<uint32_t>(btree::RecordLength(key.size(), payload.size())), checksum, true};
}

Status GlobalTree::ReadLock(const LeafValue& entry, std::string_view key, TxnLock* lock) const {
  btree::RecordFields fields;
  CELL_RETURN_IF_ERROR(ReadLocked(entry, key, &fields));
  return DecodeTxnLock(fields.value, lock);
}

void GlobalTree::NoteLock(std::string_view key, uint64_t txid, uint64_t expires_us) {
  std::lock_guard lock(txn_mu_);
  txn_locks_[std::string(key)] = ListedLock{txid, expires_us};
}

void GlobalTree::ForgetLock(std::string_view key, uint64_t txid) {
  std::lock_guard lock(txn_mu_);
  if (auto it = txn_locks_.find(key); it != txn_locks_.end() && it->second.txid == txid) txn_locks_.erase(it);
}

void GlobalTree::ForgetLock(std::string_view key) {
  std::lock_guard lock(txn_mu_);
  txn_locks_.erase(std::string(key));
}

size_t GlobalTree::txn_locks() const {
  std::lock_guard lock(txn_mu_);
  return txn_locks_.size();
}

LeafValue GlobalTree::RewriteLock(const LeafValue& entry, std::string_view key, const TxnLock& lock) {
  thread_local std::vector<uint64_t> record;
  const std::string payload = EncodeTxnLock(lock);
  const uint64_t checksum = btree::EncodeLockRecord(key, payload, &record);
  // In place: no reader reads a lock record but under its leaf's lock (readers stop at the locked entry), and the
  // leaf is locked now; the log sees the bytes, then the leaf with the new checksum.
  WriteRecord(entry.ptr, record);
  return LeafValue{entry.ptr, entry.length, checksum, true};
}

Status GlobalTree::TxnPrepare(const TxnPrepareRequest& r, GlobalPtr start, GlobalPtr* elsewhere,
                              btree::MeganodeRange* range) {
  const std::string& key = r.key;
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, r.lock.put ? r.lock.new_value : std::string()));
  if (r.lock.txid == 0) return Status::InvalidArgument("a transaction's id is nonzero");
  CELL_RETURN_IF_ERROR(CheckKeySize(r.lock.primary));
  size_t secondary_bytes = 0;
  for (const std::string& k : r.lock.secondaries) {
    CELL_RETURN_IF_ERROR(CheckKeySize(k));
    secondary_bytes += k.size() + 4;
  }
  const size_t lock_bytes =
      btree::RecordLength(key.size(), 64 + r.lock.new_value.size() + r.lock.primary.size() + secondary_bytes);
  if (lock_bytes > btree::kMaxLockRecordBytes) {
    return Status::InvalidArgument(fmt::format("a transaction's lock on key {} would take {} bytes (at most {})",
                                               Quoted(key), lock_bytes, btree::kMaxLockRecordBytes));
  }
  // The new record's block, reserved now (applying a decided commit must not need memory); given back unless used.
  GlobalPtr reserved;
  const size_t new_bytes = WordsFor(btree::RecordLength(key.size(), r.lock.new_value.size())) * 8;
  if (r.lock.put) {
    auto block = extents_->Allocate(new_bytes);
    if (!block.ok()) {
      return Status::ResourceExhausted(fmt::format("extent region {} is full: no room for key {}'s new value ({})",
                                                   extent_region_->id(), Quoted(key), block.status().message()));
    }
    reserved = *block;
  }
  EntryChange change;
  bool fresh = false;  // the lock was taken now (not held already)
  Status s = ChangeEntry(
      key, lock_bytes,
      [&](const LeafValue* current, GlobalPtr extent) -> StatusOr<Change> {
        fresh = false;
        if (current != nullptr && current->locked) {
          TxnLock held;
          CELL_RETURN_IF_ERROR(ReadLock(*current, key, &held));
          if (held.txid == r.lock.txid) {  // a retried request: held already (and listed again, which is harmless)
            NoteLock(key, held.txid, held.expires_us);
            return Change{};
          }
          return Status::Aborted(fmt::format("key {} is locked by another transaction", Quoted(key)));
        }
        if (r.expect == TxnPrepareRequest::Expect::kAbsent && current != nullptr) {
          return Status::Aborted(fmt::format("key {} was written since it was read (absent then)", Quoted(key)));
        }
        if (r.expect == TxnPrepareRequest::Expect::kChecksum &&
            (current == nullptr || current->checksum != r.checksum)) {
          return Status::Aborted(
              fmt::format("key {} was {} since it was read", Quoted(key), current == nullptr ? "deleted" : "written"));
        }
        TxnLock lock = r.lock;
        lock.expires_us = std::min(lock.expires_us, WallMicros() + kMaxLockLifeUs);
        lock.state = TxnState::kPrepared;
        lock.old_present = current != nullptr;
        if (current != nullptr) lock.old = *current;
        lock.new_block = reserved;
        lock.old_inline = false;
        fresh = true;
        // Listed now, under the meganode's split lock: a split that moves the key away afterwards forgets it here.
        // Listed after the write returned, it could follow that split's forgetting and stay listed for a lock that
        // is not here. (Should the change not be made after all, the resolver drops the listing once it expires.)
        NoteLock(key, lock.txid, lock.expires_us);
        return Change{Change::Op::kSet, PublishLock(extent, key, lock)};
      },
      start, elsewhere, range, /*free_replaced=*/false, &change);
  if (!s.ok() || !elsewhere->is_null() || !fresh) {
    if (!reserved.is_null()) CELL_RETURN_IF_ERROR(extents_->Free(reserved));
    return s;
  }
  return Status::OK();
}

Status GlobalTree::TxnDecide(std::string_view primary, uint64_t txid, GlobalPtr start, GlobalPtr* elsewhere,
                             bool* committed, btree::MeganodeRange* range) {
  *committed = false;
  return ChangeEntry(
      primary, 0,
      [&](const LeafValue* current, GlobalPtr) -> StatusOr<Change> {
        *committed = false;
        if (current == nullptr || !current->locked) return Change{};
        TxnLock lock;
        CELL_RETURN_IF_ERROR(ReadLock(*current, primary, &lock));
        if (lock.txid != txid) return Change{};  // aborted (by the resolver) and released: not ours any more
        *committed = true;
        if (lock.state == TxnState::kCommitted) return Change{};
        lock.state = TxnState::kCommitted;
        return Change{Change::Op::kSet, RewriteLock(*current, primary, lock)};
      },
      start, elsewhere, range, /*free_replaced=*/false);
}

Status GlobalTree::TxnApply(std::string_view key, uint64_t txid, bool commit, GlobalPtr start, GlobalPtr* elsewhere,
                            btree::MeganodeRange* range) {
  CELL_RETURN_IF_ERROR(CheckKeySize(key));
  TxnLock lock;
  bool applied = false;
  EntryChange change;
  Status s = ChangeEntry(
      key, 0,
      [&](const LeafValue* current, GlobalPtr) -> StatusOr<Change> {
        applied = false;
        if (current == nullptr || !current->locked) return Change{};
        CELL_RETURN_IF_ERROR(ReadLock(*current, key, &lock));
        if (lock.txid != txid) return Change{};
        applied = true;
        // Forgotten under the leaf's lock, as it was listed: a prepare of the same transaction that locks the key
        // again after this change (a late retry) lists it again after this, not before.
        ForgetLock(key, txid);
        if (!commit) {
          if (!lock.old_present) return Change{Change::Op::kRemove, {}};
          return Change{Change::Op::kSet, lock.old};
        }
        if (!lock.put) return Change{Change::Op::kRemove, {}};
        thread_local std::vector<uint64_t> record;
        btree::LayOutRecord(key, lock.new_value, &record);
        return Change{Change::Op::kSet,
                      PublishRecord(lock.new_block, &record, btree::RecordLength(key.size(), lock.new_value.size()))};
      },
      start, elsewhere, range, /*free_replaced=*/false, &change);
  if (!s.ok() || !elsewhere->is_null() || !applied) return s;
  // The lock record, and whichever of the old record and the reserved block the key no longer needs.
  CELL_RETURN_IF_ERROR(extents_->Free(change.old->ptr));
  if (commit && lock.old_present) CELL_RETURN_IF_ERROR(extents_->Free(lock.old.ptr));
  if (!commit && !lock.new_block.is_null()) CELL_RETURN_IF_ERROR(extents_->Free(lock.new_block));
  return Status::OK();
}

Status GlobalTree::TxnStatus(std::string_view key, uint64_t txid, GlobalPtr start, GlobalPtr* elsewhere,
                             TxnOutcome* outcome) {
  *outcome = TxnOutcome::kNotLocked;
  return ChangeEntry(
      key, 0,
      [&](const LeafValue* current, GlobalPtr) -> StatusOr<Change> {
        *outcome = TxnOutcome::kNotLocked;
        if (current == nullptr || !current->locked) return Change{};
        TxnLock lock;
        CELL_RETURN_IF_ERROR(ReadLock(*current, key, &lock));
        if (lock.txid == txid) {
          *outcome = lock.state == TxnState::kCommitted ? TxnOutcome::kCommitted : TxnOutcome::kPrepared;
        }
        return Change{};
      },
      start, elsewhere, nullptr, /*free_replaced=*/false);
}

Status GlobalTree::CommitHere(const HereTxn& t, std::string* conflict_key, bool* apply_left, bool* rollback_left) {
  if (apply_left != nullptr) *apply_left = false;
  if (rollback_left != nullptr) *rollback_left = false;
  if (t.writes.empty()) return Status::InvalidArgument("a transaction committed here writes at least one key");
  const std::string& primary = t.writes[0].key;
  std::vector<const HereTxn::Write*> locked;
  const auto undo = [&](Status why) {
    RollBackHere(t.txid, locked, rollback_left);
    return why;
  };
  const auto not_here = [&](std::string_view key) {
    return undo(Status::FailedPrecondition(fmt::format("key {} is on another server", Quoted(key))));
  };
  const auto conflict = [&](std::string_view key, std::string_view why) {
    *conflict_key = std::string(key);
    return undo(Status::Aborted(fmt::format("key {} {}", Quoted(key), why)));
  };
  // Prepare.
  for (size_t i = 0; i < t.writes.size(); ++i) {
    const HereTxn::Write& w = t.writes[i];
    TxnPrepareRequest r;
    r.key = w.key;
    r.expect = w.expect;
    r.checksum = w.checksum;
    r.lock =
        TxnLock{.txid = t.txid, .expires_us = t.expires_us, .put = w.put, .new_value = w.value, .primary = primary};
    if (i == 0) {
      for (size_t j = 1; j < t.writes.size(); ++j) r.lock.secondaries.push_back(t.writes[j].key);
    }
    GlobalPtr at;
    Status s = TxnPrepare(r, w.start, &at);
    if (s.IsAborted()) return conflict(w.key, s.message());
    if (!s.ok()) return undo(s);
    if (!at.is_null()) return not_here(w.key);
    locked.push_back(&w);
  }
  // Validate.
  for (const HereTxn::Read& r : t.reads) {
    std::string value;
    btree::RecordMeta meta;
    GlobalPtr at;
    Status s = Get(r.key, &value, r.start, &at, nullptr, &meta);
    if (!at.is_null()) return not_here(r.key);
    if (!s.ok() && !s.IsNotFound()) return undo(s);
    if (s.ok() && meta.locked) return conflict(r.key, "is locked by another transaction");
    if (s.ok() != r.found || (s.ok() && meta.checksum != r.checksum)) {
      return conflict(r.key, "was written since it was read");
    }
  }
  const auto own = [&](std::string_view key) {
    return std::any_of(t.writes.begin(), t.writes.end(), [&](const HereTxn::Write& w) { return w.key == key; });
  };
  for (const HereTxn::Range& range : t.ranges) {
    std::vector<btree::KeyValue> now;
    GlobalPtr at;
    std::string resume;
    Status s = Scan(range.start, range.end, range.seen.size() + t.writes.size() + 1, &now, range.from, &at, &resume,
                    btree::ScanMode{.report_locks = true});
    if (!s.ok()) return undo(s);
    if (!at.is_null()) return not_here(resume);
    if (const auto changed = RangeChanged(range.seen, now, own)) return conflict(changed->key, changed->why);
  }
  // Decide, then apply: the secondaries first, the primary last (as across servers: a crash in between leaves the
  // decision, and the resolver finishes it).
  // The primary may have moved to another server since it was locked (its meganode split there, its lock with it):
  // then the transaction is "not here", and the client commits it across servers under the same id (each lock that
  // moved is held already; those rolled back here are taken again). A lock gone is one its resolver ended: aborted.
  bool committed = false;
  GlobalPtr at;
  Status s = fault_ ? fault_("commit here decide") : Status::OK();
  if (s.ok()) s = TxnDecide(primary, t.txid, t.writes[0].start, &at, &committed);
  if (!s.ok()) return undo(s);
  if (!at.is_null()) return not_here(primary);
  if (!committed) return conflict(primary, "had its lock expire before the transaction could commit");
  ApplyCommittedHere(t, apply_left);
  return Status::OK();
}

void GlobalTree::RollBackHere(uint64_t txid, const std::vector<const HereTxn::Write*>& locked, bool* rollback_left) {
  for (const HereTxn::Write* w : locked) {
    GlobalPtr at;
    Status s = TxnApply(w->key, txid, /*commit=*/false, w->start, &at);
    if (s.ok() && at.is_null()) continue;
    if (rollback_left != nullptr) *rollback_left = true;
    if (!s.ok()) {
      diag::Warning("transaction {:x}: rolling back key {}: {}; left to the client or the resolver", txid,
                    Quoted(w->key), s.ToString());
    }
  }
}

void GlobalTree::ApplyCommittedHere(const HereTxn& t, bool* apply_left) {
  GlobalPtr at;
  Status s;
  // A secondary whose apply fails here (its meganode being split to another server, say) or whose key has moved to
  // another server keeps its committed lock, and then so does the primary: the client finishes the apply (told by
  // *apply_left), or else the resolver once the primary's lock expires (through peers where keys moved), releasing
  // the primary last. Releasing it now would make the secondary's resolver find no lock at the primary and read that
  // as "aborted": a committed write lost.
  bool all_applied = true;
  for (size_t i = t.writes.size(); i-- > 1;) {
    s = fault_ ? fault_("commit here apply") : Status::OK();
    if (s.ok()) s = TxnApply(t.writes[i].key, t.txid, /*commit=*/true, t.writes[i].start, &at);
    if (s.ok() && at.is_null()) continue;
    all_applied = false;
    diag::Info("transaction {:x}: applying key {}: {}; left to the client or the resolver", t.txid,
               Quoted(t.writes[i].key), s.ok() ? "it moved to another server" : s.ToString());
  }
  if (!all_applied) {
    if (apply_left != nullptr) *apply_left = true;
    return;  // committed: the decision is made, and logged with the locks
  }
  const std::string& primary = t.writes[0].key;
  s = TxnApply(primary, t.txid, /*commit=*/true, t.writes[0].start, &at);
  if (!s.ok() || !at.is_null()) {
    if (apply_left != nullptr) *apply_left = true;
    diag::Warning("transaction {:x}: applying its primary {}: {}; its resolver will", t.txid, Quoted(primary),
                  s.ok() ? "it moved to another server" : s.ToString());
  }
}

size_t GlobalTree::ResolveExpiredLocks(uint64_t now_us) {
  std::vector<std::pair<std::string, uint64_t>> expired;  // key, txid
  {
    std::lock_guard lock(txn_mu_);
    for (const auto& [key, listed] : txn_locks_) {
      if (listed.expires_us <= now_us) expired.emplace_back(key, listed.txid);
    }
  }
  size_t ended = 0;
  for (const auto& [key, txid] : expired) ended += ResolveLock(key, txid, now_us) ? 1 : 0;
  stats_.txn_resolved.fetch_add(ended, std::memory_order_relaxed);
  return ended;
}

GlobalPtr GlobalTree::LocalLeafFor(std::string_view key, bool* sealed) const {
  btree::SearchKey k(key);
  if (sealed != nullptr) *sealed = false;
  GlobalPtr found;
  std::lock_guard lock(megas_mu_);
  for (const auto& m : megas_) {
    if (m == nullptr || m->store == nullptr) continue;
    const btree::NodeView header(m->store->SlotWords(0));
    if (header.version() == 0 || !header.valid() || header.level() != 0 || !header.Covers(k)) continue;
    if (m->sealed.load(std::memory_order_acquire)) {
      if (sealed != nullptr) *sealed = true;
    } else if (found.is_null()) {
      found = m->store->meganode();
      if (sealed == nullptr) break;
    }
  }
  return found;
}

bool GlobalTree::ResolveLock(const std::string& key, uint64_t listed_txid, uint64_t now_us) {
  // What the lock says now (it may have been applied, or moved away with its meganode, since it was listed). The walk
  // begins at the meganode here that holds the key; none: the key left with a split (from the root, then, to see).
  // A key in a meganode here that a split on another server is still filling (sealed) keeps its listing until the
  // meganode is unsealed: the walk would leave this server, and the split's source has forgotten its own listing.
  bool sealed = false;
  const GlobalPtr here = LocalLeafFor(key, &sealed);
  if (sealed) return false;
  TxnLock lock;
  bool held = false;
  GlobalPtr elsewhere;
  Status s = ChangeEntry(
      key, 0,
      [&](const LeafValue* current, GlobalPtr) -> StatusOr<Change> {
        held = current != nullptr && current->locked;
        if (held) CELL_RETURN_IF_ERROR(ReadLock(*current, key, &lock));
        // Under the leaf's lock, as a prepare lists: not held (gone) or another transaction's, which is listed
        // instead (a lock is listed by its own transaction's prepare, but whatever lost that listing, the lock
        // found here is not left without one).
        if (!held) {
          ForgetLock(key, listed_txid);
        } else if (lock.txid != listed_txid) {
          NoteLock(key, lock.txid, lock.expires_us);
        }
        return Change{};
      },
      here, &elsewhere, nullptr, /*free_replaced=*/false);
  if (s.ok() && !elsewhere.is_null()) {
    ForgetLock(key, listed_txid);  // no longer this server's: the server that holds it now lists it
    return false;
  }
  if (s.ok() && (!held || lock.txid != listed_txid)) return false;
  if (!s.ok() || lock.expires_us > now_us) return false;
  if (lease_ && !lease_().ok()) return false;  // a server that may not answer does not act either
  // The outcome: a primary's own state, or (for a secondary) what its primary's lock says.
  TxnOutcome outcome = lock.state == TxnState::kCommitted ? TxnOutcome::kCommitted : TxnOutcome::kPrepared;
  if (lock.primary != key) {
    GlobalPtr at;
    Status asked = TxnStatus(lock.primary, lock.txid, LocalLeafFor(lock.primary), &at, &outcome);
    if (asked.ok() && !at.is_null()) {
      if (peers_ == nullptr) return false;
      auto remote = peers_->TxnStatus(at, lock.primary, lock.txid);
      if (!remote.ok()) return false;  // try again next round
      outcome = *remote;
    } else if (!asked.ok()) {
      return false;
    }
    if (outcome == TxnOutcome::kPrepared) return false;  // undecided: the primary's server will abort it first
  }
  const bool commit = outcome == TxnOutcome::kCommitted;
  if (lock.primary == key && commit) {
    // Rolled forward only from a durable decision, while this server still holds its regions: a survivor that takes
    // them over later recovers the decision too.
    if (write_sink_ != nullptr && !write_sink_->Sync().ok()) return false;
    if (lease_ && !lease_().ok()) return false;
    // A decided commit whose client went away: apply it to every secondary before releasing the primary.
    for (const std::string& k : lock.secondaries) {
      GlobalPtr at;
      Status applied = TxnApply(k, lock.txid, true, LocalLeafFor(k), &at);
      if (applied.ok() && !at.is_null()) {
        applied = peers_ == nullptr ? Status::Unavailable("no peers") : peers_->TxnApply(at, k, lock.txid, true);
      }
      if (!applied.ok()) {
        diag::Warning("transaction {:x}: applying its commit to key {} failed, retrying: {}", lock.txid, Quoted(k),
                      applied.ToString());
        return false;
      }
    }
    if (write_sink_ != nullptr && !write_sink_->Sync().ok()) return false;  // the secondaries, durable here first
  }
  GlobalPtr at;
  Status applied = TxnApply(key, lock.txid, commit, here, &at);
  if (!applied.ok() || !at.is_null()) return false;
  diag::Info("transaction {:x}: its lock on key {} expired; {} by its server", lock.txid, Quoted(key),
             commit ? "committed" : "rolled back");
  return true;
}

Status GlobalTree::InlineLock(std::string_view key, std::string* payload) const {
  TxnLock lock;
  CELL_RETURN_IF_ERROR(DecodeTxnLock(*payload, &lock));
  if (lock.old_present) {
    btree::RecordFields old;
    CELL_RETURN_IF_ERROR(ReadLocked(lock.old, key, &old));
    lock.old_version = old.version;
    lock.old_value = std::string(old.value);
  }
  lock.old_inline = true;
  *payload = EncodeTxnLock(lock);
  return Status::OK();
}

StatusOr<LeafValue> GlobalTree::AdoptMovedLock(std::string_view key, std::string_view payload) {
  TxnLock lock;
  CELL_RETURN_IF_ERROR(DecodeTxnLock(payload, &lock));
  thread_local std::vector<uint64_t> record;
  GlobalPtr old_block, new_block, lock_block;
  Status s = [&]() -> Status {
    if (lock.old_present) {
      const uint64_t checksum = btree::EncodeRecord(key, lock.old_value, lock.old_version, &record);
      CELL_ASSIGN_OR_RETURN(old_block, extents_->Allocate(record.size() * 8));
      WriteRecord(old_block, record);
      lock.old = LeafValue{old_block, static_cast<uint32_t>(btree::RecordLength(key.size(), lock.old_value.size())),
                           checksum, false};
      ObserveVersion(lock.old_version);
    }
    if (lock.put) {
      CELL_ASSIGN_OR_RETURN(new_block,
                            extents_->Allocate(WordsFor(btree::RecordLength(key.size(), lock.new_value.size())) * 8));
    }
    lock.new_block = new_block;
    lock.old_inline = false;
    lock.old_value.clear();
    lock.old_version = 0;
    const std::string encoded = EncodeTxnLock(lock);
    CELL_ASSIGN_OR_RETURN(lock_block, extents_->Allocate(btree::RecordLength(key.size(), encoded.size())));
    return Status::OK();
  }();
  if (!s.ok()) {
    for (GlobalPtr p : {old_block, new_block}) {
      if (!p.is_null()) extents_->Free(p);
    }
    return s;
  }
  NoteLock(key, lock.txid, lock.expires_us);
  return PublishLock(lock_block, key, lock);
}

void GlobalTree::FreeLockBlocks(const LeafValue& entry, std::string_view key) {
  TxnLock lock;
  if (!ReadLock(entry, key, &lock).ok()) return;
  if (lock.old_present && !lock.old_inline) extents_->Free(lock.old.ptr);
  if (!lock.new_block.is_null() && !lock.old_inline) extents_->Free(lock.new_block);
}

void GlobalTree::StartResolver(TaskScheduler* scheduler) {
  resolver_ = std::make_unique<TaskScheduler::Lane>(*scheduler);
  resolver_->PostAfter(kResolveEvery, [this] { ResolveTick(); });
}

void GlobalTree::ResolveTick() {
  ResolveExpiredLocks(WallMicros());
  resolver_->PostAfter(kResolveEvery, [this] { ResolveTick(); });
}

}  // namespace cell::meganode
