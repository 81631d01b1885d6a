// SplitCoordinator: splits the meganodes of one GlobalTree by Cell's protocol, decides where each right half goes,
// and inserts the separators the splits leave into parent meganodes, here or on other servers. Internal to meganode/.
//
// The storage tree (GlobalTree) holds the meganodes and serves reads and writes; when a write finds its meganode full
// it asks this class to split it (Split, here at once), and after every write it lets it decide whether to move part
// of a filling meganode to another server (MaybeQueueSplit) or, when this server has no room, move one (NoRoom). The
// protocol's phases and invariants are stated once, at the top of split.cc; placement is placement.cc.
//
// Background work (remote splits, separators for parents elsewhere, unseals) runs on one serial lane of a
// TaskScheduler (the server's, or one of its own), and only when there are peers: a tree of one process never leaves
// its writer's thread. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "btree/global_reader.h"
#include "btree/node_format.h"
#include "common/backoff.h"
#include "common/task_scheduler.h"
#include "meganode/global_tree.h"

namespace cell::meganode {

class SplitCoordinator {
 public:
  using Mega = GlobalTree::Mega;

  // Splits the meganodes of `tree` (which outlives this), placing right halves on `peers` (null: all stay here), with
  // the background work on a lane of `scheduler` (null: a thread of its own). `first_split_id` seeds the ids that
  // mark splits in the log (unique across restarts).
  SplitCoordinator(GlobalTree* tree, Peers* peers, TaskScheduler* scheduler, uint64_t first_split_id);
  ~SplitCoordinator();  // Stop()
  // Stops the background work: pending tasks are dropped, and a running one is waited for. The tree calls it before
  // any of its members goes (the tasks use them). Idempotent.
  void Stop();
  SplitCoordinator(const SplitCoordinator&) = delete;
  SplitCoordinator& operator=(const SplitCoordinator&) = delete;

  // Where a split may put its right half: here (a writer's split), on another server if the balance of meganodes
  // asks for it (the background thread's proactive splits), or on another server only (making room here).
  enum class Placement { kLocal, kRemoteIfWanted, kRemoteOnly };
  // Splits `m` (at `level` among meganodes) unless it has split since the caller saw `seen_splits`; then inserts the
  // separator above. Remote placements run on the background thread only. If another split of `m` is under way,
  // waits for it (OK) or, if that one is remote, gives Unavailable.
  Status Split(Mega* m, int level, uint64_t seen_splits, Placement placement);
  // A write into `m` found no room on this server (`what`: which region, and how full). With other live servers,
  // half of `m` is moved to one with room (a background kRemoteOnly split) and the writer is told to retry
  // (Unavailable); ResourceExhausted when there is no other server, or none took the last such move (for 100 ms).
  Status NoRoom(Mega* m, int level, const std::string& what);
  // After a write into `m`: queues a background split of `m` if it is 3/4 full and a remote split is wanted.
  void MaybeQueueSplit(Mega* m, int level);
  // GlobalTree::InsertSeparator (global_tree.h says what it does and refuses).
  Status InsertSeparator(GlobalPtr at, int level, const std::string& separator, GlobalPtr child);
  // After a restart: unseals these meganodes on other servers (right siblings of meganodes here, which a remote
  // split may have published and crashed before unsealing; a no-op for one not sealed).
  void UnsealAfterRestart(const std::vector<GlobalPtr>& right_siblings);

 private:
  // One split under way, as its phases (split.cc) hand it on.
  struct SplitJob {
    Mega* m = nullptr;
    int level = 0;
    bool try_remote = false;                 // the right half is to go to another server, if one takes it
    uint64_t id = 0;                         // marks the split in the log
    std::string sep;                         // the split key
    std::vector<btree::NodeEntry> right;     // the right half's entries: unchanged until the split ends
    btree::MeganodeInfo info;                // M's range, right link and level before the split
    GlobalPtr right_half;                    // N, once made
    RemoteMeganode remote_half;              // N on another server
    bool remote = false;                     // N is on another server
    std::unique_lock<SplitLock> right_lock;  // N's split lock, held from its filling until M is cut (local N)
    btree::MeganodeInfo RightInfo() const;   // what N is made with
  };
  // The phases, in split.cc's terms. MarkSplit sets *begun unless there is nothing to do (OK: split meanwhile).
  Status MarkSplit(SplitJob* job, uint64_t seen_splits, bool* begun);
  Status CopyRightHalfToPeer(SplitJob* job);
  Status CopyRightHalfHere(SplitJob* job);
  void PublishAndCut(SplitJob* job);
  // Ends the split (phase 5, or a failed phase 2): the writers held off come back.
  void EndSplit(const SplitJob& job);

  // Separators. What a separator -> child insert relies on, where it can be seen here: the meganode left of the
  // separator at the child's level (`left`, or a right sibling it split into since) ends at the separator and links
  // to the child.
  Status CheckLeftOfSeparator(GlobalPtr left, const std::string& separator, GlobalPtr child) const;
  // InsertSeparator's checks of a request's fields (InvalidArgument, as GlobalTree::InsertSeparator says).
  Status CheckSeparatorRequest(GlobalPtr at, int level, const std::string& separator, GlobalPtr child);
  // Makes a new root meganode over `root` (the root `reader` saw) and its new right sibling `child` at `separator`,
  // unless another thread has grown the root meanwhile (*grown false then: look again).
  Status GrowRoot(btree::GlobalReader* reader, GlobalPtr root, int level, const std::string& separator, GlobalPtr child,
                  bool* grown);
  void SetClusterRoot(GlobalPtr root);

  // Placement (placement.cc). Whether a split should place its right half on another server (asks the membership:
  // background thread only).
  bool WantsRemote();
  // Asks the membership whether there are peers (for writers, who never ask it), and again every second.
  void RefreshPeersHint();

  // Talking to peers, from the background thread. Makes every write reported so far durable (WriteSink::Sync)
  // before a peer is told of this server's state.
  Status SyncBeforePeers();
  // Unseals a remote meganode, retrying until it works.
  void UnsealRemote(const RemoteMeganode& meganode, Backoff backoff);
  // Sends separator -> child to the holder of meganode `at` after `delay`, retrying.
  void PostRemoteInsert(GlobalPtr at, int level, const std::string& separator, GlobalPtr child, Backoff backoff,
                        std::chrono::milliseconds delay);
  // Unseals are retried for as long as it takes (10 ms doubling to 1 s); a separator for a meganode elsewhere is sent
  // up to 50 times more (10 ms doubling to 500 ms), then given up (right links keep its keys reachable).
  static Backoff UnsealBackoff() { return Backoff(std::chrono::milliseconds(10), std::chrono::seconds(1)); }
  static Backoff SeparatorBackoff() {
    return Backoff(std::chrono::milliseconds(10), std::chrono::milliseconds(500), Backoff::Clock::time_point::max(),
                   50);
  }
  // Runs `task` on the background thread after `delay` (dropped without peers: there is no background work then).
  void Post(std::function<void()> task, std::chrono::milliseconds delay = std::chrono::milliseconds(0));

  GlobalTree& tree_;
  Peers* const peers_;
  GlobalTree::Stats& stats_;
  std::atomic<uint64_t> next_split_id_;
  std::atomic<uint64_t> placed_remotely_{0};     // meganodes this tree's splits put on other servers
  std::atomic<bool> peers_hint_{true};           // HavePeers, as the background thread last saw it
  std::atomic<int64_t> relief_failed_until_{0};  // steady_clock ticks: NoRoom's move found no server until then
  std::mutex root_mu_;                           // one root split at a time
  // Only with peers: the lane of remote splits, separators and unseals (on own_scheduler_ without a server's).
  // Stopped, never reset, by the destructor: its tasks post again through it.
  std::unique_ptr<TaskScheduler> own_scheduler_;
  std::unique_ptr<TaskScheduler::Lane> background_;
};

}  // namespace cell::meganode
