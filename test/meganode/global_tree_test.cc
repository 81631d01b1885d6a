// The tree of meganodes in one process: every answer checked against a model while small meganodes split dozens of
// times (roots included), and readers, in place and through torn-prone copies, racing the splits.
#include "meganode/global_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <random>
#include <shared_mutex>
#include <thread>

#include "btree/global_reader.h"
#include "btree/node_cache.h"
#include "test/meganode/in_process_peers.h"
#include "test/test_util.h"

namespace cell::meganode {
namespace {

std::unique_ptr<GlobalTree> SmallTree(uint64_t meganode_bytes = 32 << 10, uint32_t meganodes = 256) {
  GlobalTreeOptions o;
  o.meganode_bytes = meganode_bytes;  // 32 slots: a split every few hundred keys
  o.meganodes = meganodes;
  o.extent_region_bytes = uint64_t{256} << 20;
  auto t = GlobalTree::Open(o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

std::string Key(uint64_t i) { return "key" + std::to_string(1000000 + i); }

// What a scan of [start, end) (empty: no bound) finds in `model`: up to `limit` pairs, the greatest first if reverse.
std::vector<std::pair<std::string, std::string>> ModelScan(const std::map<std::string, std::string>& model,
                                                           const std::string& start, const std::string& end,
                                                           size_t limit, bool reverse) {
  std::vector<std::pair<std::string, std::string>> out;
  auto lo = model.lower_bound(start);
  auto hi = end.empty() ? model.end() : model.lower_bound(end);
  if (!end.empty() && !start.empty() && end <= start) return out;
  if (!reverse) {
    for (auto it = lo; it != hi && out.size() < limit; ++it) out.emplace_back(*it);
  } else {
    for (auto it = hi; it != lo && out.size() < limit;) out.emplace_back(*--it);
  }
  return out;
}

TEST(GlobalTree, AModelAgreesThroughDozensOfMeganodeSplits) {
  auto tree = SmallTree();
  ASSERT_NE(tree, nullptr);
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const std::string key = Key(rng() % 6000);
    const int op = static_cast<int>(rng() % 10);
    if (op < 6) {
      const std::string value = key + "#" + std::to_string(i) + std::string(rng() % 40, 'v');
      ASSERT_TRUE(tree->Put(key, value).ok()) << i;
      model[key] = value;
    } else if (op < 8) {
      std::string value;
      Status s = tree->Get(key, &value);
      if (model.count(key)) {
        ASSERT_TRUE(s.ok()) << key << ": " << s.ToString();
        ASSERT_EQ(value, model[key]);
      } else {
        ASSERT_TRUE(s.IsNotFound()) << key << ": " << s.ToString();
      }
    } else if (op < 9) {
      Status s = tree->Delete(key);
      ASSERT_EQ(s.ok(), model.erase(key) == 1) << key << ": " << s.ToString();
    } else {
      // A scan, forward or reverse, with values or keys only, in place or through copies, with random bounds.
      const std::string start = rng() % 8 == 0 ? std::string() : Key(rng() % 6000);
      const std::string end = rng() % 4 == 0 ? std::string() : Key(rng() % 6000);
      const btree::ScanMode mode{.keys_only = rng() % 4 == 0, .reverse = rng() % 2 == 0};
      const size_t limit = 1 + rng() % 300;
      std::vector<btree::KeyValue> got;
      if (rng() % 2 == 0) {
        GlobalPtr elsewhere;
        std::string resume;
        ASSERT_TRUE(tree->Scan(start, end, limit, &got, GlobalPtr(), &elsewhere, &resume, mode).ok());
        ASSERT_TRUE(elsewhere.is_null());
      } else {
        btree::CopyingNodeSource copies(testing::RegionFetcher(&tree->regions(), /*shuffle=*/false));
        ASSERT_TRUE(btree::GlobalReader(&copies, tree->first_meganode()).Scan(start, end, limit, &got, {}, mode).ok());
      }
      const auto want = ModelScan(model, start, end, limit, mode.reverse);
      ASSERT_EQ(got.size(), want.size()) << "[" << start << ", " << end << ") reverse " << mode.reverse;
      for (size_t j = 0; j < got.size(); ++j) {
        ASSERT_EQ(got[j].key, want[j].first);
        ASSERT_EQ(got[j].value, mode.keys_only ? std::string() : want[j].second);
      }
    }
  }
  EXPECT_GT(tree->stats().splits.load(), 20u);
  EXPECT_GE(tree->stats().root_splits.load(), 1u);
  ASSERT_TRUE(tree->CheckInvariants().ok()) << tree->CheckInvariants().ToString();
  std::vector<btree::KeyValue> all;
  ASSERT_TRUE(tree->Scan("", "", 1000000, &all).ok());
  ASSERT_EQ(all.size(), model.size());
  auto it = model.begin();
  for (const auto& kv : all) {
    ASSERT_EQ(kv.key, it->first);
    ASSERT_EQ(kv.value, it->second);
    ++it;
  }
  // The whole tree backwards, across every meganode, in place and through copies.
  btree::CopyingNodeSource copies(testing::RegionFetcher(&tree->regions(), /*shuffle=*/true));
  for (int by_copies = 0; by_copies < 2; ++by_copies) {
    std::vector<btree::KeyValue> back;
    GlobalPtr elsewhere;
    std::string resume;
    const btree::ScanMode reverse{.reverse = true};
    ASSERT_TRUE((by_copies
                     ? btree::GlobalReader(&copies, tree->first_meganode()).Scan("", "", 1000000, &back, {}, reverse)
                     : tree->Scan("", "", 1000000, &back, GlobalPtr(), &elsewhere, &resume, reverse))
                    .ok());
    ASSERT_EQ(back.size(), model.size());
    auto r = model.rbegin();
    for (const auto& kv : back) {
      ASSERT_EQ(kv.key, r->first);
      ASSERT_EQ(kv.value, r->second);
      ++r;
    }
  }
}

// A source that runs `hook` just before its `hook_at`-th fetch (Fetch or FetchHeader, counted from 1) and passes every
// call on to `inner`: a test puts a write between two of a reader's steps.
class HookedSource final : public btree::NodeSource {
 public:
  explicit HookedSource(btree::NodeSource* inner) : inner_(inner) {}
  Status Fetch(GlobalPtr p, btree::NodeHandle* h) override {
    Tick();
    return inner_->Fetch(p, h);
  }
  Status FetchHeader(GlobalPtr p, btree::NodeHandle* h) override {
    Tick();
    return inner_->FetchHeader(p, h);
  }
  bool Validate(const btree::NodeHandle& h) override { return inner_->Validate(h); }
  Status ReadWords(GlobalPtr p, size_t words, uint64_t* dst) override { return inner_->ReadWords(p, words, dst); }
  void Forget(GlobalPtr p) override { inner_->Forget(p); }

  int fetches = 0;
  int hook_at = 0;
  std::function<void()> hook;

 private:
  void Tick() {
    if (++fetches == hook_at && hook) hook();
  }
  btree::NodeSource* const inner_;
};

// A forward scan that finds nothing from its start to the end of the last meganode, which then splits below that
// start before the scan reads the meganode's max to go on: the max it reads lies behind the scan. The scan must
// locate its start again (in the new right meganode) and end normally, not report a corrupt tree.
TEST(GlobalTree, AScanWhoseMeganodeSplitsBelowItsStartBeforeItReadsTheMaxLocatesAgain) {
  auto tree = SmallTree();
  ASSERT_NE(tree, nullptr);
  int splits = 0;
  tree->set_split_observer([&](const std::string&) { ++splits; });
  uint64_t next = 0;
  for (; splits < 3; ++next) ASSERT_TRUE(tree->Put(Key(next), "v").ok());  // a few meganodes
  const std::string start = Key(1000000);  // above every key, now and after the hook's puts
  btree::CopyingNodeSource copies(testing::RegionFetcher(&tree->regions(), /*shuffle=*/false));
  // A dry run counts the scan's fetches; its last is the read of the last meganode's max (none: the scan ends).
  HookedSource dry(&copies);
  std::vector<btree::KeyValue> out;
  ASSERT_TRUE(btree::GlobalReader(&dry, tree->first_meganode()).Scan(start, "", 10, &out).ok());
  ASSERT_TRUE(out.empty());
  // Again, with keys put just before that read until the last meganode splits (at a key below `start`).
  HookedSource hooked(&copies);
  hooked.hook_at = dry.fetches;
  const int splits_before = splits;
  hooked.hook = [&] {
    for (int i = 0; splits == splits_before && i < 100000; ++i) ASSERT_TRUE(tree->Put(Key(next++), "v").ok());
  };
  Status s = btree::GlobalReader(&hooked, tree->first_meganode()).Scan(start, "", 10, &out);
  ASSERT_GT(splits, splits_before) << "the hook did not split the last meganode";
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(out.empty());
  EXPECT_GT(hooked.fetches, dry.fetches) << "the scan did not go on after the split";
  // And a scan from the last key before `start` finds exactly that key.
  out.clear();
  ASSERT_TRUE(btree::GlobalReader(&copies, tree->first_meganode()).Scan(Key(next - 1), "", 10, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key, Key(next - 1));
}

// Predecessor is Successor's inverse: no valid key lies strictly between a key and its predecessor.
TEST(GlobalTree, PredecessorIsTheGreatestKeyBelow) {
  std::string p;
  ASSERT_TRUE(btree::Predecessor("b", &p));
  EXPECT_EQ(p, "a" + std::string(kMaxKeySize - 1, '\xff'));
  ASSERT_TRUE(btree::Predecessor(std::string("a\0", 2), &p));
  EXPECT_EQ(p, "a");
  EXPECT_FALSE(btree::Predecessor(std::string(1, '\0'), &p));
  EXPECT_FALSE(btree::Predecessor("", &p));
  std::mt19937_64 rng(3);
  for (int i = 0; i < 10000; ++i) {
    static const std::string kAlphabet = {'\0', '\1', 'a', 'b', '\xfe', '\xff'};
    std::string k = testing::RandomKey(rng, 1, rng() % 2 ? 4 : kMaxKeySize, kAlphabet);
    std::string pred, back;
    if (!btree::Predecessor(k, &pred)) {
      EXPECT_EQ(k, std::string(1, '\0'));
      continue;
    }
    ASSERT_LT(btree::CompareKeys(pred, k), 0);
    ASSERT_TRUE(btree::Successor(pred, &back));
    ASSERT_EQ(back, k) << "the successor of a key's predecessor is the key";
  }
}

TEST(GlobalTree, ATreeOfThreeMeganodeLevelsIsSearchedTheSameByCopies) {
  auto tree = SmallTree(16 << 10, 2048);  // 16 slots per meganode: internal meganodes split too
  ASSERT_NE(tree, nullptr);
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(tree->Put(Key(i * 13 % 20000), "v" + std::to_string(i)).ok()) << i;
  btree::CopyingNodeSource copies(testing::RegionFetcher(&tree->regions(), /*shuffle=*/false));
  btree::GlobalReader reader(&copies, tree->first_meganode());
  auto root = reader.Root();
  ASSERT_TRUE(root.ok());
  btree::TreeReader::Header header;
  ASSERT_TRUE(btree::TreeReader(&copies, *root).ReadHeader(nullptr, &header).ok());
  EXPECT_GE(header.level, 2) << "the root meganode should sit two levels above the leaf meganodes";
  for (int i = 0; i < 20000; i += 7) {
    std::string a, b;
    ASSERT_TRUE(tree->Get(Key(i * 13 % 20000), &a).ok());
    ASSERT_TRUE(reader.Get(Key(i * 13 % 20000), &b).ok());
    ASSERT_EQ(a, "v" + std::to_string(i));
    ASSERT_EQ(a, b);
  }
  std::string none;
  EXPECT_TRUE(reader.Get("zzz", &none).IsNotFound());
  EXPECT_TRUE(reader.Get("a", &none).IsNotFound());
  ASSERT_TRUE(tree->CheckInvariants().ok()) << tree->CheckInvariants().ToString();
}

TEST(GlobalTree, RunningOutOfMeganodesIsResourceExhaustedAndKeepsEveryKey) {
  auto tree = SmallTree(16 << 10, 4);
  ASSERT_NE(tree, nullptr);
  int stored = 0;
  Status s;
  for (; stored < 100000; ++stored) {
    s = tree->Put(Key(stored), "v");
    if (!s.ok()) break;
  }
  EXPECT_TRUE(s.IsResourceExhausted()) << s.ToString();
  for (int i = 0; i < stored; ++i) {
    std::string v;
    ASSERT_TRUE(tree->Get(Key(i), &v).ok()) << i;
  }
}

// The window between publishing a split meganode's header and cutting its nodes: readers may still walk its old
// nodes for keys that now belong to the new meganode, so no write may reach the new meganode yet. A writer started
// in the window must not have completed while a reader can still see the old value.
TEST(GlobalTree, NoWriteLandsInTheNewMeganodeBeforeTheOldOneIsCut) {
  auto tree = SmallTree();
  ASSERT_NE(tree, nullptr);
  std::atomic<int> windows{0}, checks{0}, misses{0};
  std::atomic<bool> written{false};
  std::string split_key;
  std::thread writer;
  tree->set_split_observer([&](const std::string& sep) {
    if (windows++ > 0) return;  // the first split is enough
    split_key = sep;
    writer = std::thread([&] {  // blocks until the split is over (if all is well)
      EXPECT_TRUE(tree->Put(split_key, "new").ok());
      written = true;
    });
    btree::CopyingNodeSource copies(testing::RegionFetcher(&tree->regions(), /*shuffle=*/false));
    const std::string end = sep + std::string(1, '\x01');
    for (int i = 0; i < 2000; ++i) {
      const bool was_written = written.load();
      std::vector<btree::KeyValue> in_place, copied;
      // From below the split key, so the scan walks the split meganode's old nodes up to it.
      EXPECT_TRUE(tree->Scan("", end, 1000000, &in_place).ok());
      EXPECT_TRUE(btree::GlobalReader(&copies, tree->first_meganode()).Scan("", end, 1000000, &copied).ok());
      for (const auto* got : {&in_place, &copied}) {
        if (was_written && (got->empty() || got->back().key != sep || got->back().value != "new")) ++misses;
      }
      ++checks;
      if (was_written) break;
    }
  });
  for (int i = 0; windows.load() == 0; ++i) ASSERT_TRUE(tree->Put(Key(i), "old").ok());
  writer.join();
  EXPECT_EQ(misses.load(), 0) << "a scan missed a write of the split key that had completed";
  EXPECT_GT(checks.load(), 0);
  std::string value;
  ASSERT_TRUE(tree->Get(split_key, &value).ok());
  EXPECT_EQ(value, "new");
}

// Splits under fire: a writer inserts new keys (splitting meganodes, the root among them) and updates stable keys;
// readers look the stable keys up in place, through shuffled copies, and through shuffled copies with a node cache
// that keeps every node above the leaves (and so goes stale at every split), and scan. Every stable key must always be
// found, with a value of its own, and scans must return each stable key in their range exactly once, in order.
TEST(GlobalTree, ReadersRacingMeganodeSplitsAlwaysFindStableKeys) {
  const int scale = testing::StressScale();
  auto tree = SmallTree(32 << 10, 4096);
  ASSERT_NE(tree, nullptr);
  constexpr int kStable = 500;
  const auto stable = [](int i) { return "s" + std::to_string(100000 + i * 11); };
  for (int i = 0; i < kStable; ++i) ASSERT_TRUE(tree->Put(stable(i), stable(i) + "#0").ok());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> wrong{0}, reads{0};
  std::thread writer([&] {
    std::mt19937_64 rng(1);
    for (int i = 0; i < 30000 * scale; ++i) {
      // Fresh keys interleaved with the stable ones ("s1..." sorts among them), so their meganodes split.
      Status s = tree->Put("s" + std::to_string(100000 + rng() % 6000) + "x" + std::to_string(i), "new");
      if (!s.ok()) {
        ADD_FAILURE() << s.ToString();
        break;
      }
      if (i % 10 == 0) {
        const int j = static_cast<int>(rng() % kStable);
        if (!tree->Put(stable(j), stable(j) + "#" + std::to_string(i)).ok()) {
          ADD_FAILURE();
          break;
        }
      }
    }
    // However slow the readers are (ThreadSanitizer), they get a fair number of reads in while stable keys change.
    for (int i = 30000 * scale; reads.load() < 2000; ++i) {
      const int j = static_cast<int>(rng() % kStable);
      if (!tree->Put(stable(j), stable(j) + "#" + std::to_string(i)).ok()) {
        ADD_FAILURE();
        break;
      }
    }
    stop = true;
  });
  btree::NodeCache cache(size_t{64} << 20, /*min_height=*/1);
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      // Reader 2's copies are not shuffled (the cache, not tearing, is what it tests), so it reads often.
      btree::CopyingNodeSource copies(testing::RegionFetcher(&tree->regions(), /*shuffle=*/r != 2),
                                      r == 2 ? &cache : nullptr);
      std::mt19937_64 rng(r + 10);
      std::vector<long> last_seen(kStable, 0);  // a reader never sees a key's value go back in time
      while (!stop.load()) {
        const int i = static_cast<int>(rng() % kStable);
        std::string value;
        Status s = r == 0 ? tree->Get(stable(i), &value)
                          : btree::GlobalReader(&copies, tree->first_meganode()).Get(stable(i), &value);
        reads++;
        if (!s.ok() || value.rfind(stable(i) + "#", 0) != 0) {
          if (wrong++ == 0) ADD_FAILURE() << stable(i) << ": " << s.ToString() << " '" << value << "'";
          continue;
        }
        const long seq = std::stol(value.substr(stable(i).size() + 1));
        if (seq < last_seen[i]) {
          if (wrong++ == 0) ADD_FAILURE() << stable(i) << " went back from #" << last_seen[i] << " to #" << seq;
        }
        last_seen[i] = std::max(last_seen[i], seq);
        if (rng() % 5 == 0) {  // a scan over a range of stable keys, forward or reverse: each exactly once, in order
          const int a = static_cast<int>(rng() % kStable);
          const int b = std::min(kStable, a + 100);
          const btree::ScanMode mode{.reverse = rng() % 2 == 0};
          std::vector<btree::KeyValue> got;
          GlobalPtr elsewhere;
          std::string resume;
          Status ss = r == 0 ? tree->Scan(stable(a), stable(b - 1) + "\x01", 100000, &got, GlobalPtr(), &elsewhere,
                                          &resume, mode)
                             : btree::GlobalReader(&copies, tree->first_meganode())
                                   .Scan(stable(a), stable(b - 1) + "\x01", 100000, &got, {}, mode);
          for (size_t j = 1; j < got.size() && ss.ok(); ++j) {
            const int order = btree::CompareKeys(got[j - 1].key, got[j].key);
            if (mode.reverse ? order <= 0 : order >= 0) ss = Status::Corruption("out of order");
          }
          if (mode.reverse) std::reverse(got.begin(), got.end());
          int next = a;
          for (const auto& kv : got) {
            if (next < b && kv.key == stable(next)) ++next;
          }
          if (!ss.ok() || next != b) {
            if (wrong++ == 0)
              ADD_FAILURE() << "scan " << a << ".." << b << (mode.reverse ? " reverse" : "") << ": " << ss.ToString()
                            << " found up to " << next;
          }
        }
      }
    });
  }
  writer.join();
  for (auto& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GE(reads.load(), 2000u);
  EXPECT_GT(cache.stats().hits.load(), 0u);
  EXPECT_GT(cache.stats().forgotten.load(), 0u) << "no cached copy went stale: the cache's invalidation is untested";
  std::printf("node cache: %llu hits, %llu misses, %llu forgotten\n",
              static_cast<unsigned long long>(cache.stats().hits.load()),
              static_cast<unsigned long long>(cache.stats().misses.load()),
              static_cast<unsigned long long>(cache.stats().forgotten.load()));
  EXPECT_GT(tree->stats().splits.load(), 50u);
  EXPECT_GE(tree->stats().root_splits.load(), 1u);
  ASSERT_TRUE(tree->CheckInvariants().ok()) << tree->CheckInvariants().ToString();
}

// A kept copy may be stale in any way its node once was, and a slot freed by a meganode split is used again: a stale
// copy's right link can lead back to a node on its left. A search that follows right links must notice (a node
// reached to the right begins no lower than the max of the node it came from) and drop the copies, not go round
// the cycle until it gives up.
TEST(GlobalTree, AStaleCopyWhoseRightLinkLeadsBackIsDroppedNotFollowedRoundACycle) {
  auto tree = SmallTree(1 << 20, 4);  // one meganode of 1,024 slots: no meganode split
  ASSERT_NE(tree, nullptr);
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(tree->Put(Key(i), "v" + std::to_string(i)).ok()) << i;
  btree::NodeCache cache(size_t{1} << 20, /*min_height=*/1);
  btree::CopyingNodeSource copies(testing::RegionFetcher(&tree->regions(), /*shuffle=*/false), &cache);
  btree::TreeReader reader(&copies, tree->first_meganode());
  // Three level-1 nodes in a row: A, B, C.
  btree::Path path;
  btree::NodeHandle a, b, c;
  ASSERT_TRUE(reader.Descend(btree::SearchKey(Key(0)), 1, &path, &a).ok());
  ASSERT_FALSE(a.view.right().is_null()) << "the tree needs three nodes at level 1";
  ASSERT_TRUE(copies.Fetch(a.view.right(), &b).ok());
  ASSERT_FALSE(b.view.right().is_null()) << "the tree needs three nodes at level 1";
  ASSERT_TRUE(copies.Fetch(b.view.right(), &c).ok());
  std::string c_min;
  c.view.CopyMinKey(&c_min);
  const GlobalPtr a_ptr = a.ptr, c_ptr = c.ptr;
  // A stale copy of B whose right link names A.
  std::array<uint64_t, btree::kNodeWords> stale;
  std::memcpy(stale.data(), b.view.words(), btree::kNodeSize);
  stale[4] = a_ptr.Pack();  // the right link (NodeImage::SetRight)
  ASSERT_TRUE(btree::NodeView(stale.data()).right() == a_ptr);
  cache.Offer(b.ptr, stale.data());
  // From A, for a key of C: A sends right to B, whose copy sends back to A.
  const uint64_t forgotten = cache.stats().forgotten.load();
  btree::Path from_a;
  btree::NodeHandle got;
  Status s = reader.Reach(btree::SearchKey(c_min), 1, a_ptr, 1, &from_a, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(got.ptr == c_ptr);
  EXPECT_GT(cache.stats().forgotten.load(), forgotten) << "the stale copy was not dropped";
  EXPECT_GE(reader.stats().restarts, 1u);
}

// The peer side of a remote split: a sealed meganode refuses writes until unsealed; one abandoned frees its place,
// and late requests naming it (its generation) fail instead of touching the meganode that took its place.
TEST(GlobalTree, SealedMeganodesAreNamedByGenerationAndAbandonedOnesStayGone) {
  auto tree = SmallTree();
  ASSERT_NE(tree, nullptr);
  btree::MeganodeInfo info;
  info.min = "m";
  auto first = tree->CreateSealed(info);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(tree->Fill(*first, {MovedEntry{"m1", "v1", GlobalPtr()}, MovedEntry{"m2", "v2", GlobalPtr()}}).ok());
  const uint64_t used = tree->extent_bytes_used();
  EXPECT_GT(used, 0u);
  ASSERT_TRUE(tree->Abandon(*first).ok());
  EXPECT_EQ(tree->extent_bytes_used(), 0u) << "an abandoned meganode's records are freed";

  auto second = tree->CreateSealed(info);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->ptr, first->ptr) << "the abandoned meganode's place is used again";
  EXPECT_NE(second->generation, first->generation);
  EXPECT_TRUE(tree->Fill(*first, {MovedEntry{"m3", "late", GlobalPtr()}}).code() == Status::Code::kFailedPrecondition);
  EXPECT_TRUE(tree->Abandon(*first).code() == Status::Code::kFailedPrecondition);
  EXPECT_TRUE(tree->Unseal(*first).code() == Status::Code::kFailedPrecondition);
  ASSERT_TRUE(tree->Fill(*second, {MovedEntry{"m4", "v4", GlobalPtr()}}).ok());
  // Still sealed: a write that reaches it is refused (Unavailable, retry), and nothing is kept.
  GlobalPtr elsewhere;
  EXPECT_TRUE(tree->Put("m5", "v5", second->ptr, &elsewhere).IsUnavailable());
  ASSERT_TRUE(tree->Unseal(*second).ok());
  ASSERT_TRUE(tree->Unseal(*second).ok()) << "unsealing twice (a retried request) is fine";
  ASSERT_TRUE(tree->Put("m5", "v5", second->ptr, &elsewhere).ok());
  EXPECT_TRUE(elsewhere.is_null());
  std::string value;
  ASSERT_TRUE(tree->Get("m4", &value, second->ptr, &elsewhere).ok());
  EXPECT_EQ(value, "v4");
  ASSERT_TRUE(tree->Get("m5", &value, second->ptr, &elsewhere).ok());
  EXPECT_EQ(value, "v5");
  EXPECT_TRUE(tree->Abandon(*second).code() == Status::Code::kFailedPrecondition)
      << "an unsealed meganode is not abandoned";
}

// A MEGA_CREATE whose reply is lost: the splitting server cannot name the sealed meganode it made, so it abandons it
// by the create's token. A retried create with the token gives the same meganode; an abandon by token frees it, and
// one that overtakes its create makes the create fail. The count of meganodes in use returns to what it was.
TEST(GlobalTree, ACreateWhoseReplyWasLostIsAbandonedByItsToken) {
  auto tree = SmallTree();
  ASSERT_NE(tree, nullptr);
  const size_t before = tree->meganodes_in_use();
  btree::MeganodeInfo info;
  info.min = "m";
  auto made = tree->CreateSealed(info, /*token=*/77);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  auto again = tree->CreateSealed(info, 77);  // the splitter retried: the reply to the first was lost
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ptr, made->ptr);
  EXPECT_EQ(again->generation, made->generation);
  EXPECT_EQ(tree->meganodes_in_use(), before + 1);
  ASSERT_TRUE(tree->AbandonCreated(77).ok());
  EXPECT_EQ(tree->meganodes_in_use(), before) << "the unanswered create kept its meganode";
  EXPECT_EQ(tree->Fill(*made, {MovedEntry{"m1", "v", GlobalPtr()}}).code(), Status::Code::kFailedPrecondition);
  // The abandon arrives first (a new connection overtook the old one): the create that follows is refused.
  ASSERT_TRUE(tree->AbandonCreated(78).ok());
  EXPECT_EQ(tree->CreateSealed(info, 78).status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(tree->meganodes_in_use(), before);
  // Tokens are the splitter's: another token makes another meganode.
  auto other = tree->CreateSealed(info, 79);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(tree->meganodes_in_use(), before + 1);
  EXPECT_EQ(tree->AbandonCreated(0).code(), Status::Code::kInvalidArgument);
}

// Cell's split blocks only the right half: while a split copies the entries >= its key into the new meganode, a
// writer of a key below it goes on, and a writer of a key at or above it waits for the split to end.
TEST(GlobalTree, ASplitHoldsOffOnlyTheWritersOfItsRightHalf) {
  auto tree = SmallTree();
  ASSERT_NE(tree, nullptr);
  std::atomic<int> splits{0};
  std::atomic<bool> copy_over{false};
  std::string sep;
  Status right_status;
  bool right_done_during_copy = false;
  std::thread right_writer;
  tree->set_split_copy_observer([&](const std::string& s, bool remote) {
    if (splits++ > 0) return;  // the first split is enough
    EXPECT_FALSE(remote);
    sep = s;
    const uint64_t held = tree->stats().held_writes.load();
    right_writer = std::thread([&] {
      right_status = tree->Put(sep, "right");  // an update of the split key itself
      right_done_during_copy = !copy_over.load();
    });
    // An update below the split key, on another thread so that a writer wrongly held off fails the test, not hangs it.
    auto left = std::async(std::launch::async, [&] { return tree->Put(Key(1), "left"); });
    if (left.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      ADD_FAILURE() << "a writer below the split key was held off by the split";
      std::abort();  // the held writer would never return
    }
    EXPECT_TRUE(left.get().ok());
    // The right writer reaches the split's mark (bounded wait for an event, not a sleep).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (tree->stats().held_writes.load() == held && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    EXPECT_GT(tree->stats().held_writes.load(), held) << "the right half's writer was not held off";
    copy_over = true;
  });
  for (int i = 1; splits.load() == 0; ++i) ASSERT_TRUE(tree->Put(Key(i), "old").ok()) << i;
  right_writer.join();
  EXPECT_TRUE(right_status.ok()) << right_status.ToString();
  EXPECT_FALSE(right_done_during_copy) << "a writer of the right half completed while the split was copying it";
  std::string value;
  ASSERT_TRUE(tree->Get(sep, &value).ok());
  EXPECT_EQ(value, "right");
  ASSERT_TRUE(tree->Get(Key(1), &value).ok());
  EXPECT_EQ(value, "left");
  ASSERT_TRUE(tree->CheckInvariants().ok()) << tree->CheckInvariants().ToString();
}

// A split whose right half goes to another server holds no lock while it copies: writers below the split key go on,
// and writers at or above it are told to retry (Unavailable) rather than wait on the network.
TEST(GlobalTree, ARemoteSplitTellsOnlyTheRightHalfsWritersToRetry) {
  std::atomic<GlobalTree*> root_tree{nullptr}, other_tree{nullptr};
  std::shared_mutex gate;
  InProcessPeers to_other(&other_tree, &gate), to_root(&root_tree, &gate);
  GlobalTreeOptions o;
  o.meganode_bytes = 32 << 10;
  // Room for many local splits: remote splits run on the background thread, and a writer that fills meganodes
  // faster than it is scheduled splits them locally meanwhile (64 ran out once in CI, on a loaded machine).
  o.meganodes = 1024;
  o.extent_region_bytes = uint64_t{64} << 20;
  o.peers = &to_other;
  auto a = GlobalTree::Open(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  o.root = false;
  o.first_meganode = (*a)->first_meganode();
  o.node_region_id = 3;
  o.extent_region_id = 4;
  o.peers = &to_root;
  auto b = GlobalTree::Open(o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  root_tree = a->get();
  other_tree = b->get();

  std::atomic<int> observed{0};
  std::string sep;
  Status right, left;
  (*a)->set_split_copy_observer([&](const std::string& s, bool remote) {
    if (!remote || observed.load() > 0) return;
    sep = s;
    right = (*a)->Put(sep, "right");  // on the splitting thread: a writer that waited here would never return
    left = (*a)->Put(Key(1), "left");
    observed = 1;
  });
  GlobalPtr elsewhere;
  for (int i = 1; observed.load() == 0 && i < 100000; ++i) {
    Status s = (*a)->Put(Key(i), "old", GlobalPtr(), &elsewhere);
    if (s.IsUnavailable())
      --i;  // the right half of a split under way: retry
    else
      ASSERT_TRUE(s.ok()) << i << ": " << s.ToString();
  }
  ASSERT_EQ(observed.load(), 1) << "no remote split";
  EXPECT_TRUE(right.IsUnavailable()) << right.ToString();
  EXPECT_TRUE(left.ok()) << left.ToString();
  EXPECT_GT((*a)->stats().held_writes.load(), 0u);
  // After the split: the left update is here, the split key is on the other tree (unchanged: the write was refused).
  const auto get = [&](const std::string& key, std::string* value) {
    GlobalPtr next;
    Status s = (*a)->Get(key, value, GlobalPtr(), &next);
    if (s.ok() && !next.is_null()) s = (*b)->Get(key, value, next, &next);
    return s;
  };
  std::string value;
  ASSERT_TRUE(get(Key(1), &value).ok());
  EXPECT_EQ(value, "left");
  ASSERT_TRUE(get(sep, &value).ok());
  EXPECT_EQ(value, "old");
  // Each tree's peers name the other: unlink them, then stop the background threads.
  Unlink(gate, root_tree, other_tree);
  a->reset();
  b->reset();
}

// Writers of interleaved keys on several threads while meganodes split (each split lets writers below its key go on
// and holds off the rest): every thread's last word on each of its keys is what the tree holds at the end.
TEST(GlobalTree, ConcurrentWritersThroughSplitsLoseNothing) {
  const int scale = testing::StressScale();
  auto tree = SmallTree(16 << 10, 4096);
  ASSERT_NE(tree, nullptr);
  constexpr int kThreads = 3;
  const int ops = 4000 * scale;
  std::vector<std::map<std::string, std::string>> models(kThreads);
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      auto& model = models[t];
      for (int i = 0; i < ops; ++i) {
        const std::string key = Key((rng() % (ops / 2)) * kThreads + t);
        if (rng() % 8 == 0) {
          Status s = tree->Delete(key);
          ASSERT_EQ(s.ok(), model.erase(key) == 1) << key << ": " << s.ToString();
        } else {
          const std::string value = key + "@" + std::to_string(i);
          Status s = tree->Put(key, value);
          ASSERT_TRUE(s.ok()) << key << ": " << s.ToString();
          model[key] = value;
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  EXPECT_GT(tree->stats().splits.load(), 20u);
  // Whether a writer meets a split of its meganode's right half here depends on how the threads interleave, so it is
  // not asserted here: ASplitHoldsOffOnlyTheWritersOfItsRightHalf above forces that write and checks it was held.
  ASSERT_TRUE(tree->CheckInvariants().ok()) << tree->CheckInvariants().ToString();
  std::map<std::string, std::string> all;
  for (const auto& m : models) all.insert(m.begin(), m.end());
  std::vector<btree::KeyValue> got;
  ASSERT_TRUE(tree->Scan("", "", 10000000, &got).ok());
  ASSERT_EQ(got.size(), all.size());
  auto it = all.begin();
  for (const auto& kv : got) {
    ASSERT_EQ(kv.key, it->first);
    ASSERT_EQ(kv.value, it->second);
    ++it;
  }
}

// A step that fails after taking a meganode's place gives it back: a new meganode whose formatting fails, and a local
// split whose right half cannot be filled. The count of meganodes in use returns to what it was, every key stays,
// and the next split works.
TEST(GlobalTree, AFailedNewMeganodeOrRightHalfGivesItsPlaceBack) {
  auto tree = SmallTree(16 << 10, 64);
  ASSERT_NE(tree, nullptr);
  int stored = 0;
  while (tree->stats().splits.load() < 2) ASSERT_TRUE(tree->Put(Key(stored++), "v").ok());
  for (const char* point : {"new meganode", "right half"}) {
    SCOPED_TRACE(point);
    const size_t before = tree->meganodes_in_use();
    const uint64_t splits = tree->stats().splits.load();
    int injected = 0;
    tree->set_fault_injector([&](std::string_view at) {
      if (at != point || injected > 0) return Status::OK();
      ++injected;
      return Status::Internal(std::string("injected at ") + point);
    });
    Status s;
    while (injected == 0 && stored < 100000) {
      s = tree->Put(Key(stored), "v");
      if (s.ok()) ++stored;
    }
    ASSERT_EQ(injected, 1) << "no split reached the injected failure";
    EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
    EXPECT_EQ(tree->meganodes_in_use(), before) << "the failed step kept a meganode's place";
    EXPECT_EQ(tree->stats().splits.load(), splits);
    tree->set_fault_injector(nullptr);
    ASSERT_TRUE(tree->Put(Key(stored++), "v").ok());  // the split runs again, and works
    EXPECT_EQ(tree->meganodes_in_use(), before + 1);
    ASSERT_TRUE(tree->CheckInvariants().ok()) << tree->CheckInvariants().ToString();
  }
  for (int i = 0; i < stored; ++i) {
    std::string v;
    ASSERT_TRUE(tree->Get(Key(i), &v).ok()) << Key(i);
  }
}

// Two servers' trees, the root's with a quarter of the record memory: a put's record goes to the server holding its
// key's leaf meganode, and a server whose extents are full moves half of the meganode a write needs to a server with
// room (the writer retries meanwhile). Random keys fill 90% of the two servers' record memory together before the
// first ResourceExhausted, which then names the region, the bytes asked and the bytes free; every stored key reads.
TEST(GlobalTree, AFullServerMovesHalfAMeganodeToAServerWithRoom) {
  std::atomic<GlobalTree*> root_tree{nullptr}, other_tree{nullptr};
  std::shared_mutex gate;
  InProcessPeers to_other(&other_tree, &gate), to_root(&root_tree, &gate);
  GlobalTreeOptions o;
  o.meganode_bytes = 32 << 10;
  o.meganodes = 256;
  o.extent_region_bytes = 256 << 10;
  o.peers = &to_other;
  auto a = GlobalTree::Open(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  o.root = false;
  o.first_meganode = (*a)->first_meganode();
  o.node_region_id = 3;
  o.extent_region_id = 4;
  o.extent_region_bytes = 768 << 10;
  o.peers = &to_root;
  auto b = GlobalTree::Open(o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  root_tree = a->get();
  other_tree = b->get();
  // A put as a client makes it: begun at the root's server, followed where the key's meganode is, retried while
  // part of a full meganode moves.
  const auto put = [&](const std::string& key, const std::string& value) {
    Status s;
    for (int attempt = 0; attempt < 20000; ++attempt) {
      GlobalPtr next;
      s = (*a)->Put(key, value, GlobalPtr(), &next);
      while (s.ok() && !next.is_null()) {
        GlobalTree* holder = (*a)->IsLocal(next) ? a->get() : b->get();
        s = holder->Put(key, value, next, &next);
      }
      if (!s.IsUnavailable()) return s;
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // a client's back-off before its retry
    }
    return s;
  };
  const auto get = [&](const std::string& key, std::string* value) {
    GlobalPtr next;
    Status s = (*a)->Get(key, value, GlobalPtr(), &next);
    while (s.ok() && !next.is_null()) s = ((*a)->IsLocal(next) ? a->get() : b->get())->Get(key, value, next, &next);
    return s;
  };
  std::vector<int> order(20000);
  for (int i = 0; i < static_cast<int>(order.size()); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  const std::string value(200, 'r');  // with its key and header a record fills a 256-byte block
  std::vector<std::string> stored;
  Status s;
  for (int i : order) {
    s = put(Key(i), value);
    if (!s.ok()) break;
    stored.push_back(Key(i));
  }
  ASSERT_TRUE(s.IsResourceExhausted()) << s.ToString();
  EXPECT_NE(s.message().find("is full: a record of 256 bytes does not fit"), std::string::npos) << s.ToString();
  const uint64_t used = (*a)->extent_bytes_used() + (*b)->extent_bytes_used();
  const uint64_t capacity = (256 + 768) << 10;
  EXPECT_GE(used, capacity * 9 / 10) << "the first ResourceExhausted came with " << used << " of " << capacity
                                     << " bytes of records in use";
  EXPECT_GT((*a)->stats().room_splits.load() + (*b)->stats().room_splits.load(), 0u);
  for (const std::string& key : stored) {
    std::string v;
    ASSERT_TRUE(get(key, &v).ok()) << key;
    ASSERT_EQ(v, value);
  }
  Unlink(gate, root_tree, other_tree);
  a->reset();
  b->reset();
}

}  // namespace
}  // namespace cell::meganode
