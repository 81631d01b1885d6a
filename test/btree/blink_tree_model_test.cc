// Model-based tests: random operation sequences against std::map, read back by server-side (in place) and
// client-side (copying) search, through node, root and meganode-full conditions.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "btree/blink_tree.h"
#include "btree/node_lock.h"
#include "btree/tree_reader.h"
#include "meganode/local_store.h"
#include "test/test_util.h"

namespace cell {
namespace {

using btree::KeyValue;
using cell::testing::RandomKey;
using meganode::LocalStore;
using meganode::LocalStoreOptions;

struct KeyShape {
  const char* name;
  size_t min_len, max_len;
  std::string_view alphabet;
  std::string prefix;
};

std::unique_ptr<LocalStore> OpenStore(uint64_t meganode_bytes) {
  LocalStoreOptions o;
  o.meganode_bytes = meganode_bytes;
  o.extent_region_bytes = uint64_t{64} << 20;
  auto s = LocalStore::Open(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

// Checks every model key by both searches, and a few random scans by both.
void CheckAgainstModel(LocalStore& store, const std::map<std::string, std::string>& model, std::mt19937_64& rng,
                       const KeyShape& shape) {
  btree::CopyingNodeSource copying(cell::testing::RegionFetcher(&store.regions(), false));
  btree::TreeReader client(&copying, store.meganode_ptr());
  std::string v;
  for (const auto& [k, want] : model) {
    ASSERT_TRUE(store.Get(k, &v).ok()) << k;
    ASSERT_EQ(v, want);
    ASSERT_TRUE(client.Get(k, &v).ok()) << k;
    ASSERT_EQ(v, want);
  }
  for (int i = 0; i < 20; ++i) {
    std::string a = shape.prefix + RandomKey(rng, 1, 6, shape.alphabet);
    std::string b = rng() % 4 ? shape.prefix + RandomKey(rng, 1, 6, shape.alphabet) : std::string();
    size_t limit = 1 + rng() % 300;
    std::vector<KeyValue> server, clientside;
    ASSERT_TRUE(store.Scan(a, b, limit, &server).ok());
    ASSERT_TRUE(client.Scan(a, b, limit, &clientside).ok());
    std::vector<KeyValue> want;
    for (auto it = model.lower_bound(a); it != model.end() && want.size() < limit; ++it) {
      if (!b.empty() && it->first >= b) break;
      want.push_back(KeyValue{it->first, it->second});
    }
    ASSERT_EQ(server.size(), want.size()) << "scan [" << a << ", " << b << ") limit " << limit;
    ASSERT_EQ(clientside.size(), want.size());
    for (size_t j = 0; j < want.size(); ++j) {
      ASSERT_EQ(server[j].key, want[j].key);
      ASSERT_EQ(server[j].value, want[j].value);
      ASSERT_EQ(clientside[j].key, want[j].key);
      ASSERT_EQ(clientside[j].value, want[j].value);
    }
  }
  btree::BLinkTree::Shape tree_shape;
  Status st = store.tree().CheckInvariants(&tree_shape);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(tree_shape.entries, model.size());
}

class BLinkTreeModel : public ::testing::TestWithParam<KeyShape> {};

TEST_P(BLinkTreeModel, RandomOperationsMatchStdMapThroughSplitsUpToAFullMeganode) {
  const KeyShape& shape = GetParam();
  uint64_t total_splits = 0, full_refusals = 0;
  int max_height = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed);
    // Small meganodes (64 KiB to 1 MiB) so that long runs fill them.
    auto store = OpenStore(uint64_t{64} << (10 + seed % 5));
    std::map<std::string, std::string> model;
    const int ops = 6000;
    for (int i = 0; i < ops; ++i) {
      std::string key = shape.prefix + RandomKey(rng, shape.min_len, shape.max_len, shape.alphabet);
      key.resize(std::min(key.size(), kMaxKeySize));
      int op = static_cast<int>(rng() % 10);
      if (op < 6) {
        std::string value = RandomKey(rng, 0, rng() % 8 == 0 ? 3000 : 40, cell::testing::kPrintable);
        Status s = store->Put(key, value);
        if (s.IsResourceExhausted()) {
          ++full_refusals;
          // The store's one meganode is full and cannot split: there is no room for a second.
          EXPECT_NE(s.message().find("all 1 meganodes of node region 1 are in use"), std::string::npos) << s.message();
        } else {
          ASSERT_TRUE(s.ok()) << s.ToString();
          model[key] = value;
        }
      } else if (op < 8) {
        Status s = store->Delete(key);
        ASSERT_EQ(s.ok(), model.erase(key) == 1) << s.ToString();
        if (!s.ok()) {
          ASSERT_TRUE(s.IsNotFound());
        }
      } else {
        std::string v;
        Status s = store->Get(key, &v);
        auto it = model.find(key);
        ASSERT_EQ(s.ok(), it != model.end()) << s.ToString();
        if (s.ok()) {
          ASSERT_EQ(v, it->second);
        }
      }
      if (i % 1500 == 1499) CheckAgainstModel(*store, model, rng, shape);
    }
    CheckAgainstModel(*store, model, rng, shape);
    btree::BLinkTree::Shape tree_shape;
    ASSERT_TRUE(store->tree().CheckInvariants(&tree_shape).ok());
    max_height = std::max(max_height, tree_shape.height);
    total_splits += store->tree().stats().splits.load();
    EXPECT_EQ(store->tree().stats().missing_separators.load(), 0u);
  }
  // The runs really went through splits, root splits and full meganodes.
  EXPECT_GT(total_splits, 100u);
  EXPECT_GE(max_height, 3);
  EXPECT_GT(full_refusals, 0u);
}

INSTANTIATE_TEST_SUITE_P(KeyShapes, BLinkTreeModel,
                         ::testing::Values(KeyShape{"Printable", 1, 24, cell::testing::kPrintable, ""},
                                           KeyShape{"ZeroBytesAndPrefixes", 1, 12, cell::testing::kTinyAlphabet, ""},
                                           KeyShape{"LongSharedPrefix", 0, 40, "abc", std::string(200, 'x')},
                                           KeyShape{"MaxLength", 240, 255, "ab", ""}),
                         [](const ::testing::TestParamInfo<KeyShape>& info) { return std::string(info.param.name); });

// Moves the leaf at `slot` to a new slot, as a meganode split moves nodes: copy, repoint the parent and the left
// sibling, then publish the old slot as free. Returns the new slot.
uint32_t RelocateLeaf(LocalStore& store, uint32_t slot, GlobalPtr parent) {
  btree::NodeStore& ns = store.meganode();
  uint32_t fresh = 0;
  EXPECT_TRUE(ns.AllocateSlots(1, true, &fresh).ok());
  uint64_t* w = ns.SlotWords(slot);
  uint64_t locked = btree::LockNode(w);
  btree::NodeImage img;
  btree::LoadLocked(w, &img);
  btree::NodeView v = img.view();
  std::string min, max;
  v.CopyMinKey(&min);
  v.CopyMaxKey(&max);
  std::vector<btree::NodeEntry> entries = img.Entries();
  btree::NodeHeader h = img.Header();
  h.slot = fresh;
  btree::NodeImage copy;
  EXPECT_TRUE(copy.Build(h, min, max, entries.data(), entries.size()));
  uint64_t* fw = ns.SlotWords(fresh);
  btree::PublishAndUnlock(fw, &copy, btree::LockNode(fw));
  // Parent: the entry that points to `slot` now points to `fresh`.
  uint32_t parent_slot = 0;
  EXPECT_TRUE(ns.SlotOf(parent, &parent_slot));
  uint64_t* pw = ns.SlotWords(parent_slot);
  uint64_t plocked = btree::LockNode(pw);
  btree::NodeImage pimg;
  btree::LoadLocked(pw, &pimg);
  std::string pmin, pmax;
  pimg.view().CopyMinKey(&pmin);
  pimg.view().CopyMaxKey(&pmax);
  std::vector<btree::NodeEntry> pentries = pimg.Entries();
  int repointed = 0;
  for (auto& e : pentries) {
    if (e.child == slot) {
      e.child = fresh;
      ++repointed;
    }
  }
  EXPECT_EQ(repointed, 1);
  EXPECT_TRUE(pimg.Build(pimg.Header(), pmin, pmax, pentries.data(), pentries.size()));
  btree::PublishAndUnlock(pw, &pimg, plocked);
  // Left sibling: its right link now names `fresh`.
  for (uint32_t s = 1; s < ns.num_slots(); ++s) {
    uint64_t* sw = ns.SlotWords(s);
    btree::NodeView sv(sw);
    if (s == slot || sv.kind() != btree::NodeKind::kTreeNode || !sv.valid() || sv.level() != 0) continue;
    if (sv.right() == ns.SlotPtr(slot)) {
      uint64_t slocked = btree::LockNode(sw);
      btree::NodeImage simg;
      btree::LoadLocked(sw, &simg);
      simg.SetRight(ns.SlotPtr(fresh));
      btree::PublishAndUnlock(sw, &simg, slocked);
    }
  }
  img.MarkFree();
  btree::PublishAndUnlock(w, &img, locked);
  return fresh;
}

// A reader holding a pointer to a node that was freed, or freed and then reused for another key range or level,
// notices (valid flag, fence keys, level) and restarts from an ancestor: it finds the key's current value and
// never believes the old node.
TEST(BLinkTreeReuse, StalePointersToFreedAndReusedNodesAreDetected) {
  auto store = OpenStore(uint64_t{1} << 20);
  for (int i = 0; i < 3000; ++i)
    ASSERT_TRUE(store->Put("k" + std::to_string(100000 + i), "v" + std::to_string(i)).ok());
  const std::string key = "k101500";
  btree::SearchKey sk(key);
  btree::TreeReader reader = store->tree().Reader();
  btree::Path path;
  btree::NodeHandle h;
  ASSERT_TRUE(reader.Descend(sk, 0, &path, &h).ok());
  GlobalPtr stale_leaf = path.At(0), parent = path.At(1);
  btree::NodeStore& ns = store->meganode();
  uint32_t leaf_slot = 0;
  ASSERT_TRUE(ns.SlotOf(stale_leaf, &leaf_slot));
  uint64_t version_before = ns.SlotWords(leaf_slot)[0];
  uint32_t fresh = RelocateLeaf(*store, leaf_slot, parent);
  ASSERT_NE(fresh, leaf_slot);
  btree::BLinkTree::Shape shape;
  ASSERT_TRUE(store->tree().CheckInvariants(&shape).ok());

  btree::CopyingNodeSource copying(cell::testing::RegionFetcher(&store->regions(), true));
  btree::TreeReader client(&copying, store->meganode_ptr());
  auto expect_found_through_stale_pointer = [&](const char* stage) {
    for (btree::TreeReader* r : {&reader, &client}) {
      uint64_t restarts = r->stats().restarts;
      btree::Path stale_path;
      stale_path.Set(1, parent);
      btree::NodeHandle got;
      Status s = r->Reach(sk, 0, stale_leaf, 0, &stale_path, &got);
      ASSERT_TRUE(s.ok()) << stage << ": " << s.ToString();
      EXPECT_EQ(got.ptr, ns.SlotPtr(fresh)) << stage;
      EXPECT_GT(r->stats().restarts, restarts) << stage << ": the stale node was believed";
      std::string v;
      ASSERT_TRUE(r->Get(key, &v).ok());
      EXPECT_EQ(v, "v1500");
    }
  };
  // 1. The old slot is free (valid flag clear).
  expect_found_through_stale_pointer("freed");

  // 2. The old slot is reused for a leaf of another key range, [z, +inf).
  uint32_t reused = 0;
  ns.FreeSlots(&leaf_slot, 1);
  ASSERT_TRUE(ns.AllocateSlots(1, true, &reused).ok());
  ASSERT_EQ(reused, leaf_slot);
  uint64_t* w = ns.SlotWords(leaf_slot);
  btree::NodeEntry e{"zzz", btree::LeafValue{GlobalPtr{2, 0}, 11, 0}, 0};
  btree::NodeImage img;
  ASSERT_TRUE(
      img.Build(btree::NodeHeader{ns.meganode(), leaf_slot, 0, btree::kFlagValid, GlobalPtr()}, "z", "", &e, 1));
  btree::PublishAndUnlock(w, &img, btree::LockNode(w));
  EXPECT_GT(w[0], version_before) << "a reused slot's version must keep growing";
  expect_found_through_stale_pointer("reused for another range");

  // 3. Reused at another level, with a range that does cover the key.
  btree::NodeEntry inner{"", btree::LeafValue(), fresh};
  ASSERT_TRUE(
      img.Build(btree::NodeHeader{ns.meganode(), leaf_slot, 1, btree::kFlagValid, GlobalPtr()}, "", "", &inner, 1));
  btree::PublishAndUnlock(w, &img, btree::LockNode(w));
  expect_found_through_stale_pointer("reused at another level");
}

}  // namespace
}  // namespace cell
