// NodeSource: where a traversal gets its nodes. The one seam between server-side and client-side search.
//
// The search and scan code (btree/tree_reader.h) is written once, against this interface. A LocalNodeSource reads
// nodes in place in the server's own memory and validates by re-checking the version (optimistic read). A
// CopyingNodeSource fetches a private copy through a NodeFetcher (a one-sided read, later) and accepts it only if it
// passes CheckCopy; torn copies are retried and counted.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "btree/node_cache.h"
#include "btree/node_format.h"
#include "btree/node_lock.h"
#include "cell/status.h"
#include "common/global_ptr.h"

namespace cell::btree {

// A node being looked at. Sources fill it; traversals read `view` and ask the source to Validate.
struct NodeHandle {
  NodeView view;
  GlobalPtr ptr;
  uint64_t version = 0;                           // in-place sources: the version to re-check
  alignas(kCacheLine) uint64_t copy[kNodeWords];  // copying sources: the private copy
};

class LocalNodeSource;

class NodeSource {
 public:
  virtual ~NodeSource() = default;
  // The in-place source behind this interface, or nullptr. Traversals (btree/tree_reader.cc) are templates over the
  // source type and use this to call an in-place source directly (devirtualized and inlined); the traversal code is
  // the same for every source.
  virtual LocalNodeSource* AsLocal() { return nullptr; }
  // Makes h->view show a consistent state of the node at `ptr` (possibly a free or invalid node; judging that is
  // the traversal's job). Errors: the pointer names memory this source cannot reach, or a copy kept failing.
  virtual Status Fetch(GlobalPtr ptr, NodeHandle* h) = 0;
  // True if everything read through h.view since Fetch belongs to that one state.
  virtual bool Validate(const NodeHandle& h) = 0;
  // Copies `words` words of extent memory at `ptr` into dst (no validation: extent checksums do that).
  virtual Status ReadWords(GlobalPtr ptr, size_t words, uint64_t* dst) = 0;
  // Like Fetch, for a meganode header, of which only words 0..7 are read: a source may fetch less of it.
  virtual Status FetchHeader(GlobalPtr ptr, NodeHandle* h) { return Fetch(ptr, h); }
  // The node at `ptr` misled a traversal (a stale copy): a source that keeps copies drops it. Sources that read
  // the current state every time ignore it.
  virtual void Forget(GlobalPtr) {}
};

// Memory this process can read in place, by region id: a server's own regions, or a client's read-only mappings of a
// server's regions (shm).
class LocalMemory {
 public:
  virtual ~LocalMemory() = default;
  // The words at [ptr, ptr + bytes), or nullptr if that range is not all inside one region reachable here.
  virtual const uint64_t* Readable(GlobalPtr ptr, size_t bytes) const = 0;
  // Readable for a prefetch hint: nothing is read through the answer, so it must have no side effects (a client
  // neither connects, maps, renews a lease nor records an error for it); nullptr when in doubt.
  virtual const uint64_t* Peek(GlobalPtr ptr, size_t bytes) const { return Readable(ptr, bytes); }
};

// In-place source: nodes read where they are, validated by version re-check. The server's searches use it over its
// own regions; a client over shm uses it over its mappings of the server's regions.
class LocalNodeSource final : public NodeSource {
 public:
  // `max_yields`: how long a fetch waits for a node's writer before it gives up with Aborted (0: for ever). A server
  // waits for its own threads, which always finish; a client reading another process's memory bounds the wait, as
  // that process may have died holding the node.
  explicit LocalNodeSource(const LocalMemory* memory, int max_yields = 0) : memory_(memory), max_yields_(max_yields) {}
  LocalNodeSource* AsLocal() override { return this; }
  Status Fetch(GlobalPtr ptr, NodeHandle* h) override { return FetchLines(ptr, h, kNodeSize / kCacheLine); }
  Status FetchHeader(GlobalPtr ptr, NodeHandle* h) override { return FetchLines(ptr, h, 1); }
  bool Validate(const NodeHandle& h) override {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return LoadSharedWord(h.view.words()) == h.version;
  }
  Status ReadWords(GlobalPtr ptr, size_t words, uint64_t* dst) override;
  // The `bytes` of extent memory at `ptr` where they lie, to be read with word loads (common/shared_words.h), or
  // nullptr if they are not reachable here (ReadWords then says why).
  const uint64_t* ExtentWords(GlobalPtr ptr, size_t bytes) const {
    return ptr.offset % 8 == 0 ? memory_->Readable(ptr, bytes) : nullptr;
  }
  // Starts loading the cache lines of the `bytes` (at most a node's) at `ptr`, so that misses overlap: a scan asks for
  // a leaf's records, and for the next leaf, before it reads them. Nothing if they are not reachable here.
  void Prefetch(GlobalPtr ptr, size_t bytes) const {
    const char* at = reinterpret_cast<const char*>(memory_->Peek(ptr, bytes));
    if (at == nullptr) return;
    for (size_t line = 0; line < bytes && line < kNodeSize; line += kCacheLine) __builtin_prefetch(at + line);
  }

 private:
  // Fetch, prefetching the node's first `lines` cache lines.
  Status FetchLines(GlobalPtr ptr, NodeHandle* h, size_t lines) {
    const uint64_t* w = memory_->Readable(ptr, kNodeSize);
    if (w == nullptr || ptr.offset % kNodeSize != 0) [[unlikely]]
      return NotHeld(ptr, "node");
    for (size_t line = 0; line < lines; ++line) {
      __builtin_prefetch(reinterpret_cast<const char*>(w) + line * kCacheLine);
    }
    h->ptr = ptr;
    if (max_yields_ == 0) {
      h->version = WaitStableVersion(w);
    } else {
      bool waited = false;
      if (!WaitStableVersionFor(w, max_yields_, &h->version, &waited)) [[unlikely]]
        return StillLocked(ptr);
      // A client's memory checks the reader's lease in Readable: after a wait, the node's words are read later than
      // that check, so it is made again (docs/DESIGN.md, "One-sided reads and a deposed owner").
      if (waited && memory_->Readable(ptr, kNodeSize) == nullptr) [[unlikely]]
        return NotHeld(ptr, "node");
    }
    h->view = NodeView(w);
    return Status::OK();
  }
  static Status NotHeld(GlobalPtr ptr, const char* what);
  static Status StillLocked(GlobalPtr ptr);

  const LocalMemory* memory_;
  const int max_yields_;
};

// Reads `words` words at `ptr` into dst, in whatever order and with whatever timing the medium has.
using NodeFetcher = std::function<Status(GlobalPtr ptr, size_t words, uint64_t* dst)>;

// Client-side source: every node is a private copy, checked with CheckCopy before use, or a copy kept in a
// NodeCache (checked when it was fetched; possibly stale, see btree/node_cache.h).
class CopyingNodeSource final : public NodeSource {
 public:
  struct Stats {
    std::atomic<uint64_t> fetched{0};         // copies accepted
    std::atomic<uint64_t> torn{0};            // copies refused: checksum mismatch
    std::atomic<uint64_t> being_written{0};   // copies refused: odd version
    std::atomic<uint64_t> wrong_identity{0};  // copies refused: not the node asked for
  };
  // Called with every accepted copy (tests use it to prove no torn copy is ever accepted).
  using AcceptObserver = std::function<void(GlobalPtr ptr, const uint64_t* words)>;

  // `cache`: null, or a cache shared by the client's searches (it must outlive the source).
  explicit CopyingNodeSource(NodeFetcher fetcher, NodeCache* cache = nullptr, int max_attempts = 100000)
      : fetcher_(std::move(fetcher)), cache_(cache), max_attempts_(max_attempts) {}
  Status Fetch(GlobalPtr ptr, NodeHandle* h) override;
  bool Validate(const NodeHandle&) override { return true; }  // copies never change after acceptance
  Status ReadWords(GlobalPtr ptr, size_t words, uint64_t* dst) override { return fetcher_(ptr, words, dst); }
  void Forget(GlobalPtr ptr) override {
    if (cache_ != nullptr) cache_->Forget(ptr);
  }

  const Stats& stats() const { return stats_; }
  void set_accept_observer(AcceptObserver o) { observer_ = std::move(o); }

 private:
  NodeFetcher fetcher_;
  NodeCache* cache_;
  int max_attempts_;
  Stats stats_;
  AcceptObserver observer_;
};

}  // namespace cell::btree
