// A cluster of three real cell-server processes sharing a real ZooKeeper, with meganodes small enough (16 KiB) that
// the tree spreads over all three through dozens of splits, local and remote, while clients run against a model:
// answers by both searches, linearizable histories, scans across meganode and server boundaries, and a dead server.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "cell/client.h"
#include "rpc/key.h"
#include "rpc/transport.h"
#include "test/linearizability.h"
#include "test/membership/cluster_table.h"
#include "test/membership/zk_harness.h"
#include "test/server/register_history.h"
#include "test/server/server_harness.h"

namespace cell {
namespace {

using namespace std::chrono_literals;
using testing::RunningServer;
using testing::ShmPath;
using testing::StartServer;

class Cluster : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& zk = testing::ZooKeeperHarness::Shared();
    ASSERT_FALSE(zk.connect().empty()) << zk.error();
    name_ = fmt::format("{}-{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), getpid());
    cluster_ = fmt::format("zk://{}/cell/{}", zk.connect(), name_);
    // All three at once: they race to claim the root, and exactly one formats the tree.
    std::vector<std::thread> starting;
    servers_.resize(3);
    for (int i = 0; i < 3; ++i) {
      starting.emplace_back([this, i] {
        // With the cluster's keys: the servers' splits onto each other prove the peer key.
        std::vector<std::string> args = {"--listen=tcp://127.0.0.1:0",
                                         "--listen=shm://" + ShmPath(fmt::format("{}-{}", name_, i + 1)),
                                         "--membership=" + cluster_,
                                         fmt::format("--id={}", i + 1),
                                         "--workers=2",
                                         "--region-size=64MiB",
                                         "--meganode-size=16KiB",
                                         "--meganodes=4096"};
        for (const std::string& a : testing::ServerKeyArgs()) args.push_back(a);
        servers_[i] = StartServer(args);
      });
    }
    for (auto& t : starting) t.join();
    for (const auto& s : servers_) ASSERT_FALSE(s.ready.empty()) << "a server did not start";
  }

  // `node_cache_levels`: ClientOptions' (its default: 4).
  // `transports` empty: the client's default (shm first).
  std::unique_ptr<Client> Open(const std::string& search, std::chrono::milliseconds timeout = 20s,
                               int node_cache_levels = 4, std::vector<std::string> transports = {}) {
    ClientOptions options;
    if (!transports.empty()) options.transports = std::move(transports);
    options.cluster = cluster_;
    options.search = search;
    options.timeout = timeout;
    options.node_cache_levels = node_cache_levels;
    options.key_file = testing::ClientKeyFile();
    auto client = Client::Open(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // Every server's counters, summed, and how many servers hold meganodes.
  struct Totals {
    uint64_t splits = 0, remote_splits = 0, root_splits = 0, redirects = 0;
    int servers_with_meganodes = 0;
  };
  Totals Stats() {
    Totals t;
    auto client = Open("server");
    if (client == nullptr) return t;
    auto stats = client->StoreStats();
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    if (!stats.ok()) return t;
    EXPECT_EQ(stats->size(), 3u);
    for (const auto& s : *stats) {
      t.splits += s.meganode_splits;
      t.remote_splits += s.remote_splits;
      t.root_splits += s.root_splits;
      t.redirects += s.redirects;
      t.servers_with_meganodes += s.meganodes > 0 ? 1 : 0;
      fmt::print(
          "server {}: {} meganodes, {} splits ({} remote, {} root), {} requests ({} redirected), {} writes "
          "held by splits\n",
          s.server, s.meganodes, s.meganode_splits, s.remote_splits, s.root_splits, s.requests, s.redirects,
          s.held_writes);
    }
    return t;
  }

  std::string name_, cluster_;
  std::vector<RunningServer> servers_;
};

std::string Value(std::mt19937_64& rng) {
  const size_t sizes[] = {0, 1, 8, 100, 1000, 4000};
  std::string v(sizes[rng() % 6], ' ');
  for (char& c : v) c = static_cast<char>('a' + rng() % 26);
  return v;
}

using Pairs = std::vector<std::pair<std::string, std::string>>;

// A server that serves nothing (no connection with this test's client key gets that far).
class RefuseAll final : public rpc::RpcHandler {
 public:
  void Handle(uint16_t, std::string_view, rpc::Responder responder) override {
    responder.Fail(Status::PermissionDenied("this server serves nothing"));
  }
};

// Client threads, each over its own keys with its own model, by server-side, client-side (copies over tcp, in place
// over shm) and mixed search.
TEST_F(Cluster, EveryAnswerMatchesAModelWhileMeganodesSplitAcrossServers) {
  const char* searches[] = {"server", "client", "client", "fixed:0.5", "fixed:0.2"};
  const bool copies[] = {false, true, false, false, false};  // over tcp: one-sided reads copy nodes
  std::mutex models_mu;
  std::map<std::string, std::string> all_models;
  std::vector<std::thread> threads;
  for (int t = 0; t < 5; ++t) {
    threads.emplace_back([&, t] {
      // The client that copies caches every node above the leaves: its searches and scans begin at leaf meganodes
      // from its path cache, and so meet its node cache there, where splits make the copies stale most often.
      auto client = copies[t] ? Open(searches[t], 20s, 1, {"tcp"}) : Open(searches[t]);
      ASSERT_NE(client, nullptr);
      std::map<std::string, std::string> model;
      std::mt19937_64 rng(7 + t);
      const std::string prefix = fmt::format("c{}-", t);
      for (int i = 0; i < 3000; ++i) {
        // The key space grows with i, so that meganodes keep filling and splitting.
        const std::string key = fmt::format("{}{:05d}", prefix, rng() % (200 + i));
        const int op = static_cast<int>(rng() % 10);
        if (op < 5) {
          const std::string value = Value(rng);
          Status s = client->Put(key, value);
          ASSERT_TRUE(s.ok()) << key << ": " << s.ToString();
          model[key] = value;
        } else if (op < 7) {
          std::string value;
          Status s = client->Get(key, &value);
          auto it = model.find(key);
          if (it != model.end()) {
            ASSERT_TRUE(s.ok()) << key << ": " << s.ToString();
            ASSERT_EQ(value, it->second) << key;
          } else {
            ASSERT_TRUE(s.IsNotFound()) << key << ": " << s.ToString();
          }
        } else if (op < 9) {
          Status s = client->Delete(key);
          const bool had = model.erase(key) == 1;
          ASSERT_TRUE(had ? s.ok() : s.IsNotFound()) << key << ": " << s.ToString();
        } else {
          const std::string start = fmt::format("{}{:05d}", prefix, rng() % (200 + i));
          const size_t limit = 1 + rng() % 200;
          Pairs got;
          Status s = client->Scan(start, prefix + "~", limit, &got);
          ASSERT_TRUE(s.ok()) << s.ToString();
          Pairs want;
          for (auto it = model.lower_bound(start); it != model.end() && want.size() < limit; ++it) {
            want.emplace_back(it->first, it->second);
          }
          ASSERT_EQ(got, want) << "scan from " << start << " limit " << limit;
        }
      }
      if (copies[t]) {
        // Its searches went through the node cache, which went stale at splits.
        EXPECT_GT(client->stats().node_cache_hits, 0u);
        EXPECT_EQ(client->stats().in_place_searches, 0u);
      } else if (std::string(searches[t]) == "client") {
        EXPECT_GE(client->stats().in_place_searches, client->stats().client_searches);
        EXPECT_EQ(client->stats().node_cache_hits + client->stats().node_cache_misses, 0u);
      }
      std::lock_guard lock(models_mu);
      all_models.insert(model.begin(), model.end());
    });
  }
  for (auto& t : threads) t.join();
  for (const char* search : {"server", "client"}) {
    auto client = Open(search);
    ASSERT_NE(client, nullptr);
    Pairs all;
    ASSERT_TRUE(client->Scan("", "", 1000000, &all).ok());
    ASSERT_EQ(all, Pairs(all_models.begin(), all_models.end())) << search;
  }
  const Totals totals = Stats();
  EXPECT_GE(totals.splits, 24u) << "too few meganode splits to test them";
  EXPECT_GE(totals.remote_splits, 5u) << "too few splits placed meganodes on other servers";
  EXPECT_GE(totals.splits - totals.remote_splits, 5u) << "too few local splits";
  EXPECT_EQ(totals.servers_with_meganodes, 3);
  EXPECT_GT(totals.redirects, 0u);
  EXPECT_GE(totals.root_splits, 1u);
}

TEST_F(Cluster, HistoriesOnAFewKeysAreLinearizableWhileMeganodesSplitAcrossServers) {
  const auto history = testing::RecordHistoryDuringSplits([&](const char* search) { return Open(search); }, 800);
  ASSERT_EQ(history.size(), 2400u);
  std::string why;
  EXPECT_TRUE(testing::IsLinearizable(history, &why)) << why;
  const Totals totals = Stats();
  EXPECT_GT(totals.splits, 0u) << "no meganode split while the history was recorded";
  EXPECT_GT(totals.remote_splits, 0u) << "no remote split while the history was recorded";
}

// Keys present throughout appear exactly once and in order in every scan, by both searches, while other keys are
// inserted between them (splitting meganodes, some to other servers).
TEST_F(Cluster, ScansAcrossMeganodesAndServersSeeEveryStableKeyOnceInOrder) {
  std::set<std::string> stable;
  {
    auto loader = Open("server");
    ASSERT_NE(loader, nullptr);
    for (int i = 0; i < 1500; ++i) {
      const std::string key = fmt::format("s{:05d}", i * 10);
      ASSERT_TRUE(loader->Put(key, "stable").ok());
      stable.insert(key);
    }
  }
  std::atomic<bool> stop{false};
  std::thread filler([&] {
    auto client = Open("server");
    ASSERT_NE(client, nullptr);
    std::mt19937_64 rng(5);
    for (int i = 0; !stop.load() && i < 6000; ++i) {
      const std::string key = fmt::format("s{:05d}-{}", rng() % 15000, i);
      Status s = client->Put(key, std::string(40, 'x'));
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  });
  std::vector<std::thread> scanners;
  std::atomic<int> scans{0};
  for (const char* search : {"server", "client"}) {
    scanners.emplace_back([&, search] {
      auto client = Open(search);
      ASSERT_NE(client, nullptr);
      for (int round = 0; round < 15; ++round) {
        Pairs got;
        Status s = client->Scan("s", "t", 1000000, &got);
        ASSERT_TRUE(s.ok()) << s.ToString();
        std::vector<std::string> seen;
        for (size_t i = 0; i < got.size(); ++i) {
          if (i > 0) {
            ASSERT_LT(got[i - 1].first, got[i].first) << search << ": out of order or repeated";
          }
          if (got[i].second == "stable") seen.push_back(got[i].first);
        }
        ASSERT_EQ(seen, std::vector<std::string>(stable.begin(), stable.end())) << search << " round " << round;
        scans.fetch_add(1);
      }
    });
  }
  for (auto& t : scanners) t.join();
  stop = true;
  filler.join();
  EXPECT_EQ(scans.load(), 30);
  const Totals totals = Stats();
  EXPECT_GT(totals.remote_splits, 0u);
  EXPECT_EQ(totals.servers_with_meganodes, 3);
}

// A server that dies takes its meganodes with it (until the log issue's recovery): operations on its keys fail with
// Unavailable or DeadlineExceeded within the client's timeout, never hang; keys elsewhere keep working.
// An adaptive client keeps estimates per server: the reads of a client-side search count for the server that holds
// the meganode it began at (the one the choice was made for), not for the root's.
TEST_F(Cluster, AnAdaptiveClientMeasuresEachServerItSearches) {
  {
    auto loader = Open("server");
    ASSERT_NE(loader, nullptr);
    for (int i = 0; i < 3000; ++i) ASSERT_TRUE(loader->Put(fmt::format("e{:05d}", i), fmt::format("v{}", i)).ok());
  }
  ASSERT_EQ(Stats().servers_with_meganodes, 3);
  auto client = Open("adaptive");
  ASSERT_NE(client, nullptr);
  for (int pass = 0; pass < 3; ++pass) {
    for (int i = 0; i < 3000; i += 3) {
      std::string value;
      ASSERT_TRUE(client->Get(fmt::format("e{:05d}", i), &value).ok()) << i;
      ASSERT_EQ(value, fmt::format("v{}", i));
    }
  }
  const Client::Stats stats = client->stats();
  int read_measured = 0;
  for (const auto& e : stats.estimates) {
    fmt::print("server {}: search {:.1f} us, read {:.2f} us, rtt {:.2f} us\n", e.server, e.server_search_us, e.read_us,
               e.rtt_us);
    EXPECT_NE(e.server, 0u) << "estimates are kept for known servers only";
    read_measured += e.read_us > 0 ? 1 : 0;
  }
  EXPECT_EQ(read_measured, 3) << "every server holding meganodes should have its reads measured";
}

TEST_F(Cluster, ADeadServersKeysAreUnavailableWithinTheTimeoutAndTheRestServe) {
  {
    auto loader = Open("server");
    ASSERT_NE(loader, nullptr);
    for (int i = 0; i < 3000; ++i) ASSERT_TRUE(loader->Put(fmt::format("d{:05d}", i), "v").ok());
  }
  ASSERT_EQ(Stats().servers_with_meganodes, 3);
  // Not the root server (the first meganode's): a dead root stops everything until recovery.
  auto table = testing::OpenClusterTable(cluster_);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  auto root = (*table)->RootRegion();
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  auto root_entry = (*table)->GetRegion(*root);
  ASSERT_TRUE(root_entry.ok());
  const size_t victim = root_entry->owner == 3 ? 1 : 2;  // index: server id victim + 1
  servers_[victim].process->Kill();
  // Another cluster's server (its own key) takes the victim's TCP port, as a server of a test running alongside may:
  // the client must take the victim as unreachable (its keys Unavailable), not its own key as wrong.
  const auto tcp = std::find_if(servers_[victim].uris.begin(), servers_[victim].uris.end(),
                                [](const std::string& uri) { return uri.rfind("tcp://", 0) == 0; });
  ASSERT_NE(tcp, servers_[victim].uris.end());
  const std::string stranger_key = testing::ProcessDir() + "/stranger.key";
  unlink(stranger_key.c_str());
  ASSERT_TRUE(WriteNewKeyFile(stranger_key).ok());
  rpc::ServerOptions stranger_options;
  stranger_options.keys.push_back(*rpc::ReadKeyFile(stranger_key, rpc::kClientKeyName));
  RefuseAll refuse_all;
  auto stranger = rpc::Listen(*tcp, stranger_options, &refuse_all);
  ASSERT_TRUE(stranger.ok()) << stranger.status().ToString();
  auto client = Open("fixed:0.5", 1s);
  ASSERT_NE(client, nullptr);
  // Every key in order until a few failed (the victim's meganodes hold key ranges, maybe small ones: a sample of
  // keys could miss them all), each failure within the timeout.
  int ok = 0, unavailable = 0, stranger_met = 0;
  for (int i = 0; i < 3000 && unavailable < 3; ++i) {
    const auto before = std::chrono::steady_clock::now();
    std::string value;
    Status s = client->Get(fmt::format("d{:05d}", i), &value);
    const auto took = std::chrono::steady_clock::now() - before;
    EXPECT_LT(took, 2s) << s.ToString();
    if (s.ok()) {
      EXPECT_EQ(value, "v");
      ++ok;
    } else {
      EXPECT_TRUE(s.IsUnavailable() || s.IsDeadlineExceeded()) << s.ToString();
      ++unavailable;
      stranger_met += s.message().find("is not at its addresses") != std::string::npos ? 1 : 0;
    }
  }
  EXPECT_GT(ok, 0) << "no key answered from the live servers";
  EXPECT_GT(unavailable, 0) << "no key lived on the dead server";
  EXPECT_GT(stranger_met, 0) << "no get met the server at the dead server's address";
}

}  // namespace
}  // namespace cell
