// Scans while leaves split: every key present for the whole scan appears exactly once, in order, by server-side
// and by client-side scans.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "btree/tree_reader.h"
#include "meganode/local_store.h"
#include "test/test_util.h"

namespace cell {
namespace {

std::string Stable(int i) {
  char b[32];
  std::snprintf(b, sizeof b, "key%07d", i * 10);
  return b;
}

class ConcurrentScan : public ::testing::TestWithParam<bool> {};  // parameter: client-side (copying) source

TEST_P(ConcurrentScan, KeysPresentThroughoutAppearExactlyOnceInOrderWhileLeavesSplit) {
  const bool client_side = GetParam();
  const int scale = cell::testing::StressScale();
  meganode::LocalStoreOptions o;
  o.meganode_bytes = uint64_t{32} << 20;
  o.extent_region_bytes = uint64_t{256} << 20;
  auto opened = meganode::LocalStore::Open(o);
  ASSERT_TRUE(opened.ok());
  meganode::LocalStore& store = **opened;
  const int kStable = 3000;
  for (int i = 0; i < kStable; ++i) ASSERT_TRUE(store.Put(Stable(i), "s" + Stable(i)).ok());

  // The writer runs until the scans are done (capped, so a hung scanner cannot hang the test). Fresh keys fall
  // between stable keys, so the leaves that hold stable keys split again and again; the oldest fresh keys are
  // deleted to keep the tree within its meganode.
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::mt19937_64 rng(1);
    std::vector<std::string> ring;
    for (int i = 0; i < 5000000 && !stop.load(); ++i) {
      int base = static_cast<int>(rng() % kStable);
      std::string k = Stable(base) + "-" + std::to_string(rng() % 100000);
      EXPECT_TRUE(store.Put(k, "f" + k).ok());
      ring.push_back(k);
      if (ring.size() > 20000) {
        store.Delete(ring[i % 20000]);
        ring[i % 20000] = ring.back();
        ring.pop_back();
      }
    }
  });

  btree::CopyingNodeSource copying(cell::testing::RegionFetcher(&store.regions(), /*shuffle=*/true));
  btree::TreeReader reader = client_side ? btree::TreeReader(&copying, store.meganode_ptr()) : store.tree().Reader();
  std::mt19937_64 rng(2);
  int scans = 0;
  uint64_t stable_seen = 0;
  const int kScans = (client_side ? 40 : 400) * scale;
  while (scans < kScans) {
    int a = static_cast<int>(rng() % kStable), b = a + 1 + static_cast<int>(rng() % 400);
    std::string start = Stable(a), end = b < kStable ? Stable(b) : std::string();
    std::vector<btree::KeyValue> out;
    Status s = reader.Scan(start, end, 100000, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::set<std::string> seen;
    for (size_t i = 0; i < out.size(); ++i) {
      if (i > 0) {
        ASSERT_LT(out[i - 1].key, out[i].key) << "scan out of order or repeated";
      }
      ASSERT_GE(out[i].key, start);
      if (!end.empty()) {
        ASSERT_LT(out[i].key, end);
      }
      ASSERT_EQ(out[i].value.substr(1), out[i].key) << "value belongs to another key";
      seen.insert(out[i].key);
    }
    for (int i = a; i < std::min(b, kStable); ++i) {
      ASSERT_TRUE(seen.count(Stable(i))) << "scan [" << start << ", " << end << ") missed " << Stable(i);
      ++stable_seen;
    }
    ++scans;
  }
  stop.store(true);
  writer.join();
  EXPECT_GT(store.tree().stats().splits.load(), 100u) << "leaves did not split during the scans";
  std::printf("[ scans ] %d scans (%s), %llu stable keys checked, %llu leaf splits meanwhile\n", scans,
              client_side ? "client-side" : "server-side", (unsigned long long)stable_seen,
              (unsigned long long)store.tree().stats().splits.load());
}

INSTANTIATE_TEST_SUITE_P(Sources, ConcurrentScan, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "ClientSide" : "ServerSide");
                         });

}  // namespace
}  // namespace cell
