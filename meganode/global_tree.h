// GlobalTree: Cell's tree of meganodes, held by one process: meganodes carved from a node region, records in an
// extent region, searches that cross meganodes (btree/global_reader.h), and meganode splits (Cell's protocol).
//
// The first meganode (offset 0 of the node region) is the cluster's first meganode: its header names the root
// meganode. Leaf meganodes hold key -> record entries; internal meganodes hold separator -> child meganode entries
// (the leftmost child under the smallest key, "\0").
//
// The pieces: this class holds the meganodes and serves reads and writes (global_tree.cc); a meganode that fills is
// split by the SplitCoordinator (split_coordinator.h: Cell's protocol in split.cc, with its phases and invariants at
// the top; placement across servers in placement.cc), which also runs the background work with peers; a restarted
// server's tree is rebuilt and repaired from its regions' bytes (tree_recovery.cc); another server's split places its
// right half here as a sealed meganode (sealed_meganodes.cc).
// Thread-safe.
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "btree/blink_tree.h"
#include "btree/global_reader.h"
#include "btree/node_source.h"
#include "btree/write_sink.h"
#include "common/task_scheduler.h"
#include "meganode/extent_allocator.h"
#include "meganode/meganode.h"
#include "meganode/region.h"
#include "meganode/txn_lock.h"

namespace cell::meganode {

// An entry moving to a meganode on another server: a leaf entry's key and value, or an internal one's key and child.
struct MovedEntry {
  std::string key;
  std::string value;     // leaf meganodes: the value, or a locked entry's lock (txn_lock.h, encoded)
  GlobalPtr child;       // internal meganodes
  uint64_t version = 0;  // leaf meganodes: the record's version (kept, so that transactions' reads stay valid)
  bool locked = false;   // a transaction is committing the key: `value` is its lock
};

// A transaction's lock request for one key (GlobalTree::TxnPrepare).
struct TxnPrepareRequest {
  std::string key;
  enum class Expect { kAny, kAbsent, kChecksum };
  Expect expect = Expect::kAny;  // what the transaction read of the key: nothing, absent, or the entry with checksum
  uint64_t checksum = 0;
  TxnLock lock;  // txid, expiry, the put or delete, the primary (and, for it, the secondaries); the rest is set here
};

// A transaction whose keys are all on one server, committed there in one step (GlobalTree::CommitHere). `start`s
// are where each key's walk begins (null: the root).
struct HereTxn {
  uint64_t txid = 0;
  uint64_t expires_us = 0;
  struct Write {
    std::string key;
    GlobalPtr start;
    TxnPrepareRequest::Expect expect = TxnPrepareRequest::Expect::kAny;
    uint64_t checksum = 0;
    bool put = false;
    std::string value;
  };
  struct Read {
    std::string key;
    GlobalPtr start;
    bool found = false;
    uint64_t checksum = 0;
  };
  struct Range {
    std::string start, end;  // end empty: no bound
    GlobalPtr from;
    std::map<std::string, uint64_t> seen;
  };
  std::vector<Write> writes;  // in key order: the first is the primary
  std::vector<Read> reads;
  std::vector<Range> ranges;
};

// What a transaction's lock on a key says (GlobalTree::TxnStatus).
enum class TxnOutcome { kNotLocked, kPrepared, kCommitted };

// A meganode created on another server by CreateMeganode: its pointer, and the generation that tells it from a later
// meganode at the same place (a meganode abandoned by a failed split frees its place).
struct RemoteMeganode {
  GlobalPtr ptr;
  uint64_t generation = 0;
};

// What a tree spread over servers asks of the others. server/ implements it over rpc. Calls may block (on the
// tree's background thread only); the requests they make are answered by the peer's GlobalTree without blocking.
class Peers {
 public:
  virtual ~Peers() = default;
  // Transactions: the resolver of expired locks asks what a primary key's lock says, and applies a transaction's
  // outcome to a key, wherever they are (routed by key from the root).
  // `start`: where the walk begins (the cluster's first meganode).
  virtual StatusOr<TxnOutcome> TxnStatus(GlobalPtr start, std::string_view key, uint64_t txid) = 0;
  virtual Status TxnApply(GlobalPtr start, std::string_view key, uint64_t txid, bool commit) = 0;
  // True if there is another live server to place meganodes on.
  virtual bool HavePeers() = 0;
  // Creates on another server a sealed meganode described by `info`, holding `entries` (and, for a leaf meganode,
  // their records). Errors: no peer could take it (nothing is left behind).
  virtual StatusOr<RemoteMeganode> CreateMeganode(const btree::MeganodeInfo& info,
                                                  const std::vector<MovedEntry>& entries) = 0;
  virtual Status Unseal(const RemoteMeganode& meganode) = 0;
  // Frees a meganode created by CreateMeganode and never published (best effort).
  virtual void Abandon(const RemoteMeganode& meganode) = 0;
  // Asks the holder of meganode `at` to insert separator -> child at `level`, walking from `at`.
  virtual Status InsertSeparator(GlobalPtr at, int level, const std::string& separator, GlobalPtr child) = 0;
};

struct GlobalTreeOptions {
  uint64_t meganode_bytes = uint64_t{64} << 20;
  uint32_t meganodes = 16;                           // room for this many meganodes (the node region's size)
  uint64_t extent_region_bytes = uint64_t{1} << 30;  // records
  RegionBacking backing = RegionBacking::kAnonymous;
  uint32_t node_region_id = 1;
  uint32_t extent_region_id = 2;
  // True: this tree's node region is the root region: it formats the cluster's first meganode at its offset 0.
  // False: `first_meganode` names it, on another server.
  bool root = true;
  GlobalPtr first_meganode;
  Peers* peers = nullptr;  // null: every meganode stays here
  // With peers, the background work (remote splits, separators, unseals) runs on a lane of this scheduler (a
  // server's); null: on a thread of the tree's own. Not owned; it must outlive the tree.
  TaskScheduler* scheduler = nullptr;
  // Told of every write to the tree's regions, from any thread (btree/write_sink.h); null: no one. Not owned.
  btree::WriteSink* write_sink = nullptr;
  // Recovery: if set, called on the fresh, zeroed regions to fill them (from a checkpoint and the log after it); the
  // tree is then rebuilt from their bytes instead of formatted (tree_recovery.cc says how), and the repairs go through
  // the write sink. An error is Open's.
  std::function<Status(Region& nodes, Region& extents)> restore;
  // Whether this server may still act for its regions (a server's lease; null: always): the resolver of transaction
  // locks rolls a decided commit forward only if, after the decision is durable here, this says OK (so that no
  // survivor can have recovered these regions without the decision).
  std::function<Status()> lease;
};

// What recovery found and repaired.
struct TreeRecovery {
  uint32_t meganodes = 0;      // meganodes found (kept)
  uint32_t pending_kept = 0;   // right halves and roots whose publication the crash had already made
  uint32_t orphans_freed = 0;  // meganodes of splits that never published them
  uint32_t sealed = 0;         // meganodes awaiting another server's Unseal or Abandon
  uint32_t nodes_cut = 0;      // nodes a crashed split had not cut yet
  uint64_t records = 0;        // records found (their blocks marked in use)
  uint64_t record_bytes = 0;
  uint32_t txn_locks = 0;  // keys locked by transactions that were committing (the resolver ends them)
};

// A meganode's split lock: shared by its writers, exclusive for a split. A waiting split holds back new writers (a
// writer-preferring pthread rwlock; glibc's default, and std::shared_mutex, let new readers pass a waiting writer,
// so a stream of updates could keep a full meganode from ever splitting). pthread's, so ThreadSanitizer sees it.
class SplitLock {
 public:
  SplitLock() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~SplitLock() { pthread_rwlock_destroy(&lock_); }
  SplitLock(const SplitLock&) = delete;
  SplitLock& operator=(const SplitLock&) = delete;
  void lock() { pthread_rwlock_wrlock(&lock_); }
  void unlock() { pthread_rwlock_unlock(&lock_); }
  void lock_shared() { pthread_rwlock_rdlock(&lock_); }
  void unlock_shared() { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

class SplitCoordinator;

class GlobalTree {
 public:
  struct Stats {
    std::atomic<uint64_t> splits{0};             // meganode splits made here
    std::atomic<uint64_t> remote_splits{0};      // of which put the right half on another server
    std::atomic<uint64_t> root_splits{0};        // new root meganodes
    std::atomic<uint64_t> remote_separators{0};  // attempts to send a separator to a parent meganode elsewhere
    std::atomic<uint64_t> held_writes{0};  // writes that met a split of their meganode's right half (waited or retried)
    std::atomic<uint64_t> room_splits{0};  // remote splits made because this server had no room (NoRoom)
    std::atomic<uint64_t> txn_resolved{0};  // expired transaction locks the resolver ended
  };

  static StatusOr<std::unique_ptr<GlobalTree>> Open(const GlobalTreeOptions& options);
  ~GlobalTree();

  // For a tree of one process (LocalStore's): InvalidArgument for keys and values outside the limits;
  // ResourceExhausted when the records or the meganodes run out (nothing is changed then).
  Status Put(std::string_view key, std::string_view value);
  Status Get(std::string_view key, std::string* value);
  Status Delete(std::string_view key);
  Status Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out);

  // The same, for a server: the walk begins at meganode `start` (null: the root) and covers this tree's meganodes.
  // When the key's meganode is on another server, nothing is done here: OK, with *elsewhere (always set; null when
  // the walk ended here) naming the meganode to go on from (the first meganode: start again at the root server).
  // Writes give Unavailable (retry) while their meganode is sealed or being split to another server, or while part
  // of a full meganode moves to a server with room (NoRoom); a put's record is allocated here only once its leaf
  // meganode is found here, so a full server stops only the writes to its own meganodes. `range`, if not null, is
  // for the client's path cache: on the way in, range->meganode is the meganode the caller already knows (null:
  // none); if the leaf meganode that answered is another, range->meganode is set to it and its range is read.
  Status Get(std::string_view key, std::string* value, GlobalPtr start, GlobalPtr* elsewhere,
             btree::MeganodeRange* range = nullptr);
  Status Put(std::string_view key, std::string_view value, GlobalPtr start, GlobalPtr* elsewhere,
             btree::MeganodeRange* range = nullptr);
  Status Delete(std::string_view key, GlobalPtr start, GlobalPtr* elsewhere, btree::MeganodeRange* range = nullptr);
  // A scan that reaches another server's meganode returns what it has, *elsewhere set and *resume the key to go on
  // from there.
  Status Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out,
              GlobalPtr from_meganode, GlobalPtr* elsewhere, std::string* resume);

  // Get, with what a transaction records of the key (version, checksum, or that it is locked: then OK and no value).
  Status Get(std::string_view key, std::string* value, GlobalPtr start, GlobalPtr* elsewhere,
             btree::MeganodeRange* range, btree::RecordMeta* meta);
  // Scan as `mode` says (btree::ScanMode: locks reported, keys only, reverse; *resume as GlobalReader::Scan's).
  Status Scan(std::string_view start, std::string_view end, size_t limit, std::vector<btree::KeyValue>* out,
              GlobalPtr from_meganode, GlobalPtr* elsewhere, std::string* resume, btree::ScanMode mode);
  // btree::GlobalReader::ApproximateSize over this tree's meganodes: an estimate of the keys in [start, end) and
  // their bytes, added to *out; *elsewhere and *resume as Scan's (the estimate goes on there).
  Status ApproximateSize(std::string_view start, std::string_view end, btree::SizeEstimate* out,
                         GlobalPtr from_meganode, GlobalPtr* elsewhere, std::string* resume);
  // Sets `key` to `value` (nullopt: deletes it) if its value is `expected` (nullopt: absent). FailedPrecondition,
  // saying what the key holds, if not. Walks as Put does.
  Status CompareAndSwap(std::string_view key, const std::optional<std::string_view>& expected,
                        const std::optional<std::string_view>& value, GlobalPtr start, GlobalPtr* elsewhere,
                        btree::MeganodeRange* range = nullptr);

  // Transactions (transactions.cc; the lock in txn_lock.h; docs/DESIGN.md, "Transactions"). Each walks to its key as
  // Put does. Plain writes and reads of a locked key give Unavailable (retry) until the lock is gone.
  // Locks the key for r.lock.txid if it is as the transaction read it and no other transaction holds it: OK (also if
  // txid holds it already), or Aborted saying which. The lock holds the key's old record and the new value.
  Status TxnPrepare(const TxnPrepareRequest& r, GlobalPtr start, GlobalPtr* elsewhere,
                    btree::MeganodeRange* range = nullptr);
  // The decision, at the primary key: its lock by txid turns committed (*committed true), unless it is not locked
  // by txid any more (the transaction was aborted: *committed false).
  Status TxnDecide(std::string_view primary, uint64_t txid, GlobalPtr start, GlobalPtr* elsewhere, bool* committed,
                   btree::MeganodeRange* range = nullptr);
  // Ends txid's lock on key: the new value (commit) or the old one, as it was (abort). OK and nothing done if the key
  // is not locked by txid (applied already).
  Status TxnApply(std::string_view key, uint64_t txid, bool commit, GlobalPtr start, GlobalPtr* elsewhere,
                  btree::MeganodeRange* range = nullptr);
  // Commits `t` here, the steps of a commit across servers taken in one go (prepare, validate, decide, apply): OK
  // (committed); Aborted (a conflict at *conflict_key; nothing applied); FailedPrecondition (some key's meganode is on
  // another server: nothing applied; commit across servers).
  // *apply_left (if not null): committed, but a key's apply failed here (its meganode being split to another server,
  // or the key moved): the caller may finish the apply (TXN_APPLY, secondaries first); else the resolver does.
  // *rollback_left (if not null): not committed, but a key locked here could not be rolled back here (the same
  // causes): the caller may roll it back (TXN_APPLY with commit false); else the resolver does once the lock expires,
  // and until then a write of that key waits.
  Status CommitHere(const HereTxn& t, std::string* conflict_key, bool* apply_left = nullptr,
                    bool* rollback_left = nullptr);
  // What txid's lock on key says.
  Status TxnStatus(std::string_view key, uint64_t txid, GlobalPtr start, GlobalPtr* elsewhere, TxnOutcome* outcome);
  // Resolves the locks held here that expired before now_us (wall clock): a prepared primary is aborted, a committed
  // one finished (its secondaries applied, through peers where they are elsewhere, then itself); a secondary takes
  // its primary's outcome, or waits while that is undecided. Runs every 100 ms on the tree's scheduler (when it has
  // one); tests call it. Returns how many locks it ended.
  size_t ResolveExpiredLocks(uint64_t now_us);
  // Locks listed here for the resolver (for tests and stats): the locks held here, and for a while (until its expiry)
  // a lock whose prepare listed it but failed to take it.
  size_t txn_locks() const;

  // Peers' requests (a split on another server placing its right half here; a separator for a meganode here).
  // None blocks on another server.
  // Each names the meganode by pointer and generation: a late request for an abandoned meganode fails (whatever now
  // holds its place has another generation).
  // InvalidArgument for a range that is not one (keys over the limit, min >= max), a level outside
  // 0..kMaxMeganodeLevel, or a right link into this region that names no meganode's address.
  // `token` (0: none), chosen by the splitting server for this placement, makes the create idempotent: the same token
  // again gives the same meganode while it is sealed (a retry whose reply was lost), and AbandonCreated(token) frees
  // it even when the splitter never learnt its pointer.
  StatusOr<RemoteMeganode> CreateSealed(const btree::MeganodeInfo& info, uint64_t token = 0);
  // Frees the sealed meganode CreateSealed made with `token`; if none was made yet (the abandon overtook the
  // create), a later create with that token is refused. OK either way.
  Status AbandonCreated(uint64_t token);
  // Adds entries to a sealed meganode (records are written here). InvalidArgument for an entry outside the
  // meganode's range or the key and value limits, or (internal meganodes) without a plausible child pointer. On
  // error the meganode is to be abandoned.
  Status Fill(const RemoteMeganode& meganode, const std::vector<MovedEntry>& entries);
  Status Unseal(const RemoteMeganode& meganode);
  Status Abandon(const RemoteMeganode& meganode);
  // Inserts separator -> child into the meganode at `level` covering it, walking from `at` (the first meganode or
  // null: from the root). Where that meganode is elsewhere, or busy, the insert is queued and sent or retried later.
  // InvalidArgument (nothing changed) for a level outside 1..kMaxMeganodeLevel or more than one above the root, a
  // key outside the limits, or a child that cannot be the separator's: null, or here but not a published meganode one
  // level down whose range begins at the separator.
  Status InsertSeparator(GlobalPtr at, int level, const std::string& separator, GlobalPtr child);

  // The cluster's first meganode (its header names the root).
  GlobalPtr first_meganode() const { return first_; }
  bool IsLocal(GlobalPtr meganode) const { return meganode.region == node_region_->id(); }
  // Whether `p` can name a meganode here: in this tree's node region, on a meganode's boundary, inside the region
  // (whether one is there now or not). Requests are checked against it before their pointers are followed.
  bool IsMeganodeAddress(GlobalPtr p) const {
    return IsLocal(p) && p.offset % meganode_bytes_ == 0 && p.offset / meganode_bytes_ < megas_.size();
  }
  // The deepest level of meganodes a request may name (far above any real tree: 16 KiB meganodes of 255-byte keys
  // reach level 10 only past 2^64 keys).
  static constexpr int kMaxMeganodeLevel = 32;
  const RegionSet& regions() const { return regions_; }
  const Region& node_region() const { return *node_region_; }
  const Region& extent_region() const { return *extent_region_; }
  size_t meganodes_in_use() const;
  uint64_t node_bytes_used() const { return meganodes_in_use() * meganode_bytes_; }
  uint64_t node_bytes_capacity() const { return megas_.size() * meganode_bytes_; }
  uint64_t extent_bytes_used() const { return extents_->bytes_in_use(); }
  uint64_t extent_bytes_capacity() const { return extents_->capacity(); }
  const Stats& stats() const { return stats_; }
  // What recovery did (all zeros for a tree that was formatted).
  const TreeRecovery& recovery() const { return recovery_; }
  // The local tree and node store of meganode `p` here (null if none): for LocalStore and tests of one meganode.
  btree::BLinkTree* LocalTreeOf(GlobalPtr p);
  Meganode* MeganodeOf(GlobalPtr p);

  // Test seam: called by a split after it has published the left half's header and before it cuts the nodes (the
  // window in step 4), with the split key. It runs on the splitting thread, with the split locks held.
  void set_split_observer(std::function<void(const std::string& separator)> o) { split_observer_ = std::move(o); }
  // Test seam: called at the points where a failure must leave nothing behind, by name: "new meganode" (a
  // NewMeganode that has taken its place in the node region), "right half" (a local split that has made its new
  // meganode and is filling it). An error it returns is taken as that step's failure. Set it before writers run.
  void set_fault_injector(std::function<Status(std::string_view point)> f) { fault_ = std::move(f); }
  // Test seam: called by a split in phase 2 (the right half marked, M's split lock not held), with the split key and
  // whether the right half goes to another server. It runs on the splitting thread.
  void set_split_copy_observer(std::function<void(const std::string& separator, bool remote)> o) {
    split_copy_observer_ = std::move(o);
  }

  // Checks every meganode (its local tree's invariants, entries inside its range) and the chains of the meganodes the
  // tree reaches from its root (all of them when the root is elsewhere): at each level, left to right, ranges that
  // tile the key space. Only while no writer runs.
  Status CheckInvariants() const;

 private:
  // The split coordinator works on the meganodes below: it takes their split locks, makes new meganodes, gives back
  // failed ones, writes separators through Write, and counts into stats_. Nothing else reaches in.
  friend class SplitCoordinator;

  struct Mega {
    std::unique_ptr<Meganode> store;
    std::unique_ptr<btree::BLinkTree> tree;
    SplitLock split_mu;   // writers shared, a split's phases 1 and 3-5 exclusive
    uint64_t splits = 0;  // guarded by split_mu: how often this meganode has split
    // A split under way (phase 1 to 5): writers of keys >= split_key are held off. Guarded by split_mu.
    bool splitting = false;
    bool remote_split = false;  // ... and its right half goes to another server: they retry instead of waiting
    std::string split_key;
    std::atomic<uint32_t> splits_ended{0};  // moved on (and notified) as each split ends: held-off writers wait on it
    std::atomic<bool> sealed{false};        // created for another server's split, not yet unsealed: no writes
    std::atomic<bool> split_queued{false};  // a background split is queued
    uint64_t generation = 0;                // unique in this tree's life
    bool abandoned = false;         // guarded by split_mu: freed by Abandon (kept, never deleted, in graveyard_)
    bool recovered_sealed = false;  // sealed before a restart: its generation is lost, any one is accepted
    uint64_t token = 0;             // CreateSealed's token (0: none); guarded by megas_mu_
  };

  GlobalTree() = default;
  Mega* At(GlobalPtr meganode) const;
  StatusOr<Mega*> NewMeganode(const btree::MeganodeInfo& info);
  // Recovery: builds the meganodes from the node region's bytes, repairs what a crash left (see "Recovery" above),
  // and marks the records' blocks in use.
  Status Rebuild();
  // Rebuild's steps: a Mega for every valid header (*named: the meganodes those headers name); pending meganodes
  // kept if named, else freed; one meganode's free slots and records restored (a crashed split's cut finished).
  Status FindMeganodes(std::vector<GlobalPtr>* named);
  void SettlePending(const std::vector<GlobalPtr>& named);
  Status RestoreMeganode(Meganode& store);
  // Tells the write sink of a record, then copies it into its freshly allocated extent block (after the release
  // fence readers rely on).
  void WriteRecord(GlobalPtr extent, const std::vector<uint64_t>& record);
  // The sealed meganode `r` names, locked (split_mu), or an error if it is gone, abandoned or another generation.
  StatusOr<Mega*> LockSealed(const RemoteMeganode& r, std::unique_lock<SplitLock>* lock);
  // Called with m's split lock held (`lock`, shared or exclusive) while m is splitting: releases it, then waits for the
  // split to end and gives OK, or, if its right half goes to another server, gives Unavailable at once.
  template <typename Lock>
  static Status AwaitSplit(Mega* m, Lock& lock);
  // Runs `write` on the meganode at `level` (0: leaf meganodes) covering `key`, under its split lock, splitting
  // meganodes that are full. *elsewhere: as for Put. With `record_bytes`, a leaf write's record: before `write` runs
  // a block for it is allocated in this server's extents, in *extent (null on the way in; `write` writes it, under
  // the leaf's lock; the caller frees it unless the write used it).
  Status Write(int level, std::string_view key, const std::function<Status(btree::BLinkTree&)>& write, GlobalPtr start,
               GlobalPtr* elsewhere, btree::MeganodeRange* range = nullptr, size_t record_bytes = 0,
               GlobalPtr* extent = nullptr);
  // Gives back the place of a meganode nothing points to (one made for a split that failed): its header freed.
  void ReleaseMeganode(Mega* m);
  // What becomes of a leaf entry, decided under its leaf's lock (ChangeEntry): current is null if the key is absent;
  // `extent` is the block of `record_bytes` ChangeEntry allocated (null if none), for a new record (PublishRecord).
  using DecideEntry =
      std::function<StatusOr<btree::BLinkTree::LeafChange>(const btree::LeafValue* current, GlobalPtr extent)>;
  struct EntryChange {
    std::optional<btree::LeafValue> old;  // the entry before (nullopt: absent)
    btree::BLinkTree::LeafChange done;    // what `decide` said last
  };
  // Changes `key`'s leaf entry as `decide` says, walking as Put does; frees the new block if it went unused and, with
  // free_replaced, the record the entry no longer points to (a transaction's steps free what they free themselves,
  // from *change).
  Status ChangeEntry(std::string_view key, size_t record_bytes, const DecideEntry& decide, GlobalPtr start,
                     GlobalPtr* elsewhere, btree::MeganodeRange* range, bool free_replaced = true,
                     EntryChange* change = nullptr);
  // Under a leaf's lock: rewrites a lock record in place with `lock` (of the same encoded size: only its state
  // changes) and gives the entry's new value (its checksum changes).
  btree::LeafValue RewriteLock(const btree::LeafValue& entry, std::string_view key, const TxnLock& lock);
  // Under a leaf's lock: stamps `record` (LayOutRecord's, of `length` bytes) with the next version, writes it into
  // `extent` and gives the entry that points to it.
  btree::LeafValue PublishRecord(GlobalPtr extent, std::vector<uint64_t>* record, size_t length);
  // Under a leaf's lock: writes a lock record for `key` into `extent` and gives its (locked) entry.
  btree::LeafValue PublishLock(GlobalPtr extent, std::string_view key, const TxnLock& lock);
  // Reads the record an entry points to, in place, under its leaf's lock (it cannot change or be freed meanwhile).
  Status ReadLocked(const btree::LeafValue& entry, std::string_view key, btree::RecordFields* out) const;
  Status ReadLock(const btree::LeafValue& entry, std::string_view key, TxnLock* lock) const;
  // The next version: above every version this tree has written or seen (a clock in microseconds that never goes
  // back; Observe moves it past versions that came from elsewhere).
  uint64_t NextVersion();
  void ObserveVersion(uint64_t version);
  // The resolver's worklist of locks held here. A listing names the transaction, so that forgetting one
  // transaction's lock (once applied, or found gone) never drops another's taken on the same key meanwhile.
  void NoteLock(std::string_view key, uint64_t txid, uint64_t expires_us);
  void ForgetLock(std::string_view key, uint64_t txid);  // only if `txid` is the one listed
  void ForgetLock(std::string_view key);                 // whatever is listed (the key's lock moved away)
  // A leaf meganode here whose range holds `key` (null if none): where the resolver's walks to its own keys begin (a
  // walk from the root would leave this server at once when the root is elsewhere). Sealed meganodes (being filled by
  // another server's split) are not walked; *sealed, if given, says whether one of them covers the key.
  GlobalPtr LocalLeafFor(std::string_view key, bool* sealed = nullptr) const;
  // Resolves one expired lock, listed for transaction `listed_txid` (ResolveExpiredLocks): true if it ended. A listing
  // whose lock is gone, or has moved to another server, is dropped.
  bool ResolveLock(const std::string& key, uint64_t listed_txid, uint64_t now_us);
  // CommitHere's last step: a decided transaction's writes applied here, the secondaries first, the primary last
  // (only once every secondary took its value); *apply_left if some key kept its lock.
  void ApplyCommittedHere(const HereTxn& t, bool* apply_left);
  // CommitHere's undo, when it does not commit: the `locked` keys' locks rolled back here. A lock that cannot be
  // (its meganode being split to another server, or moved there with the lock) sets *rollback_left (if not null): it
  // is left to the caller, or else to its resolver once it expires.
  void RollBackHere(uint64_t txid, const std::vector<const HereTxn::Write*>& locked, bool* rollback_left);
  // A locked entry moving to another server (a remote split): its lock's payload gets the old record's contents
  // (TxnLock::old_inline); the receiver (Fill) makes them records of its own again (AdoptMovedLock).
  Status InlineLock(std::string_view key, std::string* payload) const;
  StatusOr<btree::LeafValue> AdoptMovedLock(std::string_view key, std::string_view payload);
  // The blocks a lock holds besides its record: the old record and the reserved new one (a moved lock's, here).
  void FreeLockBlocks(const btree::LeafValue& entry, std::string_view key);
  // ResolveExpiredLocks on a lane of `scheduler`, every 100 ms until the tree is destroyed.
  void StartResolver(TaskScheduler* scheduler);
  void ResolveTick();

  std::unique_ptr<Region> node_region_, extent_region_;
  GlobalPtr first_;
  btree::WriteSink* write_sink_ = nullptr;
  RegionSet regions_;
  std::unique_ptr<ExtentAllocator> extents_;
  std::unique_ptr<btree::LocalNodeSource> source_;
  uint64_t meganode_bytes_ = 0;
  std::vector<std::unique_ptr<Mega>> megas_;      // by index in the node region; null: free
  std::vector<std::unique_ptr<Mega>> graveyard_;  // abandoned meganodes: their places are free, the objects stay
  uint64_t next_generation_ = 1;                  // guarded by megas_mu_
  std::deque<uint64_t> abandoned_tokens_;         // AbandonCreated before any create (the last 1,024); megas_mu_
  mutable std::mutex megas_mu_;                   // guards megas_ slots being filled, and a new Mega's store and tree
                                                  // until NewMeganode returns it
  std::mutex token_mu_;                           // CreateSealed and AbandonCreated with tokens, one at a time
  Stats stats_;
  TreeRecovery recovery_;
  std::function<void(const std::string&)> split_observer_;
  std::function<void(const std::string&, bool)> split_copy_observer_;
  std::function<Status(std::string_view)> fault_;

  std::atomic<uint64_t> clock_{0};  // the last version handed out (NextVersion)
  std::function<Status()> lease_;   // GlobalTreeOptions::lease
  Peers* peers_ = nullptr;
  mutable std::mutex txn_mu_;
  struct ListedLock {
    uint64_t txid = 0;
    uint64_t expires_us = 0;
  };
  std::map<std::string, ListedLock, std::less<>> txn_locks_;  // locked keys here (the resolver's worklist)
  std::unique_ptr<TaskScheduler::Lane> resolver_;             // ResolveExpiredLocks every 100 ms (with a scheduler)

  std::unique_ptr<SplitCoordinator> splits_;  // splits, placement, separators and their background work
};

}  // namespace cell::meganode
