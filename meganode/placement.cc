// Placement: where the SplitCoordinator puts a right half (split_coordinator.h; the protocol is split.cc's).
//
// A writer that finds its meganode full splits it here, at once (kLocal). The background thread splits a meganode
// that is 3/4 full to another server while fewer meganodes were placed on others than are held here
// (kRemoteIfWanted), so that a growing tree spreads over the servers, and moves half of a meganode to another server
// when this one has no room left (kRemoteOnly). Writers never ask the membership whether there are peers: the
// background thread asks it every second and leaves the answer in peers_hint_.
#include <fmt/format.h>

#include <chrono>
#include <mutex>
#include <shared_mutex>

#include "common/diagnostics.h"
#include "meganode/split_coordinator.h"

namespace cell::meganode {

Status SplitCoordinator::NoRoom(Mega* m, int level, const std::string& what) {
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
          diag::Warning("could not move part of a full meganode to another server: {}", s.ToString());
        }
      });
    }
    return Status::Unavailable(what + "; moving part of the meganode to a server with room: retry");
  }
  return Status::ResourceExhausted(what + (peers_ == nullptr ? "" : "; no other server has room for it either"));
}

bool SplitCoordinator::WantsRemote() {
  if (peers_ == nullptr) return false;
  const bool have = peers_->HavePeers();  // may ask the membership: background thread only
  peers_hint_.store(have, std::memory_order_relaxed);
  return have && placed_remotely_.load(std::memory_order_relaxed) < tree_.meganodes_in_use();
}

void SplitCoordinator::MaybeQueueSplit(Mega* m, int level) {
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
      diag::Warning("a background meganode split failed: {}", s.ToString());
    }
  });
}

void SplitCoordinator::RefreshPeersHint() {
  peers_hint_.store(peers_->HavePeers(), std::memory_order_relaxed);
  Post([this] { RefreshPeersHint(); }, std::chrono::seconds(1));
}

}  // namespace cell::meganode
