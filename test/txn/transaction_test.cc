// Transactions, compare-and-swap and atomic batches against three real cell-server processes sharing a real
// ZooKeeper, with meganodes small enough (16 KiB) that the keys spread over all three servers through meganode splits
// while the transactions run (docs/DESIGN.md, "Transactions").
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "cell/client.h"
#include "test/membership/zk_harness.h"
#include "test/server/cluster_fixture.h"
#include "test/server/server_harness.h"
#include "test/test_util.h"

namespace cell {
namespace {

using namespace std::chrono_literals;

class Transactions : public testing::ClusterFixture {
 protected:
  void SetUp() override { StartCluster(); }
};

std::string Account(int i) { return fmt::format("acct{:06d}", i); }

TEST_F(Transactions, ACommittedTransactionsWritesAreVisibleTogetherAndItReadsItsOwnWrites) {
  auto client = Open();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Put("a", "1").ok());
  auto txn = client->BeginTransaction();
  ASSERT_TRUE(txn.ok()) << txn.status().ToString();
  std::string v;
  ASSERT_TRUE((*txn)->Get("a", &v).ok());
  EXPECT_EQ(v, "1");
  ASSERT_TRUE((*txn)->Put("a", "2").ok());
  ASSERT_TRUE((*txn)->Put("b", "3").ok());
  ASSERT_TRUE((*txn)->Delete("c").ok());
  ASSERT_TRUE((*txn)->Get("a", &v).ok());
  EXPECT_EQ(v, "2");  // its own write
  std::vector<std::pair<std::string, std::string>> pairs;
  ASSERT_TRUE((*txn)->Scan("a", "z", 10, &pairs).ok());
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[1], std::make_pair(std::string("b"), std::string("3")));
  // Not visible before Commit.
  EXPECT_TRUE(client->Get("b", &v).IsNotFound());
  ASSERT_TRUE((*txn)->Commit().ok());
  ASSERT_TRUE(client->Get("a", &v).ok());
  EXPECT_EQ(v, "2");
  ASSERT_TRUE(client->Get("b", &v).ok());
  EXPECT_EQ(v, "3");
  // Used after Commit: refused, nothing applied.
  EXPECT_EQ((*txn)->Put("d", "4").code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ((*txn)->Commit().code(), Status::Code::kFailedPrecondition);
  EXPECT_TRUE(client->Get("d", &v).IsNotFound());
}

TEST_F(Transactions, AConflictAbortsNamingTheKeyAndAppliesNothing) {
  auto client = Open();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Put("x", "0").ok());
  ASSERT_TRUE(client->Put("y", "0").ok());
  // Write skew: each reads both and writes one; the second to commit must abort.
  auto t1 = client->BeginTransaction();
  auto t2 = client->BeginTransaction();
  ASSERT_TRUE(t1.ok() && t2.ok());
  std::string v;
  for (auto* t : {&*t1, &*t2}) {
    ASSERT_TRUE((*t)->Get("x", &v).ok());
    ASSERT_TRUE((*t)->Get("y", &v).ok());
  }
  ASSERT_TRUE((*t1)->Put("x", "1").ok());
  ASSERT_TRUE((*t2)->Put("y", "1").ok());
  ASSERT_TRUE((*t1)->Commit().ok());
  Status s = (*t2)->Commit();
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  EXPECT_EQ((*t2)->conflict_key(), "x");
  ASSERT_TRUE(client->Get("y", &v).ok());
  EXPECT_EQ(v, "0");  // nothing of t2 applied
  // A phantom: t3 scans an empty range, t4 inserts into it, t3 writes elsewhere and must abort.
  auto t3 = client->BeginTransaction();
  ASSERT_TRUE(t3.ok());
  std::vector<std::pair<std::string, std::string>> pairs;
  ASSERT_TRUE((*t3)->Scan("p", "q", 100, &pairs).ok());
  EXPECT_TRUE(pairs.empty());
  ASSERT_TRUE(client->Put("pa", "new").ok());
  ASSERT_TRUE((*t3)->Put("z", "t3").ok());
  s = (*t3)->Commit();
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  EXPECT_EQ((*t3)->conflict_key(), "pa");
  EXPECT_TRUE(client->Get("z", &v).IsNotFound());
}

TEST_F(Transactions, BadInputGetsClearErrorsAndAppliesNothing) {
  auto client = Open();
  ASSERT_NE(client, nullptr);
  auto txn = client->BeginTransaction();
  ASSERT_TRUE(txn.ok());
  EXPECT_TRUE((*txn)->Put(std::string(300, 'k'), "v").IsInvalidArgument());
  EXPECT_TRUE((*txn)->Put("k", std::string((1 << 20) + 1, 'v')).IsInvalidArgument());
  for (size_t i = 0; i < kMaxTransactionWrites; ++i) ASSERT_TRUE((*txn)->Put(fmt::format("k{}", i), "v").ok());
  EXPECT_TRUE((*txn)->Put("one-too-many", "v").IsInvalidArgument());
  (*txn)->Rollback();
  std::string v;
  EXPECT_TRUE(client->Get("k0", &v).IsNotFound());
  // A commit after the timeout: DeadlineExceeded, nothing applied.
  TransactionOptions quick;
  quick.timeout = 50ms;
  auto late = client->BeginTransaction(quick);
  ASSERT_TRUE(late.ok());
  ASSERT_TRUE((*late)->Put("late", "v").ok());
  std::this_thread::sleep_for(100ms);  // past its timeout (the point of the test, not synchronisation)
  EXPECT_TRUE((*late)->Commit().IsDeadlineExceeded());
  EXPECT_TRUE(client->Get("late", &v).IsNotFound());
  TransactionOptions read_only;
  read_only.read_only = true;
  auto ro = client->BeginTransaction(read_only);
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ((*ro)->Put("a", "b").code(), Status::Code::kFailedPrecondition);
  read_only.search = "sideways";
  EXPECT_TRUE(client->BeginTransaction(read_only).status().IsInvalidArgument());
}

TEST_F(Transactions, CompareAndSwapIncrementsLoseNoUpdate) {
  auto client = Open();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->CompareAndSwap("counter", std::nullopt, "0").ok());
  EXPECT_EQ(client->CompareAndSwap("counter", std::nullopt, "0").code(), Status::Code::kFailedPrecondition);
  std::atomic<int> successes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        std::string v;
        ASSERT_TRUE(client->Get("counter", &v).ok());
        Status s = client->CompareAndSwap("counter", v, std::to_string(std::stoi(v) + 1));
        if (s.ok()) {
          successes.fetch_add(1);
        } else {
          ASSERT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::string v;
  ASSERT_TRUE(client->Get("counter", &v).ok());
  EXPECT_EQ(std::stoi(v), successes.load());
  EXPECT_GT(successes.load(), 0);
  ASSERT_TRUE(client->CompareAndSwap("counter", v, std::nullopt).ok());  // a conditional delete
  EXPECT_TRUE(client->Get("counter", &v).IsNotFound());
}

// Large transactions of new keys, committed while their meganodes split to other servers: a key whose apply meets a
// split is applied by the client after the commit (the server says some were left), so every committed write is
// there at once and no lock is left for the resolver.
TEST_F(Transactions, BigCommitsThatMeetMeganodeSplitsLoseNoWriteAndLeaveNoLock) {
  auto client = Open();
  ASSERT_NE(client, nullptr);
  constexpr int kTxns = 20, kKeys = 300;
  for (int t = 0; t < kTxns; ++t) {
    const Status s = RunTransaction(*client, [&](Transaction& txn) {
      std::string v;
      for (int k = 0; k < kKeys; ++k) {
        const std::string key = fmt::format("bulk{:03d}-{:04d}", k, t);
        const Status got = txn.Get(key, &v);
        if (!got.IsNotFound()) return got.ok() ? Status::Internal("a new key exists") : got;
        CELL_RETURN_IF_ERROR(txn.Put(key, std::string(40, 'v')));
      }
      return Status::OK();
    });
    ASSERT_TRUE(s.ok()) << t << ": " << s.ToString();
  }
  EXPECT_EQ(ServersWithMeganodes(*client), 3);
  auto stats = client->StoreStats();
  ASSERT_TRUE(stats.ok());
  for (const auto& server : *stats) EXPECT_EQ(server.txn_locks, 0u) << "server " << server.server;
  std::vector<std::pair<std::string, std::string>> all;
  ASSERT_TRUE(client->Scan("bulk", "bulk~", 100000, &all).ok());
  EXPECT_EQ(all.size(), static_cast<size_t>(kTxns * kKeys));
}

// Random transactions, one at a time, against an in-memory model, while the keys spread over three servers through
// meganode splits. Every read inside a transaction matches the model with the transaction's own writes over it; a
// transaction commits exactly when nothing it read was changed meanwhile (by a plain put made between its reads and
// its commit, on purpose), and then the model takes its writes. A read may abort its transaction on a key still
// locked by an earlier aborted one: a rollback that meets its meganode's split is left to the client, which rolls the
// lock back once the split settles, or, where the server answered with an error rather than a conflict, to the lock's
// expiry (the transaction's timeout plus a grace). The transaction is then dropped, as an application would run it
// again; such aborts must stay rare. A plain put of such a key waits for the lock's end: the transactions' timeout
// (8 s) is well below the client's (20 s), so that the put's deadline comes after the lock's expiry and the put
// succeeds.
TEST_F(Transactions, RandomTransactionsAgreeWithAModelThroughMeganodeSplits) {
  std::mt19937_64 rng(2026);
  auto client = Open("server");
  ASSERT_NE(client, nullptr);
  const char* searches[] = {"server", "client", ""};
  std::map<std::string, std::string> model;
  const auto key = [&] { return fmt::format("m{:05d}", rng() % 4000); };
  const auto value = [&] { return std::string(50 + rng() % 300, static_cast<char>('a' + rng() % 26)); };
  int committed = 0, aborted = 0, read_aborted = 0;
  // Whether a read's status is the abort described above (then the round is dropped), after checking it is that.
  const auto read_aborts = [&](const Status& s) {
    if (!s.IsAborted()) return false;
    EXPECT_NE(s.message().find("locked by another transaction"), std::string::npos) << s.ToString();
    ++read_aborted;
    return true;
  };
  for (int round = 0; round < 600; ++round) {
    TransactionOptions options;
    options.search = searches[round % 3];
    options.timeout = 8s;
    auto txn = client->BeginTransaction(options);
    ASSERT_TRUE(txn.ok()) << txn.status().ToString();
    std::map<std::string, std::optional<std::string>> own;  // nullopt: deleted
    std::vector<std::string> read_keys;                     // keys read, and the starts of ranges scanned
    const auto seen = [&](const std::string& k) -> std::optional<std::string> {
      if (auto it = own.find(k); it != own.end()) return it->second;
      if (auto it = model.find(k); it != model.end()) return it->second;
      return std::nullopt;
    };
    const int ops = 1 + static_cast<int>(rng() % 8);
    std::string log;
    bool dropped = false;
    for (int op = 0; op < ops && !dropped; ++op) {
      const std::string k = key();
      switch (rng() % 4) {
        case 0: {
          std::string v;
          Status s = (*txn)->Get(k, &v);
          if (read_aborts(s)) {
            dropped = true;
            break;
          }
          ASSERT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
          ASSERT_EQ(s.ok() ? std::optional<std::string>(v) : std::nullopt, seen(k)) << k;
          if (!own.count(k)) read_keys.push_back(k);  // (its own write: not read from the store)
          log += " get " + k + (s.ok() ? " found" : " absent");
          break;
        }
        case 1: {
          const std::string end = fmt::format("m{:05d}", std::stoi(k.substr(1)) + 40);
          std::vector<std::pair<std::string, std::string>> pairs;
          const size_t limit = 1 + rng() % 30;
          const Status s = (*txn)->Scan(k, end, limit, &pairs);
          if (read_aborts(s)) {
            dropped = true;
            break;
          }
          ASSERT_TRUE(s.ok()) << s.ToString();
          std::vector<std::pair<std::string, std::string>> want;
          for (auto it = model.lower_bound(k); it != model.end() && it->first < end; ++it) {
            if (!own.count(it->first)) want.emplace_back(it->first, it->second);
          }
          for (const auto& [ok, ov] : own) {
            if (ok >= k && ok < end && ov) want.emplace_back(ok, *ov);
          }
          std::sort(want.begin(), want.end());
          if (want.size() > limit) want.resize(limit);
          ASSERT_EQ(pairs, want) << "scan from " << k;
          read_keys.push_back(k);
          log += fmt::format(" scan {}..{} limit {} got {}", k, end, limit, pairs.size());
          break;
        }
        case 2:
          own[k] = value();
          ASSERT_TRUE((*txn)->Put(k, *own[k]).ok());
          log += " put " + k;
          break;
        default:
          own[k] = std::nullopt;
          ASSERT_TRUE((*txn)->Delete(k).ok());
          log += " delete " + k;
      }
    }
    if (dropped) {
      (*txn)->Rollback();
      continue;
    }
    // Sometimes a plain put of a key this transaction read meanwhile: it must then abort.
    bool interfered = false;
    if (!read_keys.empty() && rng() % 5 == 0) {
      const std::string& k = read_keys[rng() % read_keys.size()];
      const std::string v = value();
      ASSERT_TRUE(client->Put(k, v).ok());
      model[k] = v;
      interfered = true;
      log += " INTERFERE " + k;
    }
    if (rng() % 10 == 0) {
      (*txn)->Rollback();
      continue;
    }
    Status s = (*txn)->Commit();
    // (A transaction that only read one key is consistent by itself: it takes effect at that read, and commits.)
    const bool one_read = own.empty() && read_keys.size() == 1 && log.find("scan") == std::string::npos;
    if (interfered && !one_read) {
      ASSERT_TRUE(s.IsAborted()) << "round " << round << ": " << s.ToString() << " log: " << log;
      ++aborted;
      continue;
    }
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.ToString();
    ++committed;
    for (const auto& [k, v] : own) {
      if (v) {
        model[k] = *v;
      } else {
        model.erase(k);
      }
    }
    // Some filler, so that meganodes split under the transactions.
    for (int i = 0; i < 10; ++i) {
      const std::string k = key(), v = value();
      const Status put = client->Put(k, v);
      ASSERT_TRUE(put.ok()) << "round " << round << ": a put of " << k << ": " << put.ToString();
      model[k] = v;
    }
  }
  std::vector<std::pair<std::string, std::string>> all;
  ASSERT_TRUE(client->Scan("m", "n", 100000, &all).ok());
  const std::vector<std::pair<std::string, std::string>> want(model.begin(), model.end());
  ASSERT_EQ(all, want);
  EXPECT_GT(committed, 300);
  EXPECT_GT(aborted, 50);
  EXPECT_LT(read_aborted, 30) << "reads met another transaction's lock too often";
  EXPECT_EQ(ServersWithMeganodes(*client), 3);
}

// Transfers between accounts spread over three servers, with audits (a scan of every account in a transaction)
// running alongside: every audit and the end see the same total.
TEST_F(Transactions, BankTransfersKeepTheTotalInEveryAuditWhileMeganodesSplit) {
  constexpr int kAccounts = 400, kInitial = 1000;
  auto loader = Open();
  ASSERT_NE(loader, nullptr);
  for (int i = 0; i < kAccounts; ++i) ASSERT_TRUE(loader->Put(Account(i), std::to_string(kInitial)).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> transfers{0}, audits{0}, bad_audits{0};
  std::vector<std::thread> threads;
  const char* searches[] = {"server", "client", "server", "client"};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto client = Open(searches[t]);
      ASSERT_NE(client, nullptr);
      std::mt19937_64 rng(t);
      while (!stop.load()) {
        const int from = static_cast<int>(rng() % kAccounts), to = static_cast<int>(rng() % kAccounts);
        if (from == to) continue;
        const int amount = 1 + static_cast<int>(rng() % 10);
        Status s = RunTransaction(
            *client,
            [&](Transaction& txn) -> Status {
              std::string a, b;
              CELL_RETURN_IF_ERROR(txn.Get(Account(from), &a));
              CELL_RETURN_IF_ERROR(txn.Get(Account(to), &b));
              CELL_RETURN_IF_ERROR(txn.Put(Account(from), std::to_string(std::stoi(a) - amount)));
              return txn.Put(Account(to), std::to_string(std::stoi(b) + amount));
            },
            50);
        ASSERT_TRUE(s.ok() || s.IsAborted()) << s.ToString();
        if (s.ok()) transfers.fetch_add(1);
      }
    });
  }
  threads.emplace_back([&] {
    auto client = Open("client");
    ASSERT_NE(client, nullptr);
    while (!stop.load()) {
      int64_t total = 0;
      Status s = RunTransaction(
          *client,
          [&](Transaction& txn) -> Status {
            total = 0;
            std::vector<std::pair<std::string, std::string>> pairs;
            CELL_RETURN_IF_ERROR(txn.Scan(Account(0), Account(kAccounts), kAccounts + 1, &pairs));
            if (pairs.size() != kAccounts) return Status::Internal(fmt::format("{} accounts", pairs.size()));
            for (const auto& [k, v] : pairs) total += std::stoll(v);
            return Status::OK();
          },
          50);
      ASSERT_TRUE(s.ok() || s.IsAborted()) << s.ToString();
      if (s.ok()) {
        audits.fetch_add(1);
        if (total != int64_t{kAccounts} * kInitial) bad_audits.fetch_add(1);
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(testing::StressScale() * 2));  // the run's length
  stop.store(true);
  for (auto& t : threads) t.join();
  int64_t total = 0;
  std::vector<std::pair<std::string, std::string>> pairs;
  ASSERT_TRUE(loader->Scan(Account(0), Account(kAccounts), kAccounts + 1, &pairs).ok());
  ASSERT_EQ(pairs.size(), size_t{kAccounts});
  for (const auto& [k, v] : pairs) total += std::stoll(v);
  fmt::print("{} transfers, {} audits ({} bad)\n", transfers.load(), audits.load(), bad_audits.load());
  EXPECT_EQ(total, int64_t{kAccounts} * kInitial);
  EXPECT_EQ(bad_audits.load(), 0);
  EXPECT_GT(transfers.load(), 0);
  EXPECT_GT(audits.load(), 0);
}

// A batch over keys of all three servers, observed by concurrent scans in read-only transactions: all of it or none
// of it. (A scan outside a transaction is not a snapshot: it reads leaf after leaf, and may see part of a batch.)
TEST_F(Transactions, ABatchAcrossServersIsSeenWholeOrNotAtAll) {
  auto client = Open();
  ASSERT_NE(client, nullptr);
  // Enough keys that the tree spreads over the three servers; the batch's keys lie among them.
  std::string filler(200, 'f');
  constexpr int kFill = 3000, kKeys = 30;
  for (int i = 0; i < kFill; ++i) ASSERT_TRUE(client->Put(fmt::format("fill{:05d}", i), filler).ok());
  ASSERT_EQ(ServersWithMeganodes(*client), 3);
  const auto batch_key = [](int i) { return fmt::format("fill{:05d}b", i * (kFill / kKeys)); };
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0}, scans{0};
  std::thread reader([&] {
    auto c = Open("client");
    ASSERT_NE(c, nullptr);
    while (!stop.load()) {
      std::map<std::string, std::string> seen;
      Status s = RunTransaction(
          *c,
          [&](Transaction& txn) -> Status {
            seen.clear();
            std::vector<std::pair<std::string, std::string>> pairs;
            CELL_RETURN_IF_ERROR(txn.Scan("fill", "film", 2 * kFill, &pairs));
            for (auto& [k, v] : pairs) {
              if (k.back() == 'b') seen.emplace(k, v);
            }
            return Status::OK();
          },
          100);
      ASSERT_TRUE(s.ok() || s.IsAborted()) << s.ToString();
      if (!s.ok()) continue;
      std::set<std::string> generations;
      for (const auto& [k, v] : seen) generations.insert(v);
      if (!seen.empty() && (seen.size() != kKeys || generations.size() != 1)) torn.fetch_add(1);
      scans.fetch_add(1);
    }
  });
  for (int g = 0; g < 40; ++g) {
    WriteBatch batch;
    for (int i = 0; i < kKeys; ++i) batch.Put(batch_key(i), fmt::format("gen{}", g));
    ASSERT_TRUE(client->Write(batch).ok());
  }
  stop.store(true);
  reader.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_GT(scans.load(), 0);
}

}  // namespace
}  // namespace cell
