// Torn copies: writers mutate the tree while readers search it through a copying source that reads each node's 16
// cache lines in random order, spread over time (testing::RegionFetcher). No torn copy may be accepted, and answers
// must be right.
#include <absl/container/flat_hash_map.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "btree/global_reader.h"
#include "btree/tree_reader.h"
#include "btree/write_sink.h"
#include "meganode/global_tree.h"
#include "meganode/local_store.h"
#include "test/test_util.h"

namespace cell {
namespace {

// Every image ever published, by (slot, version): the oracle that an accepted copy is a published state.
class PublishedImages {
 public:
  // `where`: the node's slot in its meganode, or its packed GlobalPtr (a tree of several meganodes).
  void Record(uint64_t where, const uint64_t* words) {
    XXH128_hash_t h = XXH3_128bits(words, btree::kNodeSize);
    std::lock_guard<std::mutex> lock(mu_);
    images_[{where, words[0]}] = h;
  }
  // True if `words` is byte for byte an image published at that place with that version.
  bool WasPublished(uint64_t where, const uint64_t* words) const {
    XXH128_hash_t h = XXH3_128bits(words, btree::kNodeSize);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = images_.find(std::pair<uint64_t, uint64_t>{where, words[0]});
    return it != images_.end() && XXH128_isEqual(it->second, h);
  }

 private:
  mutable std::mutex mu_;
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, XXH128_hash_t> images_;  // (place, version) -> image hash
};

std::string StableKey(int i) { return "stable" + std::to_string(1000000 + i * 7); }

// Writers change `store` while readers search it through a copying source over `regions`. `published` holds every
// image published so far (kept current by the caller); `where` names a copied node's place as `published` does;
// `get` is a client-side get through the given source.
template <typename Store>
void RaceWritersAgainstCopyingReaders(
    Store& store, const meganode::RegionSet& regions, const PublishedImages& published,
    const std::function<bool(GlobalPtr, uint64_t*)>& where,
    const std::function<Status(btree::NodeSource*, const std::string&, std::string*)>& get) {
  const int scale = cell::testing::StressScale();

  // Keys present for the whole test (updated, never deleted), with values that name their key and a sequence.
  const int kStable = 2000;
  for (int i = 0; i < kStable; ++i) ASSERT_TRUE(store.Put(StableKey(i), StableKey(i) + "#0").ok());
  std::vector<std::atomic<uint64_t>> latest(kStable);

  std::atomic<uint64_t> bad_copies{0}, wrong_answers{0}, reads{0}, writes{0};
  btree::CopyingNodeSource source(cell::testing::RegionFetcher(&regions, /*shuffle=*/true));
  source.set_accept_observer([&](GlobalPtr ptr, const uint64_t* words) {
    uint64_t at = 0;
    if (words[0] == 0) return;  // never-written slot, accepted as free
    if (!where(ptr, &at) || !published.WasPublished(at, words)) bad_copies.fetch_add(1);
  });

  // Writers run until the readers are done: insert fresh keys (splits), update stable keys, and delete the oldest
  // fresh keys so that the tree stays within its meganode. A cap on iterations bounds the test even if readers hang.
  // Each writer keeps within kRoundsPerRead rounds per read made so far: on a loaded machine readers, who hand the
  // CPU over once per node they copy, crawl, and writers left free would take the CPU from them for the whole run.
  // The bound is above what writers make per read on a quiet machine (docs/BENCHMARKS.md, "Torn-copy test").
  const int kWriters = 2, kReaders = 2, kReadsPerReader = 3000 * scale;
  const uint64_t kRoundsPerRead = 5 * scale;
  // Tears enough for the run to mean something. How many a run catches depends on how the threads interleave (fewer
  // when other tests load the machine: docs/BENCHMARKS.md, "Torn-copy test"), so readers go on past kReadsPerReader
  // until there are enough, up to ten times as many reads.
  const uint64_t kEnoughTorn = scale > 1 ? 200u : 10u;
  std::atomic<int> readers_done{0};
  std::atomic<uint64_t> progress{0};  // reads made, and readers done: what a writer ahead waits for
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      std::vector<std::string> ring;
      for (int i = 0; i < 5000000 && readers_done.load() < kReaders; ++i) {
        for (uint64_t p = progress.load(); uint64_t(i) > kRoundsPerRead * (p + 1) && readers_done.load() < kReaders;
             p = progress.load()) {
          progress.wait(p);
        }
        std::string fresh = "fresh" + std::to_string(rng() % 1000000000) + "-" + std::to_string(t);
        EXPECT_TRUE(store.Put(fresh, fresh + "#v").ok());
        ring.push_back(fresh);
        if (ring.size() > 4000) {
          store.Delete(ring[i % 4000]);
          ring[i % 4000] = ring.back();
          ring.pop_back();
        }
        int s = static_cast<int>(rng() % kStable);
        uint64_t seq = latest[s].fetch_add(1) + 1;
        EXPECT_TRUE(store.Put(StableKey(s), StableKey(s) + "#" + std::to_string(seq)).ok());
        writes.fetch_add(1);
      }
    });
  }
  // Readers: client-side gets of stable keys (must be found, with a value written for that key: its sequence
  // number was handed out before the get returned) and of fresh keys (if found, the value belongs to that key).
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(200 + t);
      std::string v;
      for (int i = 0; i < 10 * kReadsPerReader && (i < kReadsPerReader || source.stats().torn.load() <= kEnoughTorn);
           ++i) {
        int s = static_cast<int>(rng() % kStable);
        Status st = get(&source, StableKey(s), &v);
        uint64_t max_seq = latest[s].load();
        reads.fetch_add(1);
        if (!st.ok() || v.rfind(StableKey(s) + "#", 0) != 0 ||
            std::stoull(v.substr(StableKey(s).size() + 1)) > max_seq) {
          wrong_answers.fetch_add(1);
          ADD_FAILURE() << "stable key " << StableKey(s) << ": " << st.ToString() << " value '" << v << "'";
        }
        std::string fresh = "fresh" + std::to_string(rng() % 1000000000) + "-" + std::to_string(rng() % kWriters);
        st = get(&source, fresh, &v);
        if (st.ok() && v != fresh + "#v") wrong_answers.fetch_add(1);
        progress.fetch_add(1);
        progress.notify_all();
      }
      readers_done.fetch_add(1);
      progress.fetch_add(1);
      progress.notify_all();
    });
  }
  for (auto& r : readers) r.join();
  for (auto& w : writers) w.join();

  uint64_t torn = source.stats().torn.load(), writing = source.stats().being_written.load();
  std::printf(
      "[ torn-copy ] %llu reads, %llu writer rounds, %llu nodes copied, %llu torn copies detected, %llu copies of "
      "nodes being written, %llu accepted copies not byte-identical to a published image\n",
      (unsigned long long)reads.load(), (unsigned long long)writes.load(),
      (unsigned long long)source.stats().fetched.load(), (unsigned long long)torn, (unsigned long long)writing,
      (unsigned long long)bad_copies.load());
  EXPECT_EQ(bad_copies.load(), 0u);
  EXPECT_EQ(wrong_answers.load(), 0u);
  EXPECT_GT(torn, kEnoughTorn) << "the test did not produce enough torn copies to mean anything";
}

TEST(TornCopies, ReadersNeverAcceptATornNodeAndAlwaysFindStableKeys) {
  meganode::LocalStoreOptions o;
  o.meganode_bytes = uint64_t{16} << 20;
  o.extent_region_bytes = uint64_t{256} << 20;
  auto opened = meganode::LocalStore::Open(o);
  ASSERT_TRUE(opened.ok());
  meganode::LocalStore& store = **opened;
  PublishedImages published;
  btree::NodeStore& ns = store.meganode();
  for (uint32_t s = 0; s < ns.num_slots(); ++s) {
    if (ns.SlotWords(s)[0] != 0) published.Record(s, ns.SlotWords(s));
  }
  ns.set_publish_observer([&](uint32_t slot, const btree::NodeImage& img) { published.Record(slot, img.w); });
  RaceWritersAgainstCopyingReaders(
      store, store.regions(), published,
      [&](GlobalPtr ptr, uint64_t* at) {
        uint32_t slot = 0;
        if (!ns.SlotOf(ptr, &slot)) return false;
        *at = slot;
        return true;
      },
      [&](btree::NodeSource* source, const std::string& key, std::string* value) {
        return btree::TreeReader(source, store.meganode_ptr()).Get(key, value);
      });
  btree::BLinkTree::Shape shape;
  EXPECT_TRUE(store.tree().CheckInvariants(&shape).ok());
}

// Every node image a GlobalTree publishes: its write sink hears of each before it is visible (btree/write_sink.h).
class ImageSink : public btree::WriteSink {
 public:
  explicit ImageSink(PublishedImages* images) : images_(images) {}
  void NodeWritten(GlobalPtr node, const btree::NodeImage& image) override { images_->Record(node.Pack(), image.w); }
  void BytesWritten(GlobalPtr, const uint64_t*, size_t) override {}

 private:
  PublishedImages* images_;
};

// The same through the tree cell-server runs: a GlobalTree of small meganodes, so that meganodes split (and their
// nodes are cut) while readers copy them, read with the client's walk across meganodes (btree::GlobalReader).
TEST(TornCopies, ReadersNeverAcceptATornNodeAndAlwaysFindStableKeysInTheServersTree) {
  PublishedImages published;
  ImageSink sink(&published);
  meganode::GlobalTreeOptions o;
  // 64 KiB meganodes (64 nodes): the stable keys alone fill several (their load splits meganodes whatever the speed
  // of the run), and the writers' fresh keys split more while readers copy.
  o.meganode_bytes = uint64_t{64} << 10;
  o.meganodes = 2048;
  o.extent_region_bytes = uint64_t{256} << 20;
  o.write_sink = &sink;
  auto opened = meganode::GlobalTree::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  meganode::GlobalTree& tree = **opened;
  RaceWritersAgainstCopyingReaders(
      tree, tree.regions(), published,
      [](GlobalPtr ptr, uint64_t* at) {
        *at = ptr.Pack();
        return true;
      },
      [&](btree::NodeSource* source, const std::string& key, std::string* value) {
        return btree::GlobalReader(source, tree.first_meganode()).Get(key, value);
      });
  EXPECT_GT(tree.stats().splits.load(), 0u) << "the tree never split: it proves less than it says";
  EXPECT_TRUE(tree.CheckInvariants().ok());
}

}  // namespace
}  // namespace cell
