// NodeStore: the writable side of one meganode, as the B-link tree's writers need it.
//
// Readers never see this interface (they use a NodeSource); writers lock, build and publish nodes through it.
// meganode::Meganode implements it over a slice of a node region.
#pragma once

#include <cstdint>
#include <functional>

#include "btree/node_format.h"
#include "btree/node_lock.h"
#include "btree/write_sink.h"
#include "cell/status.h"
#include "common/global_ptr.h"

namespace cell::btree {

class NodeStore {
 public:
  virtual ~NodeStore() = default;
  // The meganode's identity: the GlobalPtr of its first byte (slot 0 holds its header).
  virtual GlobalPtr meganode() const = 0;
  virtual uint32_t num_slots() const = 0;
  // The words of `slot` (1 KB), or nullptr if slot >= num_slots().
  virtual uint64_t* SlotWords(uint32_t slot) = 0;
  // Allocates n free slots, all or nothing. `continuing` is true inside a split cascade that has already
  // changed the tree: such requests may use the reserve that first splits leave untouched (see Meganode).
  virtual Status AllocateSlots(uint32_t n, bool continuing, uint32_t* out) = 0;
  // Returns slots to the free list (their nodes must already be published as free).
  virtual void FreeSlots(const uint32_t* slots, uint32_t n) = 0;
  // The tree's height changed (a new root); stores size their reserve from it.
  virtual void OnRootLevel(int /*level*/) {}

  GlobalPtr SlotPtr(uint32_t slot) const { return meganode().Plus(uint64_t{slot} * kNodeSize); }
  // The slot a node pointer names, if it is in this meganode.
  bool SlotOf(GlobalPtr p, uint32_t* slot) const {
    GlobalPtr m = meganode();
    if (p.region != m.region || p.offset < m.offset || (p.offset - m.offset) % kNodeSize != 0) return false;
    uint64_t s = (p.offset - m.offset) / kNodeSize;
    if (s >= num_slots()) return false;
    *slot = static_cast<uint32_t>(s);
    return true;
  }

  // Publishes `image` as the node in `slot` and releases the lock taken as `locked`, having first reported the
  // sealed image to the write sink (while the lock is held: before any reader or writer can see it, so the log
  // never lacks a write that anything may have seen or built on). Every node write goes through here.
  void Publish(uint32_t slot, NodeImage* image, uint64_t locked) {
    image->Seal(locked + 1);
    if (write_sink_ != nullptr) write_sink_->NodeWritten(SlotPtr(slot), *image);
    PublishSealedAndUnlock(SlotWords(slot), *image, locked);
  }
  // Where Publish reports node writes (null: nowhere). Set before the store is written.
  void set_write_sink(WriteSink* sink) { write_sink_ = sink; }
  WriteSink* write_sink() const { return write_sink_; }

  // Test seam: called with every image a writer publishes, while it still holds the node's lock.
  using PublishObserver = std::function<void(uint32_t slot, const NodeImage& image)>;
  void set_publish_observer(PublishObserver o) { publish_observer_ = std::move(o); }
  const PublishObserver& publish_observer() const { return publish_observer_; }

 private:
  PublishObserver publish_observer_;
  WriteSink* write_sink_ = nullptr;
};

}  // namespace cell::btree
