// What the pieces of the tree of meganodes (global_tree.cc, split.cc, tree_recovery.cc, sealed_meganodes.cc) share:
// edits of a meganode's header, a meganode's leaf entries, and cutting a meganode's nodes at a split key. Internal to
// meganode/.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "btree/node_format.h"
#include "btree/node_lock.h"
#include "meganode/global_tree.h"
#include "meganode/meganode.h"

namespace cell::meganode {

// Publishes a meganode's header as `edit` changes it, under the header's node lock.
template <typename Edit>
void EditMeganodeHeader(Meganode& store, Edit edit) {
  uint64_t* hw = store.SlotWords(0);
  const uint64_t locked = btree::LockNode(hw);
  btree::NodeImage header;
  btree::LoadLocked(hw, &header);
  edit(header);
  store.Publish(0, &header, locked);
}

// Publishes a meganode header with its state flags (btree::kFlagPending, kFlagSealed) set to `state`.
void SetMeganodeState(Meganode& store, uint8_t state);
// Publishes a meganode header as free: the meganode is gone (a restart will not find it).
void FreeMeganodeHeader(Meganode& store);

// The leftmost child of the node at `slot`, or 0 if the slot is not in the meganode.
uint32_t FirstChild(Meganode& store, uint32_t slot);
// The level-0 entries of a meganode's local tree, in key order (no writer may run).
std::vector<btree::NodeEntry> LeafEntries(Meganode& store, uint32_t root_slot, int root_level);
std::vector<btree::NodeEntry> LeafEntriesOf(Meganode& store);

// Step 4 of a split: cut every level of the meganode at `sep`, from the top (see split.cc). *cut, if given, counts
// the nodes changed. Without `fences` (recovery: no reader holds an old header), a node that holds nothing at or above
// sep keeps its max fence (a right half's nodes have the infinite fences of a new meganode's nodes).
void CutNodes(Meganode& store, uint32_t root_slot, int root_level, const std::string& sep, uint32_t* cut = nullptr,
              bool fences = true);

// A pointer another server sent for a meganode: null, or in a region (GlobalPtr region 0 is null).
inline bool PlausibleMeganode(GlobalPtr p) { return p.is_null() || p.region != 0; }

template <typename Lock>
Status GlobalTree::AwaitSplit(Mega* m, Lock& lock) {
  if (m->remote_split) {
    const GlobalPtr p = m->store->meganode();
    return Status::Unavailable(
        fmt::format("meganode {}:{} is being split to another server; retry", p.region, p.offset));
  }
  // The split ends by moving splits_ended on under the exclusive lock, so it is still at `ended` now.
  const uint32_t ended = m->splits_ended.load(std::memory_order_acquire);
  lock.unlock();
  m->splits_ended.wait(ended, std::memory_order_acquire);  // a local split: memory work only, never the network
  return Status::OK();
}

}  // namespace cell::meganode
