// A tree's side of another server's split: the sealed meganodes it creates here for its right halves, fills,
// unseals or abandons (see GlobalTree's "Peers' requests"). None of these blocks on another server.
#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "btree/record_format.h"
#include "common/diagnostics.h"
#include "common/key_limits.h"
#include "meganode/global_tree.h"
#include "meganode/tree_internals.h"

namespace cell::meganode {

using btree::LeafValue;
using btree::NodeView;

StatusOr<RemoteMeganode> GlobalTree::CreateSealed(const btree::MeganodeInfo& info, uint64_t token) {
  if (!info.cluster_root.is_null())
    return Status::InvalidArgument("only the root server's first meganode names the root");
  if (info.min.size() > kMaxKeySize || info.max.size() > kMaxKeySize ||
      (!info.max.empty() && btree::CompareKeys(info.min, info.max) >= 0)) {
    return Status::InvalidArgument(
        fmt::format("a new meganode's range must be [min, max) with keys of at most {} bytes and min < max (or no max)",
                    kMaxKeySize));
  }
  if (info.level < 0 || info.level > kMaxMeganodeLevel) {
    return Status::InvalidArgument(fmt::format("a meganode's level is 0..{}, not {}", kMaxMeganodeLevel, info.level));
  }
  if (!PlausibleMeganode(info.right) || (IsLocal(info.right) && !IsMeganodeAddress(info.right))) {
    return Status::InvalidArgument(
        fmt::format("the right link {}:{} names no meganode", info.right.region, info.right.offset));
  }
  // One token at a time (placements are rare: a lock across the create is cheap).
  std::lock_guard one(token_mu_);
  if (token != 0) {
    std::lock_guard lock(megas_mu_);
    if (std::find(abandoned_tokens_.begin(), abandoned_tokens_.end(), token) != abandoned_tokens_.end()) {
      return Status::FailedPrecondition("this meganode's split abandoned it before it was created");
    }
    for (const auto& m : megas_) {
      if (m != nullptr && m->token == token && m->sealed.load()) {
        return RemoteMeganode{m->store->meganode(), m->generation};  // a retry: its first reply was lost
      }
    }
  }
  btree::MeganodeInfo sealed = info;
  sealed.state = btree::kFlagSealed;                     // in its header too, so that a restart keeps it sealed
  CELL_ASSIGN_OR_RETURN(Mega * m, NewMeganode(sealed));  // sealed before anyone can know its pointer
  {
    std::lock_guard lock(megas_mu_);
    m->token = token;
  }
  return RemoteMeganode{m->store->meganode(), m->generation};
}

Status GlobalTree::AbandonCreated(uint64_t token) {
  if (token == 0) return Status::InvalidArgument("abandoning a create needs its token");
  std::lock_guard one(token_mu_);
  RemoteMeganode made;
  {
    std::lock_guard lock(megas_mu_);
    for (const auto& m : megas_) {
      if (m != nullptr && m->token == token && m->sealed.load()) {
        made = RemoteMeganode{m->store->meganode(), m->generation};
      }
    }
    if (made.ptr.is_null()) {
      abandoned_tokens_.push_back(token);
      if (abandoned_tokens_.size() > 1024) abandoned_tokens_.pop_front();
      return Status::OK();
    }
  }
  return Abandon(made);
}

StatusOr<GlobalTree::Mega*> GlobalTree::LockSealed(const RemoteMeganode& r, std::unique_lock<SplitLock>* lock) {
  Mega* m = At(r.ptr);  // a Mega is never deleted while the tree lives (abandoned ones go to the graveyard)
  if (m != nullptr) {
    *lock = std::unique_lock<SplitLock>(m->split_mu);  // uncontended: nobody else writes a sealed meganode
    // Generation 0: whichever meganode is there (a recovering splitting server knows only the pointer its published
    // header names); a meganode sealed before this server restarted has lost its generation and accepts any.
    const bool same = r.generation == 0 || m->recovered_sealed || m->generation == r.generation;
    if (same && !m->abandoned && m->sealed.load()) return m;
    lock->unlock();
  }
  return Status::FailedPrecondition(fmt::format(
      "meganode {}:{} (generation {}) is not a sealed meganode of this server (abandoned, or never created here)",
      r.ptr.region, r.ptr.offset, r.generation));
}

Status GlobalTree::Fill(const RemoteMeganode& meganode, const std::vector<MovedEntry>& entries) {
  std::unique_lock<SplitLock> lock;
  CELL_ASSIGN_OR_RETURN(Mega * m, LockSealed(meganode, &lock));
  NodeView header(m->store->SlotWords(0));
  const bool leaf = header.level() == 0;
  std::string min, max;
  header.CopyMinKey(&min);
  header.CopyMaxKey(&max);
  for (const MovedEntry& e : entries) {
    // Checked before anything is written: what the meganode will hold stays inside its range. (A fuzzing build with
    // CELL_FUZZ_PLANTED_BUG leaves the range unchecked, to prove test/server/store_request_fuzz.cc finds it.)
#ifdef CELL_FUZZ_PLANTED_BUG
    const bool outside = false;
#else
    const bool outside = btree::CompareKeys(e.key, min) < 0 || (!max.empty() && btree::CompareKeys(e.key, max) >= 0);
#endif
    if (e.key.empty() || e.key.size() > kMaxKeySize || outside) {
      return Status::InvalidArgument(fmt::format(
          "an entry for meganode {}:{} has a key of {} bytes outside the meganode's range (or the key limits)",
          meganode.ptr.region, meganode.ptr.offset, e.key.size()));
    }
    if (!leaf &&
        (e.child.is_null() || !PlausibleMeganode(e.child) || (IsLocal(e.child) && !IsMeganodeAddress(e.child)))) {
      return Status::InvalidArgument("an internal meganode's entry needs a child meganode pointer");
    }
    if (leaf && !e.locked) CELL_RETURN_IF_ERROR(CheckKeyValue(e.key, e.value));
    if (leaf && e.locked) {
      TxnLock lock;
      if (e.value.size() > btree::kMaxLockRecordBytes - btree::kRecordHeaderBytes - kMaxKeySize ||
          !DecodeTxnLock(e.value, &lock).ok() || !lock.old_inline || lock.txid == 0 ||
          (lock.old_present && CheckKeyValue(e.key, lock.old_value).ok() == false) ||
          (lock.put && !CheckKeyValue(e.key, lock.new_value).ok())) {
        return Status::InvalidArgument(fmt::format("the lock moved with key '{}' is not a transaction's lock", e.key));
      }
    }
  }
  for (const MovedEntry& e : entries) {
    LeafValue entry{e.child, 0, 0};
    if (leaf && e.locked) {
      CELL_ASSIGN_OR_RETURN(entry, AdoptMovedLock(e.key, e.value));
    } else if (leaf) {
      // The record as it was on the splitting server: same version (or the same lock), so that what transactions
      // read of it stays valid.
      thread_local std::vector<uint64_t> record;
      const uint64_t checksum = btree::EncodeRecord(e.key, e.value, e.version, &record);
      CELL_ASSIGN_OR_RETURN(GlobalPtr extent, extents_->Allocate(record.size() * 8));
      WriteRecord(extent, record);
      entry = LeafValue{extent, static_cast<uint32_t>(btree::RecordLength(e.key.size(), e.value.size())), checksum};
      ObserveVersion(e.version);
    }
    std::optional<LeafValue> replaced;
    Status s = m->tree->Put(e.key, entry, &replaced);
    if (!s.ok()) {
      if (leaf && entry.locked) FreeLockBlocks(entry, e.key);
      if (leaf) extents_->Free(entry.ptr);
      return s;
    }
    if (replaced && leaf && replaced->locked) FreeLockBlocks(*replaced, e.key);
    if (replaced && leaf) extents_->Free(replaced->ptr);
  }
  return Status::OK();
}

Status GlobalTree::Unseal(const RemoteMeganode& meganode) {
  std::unique_lock<SplitLock> lock;
  auto m = LockSealed(meganode, &lock);
  if (!m.ok()) {
    // Unsealed already (a retried request whose first reply was lost) is success.
    Mega* now = At(meganode.ptr);
    if (now != nullptr && (meganode.generation == 0 || now->generation == meganode.generation) && !now->sealed.load()) {
      return Status::OK();
    }
    return m.status();
  }
  SetMeganodeState(*(*m)->store, 0);  // its header says so first: a restart must not find it sealed
  (*m)->sealed.store(false, std::memory_order_release);
  return Status::OK();
}

Status GlobalTree::Abandon(const RemoteMeganode& meganode) {
  std::unique_lock<SplitLock> lock;
  CELL_ASSIGN_OR_RETURN(Mega * m, LockSealed(meganode, &lock));
  // Its header first: once a freed record block is reused, a restart must not find this meganode pointing to it too.
  const bool leaf = NodeView(m->store->SlotWords(0)).level() == 0;
  const std::vector<btree::NodeEntry> entries = leaf ? LeafEntriesOf(*m->store) : std::vector<btree::NodeEntry>();
  FreeMeganodeHeader(*m->store);
  for (const auto& e : entries) extents_->Free(e.value.ptr);
  m->abandoned = true;
  m->sealed.store(false, std::memory_order_release);
  lock.unlock();
  // Its place is free again; the object stays, since a late request may still hold a pointer to it.
  const uint64_t index = m->store->meganode().offset / meganode_bytes_;
  std::lock_guard megas_lock(megas_mu_);
  if (index < megas_.size() && megas_[index].get() == m) graveyard_.push_back(std::move(megas_[index]));
  return Status::OK();
}

}  // namespace cell::meganode
