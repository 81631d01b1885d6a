// The store through the public client against real cell-server processes: every operation checked against a model,
// by server-side and by client-side search, over tcp and shm; bad input, wrong owners and dead servers.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "cell/client.h"
#include "cell/limits.h"
#include "rpc/proto/store.pb.h"
#include "rpc/transport.h"
#include "test/linearizability.h"
#include "test/server/register_history.h"
#include "test/server/server_harness.h"

namespace cell {
namespace {

using namespace std::chrono_literals;
using testing::RunningServer;
using testing::ShmPath;
using testing::StartServer;

RunningServer StartEmbedded(std::string_view name, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--listen=tcp://127.0.0.1:0", "--listen=shm://" + ShmPath(name),
                                   "--region-size=64MiB", "--meganode-size=16KiB", "--meganodes=4096"};
  args.insert(args.end(), extra.begin(), extra.end());
  return StartServer(args);
}

std::unique_ptr<Client> OpenClient(const std::string& cluster, const std::string& search, const std::string& transport,
                                   std::chrono::milliseconds timeout = 10s) {
  ClientOptions options;
  options.cluster = cluster;
  options.search = search;
  options.transports = {transport};
  options.timeout = timeout;
  auto client = Client::Open(options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(*client) : nullptr;
}

std::string Value(std::mt19937_64& rng) {
  // Mostly small, sometimes a few KB, rarely 100 KB: records of every size class.
  const size_t sizes[] = {0, 1, 7, 8, 100, 1000, 4000, 100000};
  const size_t n = sizes[rng() % (rng() % 16 == 0 ? 8 : 7)];
  std::string v(n, ' ');
  for (char& c : v) c = static_cast<char>('a' + rng() % 26);
  return v;
}

struct Mode {
  const char* transport;
  const char* search;
};

class StoreModel : public ::testing::TestWithParam<Mode> {};

TEST_P(StoreModel, EveryAnswerMatchesAModel) {
  RunningServer server = StartEmbedded(fmt::format("model-{}-{}", GetParam().transport, GetParam().search[0]));
  ASSERT_FALSE(server.ready.empty());
  auto client = OpenClient(server.uris[0], GetParam().search, GetParam().transport);
  ASSERT_NE(client, nullptr);
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(42);
  for (int i = 0; i < 3000; ++i) {
    const std::string key = fmt::format("key{:04d}", rng() % 400);
    const int op = static_cast<int>(rng() % 10);
    if (op < 4) {
      const std::string value = Value(rng);
      ASSERT_TRUE(client->Put(key, value).ok());
      model[key] = value;
    } else if (op < 7) {
      std::string value;
      Status s = client->Get(key, &value);
      if (model.count(key)) {
        ASSERT_TRUE(s.ok()) << key << ": " << s.ToString();
        ASSERT_EQ(value, model[key]) << key;
      } else {
        ASSERT_TRUE(s.IsNotFound()) << key << ": " << s.ToString();
      }
    } else if (op < 9) {
      Status s = client->Delete(key);
      ASSERT_EQ(s.ok(), model.erase(key) == 1) << key << ": " << s.ToString();
      if (!s.ok()) {
        ASSERT_TRUE(s.IsNotFound()) << s.ToString();
      }
    } else {
      const std::string start = fmt::format("key{:04d}", rng() % 400);
      const std::string end = rng() % 4 == 0 ? "" : fmt::format("key{:04d}", rng() % 400);
      const size_t limit = 1 + rng() % 50;
      std::vector<std::pair<std::string, std::string>> got;
      ASSERT_TRUE(client->Scan(start, end, limit, &got).ok());
      std::vector<std::pair<std::string, std::string>> want;
      for (auto it = model.lower_bound(start); it != model.end() && want.size() < limit; ++it) {
        if (!end.empty() && it->first >= end) break;
        want.emplace_back(it->first, it->second);
      }
      ASSERT_EQ(got, want) << "scan [" << start << ", " << end << ") limit " << limit;
    }
  }
  std::vector<std::pair<std::string, std::string>> all;
  ASSERT_TRUE(client->Scan("", "", 100000, &all).ok());
  const std::vector<std::pair<std::string, std::string>> want(model.begin(), model.end());
  ASSERT_EQ(all, want);
  // The server's meganodes (16 KiB: 16 slots) split many times under this load, the root among them.
  auto stats = client->StoreStats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(stats->size(), 1u);
  EXPECT_GT(stats->front().meganode_splits, 5u);
  EXPECT_GE(stats->front().root_splits, 1u);
  // Client-side searches over shm read the server's memory in place; over tcp they copy.
  const Client::Stats searches = client->stats();
  if (std::string_view(GetParam().transport) == "shm" && searches.client_searches > 0) {
    EXPECT_GE(searches.in_place_searches, searches.client_searches);
  } else {
    EXPECT_EQ(searches.in_place_searches, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(All, StoreModel,
                         ::testing::Values(Mode{"tcp", "server"}, Mode{"tcp", "client"}, Mode{"shm", "server"},
                                           Mode{"shm", "client"}, Mode{"shm", "fixed:0.5"}, Mode{"shm", "adaptive"},
                                           Mode{"tcp", "dex"}),
                         [](const auto& info) {
                           std::string s = info.param.search;
                           if (s.find(':') != std::string::npos) s = "mixed";
                           return std::string(info.param.transport) + "_" + s;
                         });

TEST(Store, ConcurrentClientsSeeTheirOwnWritesAndScansStaySorted) {
  RunningServer server = StartEmbedded("concurrent", {"--workers=2"});
  ASSERT_FALSE(server.ready.empty());
  std::atomic<bool> writers_done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      auto client = OpenClient(server.uris[0], "fixed:0.5", t % 2 == 0 ? "shm" : "tcp");
      ASSERT_NE(client, nullptr);
      std::map<std::string, std::string> mine;
      std::mt19937_64 rng(t);
      for (int i = 0; i < 1500; ++i) {
        const std::string key = fmt::format("t{}-{:03d}", t, rng() % 200);
        if (rng() % 3 != 0) {
          const std::string value = Value(rng);
          ASSERT_TRUE(client->Put(key, value).ok());
          mine[key] = value;
        } else {
          std::string value;
          Status s = client->Get(key, &value);
          if (mine.count(key)) {
            ASSERT_TRUE(s.ok()) << s.ToString();
            ASSERT_EQ(value, mine[key]);
          } else {
            ASSERT_TRUE(s.IsNotFound()) << s.ToString();
          }
        }
      }
    });
  }
  std::thread scanner([&] {
    auto client = OpenClient(server.uris[0], "client", "shm");
    ASSERT_NE(client, nullptr);
    int scans = 0;
    while (!writers_done.load() || scans < 10) {
      std::vector<std::pair<std::string, std::string>> pairs;
      ASSERT_TRUE(client->Scan("", "", 100000, &pairs).ok());
      for (size_t i = 1; i < pairs.size(); ++i) ASSERT_LT(pairs[i - 1].first, pairs[i].first);
      ++scans;
    }
  });
  for (auto& t : threads) t.join();
  writers_done = true;
  scanner.join();
}

TEST(Store, BadInputIsRefusedByTheClientAndByTheServer) {
  RunningServer server = StartEmbedded("bad");
  ASSERT_FALSE(server.ready.empty());
  auto client = OpenClient(server.uris[0], "server", "tcp");
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->Put(std::string(256, 'k'), "v").IsInvalidArgument());
  EXPECT_TRUE(client->Put("", "v").IsInvalidArgument());
  EXPECT_TRUE(client->Put("k", std::string((1 << 20) + 1, 'v')).IsInvalidArgument());
  std::string value;
  EXPECT_TRUE(client->Get(std::string(300, 'k'), &value).IsInvalidArgument());
  ClientOptions bad;
  bad.cluster = server.uris[0];
  bad.search = "sometimes";
  EXPECT_TRUE(Client::Open(bad).status().IsInvalidArgument());
  bad.search = "adaptive";
  bad.selector.explore = 2;
  EXPECT_TRUE(Client::Open(bad).status().IsInvalidArgument());

  // The server checks too: a raw request that skips the client's checks.
  auto connection = rpc::Connect(server.uris[0]);
  ASSERT_TRUE(connection.ok());
  auto table = rpc::CallSync(**connection, 259, "");  // TABLE_ROOT_REGION: the root's id
  ASSERT_TRUE(table.ok());
  cell::proto::KeyRequest put;
  put.mutable_target()->set_region(1);
  put.mutable_target()->set_epoch(1);
  put.set_key(std::string(256, 'k'));
  put.set_value("v");
  auto reply = rpc::CallSync(**connection, cell::proto::STORE_PUT, put.SerializeAsString());
  EXPECT_TRUE(reply.status().IsInvalidArgument()) << reply.status().ToString();
  reply = rpc::CallSync(**connection, cell::proto::STORE_GET, "\xff\xff garbage");
  EXPECT_TRUE(reply.status().IsInvalidArgument()) << reply.status().ToString();
  cell::proto::ScanRequest scan;
  scan.mutable_target()->set_region(1);
  scan.mutable_target()->set_epoch(1);
  reply = rpc::CallSync(**connection, cell::proto::STORE_SCAN, scan.SerializeAsString());
  EXPECT_TRUE(reply.status().IsInvalidArgument()) << reply.status().ToString();
  // Nothing of that reached the store.
  std::vector<std::pair<std::string, std::string>> all;
  ASSERT_TRUE(client->Scan("", "", 10, &all).ok());
  EXPECT_TRUE(all.empty());
}

TEST(Store, AServerAnswersOnlyForRegionsItOwnsAtTheClientsEpoch) {
  RunningServer server = StartEmbedded("owner");
  ASSERT_FALSE(server.ready.empty());
  auto connection = rpc::Connect(server.uris[0]);
  ASSERT_TRUE(connection.ok());
  for (auto [region, epoch] : {std::pair<uint32_t, uint64_t>{1, 2}, {2, 1}, {77, 1}}) {
    cell::proto::KeyRequest get;
    get.mutable_target()->set_region(region);
    get.mutable_target()->set_epoch(epoch);
    get.set_key("k");
    auto reply = rpc::CallSync(**connection, cell::proto::STORE_GET, get.SerializeAsString());
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    cell::proto::StoreReply parsed;
    ASSERT_TRUE(parsed.ParseFromString(*reply));
    ASSERT_TRUE(parsed.has_wrong_owner()) << region << "@" << epoch;
    EXPECT_EQ(parsed.wrong_owner().region(), region);
    EXPECT_EQ(parsed.wrong_owner().epoch(), region == 1 ? 1u : 0u);
  }
}

TEST(Store, ADeadServerIsUnavailableWithinTheTimeoutNeverAHang) {
  RunningServer server = StartEmbedded("dead");
  ASSERT_FALSE(server.ready.empty());
  for (const char* search : {"server", "client"}) {
    auto client = OpenClient(server.uris[0], search, "tcp", 1000ms);
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(client->Put("k", "v").ok());
  }
  auto server_side = OpenClient(server.uris[0], "server", "tcp", 1000ms);
  auto client_side = OpenClient(server.uris[0], "client", "shm", 1000ms);
  ASSERT_NE(server_side, nullptr);
  ASSERT_NE(client_side, nullptr);
  std::string value;
  ASSERT_TRUE(client_side->Get("k", &value).ok());
  server.process->Kill();
  for (Client* c : {server_side.get(), client_side.get()}) {
    // A one-sided read may still copy the dead server's last state until the client's transport has noticed the
    // death (the shm mapping outlives the process); that copy is right, and must be "v". Within the timeout every
    // operation fails with Unavailable or DeadlineExceeded, and none hangs.
    const auto before = std::chrono::steady_clock::now();
    Status s;
    do {
      value.clear();
      s = c->Get("k", &value);
      if (s.ok()) {
        ASSERT_EQ(value, "v");
      }
    } while (s.ok() && std::chrono::steady_clock::now() - before < 4s);
    EXPECT_TRUE(s.IsUnavailable() || s.IsDeadlineExceeded()) << s.ToString();
    EXPECT_LT(std::chrono::steady_clock::now() - before, 4s);
    s = c->Put("k", "v2");
    EXPECT_TRUE(s.IsUnavailable() || s.IsDeadlineExceeded()) << s.ToString();
  }
}

TEST(Store, AFullStoreRefusesWritesAndKeepsWhatItHas) {
  RunningServer server = StartServer({"--listen=tcp://127.0.0.1:0", "--region-size=1MiB", "--meganode-size=1MiB"});
  ASSERT_FALSE(server.ready.empty());
  auto client = OpenClient(server.uris[0], "server", "tcp");
  ASSERT_NE(client, nullptr);
  const std::string big(100000, 'x');
  int stored = 0;
  Status s;
  for (; stored < 100; ++stored) {
    s = client->Put(fmt::format("big{:03d}", stored), big);
    if (!s.ok()) break;
  }
  EXPECT_TRUE(s.IsResourceExhausted()) << s.ToString();
  EXPECT_GT(stored, 0);
  for (int i = 0; i < stored; ++i) {
    std::string value;
    ASSERT_TRUE(client->Get(fmt::format("big{:03d}", i), &value).ok());
    EXPECT_EQ(value, big);
  }
  // Room comes back when records go.
  ASSERT_TRUE(client->Delete("big000").ok());
  EXPECT_TRUE(client->Put("big000", big).ok());
}

// The adaptive selector tries both searches, measures them, and keeps both estimates current; every answer is right
// whichever side gives it. Exploration takes a fraction of the time, not of the searches: on shm, where a
// server-side get costs hundreds of client-side ones, the default odds would rarely explore in this many gets, so
// this client explores at odds 1: about once in as many gets as one server-side get costs client-side ones.
TEST(Store, AdaptiveSearchMeasuresBothSidesAndAnswersTheSame) {
  RunningServer server = StartEmbedded("adaptive");
  ASSERT_FALSE(server.ready.empty());
  ClientOptions options;
  options.cluster = server.uris[0];
  options.search = "adaptive";
  options.transports = {"shm"};
  options.selector.explore = 1.0;
  auto opened = Client::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Client> client = std::move(*opened);
  constexpr int kKeys = 2000;
  for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(client->Put(fmt::format("a{:05d}", i), fmt::format("v{}", i)).ok());
  std::mt19937_64 rng(3);
  constexpr int kGets = 20000;
  for (int i = 0; i < kGets; ++i) {
    const int k = static_cast<int>(rng() % (kKeys + 100));
    std::string value;
    const Status s = client->Get(fmt::format("a{:05d}", k), &value);
    if (k < kKeys) {
      ASSERT_TRUE(s.ok()) << k << ": " << s.ToString();
      ASSERT_EQ(value, fmt::format("v{}", k));
    } else {
      ASSERT_TRUE(s.IsNotFound()) << k << ": " << s.ToString();
    }
  }
  const Client::Stats stats = client->stats();
  EXPECT_GT(stats.server_searches, 0u);
  EXPECT_GT(stats.client_searches, 0u);
  EXPECT_EQ(stats.server_searches + stats.client_searches, uint64_t{kGets});
  EXPECT_GT(stats.explorations, 0u) << "no search explored the side estimated slower";
  EXPECT_LT(stats.explorations, uint64_t{kGets} / 5) << "exploration takes a share of the time, not of the searches";
  ASSERT_FALSE(stats.estimates.empty());
  bool measured = false;
  for (const auto& e : stats.estimates) {
    if (e.server_search_us > 0 && e.read_us > 0) {
      measured = true;
      EXPECT_LE(e.rtt_us, e.read_us);
      EXPECT_GT(e.rtt_us, 0);
    }
  }
  EXPECT_TRUE(measured) << "no server has both latencies measured";
}

// Scans alone (YCSB E without its inserts) move the adaptive split too: scans measure both sides with a selector of
// their own. Over shm a client-side scan reads in place and costs a fraction of a server-side one (an RPC whose reply
// carries the pairs), so once both are measured most scans go client-side; following the gets' split instead, which
// no get ever moves, half of them went to the server.
TEST(Store, AdaptiveScansAloneFindTheCheaperSide) {
  RunningServer server = StartEmbedded("adaptive-scans");
  ASSERT_FALSE(server.ready.empty());
  auto client = OpenClient(server.uris[1], "adaptive", "shm");
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(client->Put(fmt::format("s{:05d}", i), std::string(100, 'v')).ok());
  std::mt19937_64 rng(5);
  const auto scans = [&](int n, std::chrono::steady_clock::time_point until) {
    for (int i = 0; i < n || std::chrono::steady_clock::now() < until; ++i) {
      std::vector<std::pair<std::string, std::string>> got;
      const int from = static_cast<int>(rng() % 1900);
      ASSERT_TRUE(client->Scan(fmt::format("s{:05d}", from), "", 50, &got).ok());
      ASSERT_EQ(got.size(), 50u);
      ASSERT_EQ(got.front().first, fmt::format("s{:05d}", from));
    }
  };
  // Both sides measured, and 2 s of steering (at 1/s the split crosses its whole range in one).
  scans(0, std::chrono::steady_clock::now() + 2s);
  const Client::Stats before = client->stats();
  scans(2000, {});
  const Client::Stats after = client->stats();
  const double on_server = static_cast<double>(after.server_searches - before.server_searches);
  const double client_side = static_cast<double>(after.client_searches - before.client_searches);
  ASSERT_EQ(on_server + client_side, 2000);
  EXPECT_LT(on_server / 2000, 0.3) << "scans stayed split between the sides: " << on_server << " server-side";
  EXPECT_GT(after.in_place_searches, 0u);
}

// A get started from a get's callback runs on the transport's thread; a client-side search there would wait for
// reads that only that thread can complete (tcp). It searches on the server instead, and completes. A chain of gets,
// each started by the last one's callback, in modes that mix server- and client-side searches.
TEST(Store, GetsStartedFromCallbacksCompleteWhateverTheSearchMode) {
  RunningServer server = StartEmbedded("chained");
  ASSERT_FALSE(server.ready.empty());
  for (const char* search : {"fixed:0.5", "adaptive"}) {
    auto client = OpenClient(server.uris[0], search, "tcp");
    ASSERT_NE(client, nullptr);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(client->Put(fmt::format("c{}", i), fmt::format("v{}", i)).ok());
    constexpr int kChain = 200;
    std::mutex mu;
    std::condition_variable cv;
    int completed = 0, wrong = 0;
    std::function<void(int)> next = [&](int i) {
      client->GetAsync(fmt::format("c{}", i % 10), [&, i](const Status& s, std::string_view value) {
        const bool right = s.ok() && value == fmt::format("v{}", i % 10);
        {
          std::lock_guard lock(mu);
          ++completed;
          wrong += right ? 0 : 1;
          cv.notify_all();
        }
        if (i + 1 < kChain) next(i + 1);  // on whatever thread completed this one
      });
    };
    next(0);
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 30s, [&] { return completed == kChain; }))
        << search << ": the chain stopped after " << completed << " gets";
    EXPECT_EQ(wrong, 0) << search;
    const Client::Stats stats = client->stats();
    EXPECT_GT(stats.server_searches, 0u) << search;
  }
  // The rule itself: a client-side client's get started on a transport's thread (here another client's callback)
  // goes to the server; the same get from this thread is searched client-side. (Over tcp the reads have their own
  // thread, so the chain above would complete either way; over verbs one thread serves both.)
  auto client = OpenClient(server.uris[0], "client", "tcp");
  auto other = OpenClient(server.uris[0], "server", "tcp");
  ASSERT_NE(client, nullptr);
  ASSERT_NE(other, nullptr);
  std::string value;
  ASSERT_TRUE(client->Get("c1", &value).ok());
  EXPECT_EQ(client->stats().client_searches, 1u);
  ASSERT_TRUE(other->Get("c1", &value).ok());  // the root known: other's next get completes on its I/O thread
  std::promise<std::string> got;
  other->GetAsync("c2", [&](const Status&, std::string_view) {
    client->GetAsync(
        "c3", [&](const Status& s, std::string_view v) { got.set_value(s.ok() ? std::string(v) : s.ToString()); });
  });
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(future.get(), "v3");
  EXPECT_EQ(client->stats().server_searches, 1u) << "the get from a transport thread should have gone by RPC";
  EXPECT_EQ(client->stats().client_searches, 1u);
}

// A synchronous call in a callback would wait on the thread that must complete it (a transport's, or the client's
// own): it is refused at once with FailedPrecondition, not a hang; the same calls outside callbacks work.
TEST(Store, ASynchronousCallInACallbackIsRefusedNotAHang) {
  RunningServer server = StartEmbedded("sync-in-callback");
  ASSERT_FALSE(server.ready.empty());
  auto client = OpenClient(server.uris[0], "server", "tcp");
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Put("k", "v").ok());
  std::promise<std::vector<Status>> got;
  client->GetAsync("k", [&](const Status& s, std::string_view) {
    std::string value;
    std::vector<std::pair<std::string, std::string>> pairs;
    got.set_value(
        {s, client->Get("k", &value), client->Put("k", "w"), client->Delete("k"), client->Scan("a", "z", 10, &pairs)});
  });
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(30s), std::future_status::ready);
  const std::vector<Status> statuses = future.get();
  ASSERT_TRUE(statuses[0].ok()) << statuses[0].ToString();
  for (size_t i = 1; i < statuses.size(); ++i) {
    EXPECT_EQ(statuses[i].code(), Status::Code::kFailedPrecondition) << i << ": " << statuses[i].ToString();
  }
  std::string value;
  ASSERT_TRUE(client->Get("k", &value).ok());
  EXPECT_EQ(value, "v") << "a refused put must change nothing";
}

// cell-server --nic-model makes its shm clients' one-sided reads obey a NIC model (the harness's "network"): with a
// 3 ms read latency, a client-side get cannot take less than 3 ms. (A lower bound only: no timing assumption.)
TEST(Store, TheServersNicModelPacesClientSideReads) {
  RunningServer server = StartEmbedded("nic", {"--nic-model=latency_us=3000"});
  ASSERT_FALSE(server.ready.empty());
  auto client = OpenClient(server.uris[1], "client", "shm");
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Put("paced", "value").ok());
  const auto begin = std::chrono::steady_clock::now();
  std::string value;
  ASSERT_TRUE(client->Get("paced", &value).ok());
  EXPECT_EQ(value, "value");
  EXPECT_GE(std::chrono::steady_clock::now() - begin, 3ms);
  EXPECT_EQ(client->stats().client_searches, 1u);
  EXPECT_EQ(client->stats().in_place_searches, 0u);  // the model paces copies: a search with it never reads in place
}

TEST(Store, ManyAsynchronousOperationsInFlightFromOneThread) {
  RunningServer server = StartEmbedded("async", {"--workers=2"});
  ASSERT_FALSE(server.ready.empty());
  for (const char* search : {"server", "client"}) {
    auto client = OpenClient(server.uris[0], search, "shm");
    ASSERT_NE(client, nullptr);
    constexpr int kKeys = 2000;
    std::mutex mu;
    std::condition_variable cv;
    int done = 0, failed = 0;
    const auto finish = [&](bool ok) {
      std::lock_guard lock(mu);
      ++done;
      failed += ok ? 0 : 1;
      cv.notify_all();
    };
    for (int i = 0; i < kKeys; ++i) {  // all issued before any is awaited
      client->PutAsync(fmt::format("{}-{:05d}", search, i), fmt::format("v{}", i),
                       [&](const Status& s) { finish(s.ok()); });
    }
    {
      std::unique_lock lock(mu);
      ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return done == kKeys; }));
      ASSERT_EQ(failed, 0);
      done = 0;
    }
    for (int i = 0; i < kKeys; ++i) {
      const std::string want = fmt::format("v{}", i);
      client->GetAsync(fmt::format("{}-{:05d}", search, i),
                       [&, want](const Status& s, std::string_view value) { finish(s.ok() && value == want); });
    }
    client->GetAsync("no-such-key", [&](const Status& s, std::string_view) { finish(s.IsNotFound()); });
    client->GetAsync(std::string(256, 'k'), [&](const Status& s, std::string_view) { finish(s.IsInvalidArgument()); });
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return done == kKeys + 2; }));
    EXPECT_EQ(failed, 0);
    const Client::Stats stats = client->stats();
    EXPECT_EQ(std::string(search) == "server" ? stats.server_searches : stats.client_searches, kKeys + 1u);
    lock.unlock();
    // Deletes of every other key, and of one that is not there.
    done = 0;
    for (int i = 0; i < kKeys; i += 2) {
      client->DeleteAsync(fmt::format("{}-{:05d}", search, i), [&](const Status& s) { finish(s.ok()); });
    }
    client->DeleteAsync("no-such-key", [&](const Status& s) { finish(s.IsNotFound()); });
    client->DeleteAsync("", [&](const Status& s) { finish(s.IsInvalidArgument()); });
    lock.lock();
    ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return done == kKeys / 2 + 2; }));
    EXPECT_EQ(failed, 0);
    lock.unlock();
    for (int i = 0; i < kKeys; ++i) {
      std::string value;
      const Status s = client->Get(fmt::format("{}-{:05d}", search, i), &value);
      ASSERT_EQ(s.IsNotFound(), i % 2 == 0) << i << ": " << s.ToString();
    }
  }
  // A client destroyed with operations in flight completes each of them first, exactly once.
  std::vector<std::atomic<int>> completions(500);
  {
    auto client = OpenClient(server.uris[0], "server", "tcp");
    ASSERT_NE(client, nullptr);
    std::string warm;  // the root region known, so the gets go out on the connection rather than to the retry queue
    ASSERT_TRUE(client->Get("server-00001", &warm).ok());
    for (int i = 0; i < 500; ++i) {
      client->GetAsync(fmt::format("server-{:05d}", i), [&, i](const Status&, std::string_view) { ++completions[i]; });
    }
  }
  for (int i = 0; i < 500; ++i) ASSERT_EQ(completions[i].load(), 1) << "operation " << i;
}

// The client builds requests in a buffer and parses replies into a message that each thread reuses, and frees what a
// request or reply over 64 KiB used. Values of very different sizes, put and read in turn, each from the callback of
// the one before (so on the transport's thread, where the replies are parsed), must come back byte for byte.
TEST(Store, ValuesOfMixedSizesPutAndReadInTurnFromCallbacksComeBackExactly) {
  RunningServer server = StartEmbedded("mixed-sizes", {});
  ASSERT_FALSE(server.ready.empty());
  auto client = OpenClient(server.uris[0], "server", "shm");
  ASSERT_NE(client, nullptr);
  // Big (over 64 KiB), small, and in between; distinct bytes, so that a value left over from another reply shows.
  const std::vector<std::string> values = {
      std::string(200 << 10, 'B'), "s", std::string(40 << 10, 'm'), std::string(kMaxValueSize, 'X'), "t",
      std::string(70 << 10, 'b'),  ""};
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> failures;
  bool finished = false;
  // Steps 0..n-1 put values[i], steps n..2n-1 read them back in the same order; each step starts the next from its
  // callback, so the gets' replies, of very different sizes, follow each other on the transport's thread.
  std::function<void(size_t)> step = [&](size_t i) {
    const size_t n = values.size();
    if (i == 2 * n) {
      std::lock_guard lock(mu);
      finished = true;
      cv.notify_all();
      return;
    }
    const std::string key = fmt::format("mixed-{}", i % n);
    if (i < n) {
      client->PutAsync(key, values[i], [&, i, key](const Status& s) {
        if (!s.ok()) {
          std::lock_guard lock(mu);
          failures.push_back(fmt::format("put {}: {}", key, s.ToString()));
        }
        step(i + 1);
      });
    } else {
      client->GetAsync(key, [&, i, key, want = values[i % n]](const Status& s, std::string_view value) {
        if (!s.ok() || value != want) {
          std::lock_guard lock(mu);
          failures.push_back(
              fmt::format("get {}: {}, {} bytes (want {})", key, s.ToString(), value.size(), want.size()));
        }
        step(i + 1);
      });
    }
  };
  step(0);
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return finished; }));
  EXPECT_TRUE(failures.empty()) << failures.front();
  lock.unlock();
  // And synchronously, from this thread, in the opposite order.
  for (size_t i = values.size(); i-- > 0;) {
    std::string value;
    ASSERT_TRUE(client->Get(fmt::format("mixed-{}", i), &value).ok()) << i;
    EXPECT_EQ(value, values[i]) << i;
  }
}

// Concurrent clients, by server-side and client-side search, on a few keys while meganodes split around them:
// the recorded history must be linearizable (test/linearizability.h).
TEST(Store, HistoriesOnAFewKeysDuringSplitsAreLinearizable) {
  RunningServer server = StartEmbedded("linearizable", {"--workers=2"});
  ASSERT_FALSE(server.ready.empty());
  const auto history = testing::RecordHistoryDuringSplits(
      [&](const char* search) { return OpenClient(server.uris[0], search, "shm"); }, 1000);
  ASSERT_EQ(history.size(), 3000u);
  std::string why;
  EXPECT_TRUE(testing::IsLinearizable(history, &why)) << why;
  auto client = OpenClient(server.uris[0], "server", "tcp");
  ASSERT_NE(client, nullptr);
  auto stats = client->StoreStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_GT(stats->front().meganode_splits, 0u) << "no meganode split while the history was recorded";
}

// Scans longer than one reply (4 MiB or 10,000 pairs) page through `more`, also when a page ends on a key of the
// maximum length, whose successor is not key + "\0".
TEST(Store, ScansPageThroughBigValuesAndLongestKeys) {
  RunningServer server = StartEmbedded("paging");
  ASSERT_FALSE(server.ready.empty());
  auto writer = OpenClient(server.uris[0], "server", "shm");
  ASSERT_NE(writer, nullptr);
  std::vector<std::pair<std::string, std::string>> want;
  for (int i = 0; i < 120; ++i) {
    std::string key = fmt::format("page{:03d}", i);
    key.resize(255, static_cast<char>(i % 2 == 0 ? '\xff' : 'z'));  // maximum length; half end in 0xff bytes
    want.emplace_back(key, std::string(100000, static_cast<char>('a' + i % 26)));
    ASSERT_TRUE(writer->Put(want.back().first, want.back().second).ok());
  }
  for (const char* search : {"server", "client"}) {
    auto client = OpenClient(server.uris[0], search, "shm");
    ASSERT_NE(client, nullptr);
    std::vector<std::pair<std::string, std::string>> got;
    Status s = client->Scan("page", "", 1000, &got);
    ASSERT_TRUE(s.ok()) << search << ": " << s.ToString();
    ASSERT_EQ(got.size(), want.size()) << search;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].first, want[i].first) << search << " " << i;
      ASSERT_EQ(got[i].second, want[i].second) << search << " " << i;
    }
  }
}

TEST(Store, CellctlLoadsGetsPutsDeletesAndScans) {
  RunningServer server = StartEmbedded("cellctl");
  ASSERT_FALSE(server.ready.empty());
  const std::string cluster = "--cluster=" + server.uris[0];
  using testing::Cellctl;
  auto [rc, out] = Cellctl({cluster, "load", "--count=500", "--prefix=item"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("loaded 500 keys item000000..item000499"), std::string::npos) << out;
  for (const char* search : {"--search=server", "--search=client"}) {
    std::tie(rc, out) = Cellctl({cluster, search, "get", "item000123"});
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(out, "value-of-item000123\n");
  }
  std::tie(rc, out) = Cellctl({cluster, "put", "item000123", "changed"});
  EXPECT_EQ(rc, 0) << out;
  std::tie(rc, out) = Cellctl({cluster, "--search=client", "get", "item000123"});
  EXPECT_EQ(out, "changed\n");
  std::tie(rc, out) = Cellctl({cluster, "del", "item000124"});
  EXPECT_EQ(rc, 0) << out;
  std::tie(rc, out) = Cellctl({cluster, "del", "item000124"});
  EXPECT_EQ(rc, 3) << out;
  std::tie(rc, out) = Cellctl({cluster, "get", "item000124"});
  EXPECT_EQ(rc, 3) << out;
  EXPECT_NE(out.find("no key 'item000124'"), std::string::npos) << out;
  std::tie(rc, out) = Cellctl({cluster, "--search=client", "scan", "item000122", "item000126"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "item000122\tvalue-of-item000122\nitem000123\tchanged\nitem000125\tvalue-of-item000125\n3 pair(s)\n");
  std::tie(rc, out) = Cellctl({cluster, "put", std::string(256, 'k'), "v"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("InvalidArgument"), std::string::npos) << out;
}

}  // namespace
}  // namespace cell
