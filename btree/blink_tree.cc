// Sagiv's B-link tree writers (see blink_tree.h).
#include "btree/blink_tree.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "btree/node_lock.h"

namespace cell::btree {

bool PartitionEntries(const std::vector<NodeEntry>& entries, int level, std::string_view min, std::string_view max,
                      std::vector<size_t>* starts, std::vector<std::string>* separators, bool exact_leaf_separators) {
  const size_t n = entries.size();
  starts->clear();
  separators->clear();
  if (n < 2) return false;
  auto separator_before = [&](size_t i) {
    return level == 0 && !exact_leaf_separators ? ShortestSeparator(entries[i - 1].key, entries[i].key)
                                                : entries[i].key;
  };
  auto cost = [&](size_t i, bool first) -> uint32_t {
    return (level > 0 && first) ? 2 : NodeImage::EntryWords(entries[i].key.size(), level);
  };
  auto fits = [&](size_t a, size_t b, size_t min_len, size_t max_len) {
    if (b - a > kMaxEntries) return false;
    uint32_t words = kHeaderWords + NodeImage::FenceWords(min_len) + NodeImage::FenceWords(max_len);
    for (size_t i = a; i < b; ++i) words += cost(i, i == a);
    return words <= kNodeWords;
  };

  // Two pieces, the most balanced cut that fits.
  std::vector<uint64_t> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost(i, false);
  std::vector<size_t> cuts(n - 1);
  std::iota(cuts.begin(), cuts.end(), size_t{1});
  std::sort(cuts.begin(), cuts.end(), [&](size_t a, size_t b) {
    auto imbalance = [&](size_t c) { return std::llabs(int64_t(2 * prefix[c]) - int64_t(prefix[n])); };
    return imbalance(a) < imbalance(b);
  });
  for (size_t c : cuts) {
    std::string sep = separator_before(c);
    if (fits(0, c, min.size(), sep.size()) && fits(c, n, sep.size(), max.size())) {
      *starts = {0, c};
      separators->push_back(std::move(sep));
      return true;
    }
  }
  // More pieces: greedy, each as long as it fits. One entry always fits with any two fences.
  size_t min_len = min.size();
  for (size_t a = 0; a < n;) {
    auto max_len_at = [&](size_t b) { return b == n ? max.size() : separator_before(b).size(); };
    if (!fits(a, a + 1, min_len, max_len_at(a + 1))) return false;
    size_t b = a + 1;
    while (b < n && fits(a, b + 1, min_len, max_len_at(b + 1))) ++b;
    starts->push_back(a);
    if (a > 0) separators->push_back(separator_before(a));
    if (b < n) min_len = separator_before(b).size();
    a = b;
  }
  return starts->size() >= 2;
}

Status BLinkTree::Format(NodeStore* store, const MeganodeInfo& info) {
  uint32_t root = 0;
  CELL_RETURN_IF_ERROR(store->AllocateSlots(1, false, &root));
  NodeImage image;
  uint8_t flags = kFlagValid | (info.level > 0 ? kFlagInternalMeganode : 0);
  // The local root covers every key: the meganode's range is kept (and checked) in its header.
  image.Build(NodeHeader{store->meganode(), root, 0, flags, GlobalPtr()}, "", "", nullptr, 0);
  store->Publish(root, &image, LockNode(store->SlotWords(root)));
  image.BuildMeganodeHeader(store->meganode(), root, 0, info);
  store->Publish(0, &image, LockNode(store->SlotWords(0)));
  store->OnRootLevel(0);
  return Status::OK();
}

BLinkTree::BLinkTree(NodeStore* store, NodeSource* local) : store_(store), local_(local) {
  TreeReader reader = Reader();
  GlobalPtr root;
  int level = 0;
  NodeHandle h;
  if (reader.ReadRoot(&root, &level).ok() && local_->Fetch(root, &h).ok()) {
    node_flags_ = kFlagValid | (h.view.flags() & kFlagInternalMeganode);
  }
}

void BLinkTree::Publish(uint32_t slot, uint64_t locked, NodeImage* image) {
  if (store_->publish_observer()) {
    image->Seal(locked + 1);
    store_->publish_observer()(slot, *image);
  }
  store_->Publish(slot, image, locked);
}

Status BLinkTree::LockCovering(const SearchKey& k, int level, uint32_t slot, bool have_hint, Path* path, Locked* out) {
  TreeReader reader = Reader();
  for (int attempt = 0;; ++attempt) {
    if (attempt > 1000000) return Status::Aborted("could not lock the node covering the key");
    if (!have_hint) {
      NodeHandle h;
      CELL_RETURN_IF_ERROR(reader.Descend(k, level, path, &h));
      if (!store_->SlotOf(h.ptr, &slot)) return Status::Internal("descent left the meganode");
    }
    out->slot = slot;
    out->words = store_->SlotWords(slot);
    out->version = LockNode(out->words);
    LoadLocked(out->words, &out->image);
    NodeView v = out->image.view();
    if (v.kind() == NodeKind::kTreeNode && v.valid() && v.level() == level && v.CompareMin(k) <= 0) {
      if (v.CompareMax(k) > 0) return Status::OK();
      GlobalPtr right = v.right();
      Unlock(out);
      if (!store_->SlotOf(right, &slot)) {
        return Status::FailedPrecondition("key lies beyond this meganode's range");
      }
      have_hint = true;
      continue;
    }
    Unlock(out);
    have_hint = false;
  }
}

Status BLinkTree::Update(std::string_view key, absl::FunctionRef<StatusOr<LeafChange>(const LeafValue* current)> decide,
                         std::optional<LeafValue>* old) {
  CELL_RETURN_IF_ERROR(CheckKeySize(key));
  SearchKey k(key);
  Path path;
  Locked leaf;
  CELL_RETURN_IF_ERROR(LockCovering(k, 0, 0, false, &path, &leaf));
  NodeView v = leaf.image.view();
  const uint32_t i = v.LowerBound(k);
  const bool present = i < v.size() && v.CompareEntry(i, k) == 0;
  if (present) {
    *old = v.leaf_value(i);
  } else {
    old->reset();
  }
  StatusOr<LeafChange> change = decide(present ? &**old : nullptr);
  if (!change.ok() || change->op == LeafChange::Op::kKeep || (change->op == LeafChange::Op::kRemove && !present)) {
    Unlock(&leaf);
    return change.status();
  }
  if (change->op == LeafChange::Op::kRemove) {
    leaf.image.RemoveEntry(i);
  } else if (present) {
    leaf.image.SetLeafValue(i, change->value);
  } else if (!leaf.image.InsertEntry(i, key, change->value, 0)) {
    std::vector<NodeEntry> entries = leaf.image.Entries();
    entries.insert(entries.begin() + i, NodeEntry{std::string(key), change->value, 0});
    return Split(&leaf, std::move(entries), &path, /*continuing=*/false);
  }
  Publish(&leaf);
  return Status::OK();
}

Status BLinkTree::Put(std::string_view key, const LeafValue& value, std::optional<LeafValue>* replaced) {
  return Update(
      key,
      [&](const LeafValue*) {
        return StatusOr<LeafChange>(LeafChange{LeafChange::Op::kSet, value});
      },
      replaced);
}

Status BLinkTree::Delete(std::string_view key, LeafValue* removed) {
  std::optional<LeafValue> old;
  CELL_RETURN_IF_ERROR(Update(
      key,
      [&](const LeafValue*) {
        return StatusOr<LeafChange>(LeafChange{LeafChange::Op::kRemove, {}});
      },
      &old));
  if (!old) return Status::NotFound("key not found");
  *removed = *old;
  return Status::OK();
}

Status BLinkTree::Split(Locked* node, std::vector<NodeEntry> entries, Path* path, bool continuing) {
  NodeView v = node->image.view();
  const int level = v.level();
  const NodeHeader header = node->image.Header();
  std::string min, max;
  v.CopyMinKey(&min);
  v.CopyMaxKey(&max);
  std::vector<size_t> starts;
  std::vector<std::string> seps;
  // In an internal meganode a leaf's min fence must be its first separator, so that the separator at or below any
  // key it covers is in the leaf itself (TreeReader::Find): no suffix truncation there.
  if (!PartitionEntries(entries, level, min, max, &starts, &seps, (node_flags_ & kFlagInternalMeganode) != 0)) {
    Unlock(node);
    return Status::Internal("a node's entries could not be partitioned into nodes");
  }
  const size_t pieces = starts.size();
  std::vector<uint32_t> slots(pieces - 1);
  Status s = store_->AllocateSlots(static_cast<uint32_t>(slots.size()), continuing, slots.data());
  if (!s.ok()) {
    Unlock(node);
    return s;
  }
  // Right to left, so that each new node's right link already exists when it is written.
  for (size_t c = pieces - 1; c >= 1; --c) {
    NodeHeader h = header;
    h.slot = slots[c - 1];
    h.right = c == pieces - 1 ? header.right : store_->SlotPtr(slots[c]);
    size_t end = c == pieces - 1 ? entries.size() : starts[c + 1];
    std::string_view piece_max = c == pieces - 1 ? std::string_view(max) : std::string_view(seps[c]);
    NodeImage image;
    if (!image.Build(h, seps[c - 1], piece_max, entries.data() + starts[c], end - starts[c])) {
      Unlock(node);  // cannot happen: PartitionEntries checked the sizes
      return Status::Internal("a split piece does not fit its node");
    }
    uint64_t* w = store_->SlotWords(h.slot);
    Publish(h.slot, LockNode(w), &image);
  }
  NodeHeader left = header;
  left.right = store_->SlotPtr(slots[0]);
  if (!node->image.Build(left, min, seps[0], entries.data(), starts[1])) {
    Unlock(node);
    return Status::Internal("the left split piece does not fit its node");
  }
  Publish(node);
  stats_.splits.fetch_add(1, std::memory_order_relaxed);
  for (size_t c = 1; c < pieces; ++c) InsertSeparator(level + 1, seps[c - 1], slots[c - 1], path);
  return Status::OK();
}

void BLinkTree::InsertSeparator(int level, const std::string& separator, uint32_t child, Path* path) {
  SearchKey k(separator);
  TreeReader reader = Reader();
  for (int attempt = 0; attempt < 1000; ++attempt) {
    GlobalPtr root;
    int root_level = 0;
    if (!reader.ReadRoot(&root, &root_level).ok()) break;
    if (root_level < level) {
      bool grown = false;
      if (!GrowRoot(level, separator, child, &grown).ok()) break;
      if (grown) return;
      continue;
    }
    uint32_t slot = 0;
    bool hint = path->Has(level) && store_->SlotOf(path->At(level), &slot);
    Locked parent;
    if (!LockCovering(k, level, slot, hint, path, &parent).ok()) break;
    NodeView v = parent.image.view();
    uint32_t i = v.UpperBound(k, 1);
    if (parent.image.InsertEntry(i, separator, LeafValue(), child)) {
      Publish(&parent);
      return;
    }
    std::vector<NodeEntry> entries = parent.image.Entries();
    entries.insert(entries.begin() + i, NodeEntry{separator, LeafValue(), child});
    if (!Split(&parent, std::move(entries), path, /*continuing=*/true).ok()) break;
    return;
  }
  stats_.missing_separators.fetch_add(1, std::memory_order_relaxed);
}

Status BLinkTree::GrowRoot(int level, const std::string& separator, uint32_t child, bool* grown) {
  *grown = false;
  uint64_t* hw = store_->SlotWords(0);
  uint64_t locked = LockNode(hw);
  NodeImage header;
  LoadLocked(hw, &header);
  NodeView hv = header.view();
  if (hv.root_level() >= level) {
    UnlockUnchanged(hw, locked);
    return Status::OK();
  }
  uint32_t slot = 0;
  Status s = store_->AllocateSlots(1, true, &slot);
  if (!s.ok()) {
    UnlockUnchanged(hw, locked);
    return s;
  }
  // The old root is the leftmost node of its level, so it becomes the new root's first child.
  NodeEntry entries[2] = {NodeEntry{"", LeafValue(), hv.root_slot()}, NodeEntry{separator, LeafValue(), child}};
  NodeImage root;
  root.Build(NodeHeader{store_->meganode(), slot, level, node_flags_, GlobalPtr()}, "", "", entries, 2);
  uint64_t* w = store_->SlotWords(slot);
  Publish(slot, LockNode(w), &root);
  header.SetRoot(slot, level);
  Publish(0, locked, &header);
  store_->OnRootLevel(level);
  stats_.root_splits.fetch_add(1, std::memory_order_relaxed);
  *grown = true;
  return Status::OK();
}

namespace {

// A broken invariant, named by where it was found.
Status NodeCorruption(int level, uint32_t slot, const std::string& what) {
  return Status::Corruption("level " + std::to_string(level) + " slot " + std::to_string(slot) + ": " + what);
}

// Checks the entries of `v`, a node with fences [min, max): keys strictly increasing and inside the fences (an inner
// node's first key is implicit: its min); for an inner node, each child one level down, beginning at its separator
// and, with exact_parents (no separator was ever left out), ending at the next one. *first_child, if asked for: the
// inner node's first child.
Status CheckEntries(NodeSource* source, const NodeStore& store, const NodeView& v, const std::string& min,
                    const std::string& max, bool exact_parents, GlobalPtr* first_child) {
  const int level = v.level();
  const uint32_t slot = v.slot();
  NodeHandle child;
  std::string key, prev_key, child_min, child_max, next_sep;
  for (uint32_t i = 0; i < v.size(); ++i) {
    bool implicit = level > 0 && i == 0;
    if (implicit) {
      key = min;
    } else {
      v.CopyEntryKey(i, &key);
      SearchKey sk(key);
      if (v.CompareMin(sk) > 0 || v.CompareMax(sk) <= 0) return NodeCorruption(level, slot, "key outside the fences");
      if (i > (level > 0 ? 1u : 0u) && CompareKeys(prev_key, key) >= 0) {
        return NodeCorruption(level, slot, "keys not strictly increasing");
      }
    }
    prev_key = key;
    if (level > 0) {
      uint32_t c = v.child_slot(i);
      CELL_RETURN_IF_ERROR(source->Fetch(store.SlotPtr(c), &child));
      child.view.CopyMinKey(&child_min);
      child.view.CopyMaxKey(&child_max);
      if (child.view.level() != level - 1) return NodeCorruption(level, slot, "child at the wrong level");
      if (child_min != key) return NodeCorruption(level, slot, "child min key differs from its separator");
      if (i + 1 < v.size())
        v.CopyEntryKey(i + 1, &next_sep);
      else
        next_sep = max;
      if (exact_parents && child_max != next_sep)
        return NodeCorruption(level, slot, "child max key differs from next separator");
      if (i == 0 && first_child != nullptr) *first_child = store.SlotPtr(c);
    }
  }
  return Status::OK();
}

}  // namespace

Status BLinkTree::CheckInvariants(Shape* shape) const {
  *shape = Shape();
  TreeReader reader = Reader();
  GlobalPtr root;
  int root_level = 0;
  CELL_RETURN_IF_ERROR(reader.ReadRoot(&root, &root_level));
  shape->height = root_level + 1;
  shape->nodes_per_level.assign(root_level + 1, 0);
  bool exact_parents = stats_.missing_separators.load() == 0;
  // A meganode split cuts its nodes at the meganode's new max: the rightmost node of a level then ends there, with
  // no right link (global_tree.h). Until its first split, a meganode's nodes reach +infinity.
  std::string meganode_max;
  {
    NodeHandle header;
    CELL_RETURN_IF_ERROR(local_->Fetch(store_->meganode(), &header));
    header.view.CopyMaxKey(&meganode_max);
  }
  auto edge = [&](const std::string& max) { return max.empty() || (!meganode_max.empty() && max == meganode_max); };
  GlobalPtr leftmost = root;
  NodeHandle h;
  std::string min, max, prev_max;
  for (int level = root_level; level >= 0; --level) {
    GlobalPtr ptr = leftmost;
    prev_max.clear();
    bool first = true;
    while (!ptr.is_null()) {
      CELL_RETURN_IF_ERROR(local_->Fetch(ptr, &h));
      const NodeView& v = h.view;
      uint32_t slot = v.slot();
      if (v.kind() != NodeKind::kTreeNode || !v.valid()) return NodeCorruption(level, slot, "not a valid tree node");
      if (!(v.self() == ptr) || v.level() != level) return NodeCorruption(level, slot, "wrong identity or level");
      v.CopyMinKey(&min);
      v.CopyMaxKey(&max);
      if (!first && (min.empty() || min != prev_max)) {
        return NodeCorruption(level, slot, "min key differs from left max");
      }
      if (first && !min.empty()) return NodeCorruption(level, slot, "leftmost node has a finite min key");
      if (!v.max_is_infinite() && CompareKeys(min, max) >= 0 && !min.empty()) {
        return NodeCorruption(level, slot, "min key not below max key");
      }
      if (v.right().is_null() ? !edge(max) : v.max_is_infinite()) {
        return NodeCorruption(level, slot, "right link disagrees with max key");
      }
      ++shape->nodes;
      ++shape->nodes_per_level[level];
      if (level == 0) {
        ++shape->leaves;
        shape->entries += v.size();
      }
      if (level > 0 && v.size() == 0) return NodeCorruption(level, slot, "inner node without children");
      CELL_RETURN_IF_ERROR(CheckEntries(local_, *store_, v, min, max, exact_parents, first ? &leftmost : nullptr));
      prev_max = max;
      first = false;
      ptr = v.right();
    }
    if (!edge(prev_max)) return NodeCorruption(level, 0, "rightmost node ends before the meganode's max");
  }
  return Status::OK();
}

}  // namespace cell::btree
