// LocalStore: limits, bad input and full stores give clear errors and change nothing.
#include "meganode/local_store.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace cell::meganode {
namespace {

std::unique_ptr<LocalStore> Open(uint64_t meganode_bytes, uint64_t extent_bytes, uint32_t meganodes = 1) {
  LocalStoreOptions o;
  o.meganode_bytes = meganode_bytes;
  o.meganodes = meganodes;
  o.extent_region_bytes = extent_bytes;
  auto s = LocalStore::Open(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

// Puts distinct keys until one is refused (or 100,000 are in); *acked gets those that were stored. The refusal.
Status FillUntilRefused(LocalStore& s, std::map<std::string, std::string>* acked) {
  for (int i = 0; i < 100000; ++i) {
    std::string k = "key" + std::to_string(i * 7919 % 100003);
    Status st = s.Put(k, "value" + std::to_string(i));
    if (!st.ok()) return st;
    (*acked)[k] = "value" + std::to_string(i);
  }
  return Status::OK();
}

TEST(LocalStoreLimits, KeysAndValuesAtTheLimitsWorkAndBeyondThemAreRefusedWithTheLimitNamed) {
  auto s = Open(1 << 20, 16 << 20);
  ASSERT_TRUE(s->Put("a", "1").ok());
  std::string max_key(kMaxKeySize, 'k'), max_value(kMaxValueSize, 'v');
  ASSERT_TRUE(s->Put(max_key, max_value).ok());
  ASSERT_TRUE(s->Put(std::string(1, '\0'), "").ok());
  std::string v;
  ASSERT_TRUE(s->Get(max_key, &v).ok());
  EXPECT_EQ(v, max_value);
  ASSERT_TRUE(s->Get(std::string(1, '\0'), &v).ok());
  EXPECT_EQ(v, "");

  Status st = s->Put("", "x");
  EXPECT_TRUE(st.IsInvalidArgument());
  EXPECT_NE(st.message().find("1..255 bytes"), std::string::npos) << st.message();
  st = s->Put(std::string(kMaxKeySize + 1, 'k'), "x");
  EXPECT_TRUE(st.IsInvalidArgument());
  EXPECT_NE(st.message().find("256 bytes"), std::string::npos) << st.message();
  st = s->Put("b", std::string(kMaxValueSize + 1, 'v'));
  EXPECT_TRUE(st.IsInvalidArgument());
  EXPECT_NE(st.message().find("1048576-byte limit"), std::string::npos) << st.message();
  EXPECT_TRUE(s->Get("", &v).IsInvalidArgument());
  EXPECT_TRUE(s->Get(std::string(300, 'x'), &v).IsInvalidArgument());
  EXPECT_TRUE(s->Delete("").IsInvalidArgument());
  EXPECT_TRUE(s->Delete("never-there").IsNotFound());
  std::vector<btree::KeyValue> out;
  EXPECT_TRUE(s->Scan(std::string(300, 'x'), "", 10, &out).IsInvalidArgument());

  // Nothing changed by the refusals.
  EXPECT_TRUE(s->Get("b", &v).IsNotFound());
  ASSERT_TRUE(s->Scan("", "", 10, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].key, std::string(1, '\0'));
  EXPECT_EQ(out[1].key, "a");
  EXPECT_EQ(out[2].key, max_key);
}

TEST(LocalStoreFull, AFullMeganodeRefusesInsertsClearlyAndKeepsEverythingElseWorking) {
  auto s = Open(64 << 10, 64 << 20);  // 64 node slots
  std::map<std::string, std::string> acked;
  Status st = FillUntilRefused(*s, &acked);
  ASSERT_TRUE(st.IsResourceExhausted()) << st.ToString();
  // The meganode could not split: there is no room for a second one.
  EXPECT_NE(st.message().find("all 1 meganodes of node region 1 are in use"), std::string::npos) << st.message();
  uint64_t extent_bytes = s->extent_bytes_used();
  // More refused inserts change nothing; the refused values' extents are given back.
  int refused = 0;
  for (int j = 0; j < 200; ++j) {
    const uint64_t before = s->extent_bytes_used();
    Status again = s->Put("other" + std::to_string(j), std::string(100, 'x'));
    if (again.ok()) {
      acked["other" + std::to_string(j)] = std::string(100, 'x');
    } else {
      EXPECT_TRUE(again.IsResourceExhausted());
      EXPECT_EQ(s->extent_bytes_used(), before) << "a refused insert kept its record's extent";
      ++refused;
    }
  }
  EXPECT_GT(refused, 100) << "the meganode was not full";
  btree::BLinkTree::Shape shape;
  ASSERT_TRUE(s->tree().CheckInvariants(&shape).ok());
  EXPECT_EQ(shape.entries, acked.size());
  EXPECT_GE(s->extent_bytes_used(), extent_bytes);
  std::string v;
  for (auto& [k, want] : acked) {
    ASSERT_TRUE(s->Get(k, &v).ok()) << k;
    ASSERT_EQ(v, want);
  }
  // Updates and deletes still work, and a delete makes room in its leaf again.
  auto first = acked.begin();
  ASSERT_TRUE(s->Put(first->first, "updated").ok());
  ASSERT_TRUE(s->Get(first->first, &v).ok());
  EXPECT_EQ(v, "updated");
  ASSERT_TRUE(s->Delete(first->first).ok());
  ASSERT_TRUE(s->Put(first->first, "back").ok());
  EXPECT_EQ(s->tree().stats().missing_separators.load(), 0u);
}

// With room for more meganodes, a full one splits (as a server's does) and the store holds more keys.
TEST(LocalStoreFull, WithRoomForMoreMeganodesAFullOneSplits) {
  std::map<std::string, std::string> one, four;
  auto s1 = Open(64 << 10, 64 << 20);
  ASSERT_TRUE(FillUntilRefused(*s1, &one).IsResourceExhausted());
  auto s4 = Open(64 << 10, 64 << 20, 4);
  Status st = FillUntilRefused(*s4, &four);
  ASSERT_TRUE(st.IsResourceExhausted()) << st.ToString();
  EXPECT_NE(st.message().find("all 4 meganodes"), std::string::npos) << st.message();
  EXPECT_GT(four.size(), 2 * one.size());
  std::string v;
  for (auto& [k, want] : four) {
    ASSERT_TRUE(s4->Get(k, &v).ok()) << k;
    ASSERT_EQ(v, want);
  }
  std::vector<btree::KeyValue> out;
  ASSERT_TRUE(s4->Scan("", "", four.size() + 1, &out).ok());
  ASSERT_EQ(out.size(), four.size());
  // The first meganode keeps the left part of the keys only.
  btree::BLinkTree::Shape shape;
  ASSERT_TRUE(s4->tree().CheckInvariants(&shape).ok());
  EXPECT_LT(shape.entries, four.size());
}

// With room for two meganodes, the first split takes the second and leaves no room for a root meganode above the
// two: the split stands (the right link reaches the new meganode) and writes go on until both are full, instead of
// the split's writer being refused for want of a root.
TEST(LocalStoreFull, ASplitThatCannotGrowTheRootStillLetsItsWriterOn) {
  std::map<std::string, std::string> one, two;
  auto s1 = Open(64 << 10, 64 << 20);
  ASSERT_TRUE(FillUntilRefused(*s1, &one).IsResourceExhausted());
  auto s2 = Open(64 << 10, 64 << 20, 2);
  Status st = FillUntilRefused(*s2, &two);
  ASSERT_TRUE(st.IsResourceExhausted()) << st.ToString();
  EXPECT_GT(two.size(), one.size() * 3 / 2) << "refused at the first split, not when both meganodes were full";
  std::string v;
  for (auto& [k, want] : two) {
    ASSERT_TRUE(s2->Get(k, &v).ok()) << k;
    ASSERT_EQ(v, want);
  }
}

TEST(LocalStoreFull, AFullExtentRegionRefusesWritesAndKeepsOldValues) {
  auto s = Open(1 << 20, 64 << 10);
  std::string big(10000, 'b');
  int stored = 0;
  Status st;
  for (; stored < 100; ++stored) {
    st = s->Put("k" + std::to_string(stored), big);
    if (!st.ok()) break;
  }
  ASSERT_TRUE(st.IsResourceExhausted()) << st.ToString();
  EXPECT_NE(st.message().find("extent region"), std::string::npos) << st.message();
  // An update that cannot get space keeps the old value.
  EXPECT_TRUE(s->Put("k0", std::string(20000, 'n')).IsResourceExhausted());
  std::string v;
  ASSERT_TRUE(s->Get("k0", &v).ok());
  EXPECT_EQ(v, big);
  ASSERT_TRUE(s->Delete("k1").ok());
  EXPECT_TRUE(s->Put("k1", big).ok()) << "freed space is reused";
}

TEST(LocalStoreOptions, ImpossibleSizesAreRefusedAtOpen) {
  LocalStoreOptions o;
  o.meganode_bytes = 1000;
  EXPECT_TRUE(LocalStore::Open(o).status().IsInvalidArgument());
  o.meganode_bytes = 1 << 20;
  o.node_region_id = 0;
  EXPECT_TRUE(LocalStore::Open(o).status().IsInvalidArgument());
}

}  // namespace
}  // namespace cell::meganode
