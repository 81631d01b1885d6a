// What every Membership implementation promises (in-memory here; the ZooKeeper implementation joins this suite).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "membership/in_memory_membership.h"
#include "membership/zookeeper_membership.h"
#include "test/child_process.h"
#include "test/membership/zk_harness.h"
#include "test/test_util.h"

namespace cell::membership {
namespace {

using Factory = std::function<std::unique_ptr<Membership>()>;
struct Implementation {
  const char* name;
  Factory make;
  friend void PrintTo(const Implementation& i, std::ostream* os) { *os << i.name; }
};

class MembershipTest : public ::testing::TestWithParam<Implementation> {
 protected:
  void SetUp() override {
    m_ = GetParam().make();
    ASSERT_NE(m_, nullptr);
  }
  std::unique_ptr<Membership> m_;
};

ServerInfo Server(uint64_t id) {
  return ServerInfo{id, {{"tcp", "tcp://127.0.0.1:" + std::to_string(7000 + id)}}, 64ull << 30};
}

TEST_P(MembershipTest, RegisteredServersAreListedUntilTheyLeave) {
  ASSERT_TRUE(m_->RegisterServer(Server(1)).ok());
  ASSERT_TRUE(m_->RegisterServer(Server(2)).ok());
  EXPECT_TRUE(m_->RegisterServer(Server(0)).IsInvalidArgument());
  Status dup = m_->RegisterServer(Server(2));
  EXPECT_EQ(dup.code(), Status::Code::kFailedPrecondition) << dup.ToString();
  auto servers = m_->ListServers();
  ASSERT_TRUE(servers.ok());
  EXPECT_EQ(*servers, (std::vector<ServerInfo>{Server(1), Server(2)}));
  ASSERT_TRUE(m_->UnregisterServer(1).ok());
  EXPECT_TRUE(m_->UnregisterServer(1).IsNotFound());
  servers = m_->ListServers();
  ASSERT_TRUE(servers.ok());
  EXPECT_EQ(*servers, std::vector<ServerInfo>{Server(2)});
  // The fresh question one-sided reads' leases ask.
  for (int i = 0; i < 20; ++i) {
    const auto asked = std::chrono::steady_clock::now();
    auto two = m_->IsRegistered(2), one = m_->IsRegistered(1);
    ASSERT_TRUE(two.ok() && one.ok()) << two.status().ToString() << one.status().ToString();
    EXPECT_TRUE(*two);
    EXPECT_FALSE(*one);
    EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(2)) << "a registration check hung";
  }
}

TEST_P(MembershipTest, ConcurrentAllocationsGetDisjointIds) {
  constexpr int kThreads = 4;
  const int per_thread = 250 * cell::testing::StressScale();
  std::vector<std::vector<uint32_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        auto id = m_->AllocateRegionId();
        if (id.ok()) got[t].push_back(*id);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<uint32_t> all;
  for (const auto& ids : got) {
    EXPECT_EQ(ids.size(), static_cast<size_t>(per_thread));
    for (uint32_t id : ids) {
      EXPECT_NE(id, 0u);
      EXPECT_TRUE(all.insert(id).second) << "region id " << id << " handed out twice";
    }
  }
}

TEST_P(MembershipTest, OwnerChangesAreCompareAndSetOnTheEpoch) {
  auto id = m_->AllocateRegionId();
  ASSERT_TRUE(id.ok());
  auto created = m_->CreateRegion(*id, 1);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(*created, (RegionEntry{*id, 1, 1}));
  EXPECT_EQ(m_->CreateRegion(*id, 2).status().code(), Status::Code::kFailedPrecondition);
  EXPECT_TRUE(m_->CreateRegion(*id + 1000, 2).status().IsInvalidArgument());  // never allocated

  auto moved = m_->ChangeOwner(*id, 1, 2);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, (RegionEntry{*id, 2, 2}));
  // A second server that read epoch 1 too loses the race.
  auto stale = m_->ChangeOwner(*id, 1, 3);
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(stale.status().IsAborted()) << stale.status().ToString();
  auto now = m_->GetRegion(*id);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(*now, (RegionEntry{*id, 2, 2}));
  EXPECT_TRUE(m_->GetRegion(*id + 1000).status().IsNotFound());

  // A takeover names its log directory in the same kind of change; later owner changes keep it.
  auto published = m_->ChangeOwner(*id, 2, 3, 2);
  ASSERT_TRUE(published.ok()) << published.status().ToString();
  EXPECT_EQ(*published, (RegionEntry{*id, 3, 3, 2}));
  auto kept = m_->ChangeOwner(*id, 3, 3);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, (RegionEntry{*id, 3, 4, 2}));
  EXPECT_EQ(*m_->GetRegion(*id), (RegionEntry{*id, 3, 4, 2}));
  EXPECT_EQ(m_->ListRegions()->back(), (RegionEntry{*id, 3, 4, 2}));
  EXPECT_TRUE(m_->ChangeOwner(*id, 3, 4, 9).status().IsAborted()) << "a stale epoch moves no log directory either";
}

TEST_P(MembershipTest, RacingTakeoversHaveExactlyOneWinner) {
  auto id = m_->AllocateRegionId();
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(m_->CreateRegion(*id, 1).ok());
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (uint64_t server = 2; server < 10; ++server) {
    threads.emplace_back([&, server] {
      if (m_->ChangeOwner(*id, 1, server).ok()) winners++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
  auto entry = m_->GetRegion(*id);
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ(entry->epoch, 2u);
}

TEST_P(MembershipTest, TheFirstClaimMakesTheRoot) {
  EXPECT_TRUE(m_->RootRegion().status().IsNotFound());
  auto a = m_->AllocateRegionId();
  auto b = m_->AllocateRegionId();
  ASSERT_TRUE(a.ok() && b.ok());
  // The higher id claims first and wins: the root is whoever claimed first, not the lowest id.
  auto claimed = m_->ClaimRoot(*b);
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  EXPECT_EQ(*claimed, *b);
  claimed = m_->ClaimRoot(*a);
  ASSERT_TRUE(claimed.ok());
  EXPECT_EQ(*claimed, *b);
  auto root = m_->RootRegion();
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(*root, *b);
  EXPECT_TRUE(m_->ClaimRoot(0).status().IsInvalidArgument());
}

// Servers starting together race to claim the root: exactly one claim wins, and every claimant learns which.
TEST_P(MembershipTest, RacingClaimsAgreeOnOneRoot) {
  std::vector<uint32_t> ids;
  for (int i = 0; i < 4; ++i) {
    auto id = m_->AllocateRegionId();
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  std::vector<uint32_t> answers(ids.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&, i] {
      auto r = m_->ClaimRoot(ids[i]);
      answers[i] = r.ok() ? *r : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_NE(answers[0], 0u);
  for (uint32_t a : answers) EXPECT_EQ(a, answers[0]);
  EXPECT_NE(std::find(ids.begin(), ids.end(), answers[0]), ids.end());
}

// Watchers hear of every change (ZooKeeper reports changes that come faster than it re-reads as their end state,
// so the test waits for each before making the next).
TEST_P(MembershipTest, WatchersSeeEachChange) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<MembershipEvent> seen;
  m_->Watch([&](const MembershipEvent& e) {
    std::lock_guard lock(mu);
    seen.push_back(e);
    cv.notify_all();
  });
  auto wait_for = [&](auto predicate) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30),
                       [&] { return std::any_of(seen.begin(), seen.end(), predicate); });
  };
  ASSERT_TRUE(m_->RegisterServer(Server(5)).ok());
  EXPECT_TRUE(wait_for(
      [](const MembershipEvent& e) { return e.kind == MembershipEvent::Kind::kServerJoined && e.server == 5; }));
  auto id = m_->AllocateRegionId();
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(m_->CreateRegion(*id, 5).ok());
  EXPECT_TRUE(wait_for([&](const MembershipEvent& e) { return e.region == RegionEntry{*id, 5, 1}; }));
  ASSERT_TRUE(m_->ChangeOwner(*id, 1, 0).ok());
  EXPECT_TRUE(wait_for([&](const MembershipEvent& e) { return e.region == RegionEntry{*id, 0, 2}; }));
  ASSERT_TRUE(m_->UnregisterServer(5).ok());
  EXPECT_TRUE(
      wait_for([](const MembershipEvent& e) { return e.kind == MembershipEvent::Kind::kServerLeft && e.server == 5; }));
}

std::unique_ptr<Membership> OpenZooKeeper() {
  static std::atomic<int> cluster{0};
  auto& zk = cell::testing::ZooKeeperHarness::Shared();
  if (zk.connect().empty()) {
    ADD_FAILURE() << zk.error();
    return nullptr;
  }
  ZooKeeperOptions options;
  options.connect = zk.connect();
  options.cluster = "test" + std::to_string(cluster++);  // each test its own table
  auto m = ZooKeeperMembership::Open(options);
  if (!m.ok()) {
    ADD_FAILURE() << m.status().ToString();
    return nullptr;
  }
  return std::move(*m);
}

INSTANTIATE_TEST_SUITE_P(All, MembershipTest,
                         ::testing::Values(Implementation{"in_memory",
                                                          [] { return std::make_unique<InMemoryMembership>(); }},
                                           Implementation{"zookeeper", OpenZooKeeper}),
                         [](const auto& info) { return std::string(info.param.name); });

// Several processes (each its own ZooKeeper session) allocating at once never get the same id.
TEST(ZooKeeperMembership, ConcurrentProcessesGetDisjointRegionIds) {
  auto& zk = cell::testing::ZooKeeperHarness::Shared();
  ASSERT_FALSE(zk.connect().empty()) << zk.error();
  constexpr int kProcesses = 3, kEach = 200;
  std::vector<FILE*> pipes;
  for (int p = 0; p < kProcesses; ++p) {
    const std::string command =
        std::string(CELL_ALLOCATE_IDS) + " " + zk.connect() + " multiprocess " + std::to_string(kEach);
    pipes.push_back(popen(command.c_str(), "r"));
    ASSERT_NE(pipes.back(), nullptr);
  }
  std::set<uint32_t> all;
  size_t total = 0;
  for (FILE* pipe : pipes) {
    unsigned id = 0;
    while (std::fscanf(pipe, "%u", &id) == 1) {
      ++total;
      EXPECT_TRUE(all.insert(id).second) << "region id " << id << " handed to two processes";
    }
    EXPECT_EQ(pclose(pipe), 0);
  }
  EXPECT_EQ(total, static_cast<size_t>(kProcesses * kEach));
}

// A server stopped (SIGSTOP) past its session timeout loses its registration; watchers hear it; resumed, it refuses
// to serve at once (it cannot have heard of its own expiry yet) and serves again only after registering anew.
TEST(ZooKeeperMembership, AnExpiredServerIsFencedUntilItRegistersAgain) {
  auto& zk = cell::testing::ZooKeeperHarness::Shared();
  ASSERT_FALSE(zk.connect().empty()) << zk.error();
  ZooKeeperOptions options;
  options.connect = zk.connect();
  options.cluster = "fencing";
  auto observer = ZooKeeperMembership::Open(options);
  ASSERT_TRUE(observer.ok()) << observer.status().ToString();
  std::mutex mu;
  std::condition_variable cv;
  int joined = 0, left = 0;
  (*observer)->Watch([&](const MembershipEvent& e) {
    std::lock_guard lock(mu);
    if (e.server == 42 && e.kind == MembershipEvent::Kind::kServerJoined) joined++;
    if (e.server == 42 && e.kind == MembershipEvent::Kind::kServerLeft) left++;
    cv.notify_all();
  });

  cell::testing::ChildProcess server({CELL_FENCED_SERVER, zk.connect(), "fencing", "42"});
  ASSERT_TRUE(server.ok());
  auto next_line = [&] { return server.ReadLine(std::chrono::seconds(30)).value_or("EOF"); };
  std::string line;
  do line = next_line();
  while (line != "serving" && line != "EOF");
  ASSERT_EQ(line, "serving");
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return joined >= 1; }));
  }

  ASSERT_EQ(kill(server.pid(), SIGSTOP), 0);
  {
    std::unique_lock lock(mu);  // the ensemble expires the session and deletes the ephemeral node
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return left >= 1; }));
  }
  server.DrainOutput();  // what it printed before it stopped is stale (it prints nothing while stopped)
  ASSERT_EQ(kill(server.pid(), SIGCONT), 0);
  line = next_line();
  EXPECT_EQ(line.rfind("fenced", 0), 0u) << "first report after resuming: " << line;
  // What it reported until it served again (or for 60 s, or until it fell silent for 30 s or exited): each kind of
  // report once (its numbers as N), with its count, for the failure message (a line starting "renewing" says what
  // renewing the session or registering returned).
  std::map<std::string, int> reports;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  do {
    line = next_line();
    std::string kind;
    for (const char c : line.substr(0, 200)) {
      if (!std::isdigit(static_cast<unsigned char>(c))) {
        kind += c;
      } else if (kind.empty() || kind.back() != 'N') {
        kind += 'N';
      }
    }
    ++reports[kind];
  } while (line != "serving" && line != "EOF" && std::chrono::steady_clock::now() < deadline);
  std::string seen;
  for (const auto& [report, count] : reports) seen += fmt::format("\n  {} x {}", count, report);
  EXPECT_EQ(line, "serving") << "after resuming it reported:" << seen;  // after renewing and registering again
  std::unique_lock lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return joined >= 2; })) << "it reported:" << seen;
}

// A client that rides out ZooKeeper outages of up to 30 s.
StatusOr<std::unique_ptr<ZooKeeperMembership>> OpenPatient(const std::string& connect) {
  ZooKeeperOptions options;
  options.connect = connect;
  options.operation_timeout = std::chrono::seconds(30);
  return ZooKeeperMembership::Open(options);
}

// ZooKeeper restarts under a client: its calls retry through the outage and the table is intact afterwards.
TEST(ZooKeeperMembership, ClientsCarryOnAcrossAZooKeeperRestart) {
  cell::testing::ZooKeeperHarness zk(1);
  ASSERT_FALSE(zk.connect().empty()) << zk.error();
  auto m = OpenPatient(zk.connect());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto id = (*m)->AllocateRegionId();
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE((*m)->CreateRegion(*id, 1).ok());
  ASSERT_TRUE(zk.StopNode(1, /*kill=*/false));
  ASSERT_TRUE(zk.RestartNode(1));
  auto moved = (*m)->ChangeOwner(*id, 1, 2);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  auto entry = (*m)->GetRegion(*id);
  ASSERT_TRUE(entry.ok()) << entry.status().ToString();
  EXPECT_EQ(*entry, (RegionEntry{*id, 2, 2}));
}

// A 3-node ensemble loses its leader (a crash) and keeps serving reads and compare-and-set writes.
TEST(ZooKeeperMembership, AThreeNodeEnsembleSurvivesLosingItsLeader) {
  cell::testing::ZooKeeperHarness zk(3);
  ASSERT_FALSE(zk.connect().empty()) << zk.error();
  auto m = OpenPatient(zk.connect());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto id = (*m)->AllocateRegionId();
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE((*m)->CreateRegion(*id, 1).ok());
  const int leader = zk.Leader();
  ASSERT_GE(leader, 1);
  ASSERT_TRUE(zk.StopNode(leader, /*kill=*/true));
  auto moved = (*m)->ChangeOwner(*id, 1, 2);
  ASSERT_TRUE(moved.ok()) << "with the leader (node " << leader << ") down: " << moved.status().ToString();
  auto regions = (*m)->ListRegions();
  ASSERT_TRUE(regions.ok()) << regions.status().ToString();
  EXPECT_EQ(*regions, (std::vector<RegionEntry>{{*id, 2, 2}}));
  auto fresh = (*m)->AllocateRegionId();
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_GT(*fresh, *id);
}

// With --zk-auth, only the cluster's identity can change the table; anyone can read it.
TEST(ZooKeeperMembership, OnlyTheClustersIdentityCanChangeTheTable) {
  auto& zk = cell::testing::ZooKeeperHarness::Shared();
  ASSERT_FALSE(zk.connect().empty()) << zk.error();
  auto open = [&](const std::string& auth) {
    ZooKeeperOptions options;
    options.connect = zk.connect();
    options.cluster = "secured";
    options.auth = auth;
    return ZooKeeperMembership::Open(options);
  };
  auto owner = open("cell:secret");
  ASSERT_TRUE(owner.ok()) << owner.status().ToString();
  auto id = (*owner)->AllocateRegionId();
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_TRUE((*owner)->CreateRegion(*id, 1).ok());
  for (const char* other_auth : {"", "cell:wrong", "intruder:secret"}) {
    auto other = open(other_auth);
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    auto read = (*other)->GetRegion(*id);
    ASSERT_TRUE(read.ok()) << read.status().ToString();  // reading is open
    EXPECT_EQ(*read, (RegionEntry{*id, 1, 1}));
    for (const Status& s : {(*other)->ChangeOwner(*id, 1, 9).status(), (*other)->AllocateRegionId().status(),
                            (*other)->RegisterServer(Server(9))}) {
      EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << "auth '" << other_auth << "': " << s.ToString();
      EXPECT_NE(s.message().find("--zk-auth"), std::string::npos) << s.ToString();
    }
  }
  auto moved = (*owner)->ChangeOwner(*id, 1, 2);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  auto bad = open("no-colon");
  EXPECT_TRUE(bad.status().IsInvalidArgument()) << bad.status().ToString();
}

// An entry someone else wrote badly into ZooKeeper is reported, naming its znode, and never used.
TEST(ZooKeeperMembership, AMalformedZnodeInZooKeeperIsRefused) {
  auto& zk = cell::testing::ZooKeeperHarness::Shared();
  ASSERT_FALSE(zk.connect().empty()) << zk.error();
  ZooKeeperOptions options;
  options.connect = zk.connect();
  options.cluster = "vandalised";
  auto m = ZooKeeperMembership::Open(options);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto id = (*m)->AllocateRegionId();
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE((*m)->CreateRegion(*id, 1).ok());
  const std::string path = fmt::format("/cell/vandalised/regions/{:08d}", *id);
  const std::string command = std::string(CELL_SOURCE_DIR) + "/deploy/zookeeper/zk-cli.sh -server " + zk.connect() +
                              " set " + path + " owner=banana >/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0);
  auto entry = (*m)->GetRegion(*id);
  ASSERT_FALSE(entry.ok());
  EXPECT_TRUE(entry.status().IsCorruption()) << entry.status().ToString();
  EXPECT_NE(entry.status().message().find(path), std::string::npos) << entry.status().ToString();
  EXPECT_TRUE((*m)->ListRegions().status().IsCorruption());
  EXPECT_TRUE((*m)->ChangeOwner(*id, 1, 2).status().IsCorruption());
}

TEST(ZooKeeperMembership, MalformedEntriesAreReportedNotTrusted) {
  for (const char* bad : {"", "owner=7\n", "epoch=3\n", "owner=x\nepoch=1\n", "owner=1\nepoch=0\n", "garbage",
                          "owner=1\nepoch=2\nlog_epoch=x\n", "owner=1\nepoch=2\nlog_epoch=0\n"}) {
    auto r = ZooKeeperMembership::ParseRegion(4, bad, "/cell/default/regions/00000004");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
    EXPECT_NE(r.status().message().find("/cell/default/regions/00000004"), std::string::npos);
  }
  auto good = ZooKeeperMembership::ParseRegion(4, "owner=7\nepoch=3\n", "p");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, (RegionEntry{4, 7, 3}));
  good = ZooKeeperMembership::ParseRegion(4, "owner=7\nepoch=3\nlog_epoch=2\n", "p");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, (RegionEntry{4, 7, 3, 2}));
  EXPECT_FALSE(ZooKeeperMembership::ParseServer(3, "tcp=tcp://h:1\n", "p").ok());  // no capacity
  auto server = ZooKeeperMembership::ParseServer(3, "capacity=10\ntcp=tcp://h:1\n", "p");
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(server->addresses.at("tcp"), "tcp://h:1");
}

}  // namespace
}  // namespace cell::membership
