// Edits of a meganode's bytes shared by the tree's pieces (see tree_internals.h).
#include "meganode/tree_internals.h"

namespace cell::meganode {

using btree::NodeImage;
using btree::NodeView;

void SetMeganodeState(Meganode& store, uint8_t state) {
  EditMeganodeHeader(store, [state](NodeImage& h) { h.SetMeganodeState(state); });
}

void FreeMeganodeHeader(Meganode& store) {
  EditMeganodeHeader(store, [](NodeImage& h) { h.MarkFree(); });
}

uint32_t FirstChild(Meganode& store, uint32_t slot) {
  const uint64_t* w = store.SlotWords(slot);
  return w == nullptr ? 0 : NodeView(w).child_slot(0);
}

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

}  // namespace cell::meganode
