// The in-place and the copying node sources.
#include "btree/node_source.h"

#include <thread>

#include "btree/node_lock.h"

namespace cell::btree {

namespace {
std::string PtrText(GlobalPtr p) {
  return "region " + std::to_string(p.region) + " offset " + std::to_string(p.offset);
}
}  // namespace

Status LocalNodeSource::NotHeld(GlobalPtr ptr, const char* what) {
  return Status::FailedPrecondition(std::string(what) + " pointer " + PtrText(ptr) +
                                    " is not in a region held by this server");
}

Status LocalNodeSource::StillLocked(GlobalPtr ptr) {
  return Status::Aborted("node at " + PtrText(ptr) + " stayed locked by its writer");
}

Status LocalNodeSource::ReadWords(GlobalPtr ptr, size_t words, uint64_t* dst) {
  const uint64_t* w = memory_->Readable(ptr, words * 8);
  if (w == nullptr || ptr.offset % 8 != 0) return NotHeld(ptr, "extent");
  CopyFromShared(dst, w, words);
  return Status::OK();
}

Status CopyingNodeSource::Fetch(GlobalPtr ptr, NodeHandle* h) {
  if (cache_ != nullptr && cache_->Lookup(ptr, h->copy)) {
    h->ptr = ptr;
    h->version = h->copy[0];
    h->view = NodeView(h->copy);
    return Status::OK();
  }
  for (int attempt = 0; attempt < max_attempts_; ++attempt) {
    CELL_RETURN_IF_ERROR(fetcher_(ptr, kNodeWords, h->copy));
    switch (CheckCopy(h->copy, ptr)) {
      case CopyCheck::kOk:
      case CopyCheck::kFree:
        stats_.fetched.fetch_add(1, std::memory_order_relaxed);
        if (observer_) observer_(ptr, h->copy);
        if (cache_ != nullptr) cache_->Offer(ptr, h->copy);
        h->ptr = ptr;
        h->version = h->copy[0];
        h->view = NodeView(h->copy);
        return Status::OK();
      case CopyCheck::kBeingWritten:
        stats_.being_written.fetch_add(1, std::memory_order_relaxed);
        break;
      case CopyCheck::kTorn:
        stats_.torn.fetch_add(1, std::memory_order_relaxed);
        break;
      case CopyCheck::kWrongIdentity:
        stats_.wrong_identity.fetch_add(1, std::memory_order_relaxed);
        return Status::Corruption("node at " + PtrText(ptr) + " carries another node's identity");
    }
    if (attempt > 8) std::this_thread::yield();
  }
  return Status::Aborted("node at " + PtrText(ptr) + " was still changing after " + std::to_string(max_attempts_) +
                         " copies");
}

}  // namespace cell::btree
