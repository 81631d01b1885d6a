// In-place (server-side) gets while the same keys are overwritten: the extent blocks of a key's records are freed
// and reused at once (the buddy allocator hands out the lowest free block, so a key's records ping-pong between a
// few blocks), and values keep their length, so a record torn by a rewrite of its block, or a stale copy of a reused
// block, has the right key and length. Values carry their sequence number many times over; any mix of two records
// shows as disagreeing copies. This is the case TreeReader::ReadRecord proves by the leaf version instead of the
// record checksum.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "meganode/global_tree.h"
#include "meganode/local_store.h"
#include "test/test_util.h"

namespace cell {
namespace {

constexpr int kKeys = 32;
constexpr int kCopies = 24;  // 16 hex digits each: values of 1 + 24 * 16 = 385 bytes

std::string Key(int i) { return "hot" + std::to_string(100 + i); }

std::string Value(int key, uint64_t seq) {
  char word[17];
  std::snprintf(word, sizeof word, "%016llx", static_cast<unsigned long long>(seq));
  std::string v(1, static_cast<char>('A' + key));
  for (int c = 0; c < kCopies; ++c) v += word;
  return v;
}

// The sequence number in `v` if it is a whole value written for `key`, else -1.
int64_t SeqOf(int key, const std::string& v) {
  if (v.size() != 1 + kCopies * 16 || v[0] != static_cast<char>('A' + key)) return -1;
  for (int c = 1; c < kCopies; ++c) {
    if (v.compare(1 + c * 16, 16, v, 1, 16) != 0) return -1;
  }
  return static_cast<int64_t>(std::stoull(v.substr(1, 16), nullptr, 16));
}

// Writers overwrite kKeys keys while readers get them in place through `store` (LocalStore or GlobalTree: both
// have Put(key, value) and Get(key, &value)); every value read must be whole and not from the future.
template <typename Store>
void OverwriteWhileReadingInPlace(Store& store) {
  const int scale = cell::testing::StressScale();
  std::vector<std::atomic<uint64_t>> latest(kKeys);
  for (int k = 0; k < kKeys; ++k) ASSERT_TRUE(store.Put(Key(k), Value(k, 0)).ok()) << Key(k);

  const int kReaders = 2, kReadsPerReader = 60000 * scale;
  std::atomic<int> readers_done{0};
  std::atomic<uint64_t> writes{0}, bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {  // writers: overwrite (the sequence is handed out before the write)
      std::mt19937_64 rng(10 + t);
      for (int i = 0; i < 50000000 && readers_done.load() < kReaders; ++i) {
        int k = static_cast<int>(rng() % kKeys);
        uint64_t seq = latest[k].fetch_add(1) + 1;
        EXPECT_TRUE(store.Put(Key(k), Value(k, seq)).ok());
        writes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (int t = 0; t < kReaders; ++t) {
    threads.emplace_back([&, t] {  // readers: in place, through the store's Get
      std::mt19937_64 rng(20 + t);
      std::string v;
      for (int i = 0; i < kReadsPerReader; ++i) {
        int k = static_cast<int>(rng() % kKeys);
        Status s = store.Get(Key(k), &v);
        uint64_t max_seq = latest[k].load();
        int64_t seq = s.ok() ? SeqOf(k, v) : -1;
        if (seq < 0 || static_cast<uint64_t>(seq) > max_seq) {
          if (bad.fetch_add(1) < 5) ADD_FAILURE() << Key(k) << ": " << s.ToString() << " value '" << v << "'";
        }
      }
      readers_done.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  std::printf("[ in-place ] %d gets, %llu overwrites meanwhile, %llu torn or stale values accepted\n",
              kReaders * kReadsPerReader, (unsigned long long)writes.load(), (unsigned long long)bad.load());
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(writes.load(), 1000u) << "the writers hardly ran; the test proves little";
}

TEST(InPlaceReads, OverwrittenRecordsAreNeverTornOrStale) {
  meganode::LocalStoreOptions o;
  o.meganode_bytes = uint64_t{4} << 20;
  o.extent_region_bytes = uint64_t{16} << 20;
  auto opened = meganode::LocalStore::Open(o);
  ASSERT_TRUE(opened.ok());
  OverwriteWhileReadingInPlace(**opened);
}

// The same through the tree cell-server runs (GlobalTree: its server-side get, split locks and extents).
TEST(InPlaceReads, OverwrittenRecordsAreNeverTornOrStaleInTheServersTree) {
  meganode::GlobalTreeOptions o;
  o.meganode_bytes = uint64_t{1} << 20;
  o.meganodes = 4;
  o.extent_region_bytes = uint64_t{16} << 20;
  auto opened = meganode::GlobalTree::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  OverwriteWhileReadingInPlace(**opened);
}

}  // namespace
}  // namespace cell
