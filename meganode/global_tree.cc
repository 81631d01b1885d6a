// Cell's tree of meganodes in one process (see global_tree.h).
#include "meganode/global_tree.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>

#include "btree/node_lock.h"
#include "btree/record_format.h"
#include "common/log.h"
#include "common/shared_words.h"
#include "meganode/local_store.h"

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
  t->peers_ = options.peers;
  t->write_sink_ = options.write_sink;
  // Split ids and generations from the clock: unique across restarts (a peer may still hold an old generation).
  const uint64_t now_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  t->next_split_id_ = now_us;
  t->next_generation_ = now_us;
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
  if (t->peers_ != nullptr) {
    t->background_ = std::thread([raw = t.get()] { raw->BackgroundLoop(); });
    if (options.restore) {
      // A remote split may have crashed between publishing its right half and unsealing it: unseal every right
      // sibling on another server (of any generation; a no-op for one not sealed).
      std::lock_guard lock(t->megas_mu_);
      for (const auto& m : t->megas_) {
        if (m == nullptr) continue;
        const GlobalPtr right = NodeView(m->store->SlotWords(0)).right();
        if (!right.is_null() && !t->IsLocal(right)) {
          t->Post([raw = t.get(), right] { raw->UnsealRemote(RemoteMeganode{right, 0}, 0); });
        }
      }
    }
  }
  return t;
}

GlobalTree::~GlobalTree() {
  {
    std::lock_guard lock(bg_mu_);
    stopping_ = true;
    bg_cv_.notify_all();
  }
  if (background_.joinable()) background_.join();
}

void GlobalTree::Post(std::function<void()> task, std::chrono::milliseconds delay) {
  std::lock_guard lock(bg_mu_);
  if (stopping_ || !background_.joinable()) return;  // no background thread (no peers), or shutting down
  tasks_.emplace(std::chrono::steady_clock::now() + delay, std::move(task));
  bg_cv_.notify_one();
}

void GlobalTree::BackgroundLoop() {
  std::unique_lock lock(bg_mu_);
  while (!stopping_) {
    if (tasks_.empty()) {
      // Idle: look at the membership now and then, so that writers know whether remote splits are possible.
      if (!bg_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_ || !tasks_.empty(); })) {
        lock.unlock();
        peers_hint_.store(peers_->HavePeers(), std::memory_order_relaxed);
        lock.lock();
      }
      continue;
    }
    const auto due = tasks_.begin()->first;
    if (std::chrono::steady_clock::now() < due) {
      bg_cv_.wait_until(lock, due);
      continue;
    }
    auto task = std::move(tasks_.begin()->second);
    tasks_.erase(tasks_.begin());
    lock.unlock();
    task();
    lock.lock();
  }
}

GlobalTree::Mega* GlobalTree::At(GlobalPtr meganode) const {
  if (!IsLocal(meganode) || meganode.offset % meganode_bytes_ != 0) return nullptr;
  const uint64_t i = meganode.offset / meganode_bytes_;
  std::lock_guard lock(megas_mu_);
  return i < megas_.size() ? megas_[i].get() : nullptr;
}

size_t GlobalTree::meganodes_in_use() const {
  std::lock_guard lock(megas_mu_);
  return std::count_if(megas_.begin(), megas_.end(), [](const auto& m) { return m != nullptr; });
}

namespace {
void FreeMeganodeHeader(Meganode& store);
}  // namespace

StatusOr<GlobalTree::Mega*> GlobalTree::NewMeganode(const btree::MeganodeInfo& info) {
  size_t index = 0;
  {
    std::lock_guard lock(megas_mu_);
    while (index < megas_.size() && megas_[index] != nullptr) ++index;
    if (index == megas_.size()) {
      return Status::ResourceExhausted("all " + std::to_string(megas_.size()) +
                                       " meganodes of the node region are in use");
    }
    megas_[index] = std::make_unique<Mega>();  // reserves the index; not reachable until a pointer to it is published
    megas_[index]->generation = next_generation_++;
  }
  Mega* m = megas_[index].get();
  Status made = [&]() -> Status {
    if (fault_) CELL_RETURN_IF_ERROR(fault_("new meganode"));
    CELL_ASSIGN_OR_RETURN(m->store, Meganode::Create(node_region_.get(), index * meganode_bytes_, meganode_bytes_));
    m->store->set_write_sink(write_sink_);
    CELL_RETURN_IF_ERROR(btree::BLinkTree::Format(m->store.get(), info));
    m->tree = std::make_unique<btree::BLinkTree>(m->store.get(), source_.get());
    return Status::OK();
  }();
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

namespace {
// Publishes a meganode's header as `edit` changes it, under the header's node lock.
template <typename Edit>
void EditMeganodeHeader(Meganode& store, Edit edit) {
  uint64_t* hw = store.SlotWords(0);
  const uint64_t locked = btree::LockNode(hw);
  NodeImage header;
  btree::LoadLocked(hw, &header);
  edit(header);
  store.Publish(0, &header, locked);
}

// Publishes a meganode header with its state flags (btree::kFlagPending, kFlagSealed) set to `state`.
void SetMeganodeState(Meganode& store, uint8_t state) {
  EditMeganodeHeader(store, [state](NodeImage& h) { h.SetMeganodeState(state); });
}

// Publishes a meganode header as free: the meganode is gone (a restart will not find it).
void FreeMeganodeHeader(Meganode& store) {
  EditMeganodeHeader(store, [](NodeImage& h) { h.MarkFree(); });
}

void CutNodes(Meganode& store, uint32_t root_slot, int root_level, const std::string& sep, uint32_t* cut = nullptr,
              bool fences = true);
std::vector<btree::NodeEntry> LeafEntriesOf(Meganode& store);
uint32_t FirstChild(Meganode& store, uint32_t slot);
}  // namespace

Status GlobalTree::Rebuild() {
  const uint32_t here = node_region_->id();
  std::vector<GlobalPtr> named;  // meganodes the headers here name: right siblings, and the cluster's root
  for (size_t i = 0; i < megas_.size(); ++i) {
    const GlobalPtr ptr{here, i * meganode_bytes_};
    const uint64_t* w = node_region_->Resolve(ptr.offset, btree::kNodeSize);
    const NodeView v(w);
    if (v.version() == 0 || v.kind() != btree::NodeKind::kMeganodeHeader || !v.valid()) continue;
    if (btree::CheckCopy(w, ptr) != btree::CopyCheck::kOk) {
      return Status::Corruption(fmt::format("the meganode header at {}:{} fails its check", ptr.region, ptr.offset));
    }
    named.push_back(v.right());
    named.push_back(v.cluster_root());
    auto m = std::make_unique<Mega>();
    m->generation = next_generation_++;
    CELL_ASSIGN_OR_RETURN(m->store, Meganode::Create(node_region_.get(), ptr.offset, meganode_bytes_));
    m->store->set_write_sink(write_sink_);
    m->tree = std::make_unique<btree::BLinkTree>(m->store.get(), source_.get());
    if (v.sealed()) {
      m->sealed.store(true);
      m->recovered_sealed = true;
      ++recovery_.sealed;
    }
    megas_[i] = std::move(m);
  }
  for (auto& m : megas_) {
    if (m == nullptr) continue;
    const NodeView v(m->store->SlotWords(0));
    if (!v.pending()) continue;
    const GlobalPtr ptr = m->store->meganode();
    if (std::find(named.begin(), named.end(), ptr) != named.end()) {
      SetMeganodeState(*m->store, 0);  // published before the crash: the split (or root split) is kept
      ++recovery_.pending_kept;
    } else {
      LogInfo("recovery: meganode {}:{} was made by a split that never published it; freed", ptr.region, ptr.offset);
      FreeMeganodeHeader(*m->store);
      m.reset();
      ++recovery_.orphans_freed;
    }
  }
  for (auto& m : megas_) {
    if (m == nullptr) continue;
    ++recovery_.meganodes;
    Meganode& store = *m->store;
    const NodeView hv(store.SlotWords(0));
    std::string max;
    hv.CopyMaxKey(&max);
    if (!max.empty()) CutNodes(store, hv.root_slot(), hv.root_level(), max, &recovery_.nodes_cut, /*fences=*/false);
    // The nodes reachable from the header: each level from its leftmost node along the right links.
    std::vector<uint32_t> used;
    uint32_t leftmost = hv.root_slot();
    for (int level = hv.root_level(); level >= 0; --level) {
      for (uint32_t s = leftmost; s != 0;) {
        const uint64_t* w = store.SlotWords(s);
        if (w == nullptr ||
            btree::CheckCopy(w, store.meganode().Plus(uint64_t{s} * btree::kNodeSize)) != btree::CopyCheck::kOk ||
            !NodeView(w).valid() || NodeView(w).level() != level || used.size() > store.num_slots()) {
          return Status::Corruption(
              fmt::format("meganode {}:{}: the node in slot {} (level {}) is not a valid node "
                          "of its tree",
                          store.meganode().region, store.meganode().offset, s, level));
        }
        used.push_back(s);
        uint32_t next = 0;
        const GlobalPtr right = NodeView(w).right();
        if (!right.is_null() && !store.SlotOf(right, &next)) {
          return Status::Corruption(fmt::format("meganode {}:{}: the node in slot {} links outside its meganode",
                                                store.meganode().region, store.meganode().offset, s));
        }
        s = next;
      }
      if (level > 0) leftmost = FirstChild(store, leftmost);
    }
    store.Restore(used, hv.root_level());
    if (hv.level() == 0) {
      for (const btree::NodeEntry& e : LeafEntriesOf(store)) {
        CELL_RETURN_IF_ERROR(extents_->MarkUsed(e.value.ptr, (uint64_t{e.value.length} + 7) / 8 * 8));
        ++recovery_.records;
        recovery_.record_bytes += e.value.length;
      }
    }
  }
  return Status::OK();
}

void GlobalTree::WriteRecord(GlobalPtr extent, const std::vector<uint64_t>& record) {
  std::atomic_thread_fence(std::memory_order_release);  // the extent writer's fence (LocalStore::Put explains it)
  CopyToShared(regions_.Resolve(extent, record.size() * 8), record.data(), record.size());
  // Reported after the copy (a checkpoint whose lsn is past this report then holds the bytes: it copies after it
  // reads its lsn) and before any node can point to the block (it is fresh: nothing reads it until a leaf does).
  if (write_sink_ != nullptr) write_sink_->BytesWritten(extent, record.data(), record.size());
}

namespace {
Status SplittingRemotely(GlobalPtr m) {
  return Status::Unavailable(fmt::format("meganode {}:{} is being split to another server; retry", m.region, m.offset));
}
}  // namespace

template <typename Lock>
Status GlobalTree::AwaitSplit(Mega* m, Lock& lock) {
  if (m->remote_split) return SplittingRemotely(m->store->meganode());
  // The split ends by moving splits_ended on under the exclusive lock, so it is still at `ended` now.
  const uint32_t ended = m->splits_ended.load(std::memory_order_acquire);
  lock.unlock();
  m->splits_ended.wait(ended, std::memory_order_acquire);  // a local split: memory work only, never the network
  return Status::OK();
}

Status GlobalTree::Write(int level, std::string_view key, const std::function<Status(btree::BLinkTree&)>& write,
                         GlobalPtr start, GlobalPtr* elsewhere, btree::MeganodeRange* range,
                         const std::vector<uint64_t>* record, GlobalPtr* extent) {
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
      if (record != nullptr && extent->is_null()) {
        // The key's leaf meganode is here: its record goes into this server's extents (kept across attempts).
        auto allocated = extents_->Allocate(record->size() * 8);
        if (!allocated.ok()) {
          lock.unlock();
          return NoRoom(mega, level,
                        fmt::format("extent region {} is full: a record of {} bytes does not fit "
                                    "({} of {} bytes free)",
                                    extent_region_->id(), extents_->BlockSizeFor(record->size() * 8),
                                    extents_->capacity() - extents_->bytes_in_use(), extents_->capacity()));
        }
        *extent = *allocated;
        WriteRecord(*extent, *record);
      }
      s = write(*mega->tree);
    }
    if (s.IsResourceExhausted()) {  // the meganode is full: split it, try again
      Status split = Split(mega, level, seen_splits, Placement::kLocal);
      if (split.IsResourceExhausted() && meganodes_in_use() == megas_.size()) {
        return NoRoom(mega, level,
                      fmt::format("all {} meganodes of node region {} are in use", megas_.size(), node_region_->id()));
      }
      CELL_RETURN_IF_ERROR(split);
      continue;
    }
    if (s.ok()) MaybeQueueSplit(mega, level);
    if (range != nullptr && !(m == range->meganode) && (s.ok() || s.IsNotFound())) {
      // Only a hint for the client's path cache: the write is done, whatever reading the range gives.
      if (!reader.RangeOf(m, range).ok()) range->meganode = GlobalPtr();
    }
    return s;
  }
  return Status::Aborted("the meganode for a key kept changing");
}

Status GlobalTree::NoRoom(Mega* m, int level, const std::string& what) {
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  if (peers_ != nullptr && now >= relief_failed_until_.load(std::memory_order_relaxed)) {
    // Half of the meganode (entries and records) moves to a server with room, from the background thread; the
    // writer retries meanwhile, and finds room here or the key there (or, if no server took it, is told so).
    if (!m->split_queued.exchange(true)) {
      Post([this, m, level] {
        uint64_t seen = 0;
        {
          std::shared_lock lock(m->split_mu);
          seen = m->splits;
        }
        m->split_queued.store(false);
        Status s = Split(m, level, seen, Placement::kRemoteOnly);
        if (s.ok()) stats_.room_splits.fetch_add(1, std::memory_order_relaxed);
        if (!s.ok() && !s.IsUnavailable()) {
          // No server took it: for a while, writers that find no room here are told so at once.
          relief_failed_until_.store(
              (std::chrono::steady_clock::now() + std::chrono::milliseconds(100)).time_since_epoch().count(),
              std::memory_order_relaxed);
          LogWarning("could not move part of a full meganode to another server: {}", s.ToString());
        }
      });
    }
    return Status::Unavailable(what + "; moving part of the meganode to a server with room: retry");
  }
  return Status::ResourceExhausted(what + (peers_ == nullptr ? "" : "; no other server has room for it either"));
}

bool GlobalTree::WantsRemote() {
  if (peers_ == nullptr) return false;
  const bool have = peers_->HavePeers();  // may ask the membership: background thread only
  peers_hint_.store(have, std::memory_order_relaxed);
  return have && placed_remotely_.load(std::memory_order_relaxed) < meganodes_in_use();
}

void GlobalTree::MaybeQueueSplit(Mega* m, int level) {
  // Writers never ask the membership (the background thread refreshes peers_hint_).
  if (peers_ == nullptr || !peers_hint_.load(std::memory_order_relaxed) || !m->store->MostlyFull()) return;
  if (m->split_queued.exchange(true)) return;
  Post([this, m, level] {
    if (!WantsRemote()) {
      m->split_queued.store(false);
      return;
    }
    uint64_t seen = 0;
    bool full_enough = false;
    {
      std::shared_lock lock(m->split_mu);
      seen = m->splits;
      full_enough = m->store->MostlyFull() && !m->sealed.load() && !m->splitting;
    }
    m->split_queued.store(false);
    if (!full_enough) return;
    Status s = Split(m, level, seen, Placement::kRemoteIfWanted);
    // ResourceExhausted: mostly empty nodes (deleted entries), nothing to split; Unavailable: try again later.
    if (!s.ok() && !s.IsResourceExhausted() && !s.IsUnavailable()) {
      LogWarning("a background meganode split failed: {}", s.ToString());
    }
  });
}

namespace {
// The leftmost child of the node at `slot`, or 0 if the slot is not in the meganode.
uint32_t FirstChild(Meganode& store, uint32_t slot) {
  const uint64_t* w = store.SlotWords(slot);
  return w == nullptr ? 0 : NodeView(w).child_slot(0);
}

// The level-0 entries of a meganode's local tree, in key order (no writer may run).
std::vector<btree::NodeEntry> LeafEntries(Meganode& store, uint32_t root_slot, int root_level) {
  uint32_t slot = root_slot;
  for (int level = root_level; level > 0; --level) slot = FirstChild(store, slot);
  std::vector<btree::NodeEntry> out;
  while (slot != 0) {
    const uint64_t* w = store.SlotWords(slot);
    if (w == nullptr) break;
    NodeView v(w);
    for (uint32_t i = 0; i < v.size(); ++i) {
      out.emplace_back();
      v.CopyEntryKey(i, &out.back().key);
      out.back().value = v.leaf_value(i);
    }
    uint32_t next = 0;
    if (!v.right().is_null() && !store.SlotOf(v.right(), &next)) break;
    slot = next;
  }
  return out;
}

// The level-0 entries of a meganode's local tree, from its header.
std::vector<btree::NodeEntry> LeafEntriesOf(Meganode& store) {
  NodeView hv(store.SlotWords(0));
  return LeafEntries(store, hv.root_slot(), hv.root_level());
}

// Step 4 of a split: cut every level of the meganode at `sep`, from the top (see global_tree.h). *cut, if given,
// counts the nodes changed. Without `fences` (recovery: no reader holds an old header), a node that holds nothing at
// or above sep keeps its max fence (a right half's nodes have the infinite fences of a new meganode's nodes).
void CutNodes(Meganode& store, uint32_t root_slot, int root_level, const std::string& sep, uint32_t* cut, bool fences) {
  std::vector<uint32_t> leftmost(root_level + 1);
  uint32_t slot = root_slot;
  for (int level = root_level; level >= 0; --level) {
    leftmost[level] = slot;
    if (level > 0) slot = FirstChild(store, slot);
  }
  std::vector<uint32_t> freed;
  std::string min, max;
  for (int level = root_level; level >= 0; --level) {
    for (uint32_t s = leftmost[level]; s != 0;) {
      uint64_t* w = store.SlotWords(s);
      if (w == nullptr) break;
      const uint64_t locked = btree::LockNode(w);
      NodeImage image;
      btree::LoadLocked(w, &image);
      const NodeView v = image.view();
      uint32_t next = 0;
      if (!v.right().is_null()) store.SlotOf(v.right(), &next);
      v.CopyMinKey(&min);
      v.CopyMaxKey(&max);
      if (!min.empty() && btree::CompareKeys(min, sep) >= 0) {
        image.MarkFree();  // wholly at or above the cut: invalid from now on
        store.Publish(s, &image, locked);
        freed.push_back(s);
        if (cut != nullptr) ++*cut;
      } else if (max.empty() || btree::CompareKeys(max, sep) > 0) {
        std::vector<btree::NodeEntry> entries = image.Entries();
        size_t keep = 0;
        while (keep < entries.size() && ((level > 0 && keep == 0) || btree::CompareKeys(entries[keep].key, sep) < 0)) {
          ++keep;
        }
        if (!fences && keep == entries.size() && v.right().is_null()) {
          btree::UnlockUnchanged(w, locked);
          s = next;
          continue;
        }
        btree::NodeHeader header = image.Header();
        header.right = GlobalPtr();
        image.Build(header, min, sep, entries.data(), keep);  // fewer entries than before: always fits
        store.Publish(s, &image, locked);
        if (cut != nullptr) ++*cut;
      } else if (btree::CompareKeys(max, sep) == 0 && !v.right().is_null()) {
        image.SetRight(GlobalPtr());
        store.Publish(s, &image, locked);
        if (cut != nullptr) ++*cut;
      } else {
        btree::UnlockUnchanged(w, locked);
      }
      s = next;
    }
  }
  if (!freed.empty()) store.FreeSlots(freed.data(), static_cast<uint32_t>(freed.size()));
}
}  // namespace

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

Status GlobalTree::Put(std::string_view key, std::string_view value, GlobalPtr start, GlobalPtr* elsewhere,
                       btree::MeganodeRange* range) {
  *elsewhere = GlobalPtr();  // (a caller may pass the start's own variable)
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, value));
  if (start == first_) start = GlobalPtr();  // the first meganode stands for the root (where a walk starts over)
  thread_local std::vector<uint64_t> record;
  const uint64_t checksum = btree::EncodeRecord(key, value, &record);
  const auto length = static_cast<uint32_t>(btree::RecordLength(key.size(), value.size()));
  // The record is allocated and written by Write once it has found the key's leaf meganode here (into `extent`):
  // where the key's meganode is on another server, it is that server's extents that hold it.
  GlobalPtr extent;
  std::optional<LeafValue> replaced;
  const auto put = [&](btree::BLinkTree& tree) {
    return tree.Put(key, LeafValue{extent, length, checksum}, &replaced);
  };
  Status s = Write(0, key, put, start, elsewhere, range, &record, &extent);
  if (!s.ok() || !elsewhere->is_null()) {
    if (!extent.is_null()) extents_->Free(extent);
    return s;
  }
  if (replaced) return extents_->Free(replaced->ptr);
  return Status::OK();
}

Status GlobalTree::Get(std::string_view key, std::string* value, GlobalPtr start, GlobalPtr* elsewhere,
                       btree::MeganodeRange* range) {
  *elsewhere = GlobalPtr();
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, {}));
  if (start == first_) start = GlobalPtr();  // the first meganode stands for the root
  GlobalReader reader(source_.get(), first_, node_region_->id());
  Status s = reader.Get(key, value, start);
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

Status GlobalTree::Delete(std::string_view key, GlobalPtr start, GlobalPtr* elsewhere, btree::MeganodeRange* range) {
  *elsewhere = GlobalPtr();
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, {}));
  if (start == first_) start = GlobalPtr();  // the first meganode stands for the root
  LeafValue removed;
  CELL_RETURN_IF_ERROR(Write(
      0, key, [&](btree::BLinkTree& tree) { return tree.Delete(key, &removed); }, start, elsewhere, range));
  if (!elsewhere->is_null()) return Status::OK();
  return extents_->Free(removed.ptr);
}

Status GlobalTree::Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out,
                        GlobalPtr from_meganode, GlobalPtr* elsewhere, std::string* resume) {
  *elsewhere = GlobalPtr();
  if (from_meganode == first_) from_meganode = GlobalPtr();  // the first meganode stands for the root
  GlobalReader reader(source_.get(), first_, node_region_->id());
  CELL_RETURN_IF_ERROR(reader.Scan(start, end, limit, out, from_meganode));
  if (reader.exited()) {
    *elsewhere = reader.exit();
    *resume = reader.resume_key();
  }
  return Status::OK();
}

namespace {
// A pointer another server sent for a meganode: null, or in a region (GlobalPtr region 0 is null).
bool PlausibleMeganode(GlobalPtr p) { return p.is_null() || p.region != 0; }
}  // namespace

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
  sealed.state = btree::kFlagSealed;  // in its header too, so that a restart keeps it sealed
  CELL_ASSIGN_OR_RETURN(Mega * m, NewMeganode(sealed));
  m->sealed.store(true, std::memory_order_release);  // before anyone can know its pointer
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
    if (leaf) CELL_RETURN_IF_ERROR(CheckKeyValue(e.key, e.value));
  }
  for (const MovedEntry& e : entries) {
    LeafValue entry{e.child, 0, 0};
    if (leaf) {
      thread_local std::vector<uint64_t> record;
      const uint64_t checksum = btree::EncodeRecord(e.key, e.value, &record);
      CELL_ASSIGN_OR_RETURN(GlobalPtr extent, extents_->Allocate(record.size() * 8));
      WriteRecord(extent, record);
      entry = LeafValue{extent, static_cast<uint32_t>(btree::RecordLength(e.key.size(), e.value.size())), checksum};
    }
    std::optional<LeafValue> replaced;
    Status s = m->tree->Put(e.key, entry, &replaced);
    if (!s.ok()) {
      if (leaf) extents_->Free(entry.ptr);
      return s;
    }
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

Status GlobalTree::Split(Mega* m, int level, uint64_t seen_splits, Placement placement) {
  // Asked before any lock is taken: it may ask the membership.
  const bool try_remote = placement == Placement::kRemoteOnly       ? peers_ != nullptr && peers_->HavePeers()
                          : placement == Placement::kRemoteIfWanted ? WantsRemote()
                                                                    : false;
  if (placement == Placement::kRemoteOnly && !try_remote) return Status::ResourceExhausted("no other live server");
  Meganode& store = *m->store;
  std::string sep;
  std::vector<btree::NodeEntry> right;  // the right half's entries: unchanged until the split ends (its writers wait)
  btree::MeganodeInfo info;

  // Phase 1 (global_tree.h): choose the split key, copy the right half's entries out, hold off their writers.
  {
    std::unique_lock lock(m->split_mu);
    if (m->splits != seen_splits) return Status::OK();  // split meanwhile by another writer
    if (m->splitting) return AwaitSplit(m, lock);       // being split by another writer
    if (m->sealed.load()) return Status::Unavailable("a sealed meganode cannot split yet; retry");
    // Read under the header's node lock: SetClusterRoot may be publishing it (no other writer changes the header
    // while we hold the split lock).
    uint64_t* hw = store.SlotWords(0);
    const uint64_t header_locked = btree::LockNode(hw);
    NodeImage header;
    btree::LoadLocked(hw, &header);
    btree::UnlockUnchanged(hw, header_locked);
    const NodeView hv = header.view();
    std::vector<btree::NodeEntry> entries = LeafEntries(store, hv.root_slot(), hv.root_level());
    if (entries.size() < 2) return Status::ResourceExhausted("a meganode is full with fewer than two entries");
    const size_t mid = entries.size() / 2;
    sep = entries[mid].key;
    right.assign(std::make_move_iterator(entries.begin() + mid), std::make_move_iterator(entries.end()));
    hv.CopyMinKey(&info.min);
    hv.CopyMaxKey(&info.max);
    info.right = hv.right();
    info.level = hv.level();
    m->splitting = true;
    m->remote_split = try_remote;
    m->split_key = sep;
  }
  const uint64_t split_id = next_split_id_.fetch_add(1, std::memory_order_relaxed);
  if (write_sink_ != nullptr) {
    write_sink_->SplitMarked(
        true, split_id,
        fmt::format("meganode {}:{} (level {}) splits at '{}'{}", store.meganode().region, store.meganode().offset,
                    info.level, sep, try_remote ? ", to another server" : ""));
  }
  // Ends the split (phase 5, or phase 2 failing): writers held off come back.
  const auto end_split = [this, m, split_id] {
    if (write_sink_ != nullptr) write_sink_->SplitMarked(false, split_id, {});
    {
      std::unique_lock lock(m->split_mu);
      m->splitting = false;
      m->remote_split = false;
      m->split_key.clear();
      m->splits_ended.fetch_add(1, std::memory_order_release);
    }
    m->splits_ended.notify_all();
  };

  // Phase 2, no lock held: writers below the split key go on. The right half goes into a new meganode N.
  if (split_copy_observer_) split_copy_observer_(sep, try_remote);
  btree::MeganodeInfo right_info = info;
  right_info.min = sep;
  right_info.cluster_root = GlobalPtr();
  right_info.state = btree::kFlagPending;  // until M's header names it (a remote right half is sealed instead)
  GlobalPtr right_half;
  RemoteMeganode remote_half;
  bool remote = false;
  if (try_remote) {
    // N on another server, sealed, with the right half's records; the right half's writers retry meanwhile.
    std::vector<MovedEntry> moved(right.size());
    Status read = Status::OK();
    for (size_t i = 0; i < right.size() && read.ok(); ++i) {
      MovedEntry& e = moved[i];
      e.key = right[i].key;
      if (info.level > 0) {
        e.child = right[i].value.ptr;
        continue;
      }
      const LeafValue& v = right[i].value;
      const uint64_t* words = regions_.Resolve(v.ptr, v.length);
      if (words == nullptr) {
        read = Status::Corruption("a leaf entry points outside this server's extents");
        break;
      }
      std::vector<uint64_t> copy((v.length + 7) / 8);
      CopyFromShared(copy.data(), words, copy.size());
      std::string_view value;
      if (!btree::CheckRecord(copy.data(), v, e.key, &value)) {
        read = Status::Corruption(fmt::format("the record of key '{}' does not match its leaf entry", e.key));
        break;
      }
      e.value = std::string(value);
    }
    if (read.ok()) read = SyncBeforePeers();  // the split's mark, before another server holds its right half
    auto n = read.ok() ? peers_->CreateMeganode(right_info, moved) : StatusOr<RemoteMeganode>(read);
    if (n.ok()) {
      right_half = n->ptr;
      remote_half = *n;
      remote = true;
    } else if (placement == Placement::kRemoteOnly) {
      end_split();  // a local split would not make room here
      return n.status();
    } else {
      LogWarning("placing a meganode's right half on another server failed ({}); splitting locally",
                 n.status().ToString());
      std::unique_lock lock(m->split_mu);
      m->remote_split = false;  // the right half's writers may wait now: the rest is memory work
    }
  }
  std::unique_lock<SplitLock> n_lock;
  if (!remote) {
    auto n = NewMeganode(right_info);
    if (!n.ok()) {
      end_split();
      return n.status();
    }
    Status filled = fault_ ? fault_("right half") : Status::OK();
    for (size_t i = 0; i < right.size() && filled.ok(); ++i) {
      std::optional<LeafValue> replaced;
      filled = (*n)->tree->Put(right[i].key, right[i].value, &replaced);
    }
    if (!filled.ok()) {
      ReleaseMeganode(*n);  // pending, named by no header: its place goes back
      end_split();
      return Status::Internal("the right half of a meganode does not fit a new one: " + filled.ToString());
    }
    right_half = (*n)->store->meganode();
    // No writer may change N before M is cut (step 4 in global_tree.h).
    n_lock = std::unique_lock<SplitLock>((*n)->split_mu);
  }

  // Phases 3 and 4: M's writers below the split key have finished; publish M's header and cut its nodes.
  {
    std::unique_lock lock(m->split_mu);
    ++m->splits;
    // The left half's header (max sep, right link to N), keeping its root (which phase 2's writers may have grown)
    // and the cluster root it may hold.
    uint64_t* hw = store.SlotWords(0);
    const uint64_t locked = btree::LockNode(hw);
    NodeImage header;
    btree::LoadLocked(hw, &header);
    const uint32_t root_slot = header.view().root_slot();
    const int root_level = header.view().root_level();
    info.max = sep;
    info.right = right_half;
    info.cluster_root = header.view().cluster_root();
    header.BuildMeganodeHeader(store.meganode(), root_slot, root_level, info);
    store.Publish(0, &header, locked);
    if (!remote) SetMeganodeState(*At(right_half)->store, 0);  // named by M's header now: no orphan

    if (split_observer_) split_observer_(sep);
    CutNodes(store, root_slot, root_level, sep);
    if (remote && info.level == 0) {
      // The moved entries' records here are no longer referenced: every node that held them has a new version.
      for (const btree::NodeEntry& e : right) extents_->Free(e.value.ptr);
    }
  }
  // Phase 5.
  end_split();
  if (n_lock.owns_lock()) n_lock.unlock();
  stats_.splits.fetch_add(1, std::memory_order_relaxed);
  if (remote) {
    stats_.remote_splits.fetch_add(1, std::memory_order_relaxed);
    placed_remotely_.fetch_add(1, std::memory_order_relaxed);
    UnsealRemote(remote_half, 0);
  }
  return InsertSeparator(GlobalPtr(), level + 1, sep, right_half);
}

void GlobalTree::SetClusterRoot(GlobalPtr root) {
  EditMeganodeHeader(*At(first_)->store, [root](NodeImage& h) { h.SetClusterRoot(root); });
}

Status GlobalTree::SyncBeforePeers() {
  if (write_sink_ == nullptr) return Status::OK();
  Status s = write_sink_->Sync();
  if (!s.ok())
    LogWarning("could not make this server's writes durable before telling another server: {}", s.ToString());
  return s;
}

void GlobalTree::UnsealRemote(const RemoteMeganode& meganode, int attempt) {
  // The split that published it (the left half's header and cut) is durable here before the peer unseals it.
  Status s = SyncBeforePeers();
  if (s.ok()) s = peers_->Unseal(meganode);
  if (s.ok()) return;
  // Until it is unsealed its keys refuse writes: keep trying (from the background thread), ever less often.
  if (attempt == 10) {
    LogError("cannot unseal meganode {}:{} on its server yet: {}; still trying", meganode.ptr.region,
             meganode.ptr.offset, s.ToString());
  }
  Post([=, this] { UnsealRemote(meganode, attempt + 1); },
       std::chrono::milliseconds(std::min(10 * (attempt + 1), 1000)));
}

void GlobalTree::PostRemoteInsert(GlobalPtr at, int level, const std::string& separator, GlobalPtr child, int attempt) {
  Post(
      [=, this] {
        stats_.remote_separators.fetch_add(1, std::memory_order_relaxed);
        // The split that made the child is durable here before another server's meganode names it.
        Status s = SyncBeforePeers();
        if (s.ok()) s = peers_->InsertSeparator(at, level, separator, child);
        if (s.ok()) return;
        if (attempt < 50) return PostRemoteInsert(at, level, separator, child, attempt + 1);
        // The tree stays correct without it (right links lead to the child); searches for its keys take a longer way.
        LogWarning("gave up sending separator '{}' to meganode {}:{}: {}", separator, at.region, at.offset,
                   s.ToString());
      },
      std::chrono::milliseconds(attempt == 0 ? 0 : std::min(10 * attempt, 500)));
}

Status GlobalTree::InsertSeparator(GlobalPtr at, int level, const std::string& separator, GlobalPtr child) {
  if (level < 1 || level > kMaxMeganodeLevel || separator.empty() || separator.size() > kMaxKeySize) {
    return Status::InvalidArgument(fmt::format("a separator needs a level of 1..{} (not {}) and a key of 1..{} bytes",
                                               kMaxMeganodeLevel, level, kMaxKeySize));
  }
  if (!(at.is_null() || at == first_ || IsMeganodeAddress(at))) {
    return Status::InvalidArgument(
        fmt::format("a separator's walk cannot begin at {}:{}: no meganode's address here", at.region, at.offset));
  }
  if (child.is_null() || !PlausibleMeganode(child))
    return Status::InvalidArgument("a separator needs a child meganode");
  if (IsLocal(child)) {
    // The child is here: it must be what a split publishes, a meganode one level down whose range begins at the
    // separator (a child elsewhere is its own server's to vouch for).
    Mega* c = IsMeganodeAddress(child) ? At(child) : nullptr;
    std::string min;
    if (c != nullptr && c->tree != nullptr) NodeView(c->store->SlotWords(0)).CopyMinKey(&min);
    if (c == nullptr || c->tree == nullptr || c->sealed.load(std::memory_order_acquire) ||
        NodeView(c->store->SlotWords(0)).level() != level - 1 || min != separator) {
      return Status::InvalidArgument(fmt::format(
          "separator at level {}: {}:{} is not a published meganode of level {} whose range begins at the separator",
          level, child.region, child.offset, level - 1));
    }
  }
  if (at == first_) at = GlobalPtr();
  GlobalReader reader(source_.get(), first_, node_region_->id());
  const LeafValue entry{child, 0, 0};
  for (int attempt = 0; attempt < 10000; ++attempt) {
    if (at.is_null() && IsLocal(first_)) {
      CELL_ASSIGN_OR_RETURN(GlobalPtr root, reader.Root());
      TreeReader::Header root_header;
      CELL_RETURN_IF_ERROR(TreeReader(source_.get(), root).ReadHeader(nullptr, &root_header));
      if (root_header.level < level - 1) {
        return Status::InvalidArgument(
            fmt::format("a separator for level {}, but the root is at level {}", level, root_header.level));
      }
      if (root_header.level < level) {
        // The root split: a new root meganode over the old root and its new right sibling.
        std::lock_guard lock(root_mu_);
        CELL_ASSIGN_OR_RETURN(GlobalPtr now, reader.Root());
        if (!(now == root)) continue;  // another thread grew it meanwhile
        CELL_RETURN_IF_ERROR(CheckLeftOfSeparator(root, separator, child));
        btree::MeganodeInfo info;
        info.level = level;
        info.state = btree::kFlagPending;  // until the first meganode names it
        CELL_ASSIGN_OR_RETURN(Mega * r, NewMeganode(info));
        std::optional<LeafValue> replaced;
        CELL_RETURN_IF_ERROR(r->tree->Put(std::string(1, '\0'), LeafValue{root, 0, 0}, &replaced));
        CELL_RETURN_IF_ERROR(r->tree->Put(separator, entry, &replaced));
        SetClusterRoot(r->store->meganode());
        SetMeganodeState(*r->store, 0);
        stats_.root_splits.fetch_add(1, std::memory_order_relaxed);
        return Status::OK();
      }
    }
    // The root reaches `level` (it only grows): the parent meganode is there to be found. Where it is here, the
    // entry the separator lands beside names the meganode left of it.
    GlobalPtr parent;
    CELL_RETURN_IF_ERROR(reader.Locate(separator, level, &parent, nullptr, at));
    if (!reader.exited()) {
      std::string unused;
      TreeReader::Step step;
      CELL_RETURN_IF_ERROR(TreeReader(source_.get(), parent).Find(separator, &unused, &step));
      if (step.kind == TreeReader::Step::Kind::kChild) {
        CELL_RETURN_IF_ERROR(CheckLeftOfSeparator(step.next, separator, child));
      }
    }
    GlobalPtr elsewhere;
    Status s = Write(
        level, separator,
        [&](btree::BLinkTree& tree) {
          std::optional<LeafValue> replaced;
          return tree.Put(separator, entry, &replaced);
        },
        at, &elsewhere);
    if (s.IsUnavailable() && peers_ != nullptr) {
      // The parent is sealed or splitting to another server: try again shortly, from the background thread.
      Post(
          [=, this] {
            Status again = InsertSeparator(at, level, separator, child);
            if (!again.ok()) LogWarning("inserting separator '{}': {}", separator, again.ToString());
          },
          std::chrono::milliseconds(20));
      return Status::OK();
    }
    if (!s.ok()) return s;
    if (!elsewhere.is_null()) {
      if (peers_ == nullptr) return Status::Internal("a tree of one process met another server's meganode");
      PostRemoteInsert(elsewhere, level, separator, child, 0);
    }
    return Status::OK();
  }
  return Status::Aborted("could not insert a separator into the parent meganode");
}

Status GlobalTree::CheckLeftOfSeparator(GlobalPtr left, const std::string& separator, GlobalPtr child) const {
  for (int hops = 0; hops < 4096 && IsLocal(left); ++hops) {
    if (left == child) return Status::OK();  // inserted before: a retried request
    TreeReader::Header h;
    CELL_RETURN_IF_ERROR(TreeReader(source_.get(), left).ReadHeader(nullptr, &h, /*with_range=*/true));
    if (!h.max.empty() && btree::CompareKeys(h.max, separator) < 0) {
      left = h.right;  // it split again since, at a smaller key: its right siblings lead to the separator
      continue;
    }
    if (h.max == separator && h.right == child) return Status::OK();
    return Status::InvalidArgument(fmt::format(
        "separator -> {}:{}: the meganode left of it ({}:{}) does not end at the separator and link to that child",
        child.region, child.offset, left.region, left.offset));
  }
  return Status::OK();  // the chain leads to another server, which vouches for its own meganodes
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
