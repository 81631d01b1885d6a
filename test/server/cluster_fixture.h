// A cluster of real cell-server processes sharing the test binary's real ZooKeeper, for tests of the client API
// against real servers: each server listens on tcp and shm, with meganodes small enough (16 KiB by default) that a
// few thousand keys split them over every server.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cell/client.h"
#include "test/membership/zk_harness.h"
#include "test/server/server_harness.h"

namespace cell::testing {

class ClusterFixture : public ::testing::Test {
 protected:
  // Starts `servers` servers named after the running test; `extra` arguments go to each.
  void StartCluster(int servers = 3, const std::vector<std::string>& extra = {"--meganode-size=16KiB"}) {
    auto& zk = ZooKeeperHarness::Shared();
    ASSERT_FALSE(zk.connect().empty()) << zk.error();
    name_ = fmt::format("{}-{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), getpid());
    for (char& c : name_) c = (c == '/') ? '-' : c;  // parameterized tests' names
    cluster_ = fmt::format("zk://{}/cell/{}", zk.connect(), name_);
    // Unix socket paths are at most 107 bytes: a test's name stands in them as a hash.
    const std::string short_name = fmt::format("c{:x}", std::hash<std::string>{}(name_)&0xffffffff);
    std::vector<std::thread> starting;
    servers_.resize(servers);
    for (int i = 0; i < servers; ++i) {
      starting.emplace_back([this, i, &extra, &short_name] {
        std::vector<std::string> args = {"--listen=tcp://127.0.0.1:0",
                                         "--listen=shm://" + ShmPath(fmt::format("{}-{}", short_name, i + 1)),
                                         "--membership=" + cluster_,
                                         fmt::format("--id={}", i + 1),
                                         "--workers=2",
                                         "--region-size=64MiB",
                                         "--meganodes=4096"};
        for (const std::string& a : extra) args.push_back(a);
        for (const std::string& a : ServerKeyArgs()) args.push_back(a);
        servers_[i] = StartServer(args);
      });
    }
    for (auto& t : starting) t.join();
    for (const auto& s : servers_) ASSERT_FALSE(s.ready.empty()) << "a server did not start";
  }

  std::unique_ptr<Client> Open(const std::string& search = "server",
                               std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    ClientOptions options;
    options.cluster = cluster_;
    options.search = search;
    options.timeout = timeout;
    options.key_file = ClientKeyFile();
    auto client = Client::Open(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // How many servers hold meganodes.
  int ServersWithMeganodes(Client& client) {
    auto stats = client.StoreStats();
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    int n = 0;
    for (const auto& s : stats.ok() ? *stats : std::vector<Client::ServerStats>{}) n += s.meganodes > 0 ? 1 : 0;
    return n;
  }

  std::string name_, cluster_;
  std::vector<RunningServer> servers_;
};

}  // namespace cell::testing
