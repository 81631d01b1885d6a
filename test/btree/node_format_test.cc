// The node format: key order, entry edits, copy checks, and partitioning of entries into nodes.
#include "btree/node_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "btree/blink_tree.h"
#include "btree/key.h"
#include "btree/node_source.h"
#include "test/test_util.h"

namespace cell::btree {
namespace {

using cell::testing::kTinyAlphabet;
using cell::testing::RandomKey;

int Sign(int x) { return (x > 0) - (x < 0); }

NodeHeader Header(int level, uint32_t slot = 5) {
  return NodeHeader{GlobalPtr{1, 1024 * 64}, slot, level, kFlagValid, GlobalPtr()};
}

TEST(NodeKeyOrder, WordComparisonMatchesMemcmpOrderIncludingZeroBytesAndPrefixes) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string a = RandomKey(rng, 1, 20, cell::testing::kTinyAlphabet);
    std::string b =
        rng() % 4 == 0 ? a + std::string(1 + rng() % 3, '\0') : RandomKey(rng, 1, 20, cell::testing::kTinyAlphabet);
    NodeEntry e{a, LeafValue{GlobalPtr{2, 64}, 9, 1}, 0};
    NodeImage img;
    ASSERT_TRUE(img.Build(Header(0), "", "", &e, 1));
    EXPECT_EQ(Sign(img.view().CompareEntry(0, SearchKey(b))), Sign(CompareKeys(a, b))) << "a=" << a << " b=" << b;
  }
}

TEST(NodeKeyOrder, SearchKeyHoldsTheKeysWordsZeroPaddedAtEveryLength) {
  std::mt19937_64 rng(3);
  for (size_t len = 0; len <= kMaxKeySize; ++len) {
    std::string key(len, '\0');
    for (char& c : key) c = static_cast<char>(rng());  // any byte, zeros included
    SearchKey k(key);
    ASSERT_EQ(k.size(), len);
    ASSERT_EQ(k.words(), (len + 7) / 8);
    for (uint32_t i = 0; i < k.words(); ++i) {
      ASSERT_EQ(k.word(i), OrderWord(RawWordAt(key, i))) << "length " << len << " word " << i;
    }
    if (len == 0) {
      EXPECT_EQ(k.word(0), 0u);
    }
  }
}

TEST(NodeKeyOrder, ShortestSeparatorLiesBetweenItsKeys) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 10000; ++i) {
    std::string a = RandomKey(rng, 1, 30, cell::testing::kTinyAlphabet);
    std::string b = RandomKey(rng, 1, 30, cell::testing::kTinyAlphabet);
    if (a == b) continue;
    if (a > b) std::swap(a, b);
    std::string s = ShortestSeparator(a, b);
    EXPECT_LT(CompareKeys(a, s), 0);
    EXPECT_LE(CompareKeys(s, b), 0);
    EXPECT_LE(s.size(), b.size());
  }
}

// The in-node searches (LowerBound, UpperBound, ChildIndex) give exactly std::lower_bound's and std::upper_bound's
// positions, also where many keys share their first 8 bytes (the searches compare prefixes first, then tails within a
// run of equal prefixes): keys over a tiny alphabet with zero bytes, keys of exactly 8 bytes, and keys of 0xff bytes
// (the largest prefix), in leaves and in inner nodes.
TEST(NodeSearch, BoundsAgreeWithASortedModelWhenKeysShareTheirFirstEightBytes) {
  std::mt19937_64 rng(5);
  const std::string_view heads[] = {"", "prefix00", std::string_view("\xff\xff\xff\xff\xff\xff\xff\xff", 8), "pre"};
  for (int round = 0; round < 400; ++round) {
    const int level = round % 2;  // leaves, then inner nodes (whose entry 0 has no key)
    const std::string head(heads[rng() % 4]);
    std::vector<std::string> keys;
    const size_t want = 1 + rng() % 16;  // (entries of up to 18-byte keys that fit in one node)
    while (keys.size() < want) keys.push_back(head + RandomKey(rng, head.empty() ? 1 : 0, 9, kTinyAlphabet));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    std::vector<NodeEntry> entries;
    for (size_t i = 0; i < keys.size(); ++i) {
      NodeEntry e{keys[i], LeafValue{GlobalPtr{2, 64 * (i + 1)}, 9, i}, static_cast<uint32_t>(i + 1)};
      if (level > 0 && i == 0) e.key.clear();  // an inner node's entry 0 starts at its min fence
      entries.push_back(e);
    }
    NodeImage img;
    ASSERT_TRUE(img.Build(Header(level), level > 0 ? keys[0] : "", "", entries.data(), entries.size()));
    const NodeView v = img.view();
    ASSERT_EQ(v.size(), keys.size());
    for (int probe = 0; probe < 200; ++probe) {
      std::string k = rng() % 3 == 0 ? keys[rng() % keys.size()] : head + RandomKey(rng, 0, 10, kTinyAlphabet);
      if (rng() % 5 == 0) k.push_back('\0');
      if (k.empty()) k = "a";
      const SearchKey sk(k);
      if (level == 0) {
        EXPECT_EQ(v.LowerBound(sk), std::lower_bound(keys.begin(), keys.end(), k) - keys.begin());
        EXPECT_EQ(v.UpperBound(sk), std::upper_bound(keys.begin(), keys.end(), k) - keys.begin());
      } else if (k >= keys[0]) {
        EXPECT_EQ(v.ChildIndex(sk), std::upper_bound(keys.begin(), keys.end(), k) - keys.begin() - 1);
      }
    }
  }
}

TEST(NodeImage, InsertRemoveAndFindAgreeWithASortedModel) {
  std::mt19937_64 rng(11);
  NodeImage img;
  ASSERT_TRUE(img.Build(Header(0), "b", "y", nullptr, 0));
  std::vector<std::string> model;
  for (int i = 0; i < 2000; ++i) {
    std::string k = "b" + RandomKey(rng, 0, 20, cell::testing::kPrintable);
    SearchKey sk(k);
    NodeView v = img.view();
    uint32_t at = v.LowerBound(sk);
    bool present = at < v.size() && v.CompareEntry(at, sk) == 0;
    auto it = std::lower_bound(model.begin(), model.end(), k);
    ASSERT_EQ(present, it != model.end() && *it == k);
    if (present && rng() % 2) {
      img.RemoveEntry(at);
      model.erase(it);
    } else if (!present) {
      LeafValue lv{GlobalPtr{2, 8 * static_cast<uint64_t>(i)}, 10 + static_cast<uint32_t>(k.size()), rng()};
      if (img.InsertEntry(at, k, lv, 0)) {
        model.insert(it, k);
        EXPECT_EQ(img.view().leaf_value(at), lv);
      } else {
        EXPECT_GT(model.size(), 5u) << "a node refused an entry while nearly empty";
        img.RemoveEntry(0);  // make room and go on
        model.erase(model.begin());
      }
    }
    std::string got;
    ASSERT_EQ(img.view().size(), model.size());
    for (uint32_t j = 0; j < model.size(); ++j) {
      img.view().CopyEntryKey(j, &got);
      ASSERT_EQ(got, model[j]);
    }
  }
}

TEST(NodeCopyCheck, EveryTornCacheLineIsRefused) {
  std::mt19937_64 rng(5);
  std::vector<NodeEntry> entries;
  for (int i = 0; i < 8; ++i)
    entries.push_back(NodeEntry{"key" + std::to_string(i), LeafValue{GlobalPtr{2, 64}, 20, 7}, 0});
  NodeImage before, after;
  ASSERT_TRUE(before.Build(Header(0), "", "", entries.data(), entries.size()));
  before.Seal(10);
  entries[3].value.checksum = 8;  // one entry's payload changes
  entries.push_back(NodeEntry{"key9", LeafValue{GlobalPtr{2, 128}, 20, 9}, 0});
  ASSERT_TRUE(after.Build(Header(0), "", "", entries.data(), entries.size()));
  after.Seal(12);
  GlobalPtr self = before.view().self();
  EXPECT_EQ(CheckCopy(before.w, self), CopyCheck::kOk);
  EXPECT_EQ(CheckCopy(after.w, self), CopyCheck::kOk);
  // Every mix of whole lines from the two states that differs from both is refused, whatever the mix.
  int mixes = 0;
  for (int mask = 1; mask < (1 << 16) - 1; mask += 1 + static_cast<int>(rng() % 7)) {
    uint64_t mixed[kNodeWords];
    bool differs_before = false, differs_after = false;
    for (int line = 0; line < 16; ++line) {
      const uint64_t* src = (mask >> line) & 1 ? after.w : before.w;
      for (int j = 0; j < 8; ++j) mixed[line * 8 + j] = src[line * 8 + j];
    }
    for (size_t j = 0; j < kNodeWords; ++j) {
      differs_before |= mixed[j] != before.w[j];
      differs_after |= mixed[j] != after.w[j];
    }
    if (differs_before && differs_after) {
      EXPECT_NE(CheckCopy(mixed, self), CopyCheck::kOk) << "mask " << mask;
      ++mixes;
    }
  }
  EXPECT_GT(mixes, 1000);
  // A single flipped bit anywhere is refused too.
  for (size_t bit = 0; bit < kNodeSize * 8; bit += 13) {
    uint64_t copy[kNodeWords];
    std::copy(before.w, before.w + kNodeWords, copy);
    copy[bit / 64] ^= uint64_t{1} << (bit % 64);
    EXPECT_NE(CheckCopy(copy, self), CopyCheck::kOk) << "bit " << bit;
  }
}

TEST(NodeCopyCheck, WriterHeldNodesWrongIdentityAndNeverWrittenSlotsAreTold) {
  NodeImage img;
  ASSERT_TRUE(img.Build(Header(0), "", "", nullptr, 0));
  img.Seal(4);
  EXPECT_EQ(CheckCopy(img.w, GlobalPtr{1, 1024 * 65}), CopyCheck::kWrongIdentity);
  img.w[0] = 5;
  EXPECT_EQ(CheckCopy(img.w, img.view().self()), CopyCheck::kBeingWritten);
  uint64_t zero[kNodeWords] = {};
  EXPECT_EQ(CheckCopy(zero, GlobalPtr{1, 0}), CopyCheck::kFree);
}

// A reader in place of another process's memory (a client over shm) must not wait for ever on a node whose writer
// died holding it; a server's own reader waits (its writers always finish).
TEST(LocalNodeSource, ABoundedReaderGivesUpOnANodeStillHeldAndReadsItOnceReleased) {
  struct OneNode final : LocalMemory {
    NodeImage img;
    const uint64_t* Readable(GlobalPtr ptr, size_t bytes) const override {
      return ptr == img.view().self() && bytes <= kNodeSize ? img.w : nullptr;
    }
  } memory;
  ASSERT_TRUE(memory.img.Build(Header(0), "", "", nullptr, 0));
  memory.img.Seal(7);  // odd: a writer holds it
  const GlobalPtr at = memory.img.view().self();
  LocalNodeSource bounded(&memory, /*max_yields=*/10);
  NodeHandle h;
  Status s = bounded.Fetch(at, &h);
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  EXPECT_NE(s.message().find("stayed locked"), std::string::npos) << s.ToString();
  memory.img.Seal(8);  // released
  ASSERT_TRUE(bounded.Fetch(at, &h).ok());
  EXPECT_EQ(h.version, 8u);
  EXPECT_TRUE(bounded.Validate(h));
  // Memory this reader cannot reach is an error, not a read.
  s = bounded.Fetch(GlobalPtr{1, 1024 * 66}, &h);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
}

// A client's memory checks its read lease when asked for a node (Readable). A reader that then waits for the node's
// writer reads the node later than that check, so it asks again: here the lease has ended by the time the writer
// lets go, and the fetch must fail rather than read the node. (The writer lets go once the reader has asked; in the
// rare run where that comes before the reader's first look, the reader never waited and reads the node: both
// outcomes are checked, and the waiting one must occur.)
TEST(LocalNodeSource, AReaderThatWaitedForTheWriterAsksForTheMemoryAgain) {
  struct LeaseEndsAfterFirstAsk final : LocalMemory {
    NodeImage img;
    mutable std::atomic<int> asked{0};
    const uint64_t* Readable(GlobalPtr, size_t) const override { return asked.fetch_add(1) == 0 ? img.w : nullptr; }
  };
  int refused = 0;
  for (int trial = 0; trial < 20; ++trial) {
    LeaseEndsAfterFirstAsk memory;
    ASSERT_TRUE(memory.img.Build(Header(0), "", "", nullptr, 0));
    memory.img.Seal(9);  // held by a writer
    std::thread writer([&] {
      while (memory.asked.load() == 0) std::this_thread::yield();  // the reader has asked
      __atomic_store_n(&memory.img.w[0], uint64_t{10}, __ATOMIC_RELEASE);
    });
    LocalNodeSource bounded(&memory, /*max_yields=*/1 << 30);
    NodeHandle h;
    const Status s = bounded.Fetch(memory.img.view().self(), &h);
    writer.join();
    if (s.ok()) {
      EXPECT_EQ(memory.asked.load(), 1);  // it never waited
    } else {
      EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
      EXPECT_EQ(memory.asked.load(), 2);
      ++refused;
    }
  }
  EXPECT_GT(refused, 0) << "no reader that waited asked for the memory again";
}

// Partitioning must succeed for any entries, even the longest keys with the longest fences (where a two-way cut
// can be impossible and three pieces are needed), and every piece must fit a node.
TEST(NodePartition, LongestKeysAndFencesAlwaysFitInSomeNumberOfPieces) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 300; ++trial) {
    int level = static_cast<int>(rng() % 2);
    std::string prefix(200 + rng() % 50, 'p');
    std::string min = prefix + "a", max = prefix + "z" + std::string(rng() % 4, 'z');
    std::vector<NodeEntry> entries;
    size_t n = 2 + rng() % 6;
    std::vector<std::string> keys;
    for (size_t i = 0; i < n; ++i) {
      std::string k =
          prefix + static_cast<char>('b' + rng() % 20) + RandomKey(rng, 0, kMaxKeySize - prefix.size() - 1, "mn");
      keys.push_back(k.substr(0, kMaxKeySize));
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    if (keys.size() < 2) continue;
    if (level > 0) keys[0] = min;
    for (size_t i = 0; i < keys.size(); ++i)
      entries.push_back(NodeEntry{keys[i], LeafValue{GlobalPtr{2, 64}, 20, 1}, 7});
    std::vector<size_t> starts;
    std::vector<std::string> seps;
    ASSERT_TRUE(PartitionEntries(entries, level, min, max, &starts, &seps));
    ASSERT_EQ(seps.size() + 1, starts.size());
    for (size_t c = 0; c < starts.size(); ++c) {
      size_t end = c + 1 < starts.size() ? starts[c + 1] : entries.size();
      std::string_view lo = c == 0 ? std::string_view(min) : std::string_view(seps[c - 1]);
      std::string_view hi = c + 1 < starts.size() ? std::string_view(seps[c]) : std::string_view(max);
      NodeImage img;
      EXPECT_TRUE(img.Build(Header(level), lo, hi, entries.data() + starts[c], end - starts[c])) << "piece " << c;
      for (size_t i = starts[c]; i < end; ++i) {
        if (level > 0 && i == starts[c]) continue;
        EXPECT_TRUE(img.view().Covers(SearchKey(entries[i].key)));
      }
    }
  }
}

}  // namespace
}  // namespace cell::btree
