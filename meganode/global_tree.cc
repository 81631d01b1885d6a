// The tree of meganodes held by one process: opening it, finding a key's meganode, and the reads and writes in it
// (see global_tree.h). Splits are in split.cc, recovery in tree_recovery.cc, another server's right halves in
// sealed_meganodes.cc.
#include "meganode/global_tree.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>

#include "btree/node_lock.h"
#include "btree/record_format.h"
#include "common/diagnostics.h"
#include "common/key_limits.h"
#include "common/shared_words.h"
#include "common/wall_clock.h"
#include "meganode/split_coordinator.h"
#include "meganode/tree_internals.h"

namespace cell::meganode {

using btree::GlobalReader;
using btree::LeafValue;
using btree::NodeImage;
using btree::NodeView;
using btree::TreeReader;

StatusOr<std::unique_ptr<GlobalTree>> GlobalTree::Open(const GlobalTreeOptions& options) {
  if (options.meganodes == 0) return Status::InvalidArgument("a tree needs room for at least one meganode");
  std::unique_ptr<GlobalTree> t(new GlobalTree());
  t->meganode_bytes_ = options.meganode_bytes;
  CELL_ASSIGN_OR_RETURN(t->node_region_, Region::Create(options.node_region_id,
                                                        options.meganode_bytes * options.meganodes, options.backing));
  CELL_ASSIGN_OR_RETURN(t->extent_region_,
                        Region::Create(options.extent_region_id, options.extent_region_bytes, options.backing));
  t->regions_.Add(t->node_region_.get());
  t->regions_.Add(t->extent_region_.get());
  CELL_ASSIGN_OR_RETURN(t->extents_, ExtentAllocator::Create(t->extent_region_.get(), 0, options.extent_region_bytes));
  t->source_ = std::make_unique<btree::LocalNodeSource>(&t->regions_);
  t->megas_.resize(options.meganodes);
  const uint32_t here = t->node_region_->id();
  t->write_sink_ = options.write_sink;
  // Split ids and generations from the clock: unique across restarts (a peer may still hold an old generation).
  const uint64_t now_us = WallMicros();
  t->next_generation_ = now_us;
  t->clock_.store(now_us);
  t->peers_ = options.peers;
  t->lease_ = options.lease;
  t->splits_ = std::make_unique<SplitCoordinator>(t.get(), options.peers, options.scheduler, now_us);
  if (options.restore) {
    CELL_RETURN_IF_ERROR(options.restore(*t->node_region_, *t->extent_region_));
    t->first_ = options.root ? GlobalPtr{here, 0} : options.first_meganode;
    CELL_RETURN_IF_ERROR(t->Rebuild());
    if (options.root && t->At(t->first_) == nullptr) {
      return Status::Corruption(fmt::format(
          "region {} is the root region, but its recovered bytes hold no first meganode at offset 0", here));
    }
    if (!options.root && (options.first_meganode.is_null() || options.first_meganode.region == here)) {
      return Status::InvalidArgument("a tree that does not hold the root needs the first meganode's pointer");
    }
  } else if (options.root) {
    // The first meganode: a leaf meganode over every key, and the root.
    t->first_ = GlobalPtr{here, 0};
    btree::MeganodeInfo info;
    info.cluster_root = t->first_;
    CELL_ASSIGN_OR_RETURN(Mega * first, t->NewMeganode(info));
    if (first->store->meganode() != t->first_) return Status::Internal("the first meganode is not at 0");
  } else {
    if (options.first_meganode.is_null() || options.first_meganode.region == here) {
      return Status::InvalidArgument("a tree that does not hold the root needs the first meganode's pointer");
    }
    t->first_ = options.first_meganode;
  }
  if (options.restore) {
    // A remote split may have crashed between publishing its right half and unsealing it: every right sibling on
    // another server is unsealed (of any generation; a no-op for one not sealed).
    std::vector<GlobalPtr> right_elsewhere;
    {
      std::lock_guard lock(t->megas_mu_);
      for (const auto& m : t->megas_) {
        if (m == nullptr) continue;
        const GlobalPtr right = NodeView(m->store->SlotWords(0)).right();
        if (!right.is_null() && !t->IsLocal(right)) right_elsewhere.push_back(right);
      }
    }
    t->splits_->UnsealAfterRestart(right_elsewhere);
  }
  if (options.scheduler != nullptr) t->StartResolver(options.scheduler);
  return t;
}

GlobalTree::~GlobalTree() {
  // First, while every member is whole: the coordinator's background tasks use the tree, splits_ included (a reset
  // would clear splits_ before the running task is waited for).
  if (resolver_ != nullptr) resolver_->Stop();
  if (splits_ != nullptr) splits_->Stop();
}

GlobalTree::Mega* GlobalTree::At(GlobalPtr meganode) const {
  if (!IsLocal(meganode) || meganode.offset % meganode_bytes_ != 0) return nullptr;
  const uint64_t i = meganode.offset / meganode_bytes_;
  std::lock_guard lock(megas_mu_);
  return i < megas_.size() ? megas_[i].get() : nullptr;
}

btree::BLinkTree* GlobalTree::LocalTreeOf(GlobalPtr p) {
  Mega* m = At(p);
  return m == nullptr ? nullptr : m->tree.get();
}

Meganode* GlobalTree::MeganodeOf(GlobalPtr p) {
  Mega* m = At(p);
  return m == nullptr ? nullptr : m->store.get();
}

size_t GlobalTree::meganodes_in_use() const {
  std::lock_guard lock(megas_mu_);
  return std::count_if(megas_.begin(), megas_.end(), [](const auto& m) { return m != nullptr; });
}

StatusOr<GlobalTree::Mega*> GlobalTree::NewMeganode(const btree::MeganodeInfo& info) {
  size_t index = 0;
  Mega* m = nullptr;
  {
    std::lock_guard lock(megas_mu_);
    while (index < megas_.size() && megas_[index] != nullptr) ++index;
    if (index == megas_.size()) {
      return Status::ResourceExhausted("all " + std::to_string(megas_.size()) +
                                       " meganodes of the node region are in use");
    }
    megas_[index] = std::make_unique<Mega>();  // reserves the index; not reachable until a pointer to it is published
    m = megas_[index].get();
    m->generation = next_generation_++;
  }
  // Made aside, then handed to the Mega under megas_mu_: LocalLeafFor looks at every Mega under that lock, this one
  // too while it is being made, and must find it either without a store or whole, sealed already if it is to be.
  std::unique_ptr<Meganode> store;
  std::unique_ptr<btree::BLinkTree> tree;
  Status made = [&]() -> Status {
    if (fault_) CELL_RETURN_IF_ERROR(fault_("new meganode"));
    CELL_ASSIGN_OR_RETURN(store, Meganode::Create(node_region_.get(), index * meganode_bytes_, meganode_bytes_));
    store->set_write_sink(write_sink_);
    CELL_RETURN_IF_ERROR(btree::BLinkTree::Format(store.get(), info));
    tree = std::make_unique<btree::BLinkTree>(store.get(), source_.get());
    return Status::OK();
  }();
  {
    std::lock_guard lock(megas_mu_);
    m->sealed.store((info.state & btree::kFlagSealed) != 0, std::memory_order_release);
    m->store = std::move(store);
    m->tree = std::move(tree);
  }
  if (!made.ok()) {
    ReleaseMeganode(m);  // nothing can point to it yet
    return made;
  }
  return m;
}

void GlobalTree::ReleaseMeganode(Mega* m) {
  if (m->store != nullptr && NodeView(m->store->SlotWords(0)).version() != 0) FreeMeganodeHeader(*m->store);
  std::lock_guard lock(megas_mu_);
  for (auto& slot : megas_) {
    if (slot.get() == m) graveyard_.push_back(std::move(slot));  // the object stays, as Abandon's do
  }
}

void GlobalTree::WriteRecord(GlobalPtr extent, const std::vector<uint64_t>& record) {
  // The block may have held a record that an in-place reader is still copying. This release fence, after Allocate
  // and before the new bytes are stored, lets such a reader prove its copy by re-checking the leaf version instead
  // of the checksum (argument in TreeReader::ReadRecord): a reader that loads any of these bytes and then issues an
  // acquire fence sees every write that happened before this fence, including (through the allocator's mutex, Free
  // before this Allocate) the lock of the leaf that dropped the old entry. Required of every extent writer; see
  // extent_allocator.h.
  std::atomic_thread_fence(std::memory_order_release);
  CopyToShared(regions_.Resolve(extent, record.size() * 8), record.data(), record.size());
  // Reported after the copy (a checkpoint whose lsn is past this report then holds the bytes: it copies after it
  // reads its lsn) and before any node can point to the block (it is fresh: nothing reads it until a leaf does).
  if (write_sink_ != nullptr) write_sink_->BytesWritten(extent, record.data(), record.size());
}

Status GlobalTree::Write(int level, std::string_view key, const std::function<Status(btree::BLinkTree&)>& write,
                         GlobalPtr start, GlobalPtr* elsewhere, btree::MeganodeRange* range, size_t record_bytes,
                         GlobalPtr* extent) {
  btree::SearchKey k(key);
  GlobalReader reader(source_.get(), first_, node_region_->id());
  for (int attempt = 0; attempt < 10000; ++attempt) {
    GlobalPtr m;
    CELL_RETURN_IF_ERROR(reader.Locate(key, level, &m, nullptr, start));
    if (reader.exited()) {
      *elsewhere = reader.exit();
      return Status::OK();
    }
    Mega* mega = At(m);
    if (mega == nullptr) return Status::Internal("a meganode pointer names no meganode of this tree");
    Status s;
    uint64_t seen_splits = 0;
    {
      std::shared_lock lock(mega->split_mu);
      if (mega->sealed.load(std::memory_order_acquire)) {
        return Status::Unavailable(
            fmt::format("meganode {}:{} is being filled by a split on another server; retry", m.region, m.offset));
      }
      // Under the split lock the range is stable; a split may have moved the key right since Locate.
      TreeReader::Header header;
      CELL_RETURN_IF_ERROR(TreeReader(source_.get(), m).ReadHeader(&k, &header));
      if (header.position != 0) continue;
      if (mega->splitting && btree::CompareKeys(key, mega->split_key) >= 0) {
        // The right half of a split under way: wait for it (or retry, if it goes to another server), then locate
        // the key again (it may have moved to the new meganode).
        stats_.held_writes.fetch_add(1, std::memory_order_relaxed);
        CELL_RETURN_IF_ERROR(AwaitSplit(mega, lock));
        continue;
      }
      seen_splits = mega->splits;
      if (record_bytes > 0 && extent->is_null()) {
        // The key's leaf meganode is here: its record goes into this server's extents (kept across attempts).
        auto allocated = extents_->Allocate(record_bytes);
        if (!allocated.ok()) {
          lock.unlock();
          return splits_->NoRoom(mega, level,
                                 fmt::format("extent region {} is full: a record of {} bytes does not fit "
                                             "({} of {} bytes free)",
                                             extent_region_->id(), extents_->BlockSizeFor(record_bytes),
                                             extents_->capacity() - extents_->bytes_in_use(), extents_->capacity()));
        }
        *extent = *allocated;
      }
      s = write(*mega->tree);
    }
    if (s.IsResourceExhausted()) {  // the meganode is full: split it, try again
      Status split = splits_->Split(mega, level, seen_splits, SplitCoordinator::Placement::kLocal);
      if (split.IsResourceExhausted() && meganodes_in_use() == megas_.size()) {
        return splits_->NoRoom(
            mega, level,
            fmt::format("all {} meganodes of node region {} are in use", megas_.size(), node_region_->id()));
      }
      CELL_RETURN_IF_ERROR(split);
      continue;
    }
    if (s.ok()) splits_->MaybeQueueSplit(mega, level);
    if (range != nullptr && !(m == range->meganode) && (s.ok() || s.IsNotFound())) {
      // Only a hint for the client's path cache: the write is done, whatever reading the range gives.
      if (!reader.RangeOf(m, range).ok()) range->meganode = GlobalPtr();
    }
    return s;
  }
  return Status::Aborted("the meganode for a key kept changing");
}

Status GlobalTree::InsertSeparator(GlobalPtr at, int level, const std::string& separator, GlobalPtr child) {
  return splits_->InsertSeparator(at, level, separator, child);
}

Status GlobalTree::Put(std::string_view key, std::string_view value) {
  GlobalPtr elsewhere;
  CELL_RETURN_IF_ERROR(Put(key, value, GlobalPtr(), &elsewhere));
  return elsewhere.is_null() ? Status::OK() : Status::Internal("a tree of one process met another server's meganode");
}

Status GlobalTree::Get(std::string_view key, std::string* value) {
  GlobalPtr elsewhere;
  CELL_RETURN_IF_ERROR(Get(key, value, GlobalPtr(), &elsewhere));
  return elsewhere.is_null() ? Status::OK() : Status::Internal("a tree of one process met another server's meganode");
}

Status GlobalTree::Delete(std::string_view key) {
  GlobalPtr elsewhere;
  CELL_RETURN_IF_ERROR(Delete(key, GlobalPtr(), &elsewhere));
  return elsewhere.is_null() ? Status::OK() : Status::Internal("a tree of one process met another server's meganode");
}

Status GlobalTree::Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out) {
  GlobalPtr elsewhere;
  std::string resume;
  CELL_RETURN_IF_ERROR(Scan(start, end, limit, out, GlobalPtr(), &elsewhere, &resume));
  return elsewhere.is_null() ? Status::OK() : Status::Internal("a tree of one process met another server's meganode");
}

Status GlobalTree::ChangeEntry(std::string_view key, size_t record_bytes, const DecideEntry& decide, GlobalPtr start,
                               GlobalPtr* elsewhere, btree::MeganodeRange* range, bool free_replaced,
                               EntryChange* change) {
  *elsewhere = GlobalPtr();  // (a caller may pass the start's own variable)
  CELL_RETURN_IF_ERROR(CheckKeySize(key));
  if (start == first_) start = GlobalPtr();  // the first meganode stands for the root (where a walk starts over)
  // The record's block is allocated by Write once it has found the key's leaf meganode here (into `extent`): where
  // the key's meganode is on another server, it is that server's extents that hold it.
  GlobalPtr extent;
  EntryChange own;
  std::optional<LeafValue>& old = (change != nullptr ? *change : own).old;
  btree::BLinkTree::LeafChange& done = (change != nullptr ? *change : own).done;
  const auto write = [&](btree::BLinkTree& tree) {
    return tree.Update(
        key,
        [&](const LeafValue* current) -> StatusOr<btree::BLinkTree::LeafChange> {
          CELL_ASSIGN_OR_RETURN(done, decide(current, extent));
          return done;
        },
        &old);
  };
  done = btree::BLinkTree::LeafChange{};
  Status s = Write(0, key, write, start, elsewhere, range, record_bytes, &extent);
  if (!s.ok()) done = btree::BLinkTree::LeafChange{};
  const bool used =
      s.ok() && elsewhere->is_null() && done.op == btree::BLinkTree::LeafChange::Op::kSet && done.value.ptr == extent;
  if (!extent.is_null() && !used) CELL_RETURN_IF_ERROR(extents_->Free(extent));
  if (!s.ok() || !elsewhere->is_null()) return s;
  // The old record, once no entry points to it.
  if (free_replaced && old && done.op != btree::BLinkTree::LeafChange::Op::kKeep &&
      !(done.op == btree::BLinkTree::LeafChange::Op::kSet && done.value.ptr == old->ptr)) {
    return extents_->Free(old->ptr);
  }
  return Status::OK();
}

LeafValue GlobalTree::PublishRecord(GlobalPtr extent, std::vector<uint64_t>* record, size_t length) {
  const uint64_t checksum = btree::SetRecordVersion(record, length, NextVersion());
  WriteRecord(extent, *record);
  return LeafValue{extent, static_cast<uint32_t>(length), checksum, false};
}

Status GlobalTree::ReadLocked(const LeafValue& entry, std::string_view key, btree::RecordFields* out) const {
  const uint64_t* words = regions_.Resolve(entry.ptr, entry.length);
  if (words == nullptr || !btree::CheckRecordFields(words, entry, key, out)) {
    return Status::Corruption(fmt::format("the record of key '{}' does not match its leaf entry", key));
  }
  return Status::OK();
}

uint64_t GlobalTree::NextVersion() {
  const uint64_t now_us = WallMicros();
  uint64_t last = clock_.load(std::memory_order_relaxed);
  uint64_t next;
  do {
    next = std::max(last + 1, now_us);
  } while (!clock_.compare_exchange_weak(last, next, std::memory_order_relaxed));
  return next;
}

void GlobalTree::ObserveVersion(uint64_t version) {
  uint64_t last = clock_.load(std::memory_order_relaxed);
  while (last < version && !clock_.compare_exchange_weak(last, version, std::memory_order_relaxed)) {
  }
}

Status GlobalTree::Put(std::string_view key, std::string_view value, GlobalPtr start, GlobalPtr* elsewhere,
                       btree::MeganodeRange* range) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, value));
  thread_local std::vector<uint64_t> record;
  btree::LayOutRecord(key, value, &record);
  const size_t length = btree::RecordLength(key.size(), value.size());
  return ChangeEntry(
      key, record.size() * 8,
      [&](const LeafValue* current, GlobalPtr extent) -> StatusOr<btree::BLinkTree::LeafChange> {
        if (current != nullptr && current->locked) return btree::LockedKey(key);
        return btree::BLinkTree::LeafChange{btree::BLinkTree::LeafChange::Op::kSet,
                                            PublishRecord(extent, &record, length)};
      },
      start, elsewhere, range);
}

Status GlobalTree::Delete(std::string_view key, GlobalPtr start, GlobalPtr* elsewhere, btree::MeganodeRange* range) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, {}));
  bool found = false;
  CELL_RETURN_IF_ERROR(ChangeEntry(
      key, 0,
      [&](const LeafValue* current, GlobalPtr) -> StatusOr<btree::BLinkTree::LeafChange> {
        if (current != nullptr && current->locked) return btree::LockedKey(key);
        found = current != nullptr;
        return btree::BLinkTree::LeafChange{btree::BLinkTree::LeafChange::Op::kRemove, {}};
      },
      start, elsewhere, range));
  if (!found && elsewhere->is_null()) return Status::NotFound("key not found");
  return Status::OK();
}

Status GlobalTree::CompareAndSwap(std::string_view key, const std::optional<std::string_view>& expected,
                                  const std::optional<std::string_view>& value, GlobalPtr start, GlobalPtr* elsewhere,
                                  btree::MeganodeRange* range) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, value.value_or(std::string_view())));
  if (expected) CELL_RETURN_IF_ERROR(CheckKeyValue(key, *expected));
  thread_local std::vector<uint64_t> record;
  size_t length = 0;
  if (value) {
    btree::LayOutRecord(key, *value, &record);
    length = btree::RecordLength(key.size(), value->size());
  }
  return ChangeEntry(
      key, value ? record.size() * 8 : 0,
      [&](const LeafValue* current, GlobalPtr extent) -> StatusOr<btree::BLinkTree::LeafChange> {
        if (current != nullptr && current->locked) return btree::LockedKey(key);
        if (current == nullptr && expected) {
          return Status::FailedPrecondition(fmt::format("key '{}' is absent, not the value expected", key));
        }
        if (current != nullptr) {
          btree::RecordFields now;
          CELL_RETURN_IF_ERROR(ReadLocked(*current, key, &now));
          if (!expected) return Status::FailedPrecondition(fmt::format("key '{}' is present, not absent", key));
          if (now.value != *expected) {
            return Status::FailedPrecondition(
                fmt::format("key '{}' holds another value than the one expected ({} bytes)", key, now.value.size()));
          }
        }
        if (!value) return btree::BLinkTree::LeafChange{btree::BLinkTree::LeafChange::Op::kRemove, {}};
        return btree::BLinkTree::LeafChange{btree::BLinkTree::LeafChange::Op::kSet,
                                            PublishRecord(extent, &record, length)};
      },
      start, elsewhere, range);
}

Status GlobalTree::Get(std::string_view key, std::string* value, GlobalPtr start, GlobalPtr* elsewhere,
                       btree::MeganodeRange* range) {
  return Get(key, value, start, elsewhere, range, nullptr);
}

Status GlobalTree::Get(std::string_view key, std::string* value, GlobalPtr start, GlobalPtr* elsewhere,
                       btree::MeganodeRange* range, btree::RecordMeta* meta) {
  *elsewhere = GlobalPtr();
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, {}));
  if (start == first_) start = GlobalPtr();  // the first meganode stands for the root
  GlobalReader reader(source_.get(), first_, node_region_->id());
  Status s = reader.Get(key, value, start, meta);
  if (!s.ok() && !s.IsNotFound()) return s;
  if (reader.exited()) {
    *elsewhere = reader.exit();
    return Status::OK();
  }
  if (range != nullptr && !(reader.answered() == range->meganode)) {
    if (!reader.RangeOf(reader.answered(), range).ok()) range->meganode = GlobalPtr();  // only a hint
  }
  return s;
}

Status GlobalTree::Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out,
                        GlobalPtr from_meganode, GlobalPtr* elsewhere, std::string* resume) {
  return Scan(start, end, limit, out, from_meganode, elsewhere, resume, btree::ScanMode{});
}

Status GlobalTree::Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out,
                        GlobalPtr from_meganode, GlobalPtr* elsewhere, std::string* resume, btree::ScanMode mode) {
  *elsewhere = GlobalPtr();
  if (from_meganode == first_) from_meganode = GlobalPtr();  // the first meganode stands for the root
  GlobalReader reader(source_.get(), first_, node_region_->id());
  CELL_RETURN_IF_ERROR(reader.Scan(start, end, limit, out, from_meganode, mode));
  if (reader.exited()) {
    *elsewhere = reader.exit();
    *resume = reader.resume_key();
  }
  return Status::OK();
}

Status GlobalTree::ApproximateSize(std::string_view start, std::string_view end, btree::SizeEstimate* out,
                                   GlobalPtr from_meganode, GlobalPtr* elsewhere, std::string* resume) {
  *elsewhere = GlobalPtr();
  if (from_meganode == first_) from_meganode = GlobalPtr();  // the first meganode stands for the root
  GlobalReader reader(source_.get(), first_, node_region_->id());
  CELL_RETURN_IF_ERROR(reader.ApproximateSize(start, end, out, from_meganode));
  if (reader.exited()) {
    *elsewhere = reader.exit();
    *resume = reader.resume_key();
  }
  return Status::OK();
}

Status GlobalTree::CheckInvariants() const {
  struct Seen {
    GlobalPtr ptr, right;
    std::string min, max;
  };
  std::map<int, std::vector<Seen>> levels;
  std::lock_guard lock(megas_mu_);
  // At(), under the lock held here.
  auto find = [&](GlobalPtr p) -> const Mega* {
    if (!IsLocal(p) || p.offset % meganode_bytes_ != 0 || p.offset / meganode_bytes_ >= megas_.size()) return nullptr;
    return megas_[p.offset / meganode_bytes_].get();
  };
  // The meganodes the tree reaches from its root, by child pointers and right links: only they must tile the key
  // space. A meganode made for another server's split and not (yet) published is checked on its own. When the root is
  // on another server, every meganode here counts.
  std::set<const Mega*> reached;
  const bool root_here = IsLocal(first_);
  if (root_here) {
    const Mega* first = find(first_);
    if (first == nullptr) return Status::Corruption("the first meganode is missing");
    std::vector<GlobalPtr> todo{NodeView(first->store->SlotWords(0)).cluster_root()};
    while (!todo.empty()) {
      const GlobalPtr p = todo.back();
      todo.pop_back();
      if (p.is_null() || !IsLocal(p)) continue;
      const Mega* m = find(p);
      if (m == nullptr || m->tree == nullptr) {
        return Status::Corruption(
            fmt::format("the tree reaches {}:{}, which is no meganode of this server", p.region, p.offset));
      }
      if (!reached.insert(m).second) continue;
      NodeView hv(m->store->SlotWords(0));
      todo.push_back(hv.right());
      if (hv.level() > 0) {
        for (const auto& e : LeafEntries(*m->store, hv.root_slot(), hv.root_level())) todo.push_back(e.value.ptr);
      }
    }
  }
  for (const auto& m : megas_) {
    if (m == nullptr || m->tree == nullptr) continue;
    btree::BLinkTree::Shape shape;
    CELL_RETURN_IF_ERROR(m->tree->CheckInvariants(&shape));
    NodeView hv(m->store->SlotWords(0));
    Seen s{m->store->meganode(), hv.right(), "", ""};
    hv.CopyMinKey(&s.min);
    hv.CopyMaxKey(&s.max);
    for (const auto& e : LeafEntries(*m->store, hv.root_slot(), hv.root_level())) {
      if (btree::CompareKeys(e.key, s.min) < 0 || (!s.max.empty() && btree::CompareKeys(e.key, s.max) >= 0)) {
        return Status::Corruption("meganode at offset " + std::to_string(s.ptr.offset) +
                                  " holds a key outside its range");
      }
    }
    if (!root_here || reached.contains(m.get())) levels[hv.level()].push_back(std::move(s));
  }
  for (auto& [level, row] : levels) {
    std::sort(row.begin(), row.end(), [](const Seen& a, const Seen& b) {
      return a.min.empty() ? !b.min.empty() : !b.min.empty() && btree::CompareKeys(a.min, b.min) < 0;
    });
    for (size_t i = 0; i < row.size(); ++i) {
      const bool last = i + 1 == row.size();
      const std::string at = "level " + std::to_string(level) + " meganode " + std::to_string(i);
      if (i == 0 && !row[i].min.empty()) return Status::Corruption(at + ": the leftmost meganode has a finite min");
      if (last ? !row[i].max.empty() : row[i].max != row[i + 1].min) {
        return Status::Corruption(at + ": ranges do not tile the key space");
      }
      if (last ? !row[i].right.is_null() : !(row[i].right == row[i + 1].ptr)) {
        return Status::Corruption(at + ": right link is not the next meganode");
      }
    }
  }
  return Status::OK();
}

}  // namespace cell::meganode
