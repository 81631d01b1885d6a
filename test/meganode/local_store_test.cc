// LocalStore: limits, bad input and full stores give clear errors and change nothing.
#include "meganode/local_store.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace cell::meganode {
namespace {

std::unique_ptr<LocalStore> Open(uint64_t meganode_bytes, uint64_t extent_bytes) {
  LocalStoreOptions o;
  o.meganode_bytes = meganode_bytes;
  o.extent_region_bytes = extent_bytes;
  auto s = LocalStore::Open(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
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
  Status st;
  int i = 0;
  for (; i < 100000; ++i) {
    std::string k = "key" + std::to_string(i * 7919 % 100003);
    st = s->Put(k, "value" + std::to_string(i));
    if (!st.ok()) break;
    acked[k] = "value" + std::to_string(i);
  }
  ASSERT_TRUE(st.IsResourceExhausted()) << st.ToString();
  EXPECT_NE(st.message().find("meganode full"), std::string::npos) << st.message();
  uint64_t extent_bytes = s->extents().bytes_in_use();
  // More refused inserts change nothing; the refused values' extents are given back.
  for (int j = 0; j < 200; ++j) {
    Status again = s->Put("other" + std::to_string(j), std::string(100, 'x'));
    if (again.ok())
      acked["other" + std::to_string(j)] = std::string(100, 'x');
    else
      EXPECT_TRUE(again.IsResourceExhausted());
  }
  btree::BLinkTree::Shape shape;
  ASSERT_TRUE(s->tree().CheckInvariants(&shape).ok());
  EXPECT_EQ(shape.entries, acked.size());
  EXPECT_GE(s->extents().bytes_in_use(), extent_bytes);
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
