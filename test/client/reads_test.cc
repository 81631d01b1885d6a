// The database layer's reads (include/cell/iterator.h) against three real cell-server processes and ZooKeeper, with
// meganodes small enough that the keys spread over all three servers and meganodes split as the tests write:
// iterators against a std::map model, in both directions and both searches, continuation tokens, asynchronous scans,
// MultiGet, ApproximateSize, DeleteRange, an iterator inside a transaction, and iterators racing writers.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cell/client.h"
#include "test/join_at_end.h"
#include "test/server/cluster_fixture.h"

namespace cell {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;
using Model = std::map<std::string, std::string>;

std::string Key(int i) { return fmt::format("k{:05d}", i) + std::string(i % 7 * 5, '.'); }

class Reads : public testing::ClusterFixture, public ::testing::WithParamInterface<std::string> {
 protected:
  // Keys 0, 2, 4, ... below 2n (odd numbers stay free for inserts), values of a few dozen bytes.
  void Load(Client& client, int n, Model* model) {
    for (int i = 0; i < 2 * n; i += 2) {
      const std::string v = fmt::format("v{}-", i) + std::string(i % 40, 'x');
      ASSERT_TRUE(client.Put(Key(i), v).ok()) << i;
      (*model)[Key(i)] = v;
    }
  }
};

// A std::map standing where a cell::Iterator over [lower, upper) should.
class ModelIterator {
 public:
  ModelIterator(const Model& m, std::string lower, std::string upper)
      : m_(m), lower_(std::move(lower)), upper_(std::move(upper)) {}
  bool Valid() const { return valid_; }
  void Seek(const std::string& k) { Set(m_.lower_bound(std::max(k, lower_))); }
  void SeekForPrev(const std::string& k) {
    auto it = m_.upper_bound(k);  // the first key > k, or the first at or above the upper bound if that is lower
    if (!upper_.empty()) {
      const auto u = m_.lower_bound(upper_);
      if (it == m_.end() || (u != m_.end() && u->first < it->first)) it = u;
    }
    if (it == m_.begin()) return Set(m_.end());
    Set(std::prev(it));
  }
  void SeekToFirst() { Set(m_.lower_bound(lower_)); }
  void SeekToLast() { SeekForPrev(upper_.empty() ? std::string(255, '\xff') : upper_); }
  void Next() { Set(std::next(it_)); }
  void Prev() { it_ == m_.begin() ? Set(m_.end()) : Set(std::prev(it_)); }
  const std::string& key() const { return it_->first; }
  const std::string& value() const { return it_->second; }

 private:
  void Set(Model::const_iterator it) {
    it_ = it;
    valid_ = it != m_.end() && it->first >= lower_ && (upper_.empty() || it->first < upper_);
  }
  const Model& m_;
  const std::string lower_, upper_;
  Model::const_iterator it_;
  bool valid_ = false;
};

TEST_P(Reads, IteratorsMatchAModelInBothDirectionsThroughSplitsAcrossThreeServers) {
  StartCluster();
  auto client = Open(GetParam());
  ASSERT_NE(client, nullptr);
  Model model;
  Load(*client, 1500, &model);
  std::mt19937_64 rng(11);
  const auto random_key = [&] { return Key(static_cast<int>(rng() % 3200)); };
  int moves = 0;
  for (int round = 0; round < 60; ++round) {
    // Writes between rounds (inserts into the free odd keys and deletes), so that meganodes split meanwhile.
    for (int w = 0; w < 30; ++w) {
      const std::string k = Key(static_cast<int>(rng() % 3200));
      if (rng() % 3 == 0) {
        const Status s = client->Delete(k);
        ASSERT_EQ(s.ok(), model.erase(k) == 1) << s.ToString();
      } else {
        ASSERT_TRUE(client->Put(k, "w" + k).ok());
        model[k] = "w" + k;
      }
    }
    IteratorOptions o;
    if (rng() % 3 != 0) o.lower = random_key();
    if (rng() % 3 != 0) o.upper = random_key();
    if (!o.lower.empty() && !o.upper.empty() && o.upper < o.lower) std::swap(o.lower, o.upper);
    o.initial_pairs = 1 + rng() % 8;
    o.max_pairs = o.initial_pairs + rng() % 64;
    o.keys_only = rng() % 5 == 0;
    auto it = client->NewIterator(o);
    ModelIterator want(model, o.lower, o.upper);
    for (int step = 0; step < 40; ++step) {
      const int action = static_cast<int>(rng() % 10);
      const std::string k = random_key();
      if (action == 0 || !want.Valid()) {
        switch (rng() % 4) {
          case 0:
            it->Seek(k), want.Seek(k);
            break;
          case 1:
            it->SeekForPrev(k), want.SeekForPrev(k);
            break;
          case 2:
            it->SeekToFirst(), want.SeekToFirst();
            break;
          default:
            it->SeekToLast(), want.SeekToLast();
        }
      } else {
        // A run of steps in one direction, long enough to cross pages and meganodes.
        const int run = static_cast<int>(1 + rng() % 40);
        const bool forward = action % 2 == 0;
        for (int j = 0; j < run && want.Valid(); ++j, ++moves) {
          forward ? (it->Next(), want.Next()) : (it->Prev(), want.Prev());
          ASSERT_EQ(it->Valid(), want.Valid()) << "round " << round << " step " << step;
          if (want.Valid()) {
            ASSERT_EQ(it->key(), want.key());
          }
        }
      }
      ASSERT_TRUE(it->status().ok()) << it->status().ToString();
      ASSERT_EQ(it->Valid(), want.Valid())
          << "round " << round << " step " << step << " [" << o.lower << ", " << o.upper << ")";
      if (want.Valid()) {
        ASSERT_EQ(it->key(), want.key());
        ASSERT_EQ(it->value(), o.keys_only ? std::string() : want.value());
      }
    }
  }
  EXPECT_GT(moves, 1000);
  EXPECT_EQ(ServersWithMeganodes(*client), 3);
  // The whole store, both ways, against the model.
  auto it = client->NewIterator();
  Pairs forward, backward;
  for (it->SeekToFirst(); it->Valid(); it->Next()) forward.emplace_back(it->key(), it->value());
  for (it->SeekToLast(); it->Valid(); it->Prev()) backward.emplace_back(it->key(), it->value());
  ASSERT_TRUE(it->status().ok()) << it->status().ToString();
  EXPECT_EQ(forward, Pairs(model.begin(), model.end()));
  EXPECT_EQ(backward, Pairs(model.rbegin(), model.rend()));
}

TEST_P(Reads, PagesWithContinuationTokensCoverARangeOnceInEitherOrder) {
  StartCluster();
  auto client = Open(GetParam());
  ASSERT_NE(client, nullptr);
  Model model;
  Load(*client, 800, &model);
  const std::string start = Key(101), end = Key(1401);
  const Pairs want(model.lower_bound(start), model.lower_bound(end));
  for (bool reverse : {false, true}) {
    for (bool keys_only : {false, true}) {
      ScanOptions o;
      o.reverse = reverse;
      o.keys_only = keys_only;
      ScanPage page;
      Pairs got;
      int pages = 0;
      ASSERT_TRUE(client->Scan(start, end, 7, o, &page).ok());
      while (true) {
        ++pages;
        ASSERT_LE(page.pairs.size(), 7u);
        got.insert(got.end(), page.pairs.begin(), page.pairs.end());
        if (page.continuation.empty()) break;
        const std::string token = page.continuation;
        ASSERT_TRUE(client->ScanContinue(token, 7, &page).ok());
      }
      Pairs expected = want;
      if (reverse) std::reverse(expected.begin(), expected.end());
      if (keys_only) {
        for (auto& kv : expected) kv.second.clear();
      }
      EXPECT_EQ(got, expected) << "reverse " << reverse << " keys_only " << keys_only;
      EXPECT_GE(pages, static_cast<int>(want.size() / 7));
    }
  }
  // ScanReverse: the last pairs of a range, greatest first.
  Pairs last;
  ASSERT_TRUE(client->ScanReverse(start, end, 3, &last).ok());
  EXPECT_EQ(last, Pairs(want.rbegin(), want.rbegin() + 3));
  // Tokens that are not tokens.
  ScanPage page;
  ASSERT_TRUE(client->Scan(start, end, 7, {}, &page).ok());
  const std::string token = page.continuation;
  ASSERT_FALSE(token.empty());
  for (const std::string& bad : {std::string(), token.substr(0, token.size() - 1), token + "x",
                                 std::string("\x02") + token.substr(1), std::string(40, '\xff')}) {
    const Status s = client->ScanContinue(bad, 7, &page);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  }
  ScanOptions bad_search;
  bad_search.read.search = "sideways";
  EXPECT_TRUE(client->Scan(start, end, 7, bad_search, &page).IsInvalidArgument());
  EXPECT_TRUE(client->Scan(std::string(256, 'k'), end, 7, {}, &page).IsInvalidArgument());
}

TEST_P(Reads, ScanAsyncDeliversEveryPageInOrderAndStopsWhenAsked) {
  StartCluster(1);
  auto client = Open(GetParam());
  ASSERT_NE(client, nullptr);
  Model model;
  Load(*client, 500, &model);
  for (bool reverse : {false, true}) {
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    Pairs got;
    Status last;
    ScanOptions o;
    o.reverse = reverse;
    client->ScanAsync("", "", o, 33, [&](const Status& s, ScanPage& page) {
      std::lock_guard lock(mu);
      last = s;
      got.insert(got.end(), page.pairs.begin(), page.pairs.end());
      if (!s.ok() || page.continuation.empty()) {
        finished = true;
        cv.notify_all();
      }
      return true;
    });
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return finished; }));
    ASSERT_TRUE(last.ok()) << last.ToString();
    EXPECT_EQ(got, reverse ? Pairs(model.rbegin(), model.rend()) : Pairs(model.begin(), model.end()));
  }
  // A callback that returns false is not called again.
  std::atomic<int> calls{0};
  std::atomic<bool> done{false};
  client->ScanAsync("", "", {}, 10, [&](const Status&, ScanPage&) {
    calls++;
    done = true;
    return false;
  });
  client.reset();  // waits for the scan's thread
  EXPECT_TRUE(done.load());
  EXPECT_EQ(calls.load(), 1);
}

TEST_P(Reads, MultiGetAnswersEveryKeyInItsPlace) {
  StartCluster();
  auto client = Open(GetParam());
  ASSERT_NE(client, nullptr);
  Model model;
  Load(*client, 1500, &model);
  ASSERT_EQ(ServersWithMeganodes(*client), 3);
  std::vector<std::string> keys;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 400; ++i) keys.push_back(Key(static_cast<int>(rng() % 3000)));  // present, absent, repeated
  keys.push_back("");                                                                 // not a key
  const auto requests = [&] {
    uint64_t n = 0;
    const auto stats = client->StoreStats();
    EXPECT_TRUE(stats.ok());
    for (const auto& s : stats.ok() ? *stats : std::vector<Client::ServerStats>{}) n += s.requests;
    return n;
  };
  if (GetParam() == "server") {
    // The bounds below count every request the servers take: first the background splits the load set off are
    // over (their count unchanged for a second), as a split under way sends requests of its own (MEGA_*) and moves
    // keys, which adds rounds.
    ASSERT_TRUE(testing::WaitForSplitsToSettle(*client)) << "meganodes kept splitting";
  }
  const uint64_t before = requests();
  std::vector<std::string> values;
  const std::vector<Status> statuses = client->MultiGet(keys, &values);
  if (GetParam() == "server") {
    // Grouped by server: a request per server and round (the first from the root for keys the path cache lacks,
    // then where the keys live), plus the stats' own three; not one per key.
    EXPECT_LE(requests() - before, 3u + keys.size() / 10);
    std::vector<std::string> again;
    const uint64_t warm = requests();
    const std::vector<Status> second = client->MultiGet(keys, &again);
    EXPECT_LE(requests() - warm, 3u + keys.size() / 10);
    EXPECT_EQ(again, values);
  }
  ASSERT_EQ(statuses.size(), keys.size());
  ASSERT_EQ(values.size(), keys.size());
  int found = 0;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    const auto m = model.find(keys[i]);
    if (m == model.end()) {
      EXPECT_TRUE(statuses[i].IsNotFound()) << keys[i] << ": " << statuses[i].ToString();
    } else {
      ASSERT_TRUE(statuses[i].ok()) << keys[i] << ": " << statuses[i].ToString();
      EXPECT_EQ(values[i], m->second);
      ++found;
    }
  }
  EXPECT_GT(found, 100);
  EXPECT_TRUE(statuses.back().IsInvalidArgument()) << statuses.back().ToString();
}

TEST_P(Reads, ApproximateSizesAreWithinAFactorOfTwoAndBothSearchesAgree) {
  StartCluster();
  auto client = Open(GetParam());
  ASSERT_NE(client, nullptr);
  Model model;
  Load(*client, 1500, &model);
  ASSERT_EQ(ServersWithMeganodes(*client), 3);
  const auto truth = [&](const std::string& start, const std::string& end) {
    SizeEstimate t;
    for (auto it = model.lower_bound(start); it != model.end() && (end.empty() || it->first < end); ++it) {
      ++t.keys;
      t.bytes += it->first.size() + it->second.size();
    }
    return t;
  };
  // Within a factor of two, give or take two leaves' worth at each end (60 entries a node at most).
  const auto plausible = [](uint64_t truth, uint64_t estimate, uint64_t slack) {
    return 2 * estimate + 2 * slack >= truth && estimate <= 2 * truth + slack;
  };
  EXPECT_FALSE(plausible(1000, 3000, 120)) << "the check must reject a wrong estimate";
  EXPECT_FALSE(plausible(1000, 300, 120)) << "the check must reject a wrong estimate";
  std::mt19937_64 rng(6);
  ReadOptions other;
  other.search = GetParam() == "server" ? "client" : "server";
  for (int i = 0; i < 60; ++i) {
    int a = static_cast<int>(rng() % 3000), b = static_cast<int>(rng() % 3000);
    if (a > b) std::swap(a, b);
    const std::string start = i == 0 ? "" : Key(a), end = i < 2 ? "" : Key(b);
    const StatusOr<SizeEstimate> est = client->ApproximateSize(start, end);
    ASSERT_TRUE(est.ok()) << est.status().ToString();
    const SizeEstimate t = truth(start, end);
    EXPECT_TRUE(plausible(t.keys, est->keys, 120))
        << "[" << start << ", " << end << "): " << t.keys << " keys, estimated " << est->keys;
    EXPECT_TRUE(plausible(t.bytes, est->bytes, 120 * 80)) << t.bytes << " bytes, estimated " << est->bytes;
    // Nothing is written meanwhile, so the other search reads the same nodes and estimates the same, once the
    // meganode splits the load started have finished in the background (they move entries, not keys): asked again
    // while the two differ.
    bool same = false;
    for (int attempt = 0; attempt < 200 && !same; ++attempt) {
      const StatusOr<SizeEstimate> mine = client->ApproximateSize(start, end);
      const StatusOr<SizeEstimate> by_other = client->ApproximateSize(start, end, other);
      ASSERT_TRUE(mine.ok() && by_other.ok()) << mine.status().ToString() << by_other.status().ToString();
      same = mine->keys == by_other->keys && mine->bytes == by_other->bytes;
    }
    EXPECT_TRUE(same) << "[" << start << ", " << end << "): the two searches never agreed";
  }
  const StatusOr<SizeEstimate> empty = client->ApproximateSize(Key(9000), "");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->keys, 0u) << "above every key";
  EXPECT_TRUE(client->ApproximateSize(std::string(300, 'k'), "").status().IsInvalidArgument());
  ReadOptions bad;
  bad.search = "sideways";
  EXPECT_TRUE(client->ApproximateSize("", "", bad).status().IsInvalidArgument());
}

TEST_P(Reads, DeleteRangeDeletesAllOrNothingAndRefusesTooLargeARange) {
  StartCluster();
  auto client = Open(GetParam());
  ASSERT_NE(client, nullptr);
  Model model;
  Load(*client, 1600, &model);
  // Too many keys: refused whole.
  size_t deleted = 0;
  Status s = client->DeleteRange(Key(0), Key(2 * 1100), &deleted);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  Pairs all;
  ASSERT_TRUE(client->Scan("", "", 100000, &all).ok());
  EXPECT_EQ(all.size(), model.size());
  // 500 keys over three servers, while readers check in read-only transactions that they see all of them or none.
  ASSERT_EQ(ServersWithMeganodes(*client), 3);
  const std::string start = Key(1000), end = Key(2000);
  std::atomic<bool> stop{false};
  std::atomic<int> partial{0}, audits{0};
  std::vector<std::thread> threads;
  testing::JoinAtEnd join{stop, threads};
  threads.emplace_back([&] {
    auto c = Open(GetParam());
    while (!stop.load()) {
      TransactionOptions ro;
      ro.read_only = true;
      size_t n = 0;
      const Status a = RunTransaction(
          *c,
          [&](Transaction& t) {
            Pairs p;
            CELL_RETURN_IF_ERROR(t.Scan(start, end, 10000, &p));
            n = p.size();
            return Status::OK();
          },
          10, ro);
      if (!a.ok()) continue;
      ++audits;
      if (n != 0 && n != 500) partial++;
    }
  });
  s = client->DeleteRange(start, end, &deleted);
  // Keep auditing a little after the delete, then stop.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int before = audits.load(); audits.load() < before + 3 && std::chrono::steady_clock::now() < give_up;) {
    std::this_thread::yield();
  }
  stop = true;
  threads[0].join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(deleted, 500u);
  EXPECT_EQ(partial.load(), 0) << "a transaction saw the range half deleted";
  EXPECT_GE(audits.load(), 3);
  all.clear();
  ASSERT_TRUE(client->Scan("", "", 100000, &all).ok());
  EXPECT_EQ(all.size(), model.size() - 500);
  std::string v;
  EXPECT_TRUE(client->Get(Key(998), &v).ok());
  EXPECT_TRUE(client->Get(Key(2000), &v).ok());
  EXPECT_TRUE(client->Get(Key(1000), &v).IsNotFound());
}

TEST_P(Reads, ATransactionsIteratorSeesItsOwnWritesAndItsRangeIsValidated) {
  StartCluster();
  auto client = Open(GetParam());
  ASSERT_NE(client, nullptr);
  Model model;
  Load(*client, 300, &model);
  for (bool reverse : {false, true}) {
    TransactionOptions to;
    to.search = GetParam();
    auto txn = client->BeginTransaction(to);
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE((*txn)->Put(Key(101), "mine").ok());
    ASSERT_TRUE((*txn)->Delete(Key(102)).ok());
    IteratorOptions o;
    o.lower = Key(100);
    o.upper = Key(110);
    o.initial_pairs = 2;
    auto it = (*txn)->NewIterator(o);
    Pairs got;
    if (reverse) {
      for (it->SeekToLast(); it->Valid(); it->Prev()) got.emplace_back(it->key(), it->value());
    } else {
      for (it->SeekToFirst(); it->Valid(); it->Next()) got.emplace_back(it->key(), it->value());
    }
    ASSERT_TRUE(it->status().ok()) << it->status().ToString();
    Pairs want = {{Key(100), model[Key(100)]},
                  {Key(101), "mine"},
                  {Key(104), model[Key(104)]},
                  {Key(106), model[Key(106)]},
                  {Key(108), model[Key(108)]}};
    if (reverse) std::reverse(want.begin(), want.end());
    EXPECT_EQ(got, want);
    it.reset();
    // Another client inserts into the range read: a phantom, so the commit aborts.
    ASSERT_TRUE(Open()->Put(Key(105), "phantom").ok());
    const Status s = (*txn)->Commit();
    EXPECT_TRUE(s.IsAborted()) << s.ToString();
    EXPECT_EQ((*txn)->conflict_key(), Key(105));
    ASSERT_TRUE(client->Delete(Key(105)).ok());
  }
  // Read options belong to the transaction, not its iterator.
  auto txn = client->BeginTransaction();
  ASSERT_TRUE(txn.ok());
  IteratorOptions o;
  o.read.search = "client";
  auto it = (*txn)->NewIterator(o);
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().IsInvalidArgument()) << it->status().ToString();
}

// Keys present throughout are seen exactly once, in order, in both directions, while writers insert and delete
// other keys among them (splitting meganodes, moving halves to other servers).
TEST_P(Reads, IteratorsRacingWritersSeeKeysPresentThroughoutExactlyOnce) {
  StartCluster();
  auto client = Open(GetParam());
  ASSERT_NE(client, nullptr);
  constexpr int kStable = 600;
  for (int i = 0; i < kStable; ++i) ASSERT_TRUE(client->Put(Key(i * 4), "stable").ok());
  std::atomic<bool> stop{false};
  std::atomic<int> writes{0};
  std::vector<std::thread> writers;
  testing::JoinAtEnd join{stop, writers};
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      auto c = Open("server");
      std::mt19937_64 rng(w);
      while (!stop.load()) {
        const std::string k = Key(static_cast<int>(rng() % kStable) * 4 + 1 + w) + "x";
        if (rng() % 4 == 0) {
          (void)c->Delete(k);
        } else if (c->Put(k, std::string(60, 'w')).ok()) {
          ++writes;
        }
      }
    });
  }
  int walks = 0;
  for (; walks < 12 || writes.load() < 2000; ++walks) {
    IteratorOptions o;
    o.initial_pairs = 4;
    o.max_pairs = 32;
    auto it = client->NewIterator(o);
    const bool reverse = walks % 2 == 1;
    std::vector<std::string> stable;
    std::string previous;
    for (reverse ? it->SeekToLast() : it->SeekToFirst(); it->Valid(); reverse ? it->Prev() : it->Next()) {
      const std::string k(it->key());
      if (!previous.empty()) {
        ASSERT_TRUE(reverse ? k < previous : k > previous) << previous << " then " << k;
      }
      previous = k;
      if (it->value() == "stable") stable.push_back(k);
    }
    ASSERT_TRUE(it->status().ok()) << it->status().ToString();
    ASSERT_EQ(stable.size(), static_cast<size_t>(kStable)) << (reverse ? "reverse" : "forward") << " walk " << walks;
    // A bound, should the writers stop making progress. Client-side walks are quick: on a loaded machine 200 of
    // them once ended before the writers' 2,000 puts.
    if (walks > 5000) break;
  }
  stop = true;
  for (auto& t : writers) t.join();
  EXPECT_GE(writes.load(), 2000) << "in " << walks << " walks";
  EXPECT_EQ(ServersWithMeganodes(*client), 3);
}

INSTANTIATE_TEST_SUITE_P(Searches, Reads, ::testing::Values("server", "client"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace cell
