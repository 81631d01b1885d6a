// Recovery of a tree of meganodes from its regions' bytes (GlobalTreeOptions::restore).
//
// A restarted server fills its regions from its checkpoint and log, and the tree is rebuilt from their bytes: a
// meganode is every slot-0 header that is valid; its free node slots are those no node reachable from its header uses
// (a node written for a split whose left half was never published is such a slot); its records' blocks are marked in
// the extent allocator. Meganode headers carry their state: a meganode made for a split or a new root is *pending*
// until the meganode that names it (the left half's header, or the first meganode's root pointer) is published; one
// made for another server's split is *sealed* until unsealed. So:
//   - a pending meganode some header here names is the right half of a split whose step 3 was done: it is kept;
//     one that no header names is an orphan of a split or root split that never published it: it is freed;
//   - every meganode with a finite max is cut at it (step 4, idempotent), which finishes a split that crashed between
//     its steps 3 and 5;
//   - a sealed meganode stays sealed, awaiting its splitting server's Unseal or Abandon (of any generation);
//   - every meganode whose right link leads to another server is sent an Unseal (a no-op unless the crash came
//     between publishing a remote split and unsealing its right half; GlobalTree::Open sends them).
// The repairs are written through the write sink like any write. Splits begun and ended are also marked in the log
// (WriteSink::SplitMarked), for the report. Lost with the crash, and not repaired: separators not yet inserted into
// a parent meganode (right links keep their keys reachable), and a remote split's right half created on another
// server but never published (it stays sealed there).
#include <fmt/format.h>

#include <algorithm>

#include "btree/record_format.h"
#include "common/diagnostics.h"
#include "meganode/global_tree.h"
#include "meganode/tree_internals.h"

namespace cell::meganode {

using btree::NodeView;

Status GlobalTree::Rebuild() {
  std::vector<GlobalPtr> named;  // meganodes the headers here name: right siblings, and the cluster's root
  CELL_RETURN_IF_ERROR(FindMeganodes(&named));
  SettlePending(named);
  for (auto& m : megas_) {
    if (m == nullptr) continue;
    ++recovery_.meganodes;
    CELL_RETURN_IF_ERROR(RestoreMeganode(*m->store));
  }
  return Status::OK();
}

Status GlobalTree::FindMeganodes(std::vector<GlobalPtr>* named) {
  const uint32_t here = node_region_->id();
  for (size_t i = 0; i < megas_.size(); ++i) {
    const GlobalPtr ptr{here, i * meganode_bytes_};
    const uint64_t* w = node_region_->Resolve(ptr.offset, btree::kNodeSize);
    const NodeView v(w);
    if (v.version() == 0 || v.kind() != btree::NodeKind::kMeganodeHeader || !v.valid()) continue;
    if (btree::CheckCopy(w, ptr) != btree::CopyCheck::kOk) {
      return Status::Corruption(fmt::format("the meganode header at {}:{} fails its check", ptr.region, ptr.offset));
    }
    named->push_back(v.right());
    named->push_back(v.cluster_root());
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
  return Status::OK();
}

void GlobalTree::SettlePending(const std::vector<GlobalPtr>& named) {
  for (auto& m : megas_) {
    if (m == nullptr) continue;
    const NodeView v(m->store->SlotWords(0));
    if (!v.pending()) continue;
    const GlobalPtr ptr = m->store->meganode();
    if (std::find(named.begin(), named.end(), ptr) != named.end()) {
      SetMeganodeState(*m->store, 0);  // published before the crash: the split (or root split) is kept
      ++recovery_.pending_kept;
    } else {
      diag::Info("recovery: meganode {}:{} was made by a split that never published it; freed", ptr.region, ptr.offset);
      FreeMeganodeHeader(*m->store);
      m.reset();
      ++recovery_.orphans_freed;
    }
  }
}

Status GlobalTree::RestoreMeganode(Meganode& store) {
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
            fmt::format("meganode {}:{}: the node in slot {} (level {}) is not a valid node of its tree",
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
      // Versions go on above every one found; locks go back on the resolver's worklist (a transaction that was
      // committing here is finished or rolled back by it).
      btree::RecordFields fields;
      if (!ReadLocked(e.value, e.key, &fields).ok()) {
        return Status::Corruption(fmt::format("meganode {}:{}: the record of key '{}' does not match its entry",
                                              store.meganode().region, store.meganode().offset, e.key));
      }
      if (e.value.locked) {
        TxnLock lock;
        CELL_RETURN_IF_ERROR(DecodeTxnLock(fields.value, &lock));
        // The lock's other blocks: the key's old record, and the new value's reserved block.
        if (lock.old_present) {
          CELL_RETURN_IF_ERROR(extents_->MarkUsed(lock.old.ptr, (uint64_t{lock.old.length} + 7) / 8 * 8));
        }
        if (!lock.new_block.is_null()) {
          CELL_RETURN_IF_ERROR(extents_->MarkUsed(
              lock.new_block, (btree::RecordLength(e.key.size(), lock.new_value.size()) + 7) / 8 * 8));
        }
        NoteLock(e.key, lock.txid, lock.expires_us);
        ++recovery_.txn_locks;
      } else {
        ObserveVersion(fields.version);
      }
    }
  }
  return Status::OK();
}

}  // namespace cell::meganode
