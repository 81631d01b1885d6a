// cell-server as users run it: real processes on loopback, embedded membership or a real ZooKeeper, read by clients
// through the region table (client/remote_table.h), the client's region cache and cellctl.
#include "server/cell_server.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "cell/client.h"
#include "client/region_cache.h"
#include "client/remote_table.h"
#include "membership/zookeeper_membership.h"
#include "rpc/proto/store.pb.h"
#include "test/child_process.h"
#include "test/membership/zk_harness.h"
#include "test/server/server_harness.h"

namespace cell::server {
namespace {

using testing::Cellctl;
using testing::ChildProcess;
using testing::RunningServer;
using testing::ShmPath;
using testing::StartServer;
using namespace std::chrono_literals;

TEST(EmbeddedServer, ServesItsTableToClientsOverEachTransport) {
  const std::string shm = ShmPath("table");
  // The sizes given: the defaults depend on the machine (README "Capacity"; StoreSizes tests them).
  RunningServer server =
      StartServer({"--listen=tcp://127.0.0.1:0", "--listen=shm://" + shm, "--meganodes=16", "--region-size=1GiB"});
  ASSERT_FALSE(server.ready.empty());
  EXPECT_EQ(server.ready, "ready server=1 membership=embedded");
  ASSERT_EQ(server.uris.size(), 2u);
  for (const std::string& uri : server.uris) {
    auto table = client::OpenRegionTable(uri);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    auto servers = (*table)->ListServers();
    ASSERT_TRUE(servers.ok()) << uri << ": " << servers.status().ToString();
    ASSERT_EQ(servers->size(), 1u);
    EXPECT_EQ(servers->front().id, 1u);
    EXPECT_EQ(servers->front().addresses.at("tcp"), server.uris[0]);
    EXPECT_EQ(servers->front().addresses.at("shm"), server.uris[1]);
    auto regions = (*table)->ListRegions();
    ASSERT_TRUE(regions.ok());
    ASSERT_EQ(regions->size(), 2u);  // the server's node region (the root: the first server's) and extent region
    EXPECT_EQ(regions->front().owner, 1u);
    EXPECT_EQ(regions->front().epoch, 1u);
    auto root = (*table)->RootRegion();
    ASSERT_TRUE(root.ok());
    EXPECT_EQ(*root, regions->front().region);
    auto entry = (*table)->GetRegion(*root);
    ASSERT_TRUE(entry.ok());
    EXPECT_EQ(*entry, regions->front());
    EXPECT_TRUE((*table)->GetRegion(*root + 1000).status().IsNotFound());
  }
  auto [rc, out] = Cellctl({"--cluster=" + server.uris[0], "regions"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("root"), std::string::npos) << out;
  std::tie(rc, out) = Cellctl({"--cluster=" + server.uris[1], "servers"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(server.uris[0]), std::string::npos) << out;
  EXPECT_NE(out.find("1 live server"), std::string::npos) << out;
  // Capacity per server: one meganode of the 16 x 64 MiB in use, the 1 GiB of record memory all free.
  std::tie(rc, out) = Cellctl({"--cluster=" + server.uris[0], "stats"});
  EXPECT_EQ(rc, 0) << out;
  for (const char* column : {"NODES USED", "NODES FREE", "RECORDS", "RECORDS FREE"}) {
    EXPECT_NE(out.find(column), std::string::npos) << column << " missing: " << out;
  }
  EXPECT_NE(out.find("64.0 MiB     960.0 MiB    0 B          1.0 GiB"), std::string::npos) << out;
}

TEST(EmbeddedServer, ClientsSeeItGoAndComeBack) {
  RunningServer server = StartServer({"--listen=tcp://127.0.0.1:0"});
  ASSERT_EQ(server.uris.size(), 1u);
  client::TableOptions options;
  options.rpc.connect_timeout = 2000ms;
  options.rpc.call_timeout = 2000ms;
  auto table = client::OpenRegionTable(server.uris[0], options);
  ASSERT_TRUE(table.ok());
  client::RegionCache cache(table->get());
  auto root = (*table)->RootRegion();
  ASSERT_TRUE(root.ok());
  ASSERT_TRUE(cache.Lookup(*root).ok());

  server.process->Kill();
  const auto before = std::chrono::steady_clock::now();
  Status gone = (*table)->ListServers().status();
  EXPECT_TRUE(gone.IsUnavailable()) << gone.ToString();
  EXPECT_NE(gone.message().find(server.uris[0]), std::string::npos) << gone.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 5s);
  cache.OnServerUnreachable(1);
  EXPECT_TRUE(cache.Lookup(*root).status().IsUnavailable());

  // The same address again: the table reconnects by itself, and the cache finds the region.
  RunningServer again = StartServer({"--listen=" + server.uris[0]});
  ASSERT_FALSE(again.ready.empty());
  auto route = cache.Lookup(*root);
  ASSERT_TRUE(route.ok()) << route.status().ToString();
  EXPECT_EQ(route->owner().addresses.at("tcp"), server.uris[0]);
}

// A thread's client-side searches in place remember their connection's mappings (client/read_router.h): a
// server restarted at the same addresses is reached by a new connection with mappings of its own, and the client's
// gets read those (the new server's values), never the old connection's, which it unmapped as it dropped it.
TEST(EmbeddedServer, ClientSideSearchesInPlaceReadARestartedServersNewMemory) {
  const std::vector<std::string> sizes = {"--meganodes=4", "--region-size=256MiB"};
  std::vector<std::string> args = {"--listen=tcp://127.0.0.1:0", "--listen=shm://" + ShmPath("restart-in-place")};
  args.insert(args.end(), sizes.begin(), sizes.end());
  RunningServer server = StartServer(args);
  ASSERT_FALSE(server.ready.empty());
  ASSERT_EQ(server.uris.size(), 2u);
  ClientOptions options;
  options.cluster = server.uris[0];
  options.search = "client";
  options.timeout = 20s;
  auto client = Client::Open(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  constexpr int kKeys = 200;
  const auto key = [](int i) { return fmt::format("key-{:04}", i); };
  const auto check = [&](const char* generation) {
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < kKeys; ++i) {
        std::string value;
        const Status s = (*client)->Get(key(i), &value);
        ASSERT_TRUE(s.ok()) << key(i) << ": " << s.ToString();
        ASSERT_EQ(value, fmt::format("{}-{}", generation, i)) << key(i);
      }
    }
  };
  for (int i = 0; i < kKeys; ++i) ASSERT_TRUE((*client)->Put(key(i), fmt::format("first-{}", i)).ok());
  check("first");
  const uint64_t in_place = (*client)->stats().in_place_searches;
  EXPECT_GE(in_place, 3u * kKeys) << "the gets did not search in place (shm)";

  server.process->Kill();
  // A new, empty server at the same addresses (embedded, not logged): every key is written again, differently.
  std::vector<std::string> again_args = {"--listen=" + server.uris[0], "--listen=" + server.uris[1]};
  again_args.insert(again_args.end(), sizes.begin(), sizes.end());
  RunningServer again = StartServer(again_args);
  ASSERT_FALSE(again.ready.empty());
  for (int i = 0; i < kKeys; ++i) {
    const Status s = (*client)->Put(key(i), fmt::format("second-{}", i));
    ASSERT_TRUE(s.ok()) << key(i) << ": " << s.ToString();
  }
  check("second");
  EXPECT_GE((*client)->stats().in_place_searches, in_place + 3u * kKeys)
      << "the restarted server was not read in place";
}

TEST(EmbeddedServer, BadFlagsAndBadClusterUrisGiveClearErrors) {
  {
    ChildProcess p({CELL_SERVER_BINARY, "--membership=etcd://x"}, true);
    const std::string out = p.ReadAll(30s);
    EXPECT_EQ(p.Wait(), 1) << out;
    EXPECT_NE(out.find("--membership must be 'embedded' or zk://"), std::string::npos) << out;
  }
  {
    ChildProcess p({CELL_SERVER_BINARY, "--membership=zk://127.0.0.1:1/cell/x"}, true);
    const std::string out = p.ReadAll(30s);
    EXPECT_EQ(p.Wait(), 1) << out;
    EXPECT_NE(out.find("--id is required"), std::string::npos) << out;
  }
  {
    ChildProcess p({CELL_SERVER_BINARY, "--listen=tcp://127.0.0.1:0", "--listen=tcp://127.0.0.1:0"}, true);
    const std::string out = p.ReadAll(30s);
    EXPECT_EQ(p.Wait(), 1) << out;
    EXPECT_NE(out.find("two tcp URIs"), std::string::npos) << out;
  }
  {
    ChildProcess p({CELL_SERVER_BINARY, "--listen=shm://" + testing::ShmPath("bad-nic"), "--nic-model=bogus=1"}, true);
    const std::string out = p.ReadAll(30s);
    EXPECT_EQ(p.Wait(), 1) << out;
    EXPECT_NE(out.find("unknown NIC model parameter 'bogus'"), std::string::npos) << out;
  }
  auto [rc, out] = Cellctl({"--cluster=redis://x", "regions"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("not a cluster URI"), std::string::npos) << out;
  std::tie(rc, out) = Cellctl({"--cluster=tcp://127.0.0.1:1", "--timeout-ms=2000", "servers"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("Unavailable"), std::string::npos) << out;
  std::tie(rc, out) = Cellctl({"regions"});
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--cluster is required"), std::string::npos) << out;
}

// Membership events, waited for with a deadline.
class EventLog {
 public:
  void Add(const membership::MembershipEvent& e) {
    std::lock_guard lock(mu_);
    events_.push_back(e);
    cv_.notify_all();
  }
  bool WaitFor(membership::MembershipEvent::Kind kind, uint64_t server, std::chrono::seconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      for (size_t i = next_; i < events_.size(); ++i) {
        if (events_[i].kind == kind && events_[i].server == server) {
          next_ = i + 1;
          return true;
        }
      }
      return false;
    });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<membership::MembershipEvent> events_;
  size_t next_ = 0;
};

class ZooKeeperServers : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& zk = testing::ZooKeeperHarness::Shared();
    ASSERT_FALSE(zk.connect().empty()) << zk.error();
    cluster_ = fmt::format("zk://{}/cell/{}-{}", zk.connect(),
                           ::testing::UnitTest::GetInstance()->current_test_info()->name(), getpid());
    auto options = membership::ParseZooKeeperUri(cluster_);
    ASSERT_TRUE(options.ok());
    auto observer = membership::ZooKeeperMembership::Open(*options);
    ASSERT_TRUE(observer.ok()) << observer.status().ToString();
    observer_ = std::move(*observer);
    observer_->Watch([this](const membership::MembershipEvent& e) { events_.Add(e); });
  }
  RunningServer Start(uint64_t id) {
    return StartServer({"--listen=tcp://127.0.0.1:0", "--membership=" + cluster_, fmt::format("--id={}", id),
                        "--zk-session-timeout-ms=2000"});
  }
  std::string cluster_;
  EventLog events_;  // before observer_: it must outlive the watcher that observer_'s thread calls
  std::unique_ptr<membership::ZooKeeperMembership> observer_;
};

TEST_F(ZooKeeperServers, ServersShareTheTableAndADeadOnesRegionsAreFoundAgainAfterTakeover) {
  RunningServer one = Start(1);
  ASSERT_FALSE(one.ready.empty());
  RunningServer two = Start(2);
  ASSERT_FALSE(two.ready.empty());
  ASSERT_TRUE(events_.WaitFor(membership::MembershipEvent::Kind::kServerJoined, 2, 20s));

  client::TableOptions options;
  auto table = client::OpenRegionTable(cluster_, options);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  auto servers = (*table)->ListServers();
  ASSERT_TRUE(servers.ok());
  ASSERT_EQ(servers->size(), 2u);
  EXPECT_EQ(servers->at(0).addresses.at("tcp"), one.uris[0]);
  EXPECT_EQ(servers->at(1).addresses.at("tcp"), two.uris[0]);
  auto regions = (*table)->ListRegions();
  ASSERT_TRUE(regions.ok());
  ASSERT_EQ(regions->size(), 4u);  // a node region and an extent region each
  const membership::RegionEntry root = regions->front();
  EXPECT_EQ(root.owner, 1u);  // the first server's node region
  EXPECT_EQ(regions->at(2).owner, 2u);

  auto [rc, out] = Cellctl({"--cluster=" + cluster_, "regions"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("root"), std::string::npos) << out;
  // A ZooKeeper cluster's servers keep no table of their own: asking one says where to look.
  std::tie(rc, out) = Cellctl({"--cluster=" + one.uris[0], "regions"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("in ZooKeeper"), std::string::npos) << out;

  client::RegionCache cache(table->get());
  ASSERT_EQ(cache.Lookup(root.region)->entry.owner, 1u);
  one.process->Kill();
  ASSERT_TRUE(events_.WaitFor(membership::MembershipEvent::Kind::kServerLeft, 1, 30s));
  // The client finds out when its connection fails; until a survivor takes the region over, it is unavailable.
  cache.OnServerUnreachable(1);
  Status s = cache.Lookup(root.region).status();
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  auto taken = observer_->ChangeOwner(root.region, root.epoch, 2);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  auto route = cache.Lookup(root.region);
  ASSERT_TRUE(route.ok()) << route.status().ToString();
  EXPECT_EQ(route->entry.owner, 2u);
  EXPECT_EQ(route->entry.epoch, root.epoch + 1);
  EXPECT_EQ(route->owner().addresses.at("tcp"), two.uris[0]);
}

TEST_F(ZooKeeperServers, AServerStoppedPastItsSessionRegistersAgainWhenItResumes) {
  RunningServer server = Start(7);
  ASSERT_FALSE(server.ready.empty());
  ASSERT_TRUE(events_.WaitFor(membership::MembershipEvent::Kind::kServerJoined, 7, 20s));
  auto root = observer_->RootRegion();
  ASSERT_TRUE(root.ok());
  auto before = observer_->GetRegion(*root);
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(kill(server.process->pid(), SIGSTOP), 0);
  // ZooKeeper expires its session (2 s) and drops its ephemeral node.
  const bool left = events_.WaitFor(membership::MembershipEvent::Kind::kServerLeft, 7, 30s);
  ASSERT_EQ(kill(server.process->pid(), SIGCONT), 0);
  ASSERT_TRUE(left);
  // Resumed, it learns that it was fenced, starts a new session and registers again.
  ASSERT_TRUE(events_.WaitFor(membership::MembershipEvent::Kind::kServerJoined, 7, 30s));
  auto servers = observer_->ListServers();
  ASSERT_TRUE(servers.ok());
  ASSERT_EQ(servers->size(), 1u);
  EXPECT_EQ(servers->front().addresses.at("tcp"), server.uris[0]);
  // Before it serves again it claims its region again at a new epoch (so that a survivor that saw it gone and is
  // about to take the region over, at the epoch it read, fails), and then it serves it.
  ClientOptions options;
  options.cluster = cluster_;
  options.timeout = 20s;
  auto client = Client::Open(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE((*client)->Put("k", "after").ok());
  auto after = observer_->GetRegion(*root);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->owner, 7u);
  EXPECT_EQ(after->epoch, before->epoch + 1) << "the resumed server did not claim its region again";
}

// The acknowledgement rule (docs/DESIGN.md, "Ownership"): a put reaches a server that is paused (SIGSTOP) past its
// session; meanwhile its region is given to another server in the table, as a survivor's takeover does. Resumed, the
// server must not acknowledge that put: its lease lapsed while it was stopped, whatever its request path's cached
// flag still says. (Before the rule, the put was acknowledged in about one run of three.)
TEST_F(ZooKeeperServers, AServerPausedPastItsSessionAcknowledgesNoWriteItHadUnderWay) {
  RunningServer server = Start(7);
  ASSERT_FALSE(server.ready.empty());
  ASSERT_TRUE(events_.WaitFor(membership::MembershipEvent::Kind::kServerJoined, 7, 20s));
  ClientOptions options;
  options.cluster = cluster_;
  options.timeout = 15s;
  auto client = Client::Open(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE((*client)->Put("k", "before").ok());
  auto root = observer_->RootRegion();
  ASSERT_TRUE(root.ok());
  auto entry = observer_->GetRegion(*root);
  ASSERT_TRUE(entry.ok());

  ASSERT_EQ(kill(server.process->pid(), SIGSTOP), 0);
  // The put must reach a stopped server (a loaded machine may take a while to stop every thread): each of the
  // process's threads is seen in state T first.
  const auto all_stopped = [pid = server.process->pid()] {
    std::error_code error;
    int threads = 0;
    for (const auto& task : std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid), error)) {
      std::ifstream stat(task.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const size_t close = line.rfind(')');
      if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'T') return false;
      ++threads;
    }
    return !error && threads > 0;
  };
  const auto stop_deadline = std::chrono::steady_clock::now() + 10s;
  while (!all_stopped() && std::chrono::steady_clock::now() < stop_deadline) {
    std::this_thread::sleep_for(1ms);  // polling /proc for the stop to take effect
  }
  ASSERT_TRUE(all_stopped()) << "the server's threads did not all stop";
  Status during = Status::Internal("not done");
  std::thread put([&] { during = (*client)->Put("k", "during"); });  // waits in the stopped server's socket
  const bool left = events_.WaitFor(membership::MembershipEvent::Kind::kServerLeft, 7, 30s);  // session expired
  const auto taken = observer_->ChangeOwner(*root, entry->epoch, 99);                         // a survivor's takeover
  ASSERT_EQ(kill(server.process->pid(), SIGCONT), 0);
  put.join();
  ASSERT_TRUE(left);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_FALSE(during.ok()) << "the resumed server acknowledged a write after its region had been given to another";
  EXPECT_TRUE(during.IsUnavailable() || during.IsDeadlineExceeded()) << during.ToString();
}

TEST_F(ZooKeeperServers, ASecondServerWithATakenIdIsRefusedAndTheFirstStays) {
  RunningServer first = Start(3);
  ASSERT_FALSE(first.ready.empty());
  ASSERT_TRUE(events_.WaitFor(membership::MembershipEvent::Kind::kServerJoined, 3, 20s));
  {
    ChildProcess p({CELL_SERVER_BINARY, "--listen=tcp://127.0.0.1:0", "--membership=" + cluster_, "--id=3"}, true);
    const std::string out = p.ReadAll(60s);
    EXPECT_EQ(p.Wait(), 1) << out;
    EXPECT_NE(out.find("FailedPrecondition"), std::string::npos) << out;
  }
  {
    // The same mistake with a port already taken fails earlier, at --listen; it must not unregister the first either.
    ChildProcess p({CELL_SERVER_BINARY, "--listen=" + first.uris[0], "--membership=" + cluster_, "--id=3"}, true);
    const std::string out = p.ReadAll(60s);
    EXPECT_EQ(p.Wait(), 1) << out;
    EXPECT_NE(out.find("--listen=" + first.uris[0]), std::string::npos) << out;
  }
  // The refused processes have exited; server 3 is still the first one, and never left.
  auto servers = observer_->ListServers();
  ASSERT_TRUE(servers.ok());
  ASSERT_EQ(servers->size(), 1u);
  EXPECT_EQ(servers->front().addresses.at("tcp"), first.uris[0]);
  EXPECT_FALSE(events_.WaitFor(membership::MembershipEvent::Kind::kServerLeft, 3, 0s));
}

TEST_F(ZooKeeperServers, ACleanStopUnregistersWithoutWaitingForTheSessionToEnd) {
  // In this process, so that the server's ZooKeeper session outlives Stop(): the registration must go because Stop
  // removed it, not because the session closed.
  ServerConfig config;
  config.id = 4;
  config.listen = {"tcp://127.0.0.1:0"};
  config.membership = cluster_;
  auto server = CellServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE(events_.WaitFor(membership::MembershipEvent::Kind::kServerJoined, 4, 20s));
  EXPECT_TRUE((*server)->serving());
  (*server)->Stop();
  EXPECT_FALSE((*server)->serving());
  auto servers = observer_->ListServers();
  ASSERT_TRUE(servers.ok());
  EXPECT_TRUE(servers->empty());
  // The process form: SIGTERM, exit 0.
  RunningServer process = Start(5);
  ASSERT_FALSE(process.ready.empty());
  ASSERT_EQ(kill(process.process->pid(), SIGTERM), 0);
  EXPECT_EQ(process.process->Wait(), 0);
}

// A MEGA_CREATE whose reply is lost (here every one of server 1's: its peer made the sealed meganode, the splitter
// never hears which): the splitter abandons it by the create's token, so the peer's meganode count returns to what it
// was, and splits locally instead. Two servers in this process, so that the test can lose the replies and count.
TEST_F(ZooKeeperServers, ALostMegaCreateReplyLeavesNoMeganodeOnThePeer) {
  const auto config = [&](uint64_t id) {
    ServerConfig c;
    c.id = id;
    c.listen = {"tcp://127.0.0.1:0"};
    c.membership = cluster_;
    c.store.meganode_bytes = 16 << 10;  // many splits after a few thousand keys
    c.store.meganodes = 4096;
    c.store.extent_region_bytes = uint64_t{64} << 20;
    return c;
  };
  auto one = CellServer::Start(config(11));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  auto two = CellServer::Start(config(12));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  ASSERT_TRUE(events_.WaitFor(membership::MembershipEvent::Kind::kServerJoined, 12, 20s));
  const size_t before = (*two)->store().meganodes_in_use();
  std::atomic<int> lost{0};
  (*one)->store().set_peer_reply_fault([&](uint16_t method) {
    if (method != cell::proto::MEGA_CREATE) return Status::OK();
    lost.fetch_add(1);
    return Status::DeadlineExceeded("test: the MEGA_CREATE reply was lost");
  });
  ClientOptions options;
  options.cluster = cluster_;
  auto client = Client::Open(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  int stored = 0;
  for (; stored < 20000 && lost.load() < 3; ++stored) {
    ASSERT_TRUE((*client)->Put(fmt::format("lost{:06}", stored), "value").ok()) << stored;
  }
  ASSERT_GE(lost.load(), 3) << "server 11 placed no meganode remotely in " << stored << " puts";
  // (The last split may still be abandoning its create: server 11's background splits run beside the puts.)
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while ((*two)->store().meganodes_in_use() != before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);  // polling for the abandon to land
  }
  EXPECT_EQ((*two)->store().meganodes_in_use(), before) << lost.load() << " lost creates left meganodes behind";
  // Every key stored is there, once, in order (the local splits that replaced the remote ones lost nothing).
  // (CheckInvariants would need the background splits stopped.)
  std::vector<std::pair<std::string, std::string>> pairs;
  ASSERT_TRUE((*client)->Scan("lost", "lost~", 100000, &pairs).ok());
  ASSERT_EQ(pairs.size(), static_cast<size_t>(stored));
  for (int i = 0; i < stored; ++i) ASSERT_EQ(pairs[i].first, fmt::format("lost{:06}", i));
  // Replies that arrive again: the next remote split places its right half there.
  (*one)->store().set_peer_reply_fault(nullptr);
  for (int i = 0; i < 20000 && (*two)->store().meganodes_in_use() == before; ++i) {
    ASSERT_TRUE((*client)->Put(fmt::format("found{:06}", i), "value").ok()) << i;
  }
  EXPECT_GT((*two)->store().meganodes_in_use(), before);
}

TEST_F(ZooKeeperServers, AClientOfAMistypedClusterGetsNotFoundAndCreatesNothing) {
  RunningServer server = Start(6);
  ASSERT_FALSE(server.ready.empty());
  auto& zk = testing::ZooKeeperHarness::Shared();
  const std::string typo = fmt::format("zk://{}/cell/no-such-cluster-{}", zk.connect(), getpid());
  auto [rc, out] = Cellctl({"--cluster=" + typo, "regions"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("NotFound"), std::string::npos) << out;
  EXPECT_NE(out.find("no Cell cluster"), std::string::npos) << out;
  // Still not there: the client created nothing.
  std::tie(rc, out) = Cellctl({"--cluster=" + typo, "servers"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("no Cell cluster"), std::string::npos) << out;
}

// Client::Regions marks the region the table names as root, not the lowest id: here a region made before the first
// server (as by another server starting at the same time) has a lower id than the root the server claims.
TEST_F(ZooKeeperServers, RegionsMarksTheRootTheTableNamesNotTheLowestId) {
  auto early = observer_->AllocateRegionId();
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  ASSERT_TRUE(observer_->CreateRegion(*early, 99).ok());
  RunningServer server = Start(4);
  ASSERT_FALSE(server.ready.empty());
  auto root = observer_->RootRegion();
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  ASSERT_GT(*root, *early);
  ClientOptions options;
  options.cluster = cluster_;
  auto client = Client::Open(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto regions = (*client)->Regions();
  ASSERT_TRUE(regions.ok()) << regions.status().ToString();
  size_t roots = 0;
  for (const RegionDescription& r : *regions) {
    if (r.root) ++roots;
    EXPECT_EQ(r.root, r.id == *root) << "region " << r.id;
  }
  EXPECT_EQ(roots, 1u);
}

}  // namespace
}  // namespace cell::server
