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

#include "btree/node_source.h"
#include "btree/record_format.h"
#include "btree/tree_reader.h"
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

// A store of one 4 MiB meganode and 16 MiB of extents.
StatusOr<std::unique_ptr<meganode::LocalStore>> SmallLocalStore() {
  meganode::LocalStoreOptions o;
  o.meganode_bytes = uint64_t{4} << 20;
  o.extent_region_bytes = uint64_t{16} << 20;
  return meganode::LocalStore::Open(o);
}

TEST(InPlaceReads, OverwrittenRecordsAreNeverTornOrStale) {
  auto opened = SmallLocalStore();
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

// A record read in place is proven by its leaf's version; when the leaf moves between the copy and that check, the
// copy is dropped and the record is copied again and checked by its checksum. A memory that acts as a writer would at
// the two moments that matter makes that path run every time: when the reader asks for the record's words the first
// time, the key is deleted (its leaf moves; its block is freed, its bytes still intact, so the in-place check passes);
// when they are asked for again (the copy checked by its checksum), the freed block is reused: here, one byte of its
// value changes, which only the checksum can tell. The reader must then drop both copies, read the leaf again and
// find the key gone, with nothing left in the value.
TEST(InPlaceReads, ARecordCopiedInPlaceIsDroppedWhenItsLeafMovesBeforeItIsProven) {
  auto opened = SmallLocalStore();
  ASSERT_TRUE(opened.ok());
  meganode::LocalStore& store = **opened;
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(store.Put("key" + std::to_string(100 + i), std::string(200, 'v')).ok());
  const std::string key = "key125";
  const size_t record_length = btree::RecordLength(key.size(), 200);

  struct WriterAtTheWorstMoments final : btree::LocalMemory {
    meganode::LocalStore* store = nullptr;
    std::string key;
    size_t record_length = 0;
    bool armed = true;
    int asked = 0;  // how often a record's words were asked for while armed
    const uint64_t* Readable(GlobalPtr p, size_t bytes) const override {
      const uint64_t* at = store->regions().Readable(p, bytes);
      // A node is read by lines or whole (64 or 1,024 bytes); a record's words are the record's length rounded up.
      if (at == nullptr || !armed || bytes != (record_length + 7) / 8 * 8) return at;
      auto* self = const_cast<WriterAtTheWorstMoments*>(this);
      if (++self->asked == 1) {
        EXPECT_TRUE(store->Delete(key).ok());
      } else if (self->asked == 2) {
        // The freed block taken by another record of the key's length: its value's last byte differs.
        reinterpret_cast<char*>(const_cast<uint64_t*>(at))[record_length - 1] ^= 1;
      }
      return at;
    }
    const uint64_t* Peek(GlobalPtr, size_t) const override { return nullptr; }
  } memory;
  memory.store = &store;
  memory.key = key;
  memory.record_length = record_length;

  btree::LocalNodeSource source(&memory);
  btree::TreeReader reader(&source, store.meganode_ptr());
  std::string value;
  const Status s = reader.Get(key, &value);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString() << ": the copy made in place before the delete was kept";
  EXPECT_TRUE(value.empty()) << value.size() << " unproven bytes left in the value";
  EXPECT_EQ(memory.asked, 2) << "the record was read in place, then copied again to check its checksum";
  EXPECT_GE(reader.stats().retries, 1u) << "the leaf was read again";
  memory.armed = false;
  std::string other;
  EXPECT_TRUE(reader.Get("key124", &other).ok());  // the rest of the leaf is intact
  EXPECT_EQ(other, std::string(200, 'v'));
}

}  // namespace
}  // namespace cell
