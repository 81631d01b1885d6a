// Serializability of real concurrent histories: client threads (searching on the server, by one-sided reads, and
// adaptively) run random list-append transactions against three real cell-server processes sharing a real ZooKeeper,
// with meganodes small enough (16 KiB) that meganodes split, here and onto other servers, while the transactions run
// (a writer keeps inserting filler keys among the transactions' keys). Every attempt is recorded (what it read, what
// it appended, when it began and ended, how its commit came out) and the history is handed to the list-append checker
// (bench/serializability.h, after Elle), which must find it strictly serializable. One variant mixes in
// compare-and-swaps (a single-key read-modify-write: a transaction too). To show that the checker is not blind to
// what these histories hold, each recorded history is checked again with one committed read made stale, and must be
// rejected.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench/serializability.h"
#include "cell/client.h"
#include "test/membership/zk_harness.h"
#include "test/server/server_harness.h"
#include "test/test_util.h"

namespace cell {
namespace {

using namespace std::chrono_literals;
namespace ser = bench::serializability;
using Clock = std::chrono::steady_clock;

constexpr int kHotKeys = 50;
// Transactions' keys, spread over the key space of the fillers ("k0000" .. "k4900"), so that they live in different
// meganodes and on different servers, and move when those split.
std::string HotKey(int i) { return fmt::format("k{:04d}", i * 100); }
bool IsHotKey(std::string_view key) { return key.size() == 5; }
std::string FillerKey(std::mt19937_64& rng, uint64_t n) { return fmt::format("k{:04d}f{:07d}", rng() % 5000, n); }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

struct ClusterStats {
  uint64_t splits = 0, remote_splits = 0, locks = 0;
  int servers_with_meganodes = 0;
};

class History : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& zk = testing::ZooKeeperHarness::Shared();
    ASSERT_FALSE(zk.connect().empty()) << zk.error();
    name_ = fmt::format("{}-{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), getpid());
    cluster_ = fmt::format("zk://{}/cell/{}", zk.connect(), name_);
    std::vector<std::thread> starting;
    servers_.resize(3);
    for (int i = 0; i < 3; ++i) {
      starting.emplace_back([this, i] {
        std::vector<std::string> args = {"--listen=tcp://127.0.0.1:0",
                                         "--listen=shm://" + testing::ShmPath(fmt::format("{}-{}", name_, i + 1)),
                                         "--membership=" + cluster_,
                                         fmt::format("--id={}", i + 1),
                                         "--workers=2",
                                         "--region-size=64MiB",
                                         "--meganode-size=16KiB",
                                         "--meganodes=4096"};
        for (const std::string& a : testing::ServerKeyArgs()) args.push_back(a);
        servers_[i] = testing::StartServer(args);
      });
    }
    for (auto& t : starting) t.join();
    for (const auto& s : servers_) ASSERT_FALSE(s.ready.empty()) << "a server did not start";
  }

  std::unique_ptr<Client> Open(const std::string& search, std::chrono::milliseconds timeout = 10s) {
    ClientOptions options;
    options.cluster = cluster_;
    options.search = search;
    options.timeout = timeout;
    options.key_file = testing::ClientKeyFile();
    auto client = Client::Open(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }

  ClusterStats Stats(Client& client) {
    ClusterStats out;
    auto stats = client.StoreStats();
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    if (!stats.ok()) return out;
    for (const auto& s : *stats) {
      out.splits += s.meganode_splits;
      out.remote_splits += s.remote_splits;
      out.locks += s.txn_locks;
      out.servers_with_meganodes += s.meganodes > 0 ? 1 : 0;
    }
    return out;
  }

  // Runs the workload for the stress scale's seconds and returns its history. `cas_thread`: the last thread does
  // compare-and-swaps instead of transactions.
  ser::History Run(bool cas_thread);

  std::string name_, cluster_;
  std::vector<testing::RunningServer> servers_;
};

// One thread's view of what went wrong beyond what the history records (a status no operation may return).
struct Unexpected {
  std::mutex mu;
  std::vector<std::string> what;
  void Add(const std::string& s) {
    std::lock_guard lock(mu);
    if (what.size() < 20) what.push_back(s);
  }
};

ser::History History::Run(bool cas_thread) {
  constexpr int kThreads = 6;
  ser::History history;
  // Fillers first, so that the tree spans all three servers before the transactions begin.
  auto loader = Open("server");
  if (loader == nullptr) return history;
  std::atomic<uint64_t> fillers{0};
  {
    std::vector<std::thread> loading;
    for (int t = 0; t < 3; ++t) {
      loading.emplace_back([&, t] {
        std::mt19937_64 rng(100 + t);
        const std::string value(200, 'f');
        for (int i = 0; i < 1000; ++i) {
          const Status s = loader->Put(FillerKey(rng, fillers.fetch_add(1)), value);
          ASSERT_TRUE(s.ok()) << s.ToString();
        }
      });
    }
    for (auto& t : loading) t.join();
  }
  const ClusterStats before = Stats(*loader);
  EXPECT_EQ(before.servers_with_meganodes, 3) << "the fillers should spread the tree over all three servers";

  std::atomic<bool> stop{false};
  std::atomic<int64_t> next_element{1}, next_txn{1};
  std::atomic<uint64_t> committed{0}, aborted{0}, unknown{0}, cas_ok{0};
  Unexpected unexpected;
  std::vector<std::vector<ser::Txn>> recorded(kThreads);
  std::vector<std::thread> threads;
  const char* searches[kThreads] = {"server", "client", "adaptive", "server", "client", "adaptive"};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = Open(searches[t]);
      ASSERT_NE(client, nullptr);
      std::mt19937_64 rng(1000 + t);
      std::vector<ser::Txn>& mine = recorded[t];
      const auto note = [&](const Status& s, const char* what) {
        unexpected.Add(fmt::format("thread {} ({}): {}: {}", t, searches[t], what, s.ToString()));
      };
      const auto decode = [&](const std::string& key, const std::string& value) {
        std::vector<int64_t> list;
        if (!ser::DecodeList(value, &list)) note(Status::Corruption(value.substr(0, 80)), key.c_str());
        return list;
      };
      if (cas_thread && t == kThreads - 1) {
        // Compare-and-swaps: a plain read, then the list with one more element if the key still holds what was read.
        while (!stop.load()) {
          const std::string key = HotKey(static_cast<int>(rng() % kHotKeys));
          ser::Txn txn;
          txn.id = next_txn.fetch_add(1);
          txn.begin = NowNs();
          std::string value;
          Status s = client->Get(key, &value);
          if (!s.ok() && !s.IsNotFound()) {
            if (!s.IsUnavailable() && !s.IsDeadlineExceeded()) note(s, "a plain get");
            continue;
          }
          std::optional<std::string> expected;
          std::optional<std::vector<int64_t>> list;
          if (s.ok()) {
            expected = value;
            list = decode(key, value);
          }
          const int64_t element = next_element.fetch_add(1);
          std::vector<int64_t> after = list.value_or(std::vector<int64_t>{});
          after.push_back(element);
          s = client->CompareAndSwap(key, expected, ser::EncodeList(after));
          txn.end = NowNs();
          txn.ops = {ser::Read{key, list}, ser::Append{key, element}};
          if (s.ok()) {
            txn.outcome = ser::Outcome::kCommitted;
            cas_ok.fetch_add(1);
            committed.fetch_add(1);
          } else if (s.code() == Status::Code::kFailedPrecondition) {
            txn.outcome = ser::Outcome::kAborted;
            aborted.fetch_add(1);
          } else {
            if (!s.IsUnavailable() && !s.IsDeadlineExceeded()) note(s, "a compare-and-swap");
            txn.outcome = ser::Outcome::kUnknown;
            unknown.fetch_add(1);
          }
          mine.push_back(std::move(txn));
        }
        return;
      }
      while (!stop.load()) {
        ser::Txn txn;
        txn.id = next_txn.fetch_add(1);
        txn.begin = NowNs();
        auto begun = client->BeginTransaction();
        if (!begun.ok()) {
          note(begun.status(), "BeginTransaction");
          continue;
        }
        Transaction& tx = **begun;
        const int ops = 1 + static_cast<int>(rng() % 4);
        Status failed;
        for (int o = 0; o < ops && failed.ok(); ++o) {
          const uint64_t dice = rng() % 100;
          if (dice < 12) {
            // A scan of 1..4 consecutive hot keys (and the fillers between them, which are not in the history).
            const int first = static_cast<int>(rng() % kHotKeys);
            const int last = std::min(kHotKeys, first + 1 + static_cast<int>(rng() % 4));
            ser::Scan scan{HotKey(first), HotKey(last), {}};
            std::vector<std::pair<std::string, std::string>> pairs;
            failed = tx.Scan(scan.start, scan.end, 100000, &pairs);
            if (!failed.ok()) break;
            for (const auto& [k, v] : pairs) {
              if (IsHotKey(k)) scan.seen.emplace(k, decode(k, v));
            }
            txn.ops.push_back(std::move(scan));
            continue;
          }
          const std::string key = HotKey(static_cast<int>(rng() % kHotKeys));
          std::string value;
          Status s = tx.Get(key, &value);
          if (!s.ok() && !s.IsNotFound()) {
            failed = s;
            break;
          }
          std::optional<std::vector<int64_t>> list;
          if (s.ok()) list = decode(key, value);
          txn.ops.push_back(ser::Read{key, list});
          if (dice < 60) {  // an append: the list read, and one more element
            const int64_t element = next_element.fetch_add(1);
            std::vector<int64_t> after = list.value_or(std::vector<int64_t>{});
            after.push_back(element);
            failed = tx.Put(key, ser::EncodeList(after));
            if (failed.ok()) txn.ops.push_back(ser::Append{key, element});
          }
        }
        if (!failed.ok()) {
          // Nothing was sent to be written: the attempt is aborted whatever went wrong.
          if (!failed.IsAborted() && !failed.IsUnavailable() && !failed.IsDeadlineExceeded()) note(failed, "a read");
          tx.Rollback();
          txn.end = NowNs();
          txn.outcome = ser::Outcome::kAborted;
          aborted.fetch_add(1);
          mine.push_back(std::move(txn));
          continue;
        }
        const Status s = tx.Commit();
        txn.end = NowNs();
        if (s.ok()) {
          txn.outcome = ser::Outcome::kCommitted;
          committed.fetch_add(1);
        } else if (s.IsAborted()) {
          txn.outcome = ser::Outcome::kAborted;
          aborted.fetch_add(1);
        } else {
          if (!s.IsUnavailable() && !s.IsDeadlineExceeded()) note(s, "Commit");
          txn.outcome = ser::Outcome::kUnknown;
          unknown.fetch_add(1);
        }
        mine.push_back(std::move(txn));
      }
    });
  }
  // Fillers keep arriving among the transactions' keys: meganodes holding them (and their locks) keep splitting.
  threads.emplace_back([&] {
    auto client = Open("server");
    ASSERT_NE(client, nullptr);
    std::mt19937_64 rng(7);
    const std::string value(200, 'f');
    while (!stop.load()) {
      const Status s = client->Put(FillerKey(rng, fillers.fetch_add(1)), value);
      if (!s.ok()) unexpected.Add("a filler put: " + s.ToString());
      std::this_thread::sleep_for(2ms);  // a pace, not a synchronisation
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(2 * testing::StressScale()));  // the run's length
  stop.store(true);
  for (auto& t : threads) t.join();

  const ClusterStats after = Stats(*loader);
  fmt::print(
      "{} committed ({} compare-and-swaps), {} aborted, {} unknown; {} fillers; meganode splits {} -> {} (remote {} -> "
      "{}), {} servers hold meganodes\n",
      committed.load(), cas_ok.load(), aborted.load(), unknown.load(), fillers.load(), before.splits, after.splits,
      before.remote_splits, after.remote_splits, after.servers_with_meganodes);
  EXPECT_TRUE(unexpected.what.empty()) << fmt::format("{}", fmt::join(unexpected.what, "\n"));
  EXPECT_GT(after.splits, before.splits) << "no meganode split while the transactions ran";
  EXPECT_GT(after.remote_splits, 0u) << "no meganode split placed its right half on another server";
  EXPECT_EQ(after.servers_with_meganodes, 3);
  EXPECT_GT(committed.load(), 100u);
  if (cas_thread) {
    EXPECT_GT(cas_ok.load(), 0u);
  }
  for (auto& mine : recorded) {
    for (auto& txn : mine) history.txns.push_back(std::move(txn));
  }
  return history;
}

// A copy of `history` with one committed read made stale: a read of a list whose last element was appended by a
// transaction that had ended before the reader began, now without that element. Strictly serializable no longer
// (the reader must follow the appender in real time, yet missed its append). nullopt if no read qualifies; else the
// history and the reader's id.
std::optional<std::pair<ser::History, int64_t>> WithStaleRead(const ser::History& history) {
  std::unordered_map<int64_t, const ser::Txn*> appender;
  for (const ser::Txn& txn : history.txns) {
    for (const ser::MicroOp& op : txn.ops) {
      if (const auto* a = std::get_if<ser::Append>(&op)) appender[a->element] = &txn;
    }
  }
  ser::History copy = history;
  for (ser::Txn& txn : copy.txns) {
    if (txn.outcome != ser::Outcome::kCommitted) continue;
    for (ser::MicroOp& op : txn.ops) {
      auto* read = std::get_if<ser::Read>(&op);
      if (read == nullptr || !read->list || read->list->empty()) continue;
      const auto it = appender.find(read->list->back());
      if (it == appender.end() || it->second->outcome != ser::Outcome::kCommitted || it->second->end >= txn.begin) {
        continue;
      }
      fmt::print("corrupted: T{} read {} = [..{} elements, {}] from T{}, now without its last element\n", txn.id,
                 read->key, read->list->size(), read->list->back(), it->second->id);
      read->list->pop_back();
      const int64_t id = txn.id;
      return std::make_pair(std::move(copy), id);
    }
  }
  return std::nullopt;
}

std::string Tail(const std::vector<int64_t>& list) {
  std::string out = list.size() > 3 ? fmt::format("[({} elements) ..", list.size()) : "[";
  for (size_t i = list.size() > 3 ? list.size() - 3 : 0; i < list.size(); ++i) {
    out += fmt::format("{}{}", i + 3 >= list.size() && out.back() != '[' && out.back() != '.' ? "," : "", list[i]);
  }
  return out + "]";
}

// The transactions an anomaly names, each with its operations in order (lists shown by their last elements).
std::string Describe(const ser::History& history, const ser::CheckResult& result) {
  std::unordered_map<int64_t, const ser::Txn*> by_id;
  for (const ser::Txn& txn : history.txns) by_id[txn.id] = &txn;
  std::set<int64_t> named;
  std::string out;
  for (const ser::Anomaly& anomaly : result.anomalies) {
    for (const int64_t id : anomaly.txns) {
      if (!named.insert(id).second || !by_id.contains(id)) continue;
      const ser::Txn& txn = *by_id.at(id);
      const char* outcome = txn.outcome == ser::Outcome::kCommitted ? "committed"
                            : txn.outcome == ser::Outcome::kAborted ? "aborted"
                                                                    : "unknown";
      out += fmt::format("T{} ({}, {} .. {} ns):", id, outcome, txn.begin, txn.end);
      for (const ser::MicroOp& op : txn.ops) {
        if (const auto* a = std::get_if<ser::Append>(&op)) out += fmt::format(" append({}, {})", a->key, a->element);
        if (const auto* r = std::get_if<ser::Read>(&op)) {
          out += fmt::format(" read({}) = {}", r->key, r->list ? Tail(*r->list) : "absent");
        }
        if (const auto* sc = std::get_if<ser::Scan>(&op)) {
          out += fmt::format(" scan[{}, {}) = {{", sc->start, sc->end);
          for (const auto& [k, l] : sc->seen) out += fmt::format(" {}: {}", k, Tail(l));
          out += " }";
        }
      }
      out += "\n";
    }
  }
  return out;
}

void CheckHistory(const ser::History& history) {
  const auto began = Clock::now();
  const ser::CheckResult result = ser::Check(history);
  fmt::print("checked in {:.2f} s: {}\n", std::chrono::duration<double>(Clock::now() - began).count(),
             result.Summary());
  EXPECT_TRUE(result.ok) << result.Summary() << "\n" << Describe(history, result);
  EXPECT_GT(result.edges.ww + result.edges.wr + result.edges.rw, 0u) << "a history with no dependencies proves nothing";
  // The same history with one stale read: the checker must name the reader in an anomaly (whatever else it found).
  const auto corrupted = WithStaleRead(history);
  ASSERT_TRUE(corrupted.has_value()) << "no committed read of another's earlier append to corrupt";
  const ser::CheckResult bad = ser::Check(corrupted->first);
  fmt::print("with the stale read: {}\n", bad.Summary().substr(0, 2000));
  EXPECT_FALSE(bad.ok) << "the checker accepted a history with a stale read";
  const bool named = std::any_of(bad.anomalies.begin(), bad.anomalies.end(), [&](const ser::Anomaly& a) {
    return std::find(a.txns.begin(), a.txns.end(), corrupted->second) != a.txns.end();
  });
  EXPECT_TRUE(named) << "no anomaly names T" << corrupted->second << ", whose read was made stale";
}

// What the histories above caught, reduced to one transaction: it scans a key, another client changes the key, the
// transaction reads the key again (seeing the new value) and writes it. It saw two versions of one key, so it must
// not commit (Get may refuse, as for two Gets of a key that changed between them, or Commit must abort). Also when the
// key was absent from the scan and inserted before the Get (a phantom the transaction then writes over).
TEST_F(History, AKeyReadAgainAfterAScanSawAnOlderVersionDoesNotCommit) {
  auto client = Open("server");
  auto other = Open("server");
  ASSERT_NE(client, nullptr);
  ASSERT_NE(other, nullptr);
  for (const bool present : {true, false}) {
    SCOPED_TRACE(present ? "the key was present at the scan" : "the key was absent at the scan");
    const std::string key = present ? "skew-present" : "skew-absent";
    if (present) {
      ASSERT_TRUE(client->Put(key, "1").ok());
    }
    auto txn = client->BeginTransaction();
    ASSERT_TRUE(txn.ok()) << txn.status().ToString();
    std::vector<std::pair<std::string, std::string>> pairs;
    ASSERT_TRUE((*txn)->Scan(key, key + "~", 10, &pairs).ok());
    ASSERT_EQ(pairs.size(), present ? 1u : 0u);
    ASSERT_TRUE(other->Put(key, "2").ok());  // committed between the scan and the get
    std::string value;
    const Status got = (*txn)->Get(key, &value);
    if (got.IsAborted()) continue;  // refused at once: correct
    ASSERT_TRUE(got.ok()) << got.ToString();
    EXPECT_EQ(value, "2");
    ASSERT_TRUE((*txn)->Put(key, "3").ok());
    const Status committed = (*txn)->Commit();
    EXPECT_TRUE(committed.IsAborted()) << "the transaction saw " << key << " both "
                                       << (present ? "as '1' (its scan)" : "absent (its scan)")
                                       << " and as '2' (its get), yet Commit returned " << committed.ToString();
    ASSERT_TRUE(client->Get(key, &value).ok());
    EXPECT_EQ(value, "2") << "the transaction's write was applied";
  }
}

TEST_F(History, ConcurrentListAppendTransactionsAreStrictlySerializable) {
  const ser::History history = Run(/*cas_thread=*/false);
  ASSERT_FALSE(history.txns.empty());
  CheckHistory(history);
}

TEST_F(History, TransactionsAndCompareAndSwapsTogetherAreStrictlySerializable) {
  const ser::History history = Run(/*cas_thread=*/true);
  ASSERT_FALSE(history.txns.empty());
  CheckHistory(history);
}

}  // namespace
}  // namespace cell
