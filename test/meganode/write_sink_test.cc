// The write sink (btree/write_sink.h) hears of every change to a tree's regions: replaying what it heard onto
// zeroed copies of the regions (node images by version, record bytes in order) gives the regions byte for byte,
// through thousands of puts, overwrites, deletes and dozens of meganode splits, from several threads. This is what
// physical redo logging rests on.
#include "btree/write_sink.h"

#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "meganode/global_tree.h"

namespace cell::meganode {
namespace {

// Keeps every write it hears of, in the order it hears of them.
class RecordingSink final : public btree::WriteSink {
 public:
  struct Write {
    GlobalPtr at;
    bool node;
    std::vector<uint64_t> words;
  };
  void NodeWritten(GlobalPtr node, const btree::NodeImage& image) override {
    std::lock_guard lock(mu_);
    writes_.push_back({node, true, std::vector<uint64_t>(image.w, image.w + btree::kNodeWords)});
  }
  void BytesWritten(GlobalPtr at, const uint64_t* words, size_t n) override {
    std::lock_guard lock(mu_);
    writes_.push_back({at, false, std::vector<uint64_t>(words, words + n)});
  }
  // Replays onto zeroed copies of the regions and compares them with the live ones; returns the mismatches.
  std::string Compare(const Region& nodes, const Region& extents) {
    std::lock_guard lock(mu_);
    std::vector<uint64_t> node_copy(nodes.size() / 8, 0), extent_copy(extents.size() / 8, 0);
    size_t node_writes = 0;
    for (const Write& w : writes_) {
      if (w.node) {
        EXPECT_EQ(w.at.region, nodes.id());
        uint64_t* dst = node_copy.data() + w.at.offset / 8;
        EXPECT_EQ(w.words[0] % 2, 0u) << "a published image is unlocked";
        if (w.words[0] > dst[0]) std::memcpy(dst, w.words.data(), btree::kNodeSize);  // a newer version
        ++node_writes;
      } else {
        EXPECT_EQ(w.at.region, extents.id());
        std::memcpy(extent_copy.data() + w.at.offset / 8, w.words.data(), w.words.size() * 8);
      }
    }
    std::string out;
    const auto compare = [&out](const char* what, const std::vector<uint64_t>& copy, const Region& live) {
      const uint64_t* words = live.Resolve(0, live.size());
      size_t bad = 0;
      for (size_t i = 0; i < copy.size(); ++i) {
        if (copy[i] != words[i] && bad++ < 3) {
          out += std::string(what) + " word at offset " + std::to_string(i * 8) + " differs; ";
        }
      }
      if (bad > 0) out += std::to_string(bad) + " " + what + " words differ. ";
    };
    compare("node", node_copy, nodes);
    compare("extent", extent_copy, extents);
    EXPECT_GT(node_writes, 0u);
    return out;
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return writes_.size();
  }

 private:
  std::mutex mu_;
  std::vector<Write> writes_;
};

std::unique_ptr<GlobalTree> SmallTree(btree::WriteSink* sink) {
  GlobalTreeOptions o;
  o.meganode_bytes = 32 << 10;  // 32 slots: a split every few hundred keys
  o.meganodes = 512;
  o.extent_region_bytes = uint64_t{64} << 20;
  o.write_sink = sink;
  auto t = GlobalTree::Open(o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

std::string Key(uint64_t i) { return "key" + std::to_string(1000000 + i); }

TEST(WriteSink, ReplayingWhatItHeardRebuildsTheRegionsExactly) {
  RecordingSink sink;
  auto tree = SmallTree(&sink);
  ASSERT_NE(tree, nullptr);
  EXPECT_EQ(sink.Compare(tree->node_region(), tree->extent_region()), "") << "the first meganode's format";
  std::mt19937_64 rng(3);
  for (int i = 0; i < 15000; ++i) {
    const uint64_t k = rng() % 6000;
    if (rng() % 5 == 0) {
      const Status s = tree->Delete(Key(k));
      ASSERT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
    } else {
      ASSERT_TRUE(tree->Put(Key(k), std::string(1 + rng() % 200, static_cast<char>('a' + k % 26))).ok());
    }
  }
  EXPECT_GT(tree->stats().splits.load(), 10u);
  EXPECT_EQ(sink.Compare(tree->node_region(), tree->extent_region()), "");
}

TEST(WriteSink, WritersOnManyThreadsAreAllHeardOf) {
  RecordingSink sink;
  auto tree = SmallTree(&sink);
  ASSERT_NE(tree, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(10 + t);
      for (int i = 0; i < 3000; ++i) {
        const uint64_t k = rng() % 4000;
        if (rng() % 6 == 0) {
          (void)tree->Delete(Key(k));
        } else {
          ASSERT_TRUE(tree->Put(Key(k), std::string(1 + rng() % 300, static_cast<char>('A' + t))).ok());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GT(tree->stats().splits.load(), 10u);
  EXPECT_EQ(sink.Compare(tree->node_region(), tree->extent_region()), "");
}

}  // namespace
}  // namespace cell::meganode
