// A transaction's steps at a tree (meganode/transactions.cc): locks, versions and their checksums, the decision,
// applying and rolling back, the resolver of expired locks, and locks that move with their entries in meganode
// splits, local and to another tree.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "btree/tree_reader.h"
#include "meganode/global_tree.h"
#include "test/meganode/in_process_peers.h"

namespace cell::meganode {
namespace {

constexpr uint64_t kFar = ~uint64_t{0} >> 1;  // an expiry that never comes

std::unique_ptr<GlobalTree> SmallTree(uint64_t meganode_bytes = 32 << 10) {
  GlobalTreeOptions o;
  o.meganode_bytes = meganode_bytes;
  o.meganodes = 256;
  o.extent_region_bytes = uint64_t{256} << 20;
  auto t = GlobalTree::Open(o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

std::string Key(int i) { return "key" + std::to_string(100000 + i); }

// Two trees whose remote splits go to each other, `a` holding the root (32 KiB meganodes: splits every few hundred
// keys). Unlinked before either is destroyed.
struct TreePair {
  std::atomic<GlobalTree*> root_tree{nullptr}, other_tree{nullptr};
  std::shared_mutex gate;
  InProcessPeers to_other{&other_tree, &gate}, to_root{&root_tree, &gate};
  std::unique_ptr<GlobalTree> owned_a, owned_b;
  GlobalTree* a = nullptr;
  GlobalTree* b = nullptr;

  Status Open() {
    GlobalTreeOptions o;
    o.meganode_bytes = 32 << 10;
    o.meganodes = 1024;
    o.extent_region_bytes = uint64_t{64} << 20;
    o.peers = &to_other;
    CELL_ASSIGN_OR_RETURN(owned_a, GlobalTree::Open(o));
    o.root = false;
    o.first_meganode = owned_a->first_meganode();
    o.node_region_id = 3;
    o.extent_region_id = 4;
    o.peers = &to_root;
    CELL_ASSIGN_OR_RETURN(owned_b, GlobalTree::Open(o));
    a = root_tree = owned_a.get();
    b = other_tree = owned_b.get();
    return Status::OK();
  }
  ~TreePair() { Unlink(gate, root_tree, other_tree); }
};

// A step of a key on whichever of two trees holds it now: from the root's tree, following each `elsewhere` to the tree
// it names, and again while the right half of a split under way is refused (Unavailable). *on_b: it ended on b.
using Step = std::function<Status(GlobalTree&, GlobalPtr, GlobalPtr*)>;
Status OnEitherTree(GlobalTree& a, GlobalTree& b, const Step& step, bool* on_b = nullptr) {
  while (true) {
    GlobalTree* t = &a;
    GlobalPtr at;
    Status s = step(a, GlobalPtr(), &at);
    for (int hops = 0; s.ok() && !at.is_null() && hops < 64; ++hops) {
      t = a.IsLocal(at) ? &a : &b;
      s = step(*t, at, &at);
    }
    if (on_b != nullptr) *on_b = t == &b;
    if (s.ok() && !at.is_null()) return Status::Internal("a key's walk went back and forth between the trees");
    if (!s.IsUnavailable()) return s;
  }
}

// Puts filler keys (Key(0), Key(1), ..., 100 bytes each, on whichever tree holds each) until a split has moved `key`
// from a to b (*moved), or 20,000 of them went in.
Status FillUntilMoved(GlobalTree& a, GlobalTree& b, const std::string& key, bool* moved) {
  for (int i = 0; i < 20000 && !*moved; ++i) {
    const std::string k = Key(i);
    CELL_RETURN_IF_ERROR(OnEitherTree(
        a, b, [&](GlobalTree& t, GlobalPtr s, GlobalPtr* at) { return t.Put(k, std::string(100, 'f'), s, at); }));
    std::string v;
    GlobalPtr at;
    Status s = a.Get(key, &v, GlobalPtr(), &at);
    *moved = (s.ok() || s.IsNotFound()) && !at.is_null();
  }
  return Status::OK();
}

// What a transactional read sees: the value (nullopt: absent) and the entry's checksum and version.
struct Seen {
  std::optional<std::string> value;
  btree::RecordMeta meta;
};
Seen Read(GlobalTree& t, const std::string& key) {
  Seen seen;
  std::string value;
  GlobalPtr elsewhere;
  Status s = t.Get(key, &value, GlobalPtr(), &elsewhere, nullptr, &seen.meta);
  EXPECT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
  if (s.ok() && !seen.meta.locked) seen.value = value;
  return seen;
}

Status Prepare(GlobalTree& t, uint64_t txid, const std::string& key, std::optional<std::string> value,
               const std::string& primary, std::vector<std::string> secondaries = {}, uint64_t expires = kFar,
               TxnPrepareRequest::Expect expect = TxnPrepareRequest::Expect::kAny, uint64_t checksum = 0) {
  TxnPrepareRequest r;
  r.key = key;
  r.expect = expect;
  r.checksum = checksum;
  r.lock.txid = txid;
  r.lock.expires_us = expires;
  r.lock.put = value.has_value();
  r.lock.new_value = value.value_or("");
  r.lock.primary = primary;
  r.lock.secondaries = std::move(secondaries);
  GlobalPtr elsewhere;
  return t.TxnPrepare(r, GlobalPtr(), &elsewhere);
}

Status Apply(GlobalTree& t, uint64_t txid, const std::string& key, bool commit) {
  GlobalPtr elsewhere;
  return t.TxnApply(key, txid, commit, GlobalPtr(), &elsewhere);
}

bool Decide(GlobalTree& t, uint64_t txid, const std::string& primary) {
  bool committed = false;
  GlobalPtr elsewhere;
  EXPECT_TRUE(t.TxnDecide(primary, txid, GlobalPtr(), &elsewhere, &committed).ok());
  return committed;
}

TEST(Transactions, EveryWriteGrowsTheVersionAndChangesTheChecksum) {
  auto t = SmallTree();
  ASSERT_TRUE(t->Put("k", "v").ok());
  const Seen first = Read(*t, "k");
  ASSERT_TRUE(t->Put("k", "v").ok());  // the same value again: still a new version
  const Seen second = Read(*t, "k");
  EXPECT_GT(second.meta.version, first.meta.version);
  EXPECT_NE(second.meta.checksum, first.meta.checksum);
  EXPECT_EQ(second.value, "v");
}

TEST(Transactions, ALockedKeyTurnsReadersAndWritersAwayUntilItIsApplied) {
  auto t = SmallTree();
  ASSERT_TRUE(t->Put("a", "old").ok());
  ASSERT_TRUE(t->Put("0", "before a").ok());
  ASSERT_TRUE(t->Put("b", "after a").ok());
  const Seen before = Read(*t, "a");
  ASSERT_TRUE(Prepare(*t, 7, "a", "new", "a").ok());
  EXPECT_TRUE(Read(*t, "a").meta.locked);
  std::string v;
  EXPECT_TRUE(t->Get("a", &v).IsUnavailable());
  EXPECT_TRUE(t->Put("a", "x").IsUnavailable());
  EXPECT_TRUE(t->Delete("a").IsUnavailable());
  std::vector<btree::KeyValue> pairs;
  GlobalPtr elsewhere;
  std::string resume;
  // A scan stops at the locked key, keeping the pairs before it (whole) and none after it.
  EXPECT_TRUE(t->Scan("", "", 10, &pairs, GlobalPtr(), &elsewhere, &resume).IsUnavailable());
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].key, "0");
  EXPECT_EQ(pairs[0].value, "before a");
  pairs.clear();
  ASSERT_TRUE(
      t->Scan("", "", 10, &pairs, GlobalPtr(), &elsewhere, &resume, btree::ScanMode{.report_locks = true}).ok());
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_TRUE(pairs[1].locked);
  EXPECT_EQ(pairs[1].key, "a");
  EXPECT_EQ(pairs[1].value, "");
  EXPECT_EQ(pairs[2].value, "after a");
  // Another transaction cannot lock it; the same one again can (a retried request).
  EXPECT_TRUE(Prepare(*t, 8, "a", "other", "a").IsAborted());
  EXPECT_TRUE(Prepare(*t, 7, "a", "new", "a").ok());
  EXPECT_EQ(t->txn_locks(), 1u);
  // Rolled back: the old record as it was, same version and checksum (what readers validated stays valid).
  ASSERT_TRUE(Apply(*t, 7, "a", /*commit=*/false).ok());
  const Seen after = Read(*t, "a");
  EXPECT_EQ(after.value, "old");
  EXPECT_EQ(after.meta.checksum, before.meta.checksum);
  EXPECT_EQ(after.meta.version, before.meta.version);
  EXPECT_EQ(t->txn_locks(), 0u);
  // Applying a lock that is gone does nothing.
  EXPECT_TRUE(Apply(*t, 7, "a", true).ok());
  EXPECT_EQ(Read(*t, "a").value, "old");
}

TEST(Transactions, APrepareFailsIfTheKeyChangedSinceItWasRead) {
  auto t = SmallTree();
  ASSERT_TRUE(t->Put("a", "1").ok());
  const Seen read = Read(*t, "a");
  ASSERT_TRUE(t->Put("a", "2").ok());
  EXPECT_TRUE(
      Prepare(*t, 1, "a", "3", "a", {}, kFar, TxnPrepareRequest::Expect::kChecksum, read.meta.checksum).IsAborted());
  EXPECT_TRUE(Prepare(*t, 1, "a", "3", "a", {}, kFar, TxnPrepareRequest::Expect::kAbsent).IsAborted());
  EXPECT_TRUE(Prepare(*t, 1, "b", "3", "b", {}, kFar, TxnPrepareRequest::Expect::kChecksum, 42).IsAborted());
  EXPECT_EQ(t->txn_locks(), 0u);
  // An insert into an absent key, then rolled back: absent again.
  ASSERT_TRUE(Prepare(*t, 2, "b", "new", "b", {}, kFar, TxnPrepareRequest::Expect::kAbsent).ok());
  ASSERT_TRUE(Apply(*t, 2, "b", false).ok());
  EXPECT_FALSE(Read(*t, "b").value.has_value());
  EXPECT_EQ(t->extent_bytes_used(), [&] {
    auto fresh = SmallTree();
    EXPECT_TRUE(fresh->Put("a", "2").ok());
    return fresh->extent_bytes_used();
  }());  // every block a lock took was given back
}

TEST(Transactions, ADecidedCommitIsAppliedAndAnUndecidedOneExpiresIntoARollback) {
  auto t = SmallTree();
  ASSERT_TRUE(t->Put("p", "p0").ok());
  ASSERT_TRUE(t->Put("s", "s0").ok());
  // Decided, then its client went away: the resolver finishes it once it expires.
  ASSERT_TRUE(Prepare(*t, 1, "p", "p1", "p", {"s", "t"}, 1000).ok());
  ASSERT_TRUE(Prepare(*t, 1, "s", "s1", "p", {}, 1000).ok());
  ASSERT_TRUE(Prepare(*t, 1, "t", std::nullopt, "p", {}, 1000).ok());  // a delete of an absent key
  EXPECT_TRUE(Decide(*t, 1, "p"));
  EXPECT_EQ(t->ResolveExpiredLocks(999), 0u);  // not expired yet
  EXPECT_EQ(t->txn_locks(), 3u);
  EXPECT_GE(t->ResolveExpiredLocks(2000), 1u);  // the primary, which applies its secondaries first
  EXPECT_EQ(Read(*t, "p").value, "p1");
  EXPECT_EQ(Read(*t, "s").value, "s1");
  EXPECT_FALSE(Read(*t, "t").value.has_value());
  EXPECT_EQ(t->txn_locks(), 0u);
  // Undecided: rolled back, and a decision that comes too late finds it aborted.
  ASSERT_TRUE(Prepare(*t, 2, "p", "p2", "p", {"s"}, 1000).ok());
  ASSERT_TRUE(Prepare(*t, 2, "s", "s2", "p", {}, 1000).ok());
  EXPECT_GE(t->ResolveExpiredLocks(2000), 1u);
  t->ResolveExpiredLocks(2000);  // the secondary learns the primary's outcome (in either order)
  EXPECT_FALSE(Decide(*t, 2, "p"));
  EXPECT_EQ(Read(*t, "p").value, "p1");
  EXPECT_EQ(Read(*t, "s").value, "s1");
  EXPECT_EQ(t->txn_locks(), 0u);
}

TEST(Transactions, CommitHereAppliesAllOrNothing) {
  auto t = SmallTree();
  ASSERT_TRUE(t->Put("x", "1").ok());
  ASSERT_TRUE(t->Put("y", "1").ok());
  const Seen x = Read(*t, "x");
  HereTxn txn;
  txn.txid = 5;
  txn.expires_us = kFar;
  txn.writes.push_back({"x", GlobalPtr(), TxnPrepareRequest::Expect::kChecksum, x.meta.checksum, true, "2"});
  txn.writes.push_back({"z", GlobalPtr(), TxnPrepareRequest::Expect::kAbsent, 0, true, "new"});
  txn.reads.push_back({"y", GlobalPtr(), true, Read(*t, "y").meta.checksum});
  txn.ranges.push_back({"a", "w", GlobalPtr(), {}});  // saw nothing in [a, w)
  std::string conflict;
  // A key inserted into the scanned range since: nothing applied.
  ASSERT_TRUE(t->Put("m", "phantom").ok());
  EXPECT_TRUE(t->CommitHere(txn, &conflict).IsAborted());
  EXPECT_EQ(conflict, "m");
  EXPECT_EQ(Read(*t, "x").value, "1");
  EXPECT_FALSE(Read(*t, "z").value.has_value());
  EXPECT_EQ(t->txn_locks(), 0u);
  ASSERT_TRUE(t->Delete("m").ok());
  ASSERT_TRUE(t->CommitHere(txn, &conflict).ok());
  EXPECT_EQ(Read(*t, "x").value, "2");
  EXPECT_EQ(Read(*t, "z").value, "new");
}

// A commit whose secondary cannot be applied at once (its meganode being split to another server) is still committed:
// the primary keeps its committed lock, so that the resolver, once the locks expire, applies the secondary and only
// then releases the primary (released first, the secondary's resolver would read "aborted" and roll it back).
TEST(Transactions, CommitHereKeepsThePrimaryLockedUntilEverySecondaryIsApplied) {
  auto t = SmallTree();
  for (const char* k : {"p", "q", "r"}) ASSERT_TRUE(t->Put(k, "old").ok());
  HereTxn txn;
  txn.txid = 9;
  txn.expires_us = 1000;  // already expired by the resolver's clock below
  for (const char* k : {"p", "q", "r"}) {
    txn.writes.push_back({k, GlobalPtr(), TxnPrepareRequest::Expect::kChecksum, Read(*t, k).meta.checksum, true,
                          std::string("new-") + k});
  }
  int failed = 0;
  t->set_fault_injector([&](std::string_view point) {
    if (point != "commit here apply" || failed++ > 0) return Status::OK();
    return Status::Unavailable("meganode being split to another server (injected)");
  });
  std::string conflict;
  ASSERT_TRUE(t->CommitHere(txn, &conflict).ok()) << "the decision was made: the transaction committed";
  t->set_fault_injector(nullptr);
  EXPECT_EQ(failed, 2);
  // The secondary that failed ("r", applied first) and the primary are still locked; "q" was applied.
  EXPECT_EQ(t->txn_locks(), 2u);
  EXPECT_EQ(Read(*t, "q").value, "new-q");
  // The resolver finishes it, in either order of its keys, within a few rounds: every write lands.
  for (int round = 0; round < 3; ++round) t->ResolveExpiredLocks(2000);
  EXPECT_EQ(t->txn_locks(), 0u);
  for (const char* k : {"p", "q", "r"}) EXPECT_EQ(Read(*t, k).value, std::string("new-") + k) << k;
}

// A primary whose meganode moved to another tree between its lock and the decision: the commit is "not here"
// (FailedPrecondition), and the client then commits across servers under the same id, finding each moved lock held
// already.
TEST(Transactions, CommitHereWhosePrimaryMovedAwayIsNotHereAndFinishesAcrossServers) {
  TreePair pair;
  ASSERT_TRUE(pair.Open().ok());
  GlobalTree& a = *pair.a;
  GlobalTree& b = *pair.b;
  const auto on = [&](const Step& step) { return OnEitherTree(a, b, step); };
  const std::string primary = Key(50000), secondary = Key(50001);
  for (const std::string& k : {primary, secondary}) ASSERT_TRUE(a.Put(k, "old").ok());
  HereTxn txn;
  txn.txid = 21;
  txn.expires_us = kFar;
  for (const std::string& k : {primary, secondary}) {
    txn.writes.push_back(
        {k, GlobalPtr(), TxnPrepareRequest::Expect::kChecksum, Read(a, k).meta.checksum, true, "new-" + k});
  }
  // At the decision, smaller keys fill the meganode until a split moves its right half (both keys) to b.
  bool moved = false;
  a.set_fault_injector([&](std::string_view point) {
    if (point != "commit here decide") return Status::OK();
    return FillUntilMoved(a, b, primary, &moved);
  });
  std::string conflict;
  Status s = a.CommitHere(txn, &conflict);
  // The injector stays: background splits call it (for other points, which it passes at once without touching what
  // it captured), and replacing it now would race with them.
  ASSERT_TRUE(moved) << "no split moved the primary to the other tree";
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_TRUE(conflict.empty());
  // What the client does then: prepare every key (held already), decide at the primary's server, apply.
  for (const std::string& k : {primary, secondary}) {
    ASSERT_TRUE(on([&](GlobalTree& t, GlobalPtr start, GlobalPtr* at) {
                  TxnPrepareRequest r;
                  r.key = k;
                  r.lock =
                      TxnLock{.txid = 21, .expires_us = kFar, .put = true, .new_value = "new-" + k, .primary = primary};
                  if (k == primary) r.lock.secondaries = {secondary};
                  return t.TxnPrepare(r, start, at);
                }).ok())
        << k;
  }
  bool committed = false;
  ASSERT_TRUE(on([&](GlobalTree& t, GlobalPtr start, GlobalPtr* at) {
                return t.TxnDecide(primary, 21, start, at, &committed);
              }).ok());
  EXPECT_TRUE(committed);
  for (const std::string& k : {secondary, primary}) {
    ASSERT_TRUE(
        on([&](GlobalTree& t, GlobalPtr start, GlobalPtr* at) { return t.TxnApply(k, 21, true, start, at); }).ok());
    std::string v;
    ASSERT_TRUE(on([&](GlobalTree& t, GlobalPtr start, GlobalPtr* at) { return t.Get(k, &v, start, at); }).ok());
    EXPECT_EQ(v, "new-" + k);
  }
  EXPECT_EQ(a.txn_locks() + b.txn_locks(), 0u);
}

// A commit whose locks the resolver ended before the decision (they expired) is aborted, a conflict to run again,
// with nothing applied.
TEST(Transactions, CommitHereWhoseLocksExpiredBeforeTheDecisionIsAConflict) {
  auto t = SmallTree();
  for (const char* k : {"p", "q"}) ASSERT_TRUE(t->Put(k, "old").ok());
  HereTxn txn;
  txn.txid = 22;
  txn.expires_us = 1000;
  for (const char* k : {"p", "q"}) {
    txn.writes.push_back({k, GlobalPtr(), TxnPrepareRequest::Expect::kChecksum, Read(*t, k).meta.checksum, true,
                          std::string("new-") + k});
  }
  size_t resolved = 0;
  t->set_fault_injector([&](std::string_view point) {
    if (point == "commit here decide") resolved = t->ResolveExpiredLocks(2000);
    return Status::OK();
  });
  std::string conflict;
  bool apply_left = true, rollback_left = true;
  Status s = t->CommitHere(txn, &conflict, &apply_left, &rollback_left);
  t->set_fault_injector(nullptr);
  EXPECT_GT(resolved, 0u);
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  EXPECT_EQ(conflict, "p");
  EXPECT_FALSE(apply_left);
  EXPECT_FALSE(rollback_left) << "every lock was rolled back here";
  for (const char* k : {"p", "q"}) EXPECT_EQ(Read(*t, k).value, "old") << k;
  EXPECT_EQ(t->txn_locks(), 0u);
}

// An aborted commit whose secondary moved to another tree with its lock (a meganode split at the decision) cannot
// roll that lock back here: it says so (rollback_left), and the caller's rollback (TXN_APPLY, commit false, where the
// key is now) ends it, instead of the lock's expiry, which writes of the key would wait for.
TEST(Transactions, CommitHereThatCannotRollBackAMovedLockSaysSo) {
  TreePair pair;
  ASSERT_TRUE(pair.Open().ok());
  GlobalTree& a = *pair.a;
  GlobalTree& b = *pair.b;
  const auto on = [&](const Step& step) { return OnEitherTree(a, b, step); };
  // The primary below every filler key (it stays in a's leftmost meganode), the secondary above them all.
  const std::string primary = "key0", secondary = Key(50001);
  for (const std::string& k : {primary, secondary}) ASSERT_TRUE(a.Put(k, "old").ok());
  HereTxn txn;
  txn.txid = 23;
  txn.expires_us = 1000;  // long expired: the resolver may end its locks
  for (const std::string& k : {primary, secondary}) {
    txn.writes.push_back(
        {k, GlobalPtr(), TxnPrepareRequest::Expect::kChecksum, Read(a, k).meta.checksum, true, "new-" + k});
  }
  // At the decision: fillers until a split moves the secondary (and its lock) to b, then a's resolver ends the
  // primary's expired lock, so that the decision finds it gone: a conflict.
  bool moved = false;
  size_t resolved = 0;
  a.set_fault_injector([&](std::string_view point) {
    if (point != "commit here decide") return Status::OK();
    CELL_RETURN_IF_ERROR(FillUntilMoved(a, b, secondary, &moved));
    resolved = a.ResolveExpiredLocks(2000);
    return Status::OK();
  });
  std::string conflict;
  bool apply_left = true, rollback_left = false;
  Status s = a.CommitHere(txn, &conflict, &apply_left, &rollback_left);
  // (The injector stays: background splits call it, as in the test above.)
  ASSERT_TRUE(moved) << "no split moved the secondary to the other tree";
  EXPECT_EQ(resolved, 1u) << "the primary's lock, the only expired one left on a";
  ASSERT_TRUE(s.IsAborted()) << s.ToString();
  EXPECT_EQ(conflict, primary);
  EXPECT_FALSE(apply_left);
  EXPECT_TRUE(rollback_left) << "the secondary's lock went to b with its key and was not rolled back";
  EXPECT_EQ(a.txn_locks(), 0u);
  EXPECT_EQ(b.txn_locks(), 1u);
  // What the client does then: TXN_APPLY with commit false for every key, where each is now.
  for (const std::string& k : {primary, secondary}) {
    ASSERT_TRUE(
        on([&](GlobalTree& t, GlobalPtr start, GlobalPtr* at) { return t.TxnApply(k, 23, false, start, at); }).ok())
        << k;
  }
  EXPECT_EQ(a.txn_locks() + b.txn_locks(), 0u);
  for (const std::string& k : {primary, secondary}) {
    std::string v;
    ASSERT_TRUE(on([&](GlobalTree& t, GlobalPtr start, GlobalPtr* at) { return t.Get(k, &v, start, at); }).ok()) << k;
    EXPECT_EQ(v, "old") << k;
  }
}

// Locks move with their entries: in local splits (the same records) and to another tree (the lock's values copied),
// and are applied or rolled back there.
TEST(Transactions, LocksSurviveMeganodeSplitsLocalAndRemote) {
  TreePair pair;
  ASSERT_TRUE(pair.Open().ok());
  GlobalTree& a = *pair.a;
  GlobalTree& b = *pair.b;
  // Locked keys spread over the key space, half to commit and half to roll back; then enough writes that meganodes
  // split, some to the other tree.
  const auto on = [&](const Step& step) { return OnEitherTree(a, b, step); };
  constexpr int kLocked = 200;
  for (int i = 0; i < kLocked; ++i) {
    const std::string k = Key(i * 50);
    ASSERT_TRUE(on([&](GlobalTree& t, GlobalPtr s, GlobalPtr* at) { return t.Put(k, "before", s, at); }).ok());
    ASSERT_TRUE(on([&](GlobalTree& t, GlobalPtr s, GlobalPtr* at) {
                  TxnPrepareRequest r;
                  r.key = k;
                  r.lock = TxnLock{
                      .txid = uint64_t(1000 + i), .expires_us = kFar, .put = true, .new_value = "after", .primary = k};
                  return t.TxnPrepare(r, s, at);
                }).ok());
  }
  for (int i = 0; i < kLocked * 50; ++i) {
    if (i % 50 == 0) continue;
    const std::string k = Key(i);
    ASSERT_TRUE(
        on([&](GlobalTree& t, GlobalPtr s, GlobalPtr* at) { return t.Put(k, std::string(100, 'f'), s, at); }).ok());
  }
  ASSERT_GT(a.stats().remote_splits.load(), 0u);
  size_t moved = 0;
  for (int i = 0; i < kLocked; ++i) {
    const std::string k = Key(i * 50);
    TxnOutcome outcome;
    ASSERT_TRUE(
        on([&](GlobalTree& t, GlobalPtr s, GlobalPtr* at) { return t.TxnStatus(k, 1000 + i, s, at, &outcome); }).ok());
    EXPECT_EQ(outcome, TxnOutcome::kPrepared) << k;
    ASSERT_TRUE(on([&](GlobalTree& t, GlobalPtr s, GlobalPtr* at) {
                  return t.TxnApply(k, 1000 + i, /*commit=*/i % 2 == 0, s, at);
                }).ok());
    std::string v;
    ASSERT_TRUE(on([&](GlobalTree& t, GlobalPtr s, GlobalPtr* at) { return t.Get(k, &v, s, at); }).ok()) << k;
    EXPECT_EQ(v, i % 2 == 0 ? "after" : "before") << k;
    GlobalPtr at;
    std::string here;
    moved += a.Get(k, &here, GlobalPtr(), &at).ok() && !at.is_null() ? 1 : 0;
  }
  EXPECT_GT(moved, 0u) << "no locked key moved to the other tree";
  // Every lock was applied where it was, and is listed nowhere (a moved lock leaves its old tree's list).
  EXPECT_EQ(a.txn_locks(), 0u);
  EXPECT_EQ(b.txn_locks(), 0u);
  fmt::print("{} of {} locked keys moved to the other tree\n", moved, kLocked);
}

// A lock on the tree without the root is resolved there: its walk begins at its own meganode (from the root it would
// leave at once). One transaction's primary is on the root's tree and decided; another's are both on the other tree,
// undecided.
TEST(Transactions, LocksOnATreeWithoutTheRootAreResolvedThere) {
  TreePair pair;
  ASSERT_TRUE(pair.Open().ok());
  GlobalTree& a = *pair.a;
  GlobalTree& b = *pair.b;
  const auto on = [&](const Step& step, bool* on_b = nullptr) { return OnEitherTree(a, b, step, on_b); };
  for (int i = 0; i < 4000; ++i) {
    ASSERT_TRUE(on([&](GlobalTree& t, GlobalPtr s, GlobalPtr* at) {
                  return t.Put(Key(i), std::string(100, 'v'), s, at);
                }).ok());
  }
  // Keys on each tree.
  std::vector<std::string> here, there;
  for (int i = 0; i < 4000; ++i) {
    bool on_b = false;
    std::string v;
    Status got = on([&](GlobalTree& t, GlobalPtr s, GlobalPtr* at) { return t.Get(Key(i), &v, s, at); }, &on_b);
    ASSERT_TRUE(got.ok()) << i << " " << got.ToString();
    (on_b ? there : here).push_back(Key(i));
  }
  ASSERT_GE(here.size(), 1u);
  ASSERT_GE(there.size(), 3u);
  const auto prepare = [&](uint64_t txid, const std::string& key, const std::string& primary,
                           std::vector<std::string> secondaries) {
    return on([&](GlobalTree& t, GlobalPtr s, GlobalPtr* at) {
      TxnPrepareRequest r;
      r.key = key;
      r.lock = TxnLock{.txid = txid,
                       .expires_us = 1000,
                       .put = true,
                       .new_value = "new-" + std::to_string(txid),
                       .primary = primary,
                       .secondaries = std::move(secondaries)};
      return t.TxnPrepare(r, s, at);
    });
  };
  // Transaction 1: primary here (decided), secondary there. Transaction 2: both there, undecided.
  ASSERT_TRUE(prepare(1, here[0], here[0], {there[0]}).ok());
  ASSERT_TRUE(prepare(1, there[0], here[0], {}).ok());
  ASSERT_TRUE(Decide(a, 1, here[0]));
  ASSERT_TRUE(prepare(2, there[1], there[1], {there[2]}).ok());
  ASSERT_TRUE(prepare(2, there[2], there[1], {}).ok());
  EXPECT_EQ(b.txn_locks(), 3u);
  for (int round = 0; round < 3; ++round) {  // in either order, each learns what it needs within a few rounds
    b.ResolveExpiredLocks(2000);
    a.ResolveExpiredLocks(2000);
  }
  EXPECT_EQ(a.txn_locks(), 0u);
  EXPECT_EQ(b.txn_locks(), 0u);
  const auto value = [&](const std::string& k) {
    std::string v;
    EXPECT_TRUE(on([&](GlobalTree& t, GlobalPtr s, GlobalPtr* at) { return t.Get(k, &v, s, at); }).ok()) << k;
    return v;
  };
  EXPECT_EQ(value(here[0]), "new-1");
  EXPECT_EQ(value(there[0]), "new-1");
  EXPECT_EQ(value(there[1]), std::string(100, 'v'));
  EXPECT_EQ(value(there[2]), std::string(100, 'v'));
}

// A lock that moves with its entry into a meganode being filled by another server's split (sealed here until that
// server has cut its half) is already expired: the resolver keeps it listed while the meganode is sealed (the walk to
// it would leave through the root, and the split's source forgets its own listing), and ends it once unsealed.
TEST(Transactions, AnExpiredLockMovedIntoASealedMeganodeIsResolvedOnceItIsUnsealed) {
  TreePair pair;  // b, without the root, receives the right half of a split of a's
  ASSERT_TRUE(pair.Open().ok());
  GlobalTree* t = pair.b;
  TxnLock lock;
  lock.txid = 77;
  lock.expires_us = 1000;
  lock.put = true;
  lock.new_value = "new";
  lock.primary = "m1";
  lock.old_present = true;
  lock.old_inline = true;
  lock.old_value = "old";
  lock.old_version = 5;
  btree::MeganodeInfo info;
  info.min = "m";
  auto sealed = t->CreateSealed(info);
  ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
  MovedEntry moved{"m1", EncodeTxnLock(lock), GlobalPtr()};
  moved.locked = true;
  ASSERT_TRUE(t->Fill(*sealed, {moved}).ok());
  EXPECT_EQ(t->txn_locks(), 1u);
  EXPECT_EQ(t->ResolveExpiredLocks(2000), 0u);
  EXPECT_EQ(t->txn_locks(), 1u) << "the listing of a lock in a sealed meganode was dropped";
  ASSERT_TRUE(t->Unseal(*sealed).ok());
  EXPECT_EQ(t->ResolveExpiredLocks(2000), 1u);  // undecided at its primary (itself): rolled back
  EXPECT_EQ(t->txn_locks(), 0u);
  std::string value;
  GlobalPtr at;
  ASSERT_TRUE(t->Get("m1", &value, sealed->ptr, &at).ok());
  EXPECT_TRUE(at.is_null());
  EXPECT_EQ(value, "old");
}

}  // namespace
}  // namespace cell::meganode
