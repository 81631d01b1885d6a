// Cell's tree of meganodes in one process (see global_tree.h).
#include "meganode/global_tree.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "btree/node_lock.h"
#include "btree/record_format.h"
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
                                                        options.meganode_bytes * options.meganodes,
                                                        options.backing));
  CELL_ASSIGN_OR_RETURN(t->extent_region_,
                        Region::Create(options.extent_region_id, options.extent_region_bytes, options.backing));
  t->regions_.Add(t->node_region_.get());
  t->regions_.Add(t->extent_region_.get());
  CELL_ASSIGN_OR_RETURN(t->extents_,
                        ExtentAllocator::Create(t->extent_region_.get(), 0, options.extent_region_bytes));
  t->source_ = std::make_unique<btree::LocalNodeSource>(&t->regions_);
  t->megas_.resize(options.meganodes);
  // The first meganode: a leaf meganode over every key, and the root.
  btree::MeganodeInfo info;
  info.cluster_root = t->first_meganode();
  CELL_ASSIGN_OR_RETURN(Mega * first, t->NewMeganode(info));
  if (first->store->meganode() != t->first_meganode()) return Status::Internal("the first meganode is not at 0");
  return t;
}

GlobalTree::Mega* GlobalTree::At(GlobalPtr meganode) const {
  if (meganode.region != node_region_->id() || meganode.offset % meganode_bytes_ != 0) return nullptr;
  const uint64_t i = meganode.offset / meganode_bytes_;
  std::lock_guard lock(megas_mu_);
  return i < megas_.size() ? megas_[i].get() : nullptr;
}

size_t GlobalTree::meganodes_in_use() const {
  std::lock_guard lock(megas_mu_);
  return std::count_if(megas_.begin(), megas_.end(), [](const auto& m) { return m != nullptr; });
}

StatusOr<GlobalTree::Mega*> GlobalTree::NewMeganode(const btree::MeganodeInfo& info) {
  size_t index = 0;
  {
    std::lock_guard lock(megas_mu_);
    while (index < megas_.size() && megas_[index] != nullptr) ++index;
    if (index == megas_.size()) {
      return Status::ResourceExhausted("all " + std::to_string(megas_.size()) + " meganodes of the node region are in use");
    }
    megas_[index] = std::make_unique<Mega>();  // reserves the index; not reachable until a pointer to it is published
  }
  Mega* m = megas_[index].get();
  CELL_ASSIGN_OR_RETURN(m->store, Meganode::Create(node_region_.get(), index * meganode_bytes_, meganode_bytes_));
  CELL_RETURN_IF_ERROR(btree::BLinkTree::Format(m->store.get(), info));
  m->tree = std::make_unique<btree::BLinkTree>(m->store.get(), source_.get());
  return m;
}

Status GlobalTree::Write(int level, std::string_view key, const std::function<Status(btree::BLinkTree&)>& write) {
  btree::SearchKey k(key);
  GlobalReader reader(source_.get(), first_meganode());
  for (int attempt = 0; attempt < 10000; ++attempt) {
    GlobalPtr m;
    CELL_RETURN_IF_ERROR(reader.Locate(key, level, &m, nullptr));
    Mega* mega = At(m);
    if (mega == nullptr) return Status::Internal("a meganode pointer names no meganode of this tree");
    Status s;
    uint64_t seen_splits = 0;
    {
      std::shared_lock lock(mega->split_mu);
      // Under the split lock the range is stable; a split may have moved the key right since Locate.
      TreeReader::Header header;
      CELL_RETURN_IF_ERROR(TreeReader(source_.get(), m).ReadHeader(&k, &header));
      if (header.position != 0) continue;
      seen_splits = mega->splits;
      s = write(*mega->tree);
    }
    if (s.IsResourceExhausted()) {  // the meganode is full (records were allocated before): split it, try again
      CELL_RETURN_IF_ERROR(Split(mega, level, seen_splits));
      continue;
    }
    return s;
  }
  return Status::Aborted("the meganode for a key kept changing");
}

Status GlobalTree::Put(std::string_view key, std::string_view value) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, value));
  thread_local std::vector<uint64_t> record;
  const uint64_t checksum = btree::EncodeRecord(key, value, &record);
  auto extent = extents_->Allocate(record.size() * 8);
  if (!extent.ok()) return extent.status();
  std::atomic_thread_fence(std::memory_order_release);  // the extent writer's fence (LocalStore::Put explains it)
  CopyToShared(regions_.Resolve(*extent, record.size() * 8), record.data(), record.size());
  const LeafValue entry{*extent, static_cast<uint32_t>(btree::RecordLength(key.size(), value.size())), checksum};
  std::optional<LeafValue> replaced;
  Status s = Write(0, key, [&](btree::BLinkTree& tree) { return tree.Put(key, entry, &replaced); });
  if (!s.ok()) {
    extents_->Free(*extent);
    return s;
  }
  if (replaced) return extents_->Free(replaced->ptr);
  return Status::OK();
}

Status GlobalTree::Get(std::string_view key, std::string* value) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, {}));
  return GlobalReader(source_.get(), first_meganode()).Get(key, value);
}

Status GlobalTree::Delete(std::string_view key) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, {}));
  LeafValue removed;
  CELL_RETURN_IF_ERROR(Write(0, key, [&](btree::BLinkTree& tree) { return tree.Delete(key, &removed); }));
  return extents_->Free(removed.ptr);
}

Status GlobalTree::Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out) {
  return GlobalReader(source_.get(), first_meganode()).Scan(start, end, limit, out);
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

// Step 4 of a split: cut every level of the meganode at `sep`, from the top (see global_tree.h).
void CutNodes(Meganode& store, uint32_t root_slot, int root_level, const std::string& sep) {
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
        btree::PublishAndUnlock(w, &image, locked);
        freed.push_back(s);
      } else if (max.empty() || btree::CompareKeys(max, sep) > 0) {
        std::vector<btree::NodeEntry> entries = image.Entries();
        size_t keep = 0;
        while (keep < entries.size() && ((level > 0 && keep == 0) || btree::CompareKeys(entries[keep].key, sep) < 0)) {
          ++keep;
        }
        btree::NodeHeader header = image.Header();
        header.right = GlobalPtr();
        image.Build(header, min, sep, entries.data(), keep);  // fewer entries than before: always fits
        btree::PublishAndUnlock(w, &image, locked);
      } else if (btree::CompareKeys(max, sep) == 0 && !v.right().is_null()) {
        image.SetRight(GlobalPtr());
        btree::PublishAndUnlock(w, &image, locked);
      } else {
        btree::UnlockUnchanged(w, locked);
      }
      s = next;
    }
  }
  if (!freed.empty()) store.FreeSlots(freed.data(), static_cast<uint32_t>(freed.size()));
}
}  // namespace

Status GlobalTree::Split(Mega* m, int level, uint64_t seen_splits) {
  std::string sep;
  GlobalPtr right_half;
  {
    std::unique_lock lock(m->split_mu);
    Meganode& store = *m->store;
    if (m->splits != seen_splits) return Status::OK();  // split meanwhile by another writer
    ++m->splits;
    uint64_t* hw = store.SlotWords(0);
    NodeView hv(hw);  // no writer changes the header while we hold the split lock, except SetClusterRoot (locked)
    const uint32_t root_slot = hv.root_slot();
    const int root_level = hv.root_level();
    std::vector<btree::NodeEntry> entries = LeafEntries(store, root_slot, root_level);
    if (entries.size() < 2) return Status::ResourceExhausted("a meganode is full with fewer than two entries");
    const size_t mid = entries.size() / 2;
    sep = entries[mid].key;

    btree::MeganodeInfo info;
    hv.CopyMinKey(&info.min);
    hv.CopyMaxKey(&info.max);
    info.right = hv.right();
    info.level = hv.level();
    btree::MeganodeInfo right_info = info;
    right_info.min = sep;
    right_info.cluster_root = GlobalPtr();
    CELL_ASSIGN_OR_RETURN(Mega * n, NewMeganode(right_info));
    for (size_t i = mid; i < entries.size(); ++i) {
      std::optional<LeafValue> replaced;
      Status s = n->tree->Put(entries[i].key, entries[i].value, &replaced);
      if (!s.ok()) return Status::Internal("the right half of a meganode does not fit a new one: " + s.ToString());
    }
    right_half = n->store->meganode();
    // No writer may change N before M is cut (step 4 in global_tree.h).
    std::unique_lock n_lock(n->split_mu);

    // Publish the left half's header (max sep, right link to N), keeping its root and the cluster root it may hold.
    const uint64_t locked = btree::LockNode(hw);
    NodeImage header;
    btree::LoadLocked(hw, &header);
    info.max = sep;
    info.right = right_half;
    info.cluster_root = header.view().cluster_root();
    header.BuildMeganodeHeader(store.meganode(), header.view().root_slot(), header.view().root_level(), info);
    btree::PublishAndUnlock(hw, &header, locked);

    if (split_observer_) split_observer_(sep);
    CutNodes(store, root_slot, root_level, sep);
  }
  stats_.splits.fetch_add(1, std::memory_order_relaxed);
  return InsertSeparator(level + 1, sep, right_half);
}

void GlobalTree::SetClusterRoot(GlobalPtr root) {
  uint64_t* hw = At(first_meganode())->store->SlotWords(0);
  const uint64_t locked = btree::LockNode(hw);
  NodeImage header;
  btree::LoadLocked(hw, &header);
  header.SetClusterRoot(root);
  btree::PublishAndUnlock(hw, &header, locked);
}

Status GlobalTree::InsertSeparator(int level, const std::string& separator, GlobalPtr child) {
  GlobalReader reader(source_.get(), first_meganode());
  const LeafValue entry{child, 0, 0};
  for (int attempt = 0; attempt < 10000; ++attempt) {
    CELL_ASSIGN_OR_RETURN(GlobalPtr root, reader.Root());
    TreeReader::Header root_header;
    CELL_RETURN_IF_ERROR(TreeReader(source_.get(), root).ReadHeader(nullptr, &root_header));
    if (root_header.level < level) {
      // The root split: a new root meganode over the old root and its new right sibling.
      std::lock_guard lock(root_mu_);
      CELL_ASSIGN_OR_RETURN(GlobalPtr now, reader.Root());
      if (!(now == root)) continue;  // another thread grew it meanwhile
      btree::MeganodeInfo info;
      info.level = level;
      CELL_ASSIGN_OR_RETURN(Mega * r, NewMeganode(info));
      std::optional<LeafValue> replaced;
      CELL_RETURN_IF_ERROR(r->tree->Put(std::string(1, '\0'), LeafValue{root, 0, 0}, &replaced));
      CELL_RETURN_IF_ERROR(r->tree->Put(separator, entry, &replaced));
      SetClusterRoot(r->store->meganode());
      stats_.root_splits.fetch_add(1, std::memory_order_relaxed);
      return Status::OK();
    }
    // The root reaches `level` (it only grows): the parent meganode is there to be found.
    return Write(level, separator, [&](btree::BLinkTree& tree) {
      std::optional<LeafValue> replaced;
      return tree.Put(separator, entry, &replaced);
    });
  }
  return Status::Aborted("could not insert a separator into the parent meganode");
}

Status GlobalTree::CheckInvariants() const {
  struct Seen {
    GlobalPtr ptr, right;
    std::string min, max;
  };
  std::map<int, std::vector<Seen>> levels;
  std::lock_guard lock(megas_mu_);
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
        return Status::Corruption("meganode at offset " + std::to_string(s.ptr.offset) + " holds a key outside its range");
      }
    }
    levels[hv.level()].push_back(std::move(s));
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
