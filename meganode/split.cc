// Cell's meganode split (SplitCoordinator, split_coordinator.h) and the separators it sends up. Placement, which
// decides where a right half goes, is placement.cc.
//
// The protocol. A meganode M that runs out of slots is split in phases (SplitCoordinator::Split), of which only 1
// and 3-5 exclude M's writers (briefly: memory work, never the network); readers are never held off:
//   1. MarkSplit (M's split lock exclusive): the split key s is M's middle entry; the entries >= s (the right half)
//      are copied out, and M is marked as splitting at s. From here until step 5, writers of keys >= s are held off:
//      they wait for the split to end (or, when the right half goes to another server, get Unavailable and retry).
//      Writers of keys below s go on;
//   2. CopyRightHalfHere or CopyRightHalfToPeer (no lock): a new meganode N, range [s, M's max), right link M's
//      right sibling, gets the right half's entries (records do not move: N's entries point to the same extents).
//      Nothing changes those entries meanwhile: their writers are held off. N's split lock is taken, so that no
//      writer changes N until step 4 is done;
//   3. PublishAndCut (M's split lock exclusive again, once phase 2's writers below s are done): M's header is
//      published with max s and right link N: a search for k >= s that reads it moves right to N;
//   4. PublishAndCut, by CutNodes: M's nodes are cut, level by level from the top: entries >= s dropped, max fence
//      s, no right link (a reader that meets such a node re-reads the header and moves right); nodes wholly >= s
//      are published invalid and their slots freed (a reader holding a pointer to one restarts from an ancestor, as
//      for any stale pointer). Until the cut reaches a node, readers may still see it whole: its content is
//      current, because neither M nor N takes writes yet. And since every node of M holding an entry >= s changes
//      version before any write to N can free a record, an in-place reader's version check never vouches for a
//      record reused since;
//   5. EndSplit: the mark is cleared and writers are let into M and N again (those for k >= s find N), and the
//      separator s -> N is inserted into the parent meganode, which may split in turn; when the root splits, a new
//      root meganode is made and the first meganode's header is pointed at it.
//
// Across servers. Each server's GlobalTree holds the meganodes of its own node region; pointers to meganodes in other
// regions lead to other servers. A walk here covers only this server's meganodes: where it would enter another's,
// it stops and names that meganode (`elsewhere`), and the request goes on there. A split may put the right half on
// another server (Peers, implemented by server/ over rpc): the new meganode is created there sealed (readable, no
// writes), filled with the right half's entries and their records, published by the left half's header as in step 3,
// and unsealed once the left half is cut and its moved records freed. Such remote splits run on the coordinator's
// background thread (placement.cc says when). Writers never wait on the network: the copy to the other server is
// phase 2, which holds no lock, and the right half's writers get Unavailable (retry) meanwhile instead of waiting for
// it. Separators for a parent meganode on another server are sent by the background thread; until they arrive, right
// links keep every key reachable. A new root meganode is always made by the server holding the first meganode (the
// root server).
#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "btree/record_format.h"
#include "common/diagnostics.h"
#include "common/key_limits.h"
#include "common/shared_words.h"
#include "meganode/global_tree.h"
#include "meganode/split_coordinator.h"
#include "meganode/tree_internals.h"

namespace cell::meganode {

using btree::GlobalReader;
using btree::LeafValue;
using btree::NodeImage;
using btree::NodeView;
using btree::TreeReader;

SplitCoordinator::SplitCoordinator(GlobalTree* tree, Peers* peers, TaskScheduler* scheduler, uint64_t first_split_id)
    : tree_(*tree), peers_(peers), stats_(tree->stats_), next_split_id_(first_split_id) {
  if (peers_ == nullptr) return;  // no background work
  if (scheduler == nullptr) {
    own_scheduler_ = std::make_unique<TaskScheduler>(TaskScheduler::AtStop::kDrop);
    scheduler = own_scheduler_.get();
  }
  background_ = std::make_unique<TaskScheduler::Lane>(*scheduler);
  Post([this] { RefreshPeersHint(); }, std::chrono::seconds(1));
}

SplitCoordinator::~SplitCoordinator() { Stop(); }

void SplitCoordinator::Stop() {
  if (background_ != nullptr) background_->Stop();
}

void SplitCoordinator::Post(std::function<void()> task, std::chrono::milliseconds delay) {
  if (background_ != nullptr) background_->PostAfter(delay, std::move(task));  // else: no peers, nothing to do
}

Status SplitCoordinator::Split(Mega* m, int level, uint64_t seen_splits, Placement placement) {
  // Asked before any lock is taken: it may ask the membership.
  const bool try_remote = placement == Placement::kRemoteOnly       ? peers_ != nullptr && peers_->HavePeers()
                          : placement == Placement::kRemoteIfWanted ? WantsRemote()
                                                                    : false;
  if (placement == Placement::kRemoteOnly && !try_remote) return Status::ResourceExhausted("no other live server");
  SplitJob job{.m = m, .level = level, .try_remote = try_remote};
  bool begun = false;
  CELL_RETURN_IF_ERROR(MarkSplit(&job, seen_splits, &begun));  // phase 1
  if (!begun) return Status::OK();                             // split meanwhile, or by another writer
  job.id = next_split_id_.fetch_add(1, std::memory_order_relaxed);
  if (tree_.write_sink_ != nullptr) {
    const GlobalPtr p = m->store->meganode();
    tree_.write_sink_->SplitMarked(true, job.id,
                                   fmt::format("meganode {}:{} (level {}) splits at '{}'{}", p.region, p.offset,
                                               job.info.level, job.sep, try_remote ? ", to another server" : ""));
  }

  // Phase 2, no lock held: writers below the split key go on. The right half goes into a new meganode N.
  if (tree_.split_copy_observer_) tree_.split_copy_observer_(job.sep, try_remote);
  if (try_remote) {
    Status copied = CopyRightHalfToPeer(&job);
    if (!copied.ok() && placement == Placement::kRemoteOnly) {
      EndSplit(job);  // a local split would not make room here
      return copied;
    }
    if (!copied.ok()) {
      diag::Warning("placing a meganode's right half on another server failed ({}); splitting locally",
                    copied.ToString());
      std::unique_lock lock(m->split_mu);
      m->remote_split = false;  // the right half's writers may wait now: the rest is memory work
    }
  }
  if (!job.remote) {
    Status copied = CopyRightHalfHere(&job);
    if (!copied.ok()) {
      EndSplit(job);
      return copied;
    }
  }

  PublishAndCut(&job);  // phases 3 and 4
  EndSplit(job);        // phase 5
  if (job.right_lock.owns_lock()) job.right_lock.unlock();
  stats_.splits.fetch_add(1, std::memory_order_relaxed);
  if (job.remote) {
    stats_.remote_splits.fetch_add(1, std::memory_order_relaxed);
    placed_remotely_.fetch_add(1, std::memory_order_relaxed);
    UnsealRemote(job.remote_half, UnsealBackoff());
  }
  // The split is done, and its right half reachable by M's right link whether or not the separator gets in above (a
  // missing separator costs searches a hop, never a key): the writer goes on either way. A root that cannot grow
  // (no free meganode) is tried again by the next split.
  if (Status above = InsertSeparator(GlobalPtr(), level + 1, job.sep, job.right_half); !above.ok()) {
    static diag::RateLimit limit;
    if (uint64_t dropped; limit.Allow(&dropped)) {
      diag::Warning("a meganode split at '{}' left its separator out of the parent: {} ({} like it dropped)", job.sep,
                    above.ToString(), dropped);
    }
  }
  return Status::OK();
}

Status SplitCoordinator::MarkSplit(SplitJob* job, uint64_t seen_splits, bool* begun) {
  Mega* m = job->m;
  std::unique_lock lock(m->split_mu);
  if (m->splits != seen_splits) return Status::OK();         // split meanwhile by another writer
  if (m->splitting) return GlobalTree::AwaitSplit(m, lock);  // being split by another writer
  if (m->sealed.load()) return Status::Unavailable("a sealed meganode cannot split yet; retry");
  // A right half kept here needs a free meganode: without one, refuse before copying the entries out.
  if (!job->try_remote && tree_.meganodes_in_use() == tree_.megas_.size()) {
    return Status::ResourceExhausted("no free meganode for a split's right half");
  }
  // Read under the header's node lock: SetClusterRoot may be publishing it (no other writer changes the header
  // while we hold the split lock).
  Meganode& store = *m->store;
  uint64_t* hw = store.SlotWords(0);
  const uint64_t header_locked = btree::LockNode(hw);
  NodeImage header;
  btree::LoadLocked(hw, &header);
  btree::UnlockUnchanged(hw, header_locked);
  const NodeView hv = header.view();
  std::vector<btree::NodeEntry> entries = LeafEntries(store, hv.root_slot(), hv.root_level());
  if (entries.size() < 2) return Status::ResourceExhausted("a meganode is full with fewer than two entries");
  const size_t mid = entries.size() / 2;
  job->sep = entries[mid].key;
  job->right.assign(std::make_move_iterator(entries.begin() + mid), std::make_move_iterator(entries.end()));
  hv.CopyMinKey(&job->info.min);
  hv.CopyMaxKey(&job->info.max);
  job->info.right = hv.right();
  job->info.level = hv.level();
  m->splitting = true;
  m->remote_split = job->try_remote;
  m->split_key = job->sep;
  *begun = true;
  return Status::OK();
}

btree::MeganodeInfo SplitCoordinator::SplitJob::RightInfo() const {
  btree::MeganodeInfo right_info = info;
  right_info.min = sep;
  right_info.cluster_root = GlobalPtr();
  right_info.state = btree::kFlagPending;  // until M's header names it (a remote right half is sealed instead)
  return right_info;
}

Status SplitCoordinator::CopyRightHalfToPeer(SplitJob* job) {
  // N on another server, sealed, with the right half's records; the right half's writers retry meanwhile.
  std::vector<MovedEntry> moved(job->right.size());
  for (size_t i = 0; i < job->right.size(); ++i) {
    MovedEntry& e = moved[i];
    e.key = job->right[i].key;
    if (job->info.level > 0) {
      e.child = job->right[i].value.ptr;
      continue;
    }
    const LeafValue& v = job->right[i].value;
    const uint64_t* words = tree_.regions_.Resolve(v.ptr, v.length);
    if (words == nullptr) return Status::Corruption("a leaf entry points outside this server's extents");
    std::vector<uint64_t> copy((v.length + 7) / 8);
    CopyFromShared(copy.data(), words, copy.size());
    btree::RecordFields record;
    if (!btree::CheckRecord(copy.data(), v, e.key, &record)) {
      return Status::Corruption(fmt::format("the record of key '{}' does not match its leaf entry", e.key));
    }
    e.value = std::string(record.value);
    e.version = record.version;
    e.locked = v.locked;
    if (e.locked) CELL_RETURN_IF_ERROR(tree_.InlineLock(e.key, &e.value));  // the old record moves inside the lock
  }
  CELL_RETURN_IF_ERROR(SyncBeforePeers());  // the split's mark, before another server holds its right half
  CELL_ASSIGN_OR_RETURN(job->remote_half, peers_->CreateMeganode(job->RightInfo(), moved));
  job->right_half = job->remote_half.ptr;
  job->remote = true;
  return Status::OK();
}

Status SplitCoordinator::CopyRightHalfHere(SplitJob* job) {
  CELL_ASSIGN_OR_RETURN(Mega * n, tree_.NewMeganode(job->RightInfo()));
  Status filled = tree_.fault_ ? tree_.fault_("right half") : Status::OK();
  for (size_t i = 0; i < job->right.size() && filled.ok(); ++i) {
    std::optional<LeafValue> replaced;
    filled = n->tree->Put(job->right[i].key, job->right[i].value, &replaced);
  }
  if (!filled.ok()) {
    tree_.ReleaseMeganode(n);  // pending, named by no header: its place goes back
    return Status::Internal("the right half of a meganode does not fit a new one: " + filled.ToString());
  }
  job->right_half = n->store->meganode();
  // No writer may change N before M is cut (step 4 above).
  job->right_lock = std::unique_lock<SplitLock>(n->split_mu);
  return Status::OK();
}

void SplitCoordinator::PublishAndCut(SplitJob* job) {
  // M's writers below the split key have finished once the exclusive lock is ours.
  Mega* m = job->m;
  Meganode& store = *m->store;
  std::unique_lock lock(m->split_mu);
  ++m->splits;
  // Phase 3: the left half's header (max sep, right link to N), keeping its root (which phase 2's writers may have
  // grown) and the cluster root it may hold.
  uint64_t* hw = store.SlotWords(0);
  const uint64_t locked = btree::LockNode(hw);
  NodeImage header;
  btree::LoadLocked(hw, &header);
  const uint32_t root_slot = header.view().root_slot();
  const int root_level = header.view().root_level();
  btree::MeganodeInfo info = job->info;
  info.max = job->sep;
  info.right = job->right_half;
  info.cluster_root = header.view().cluster_root();
  header.BuildMeganodeHeader(store.meganode(), root_slot, root_level, info);
  store.Publish(0, &header, locked);
  if (!job->remote) SetMeganodeState(*tree_.At(job->right_half)->store, 0);  // named by M's header now: no orphan

  // Phase 4.
  if (tree_.split_observer_) tree_.split_observer_(job->sep);
  CutNodes(store, root_slot, root_level, job->sep);
  if (job->remote && info.level == 0) {
    // The moved entries' records here are no longer referenced: every node that held them has a new version.
    for (const btree::NodeEntry& e : job->right) {
      if (e.value.locked) {  // the lock lives on there: its old record and reserved block here go, and its listing
        tree_.FreeLockBlocks(e.value, e.key);
        tree_.ForgetLock(e.key);
      }
      tree_.extents_->Free(e.value.ptr);
    }
  }
}

void SplitCoordinator::EndSplit(const SplitJob& job) {
  if (tree_.write_sink_ != nullptr) tree_.write_sink_->SplitMarked(false, job.id, {});
  Mega* m = job.m;
  {
    std::unique_lock lock(m->split_mu);
    m->splitting = false;
    m->remote_split = false;
    m->split_key.clear();
    m->splits_ended.fetch_add(1, std::memory_order_release);
  }
  m->splits_ended.notify_all();
}

void SplitCoordinator::SetClusterRoot(GlobalPtr root) {
  EditMeganodeHeader(*tree_.At(tree_.first_)->store, [root](NodeImage& h) { h.SetClusterRoot(root); });
}

Status SplitCoordinator::SyncBeforePeers() {
  if (tree_.write_sink_ == nullptr) return Status::OK();
  Status s = tree_.write_sink_->Sync();
  if (!s.ok())
    diag::Warning("could not make this server's writes durable before telling another server: {}", s.ToString());
  return s;
}

void SplitCoordinator::UnsealRemote(const RemoteMeganode& meganode, Backoff backoff) {
  // The split that published it (the left half's header and cut) is durable here before the peer unseals it.
  Status s = SyncBeforePeers();
  if (s.ok()) s = peers_->Unseal(meganode);
  if (s.ok()) return;
  // Until it is unsealed its keys refuse writes: keep trying (from the background thread), ever less often.
  if (backoff.retries() == 10) {
    diag::Error("cannot unseal meganode {}:{} on its server yet: {}; still trying", meganode.ptr.region,
                meganode.ptr.offset, s.ToString());
  }
  const auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(backoff.NextDelay().value());
  Post([=, this] { UnsealRemote(meganode, backoff); }, delay);
}

void SplitCoordinator::UnsealAfterRestart(const std::vector<GlobalPtr>& right_siblings) {
  for (const GlobalPtr right : right_siblings) {
    Post([this, right] { UnsealRemote(RemoteMeganode{right, 0}, UnsealBackoff()); });
  }
}

void SplitCoordinator::PostRemoteInsert(GlobalPtr at, int level, const std::string& separator, GlobalPtr child,
                                        Backoff backoff, std::chrono::milliseconds delay) {
  Post(
      [=, this]() mutable {
        stats_.remote_separators.fetch_add(1, std::memory_order_relaxed);
        // The split that made the child is durable here before another server's meganode names it.
        Status s = SyncBeforePeers();
        if (s.ok()) s = peers_->InsertSeparator(at, level, separator, child);
        if (s.ok()) return;
        if (const auto next = backoff.NextDelay()) {
          return PostRemoteInsert(at, level, separator, child, backoff,
                                  std::chrono::duration_cast<std::chrono::milliseconds>(*next));
        }
        // The tree stays correct without it (right links lead to the child); searches for its keys take a longer way.
        diag::Warning("gave up sending separator '{}' to meganode {}:{}: {}", separator, at.region, at.offset,
                      s.ToString());
      },
      delay);
}

Status SplitCoordinator::InsertSeparator(GlobalPtr at, int level, const std::string& separator, GlobalPtr child) {
  CELL_RETURN_IF_ERROR(CheckSeparatorRequest(at, level, separator, child));
  if (at == tree_.first_) at = GlobalPtr();
  GlobalReader reader(tree_.source_.get(), tree_.first_, tree_.node_region_->id());
  const LeafValue entry{child, 0, 0};
  for (int attempt = 0; attempt < 10000; ++attempt) {
    if (at.is_null() && tree_.IsLocal(tree_.first_)) {
      CELL_ASSIGN_OR_RETURN(GlobalPtr root, reader.Root());
      TreeReader::Header root_header;
      CELL_RETURN_IF_ERROR(TreeReader(tree_.source_.get(), root).ReadHeader(nullptr, &root_header));
      if (root_header.level < level - 1) {
        return Status::InvalidArgument(
            fmt::format("a separator for level {}, but the root is at level {}", level, root_header.level));
      }
      if (root_header.level < level) {
        // The root split: a new root meganode over the old root and its new right sibling.
        bool grown = false;
        CELL_RETURN_IF_ERROR(GrowRoot(&reader, root, level, separator, child, &grown));
        if (grown) return Status::OK();
        continue;  // another thread grew it meanwhile
      }
    }
    // The root reaches `level` (it only grows): the parent meganode is there to be found. Where it is here, the
    // entry the separator lands beside names the meganode left of it.
    GlobalPtr parent;
    CELL_RETURN_IF_ERROR(reader.Locate(separator, level, &parent, nullptr, at));
    if (!reader.exited()) {
      std::string unused;
      TreeReader::Step step;
      CELL_RETURN_IF_ERROR(TreeReader(tree_.source_.get(), parent).Find(separator, &unused, &step));
      if (step.kind == TreeReader::Step::Kind::kChild) {
        CELL_RETURN_IF_ERROR(CheckLeftOfSeparator(step.next, separator, child));
      }
    }
    GlobalPtr elsewhere;
    Status s = tree_.Write(
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
            if (!again.ok()) diag::Warning("inserting separator '{}': {}", separator, again.ToString());
          },
          std::chrono::milliseconds(20));
      return Status::OK();
    }
    if (!s.ok()) return s;
    if (!elsewhere.is_null()) {
      if (peers_ == nullptr) return Status::Internal("a tree of one process met another server's meganode");
      PostRemoteInsert(elsewhere, level, separator, child, SeparatorBackoff(), std::chrono::milliseconds(0));
    }
    return Status::OK();
  }
  return Status::Aborted("could not insert a separator into the parent meganode");
}

Status SplitCoordinator::CheckSeparatorRequest(GlobalPtr at, int level, const std::string& separator, GlobalPtr child) {
  if (level < 1 || level > GlobalTree::kMaxMeganodeLevel || separator.empty() || separator.size() > kMaxKeySize) {
    return Status::InvalidArgument(fmt::format("a separator needs a level of 1..{} (not {}) and a key of 1..{} bytes",
                                               GlobalTree::kMaxMeganodeLevel, level, kMaxKeySize));
  }
  if (!(at.is_null() || at == tree_.first_ || tree_.IsMeganodeAddress(at))) {
    return Status::InvalidArgument(
        fmt::format("a separator's walk cannot begin at {}:{}: no meganode's address here", at.region, at.offset));
  }
  if (child.is_null() || !PlausibleMeganode(child))
    return Status::InvalidArgument("a separator needs a child meganode");
  if (tree_.IsLocal(child)) {
    // The child is here: it must be what a split publishes, a meganode one level down whose range begins at the
    // separator (a child elsewhere is its own server's to vouch for).
    Mega* c = tree_.IsMeganodeAddress(child) ? tree_.At(child) : nullptr;
    std::string min;
    if (c != nullptr && c->tree != nullptr) NodeView(c->store->SlotWords(0)).CopyMinKey(&min);
    if (c == nullptr || c->tree == nullptr || c->sealed.load(std::memory_order_acquire) ||
        NodeView(c->store->SlotWords(0)).level() != level - 1 || min != separator) {
      return Status::InvalidArgument(fmt::format(
          "separator at level {}: {}:{} is not a published meganode of level {} whose range begins at the separator",
          level, child.region, child.offset, level - 1));
    }
  }
  return Status::OK();
}

Status SplitCoordinator::GrowRoot(btree::GlobalReader* reader, GlobalPtr root, int level, const std::string& separator,
                                  GlobalPtr child, bool* grown) {
  std::lock_guard lock(root_mu_);
  CELL_ASSIGN_OR_RETURN(GlobalPtr now, reader->Root());
  if (!(now == root)) return Status::OK();  // another thread grew it meanwhile
  CELL_RETURN_IF_ERROR(CheckLeftOfSeparator(root, separator, child));
  btree::MeganodeInfo info;
  info.level = level;
  info.state = btree::kFlagPending;  // until the first meganode names it
  CELL_ASSIGN_OR_RETURN(Mega * r, tree_.NewMeganode(info));
  std::optional<LeafValue> replaced;
  CELL_RETURN_IF_ERROR(r->tree->Put(std::string(1, '\0'), LeafValue{root, 0, 0}, &replaced));
  CELL_RETURN_IF_ERROR(r->tree->Put(separator, LeafValue{child, 0, 0}, &replaced));
  SetClusterRoot(r->store->meganode());
  SetMeganodeState(*r->store, 0);
  stats_.root_splits.fetch_add(1, std::memory_order_relaxed);
  *grown = true;
  return Status::OK();
}

Status SplitCoordinator::CheckLeftOfSeparator(GlobalPtr left, const std::string& separator, GlobalPtr child) const {
  for (int hops = 0; hops < 4096 && tree_.IsLocal(left); ++hops) {
    if (left == child) return Status::OK();  // inserted before: a retried request
    TreeReader::Header h;
    CELL_RETURN_IF_ERROR(TreeReader(tree_.source_.get(), left).ReadHeader(nullptr, &h, /*with_range=*/true));
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

}  // namespace cell::meganode
