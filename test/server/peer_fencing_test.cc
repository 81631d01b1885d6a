// Fencing between servers (server/peers.h; docs/DESIGN.md, "Ownership", rule 5): a server that may not act (its lease
// gone, as for one paused past its ZooKeeper session) sends its peers nothing. (Else a server resumed in the middle of
// a remote split could split locally and send the parent's server a separator naming a meganode its survivor never
// had: a dangling pointer.) Two real cell-server processes and a real ZooKeeper; the asking
// server is a ServerPeers in this process, with the peer key. That a server's own ServerPeers asks its lease, and that
// peer answers go out only under it, is test/server/store_service_test.cc's.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "rpc/key.h"
#include "server/peers.h"
#include "test/membership/cluster_table.h"
#include "test/server/cluster_fixture.h"

namespace cell {
namespace {

using namespace std::chrono_literals;

rpc::Key PeerKey() { return *rpc::ReadKeyFile(testing::TestKeys::Get().peer_file, rpc::kPeerKeyName); }

class PeerFencing : public testing::ClusterFixture {
 protected:
  void SetUp() override {
    StartCluster(2);
    client_ = Open();
    ASSERT_NE(client_, nullptr);
    for (int i = 0; i < 2000; ++i) {
      const std::string key = fmt::format("fence{:05}", i);
      ASSERT_TRUE(client_->Put(key, "value-" + key).ok());
      model_[key] = "value-" + key;
    }
    ASSERT_TRUE(testing::WaitForSplitsToSettle(*client_));
    auto table = testing::OpenClusterTable(cluster_);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    table_ = std::move(*table);
    auto root = table_->RootRegion();
    ASSERT_TRUE(root.ok()) << root.status().ToString();
    root_region_ = *root;
    meganodes_ = Meganodes();
  }

  // Meganodes in use, per server id.
  std::map<uint64_t, uint64_t> Meganodes() {
    std::map<uint64_t, uint64_t> out;
    auto stats = client_->StoreStats();
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    for (const auto& s : stats.ok() ? *stats : std::vector<Client::ServerStats>{}) out[s.server] = s.meganodes;
    return out;
  }

  // Every server holds the meganodes it held after the load, and the store what the model says.
  void ExpectUnchanged() {
    EXPECT_EQ(Meganodes(), meganodes_);
    std::vector<std::pair<std::string, std::string>> pairs;
    ASSERT_TRUE(client_->Scan("", "", 100000, &pairs).ok());
    EXPECT_EQ(pairs, (std::vector<std::pair<std::string, std::string>>(model_.begin(), model_.end())));
  }

  std::unique_ptr<Client> client_;
  std::map<std::string, std::string> model_;
  std::unique_ptr<membership::ZooKeeperMembership> table_;
  uint32_t root_region_ = 0;
  std::map<uint64_t, uint64_t> meganodes_;
};

TEST_F(PeerFencing, AServerThatMayNotActAsksNothingOfItsPeers) {
  bool may_act = false;
  // Server 99 is no server of the cluster's: both are its peers.
  server::ServerPeers peers(table_.get(), 99, 5000ms, PeerKey(), [&may_act] {
    return may_act ? Status::OK() : Status::Unavailable("paused past its session");
  });
  btree::MeganodeInfo info;
  info.min = "fence";
  info.max = "fencf";
  const GlobalPtr first{root_region_, 0};
  const auto refused = [](const Status& s, const char* what) {
    EXPECT_TRUE(s.IsUnavailable()) << what << ": " << s.ToString();
    EXPECT_NE(s.message().find("asks nothing of other servers now: paused past its session"), std::string::npos)
        << what << ": " << s.ToString();
  };
  refused(peers.CreateMeganode(info, {}).status(), "create");
  refused(peers.InsertSeparator(first, 1, "fence01000", GlobalPtr{root_region_, 16 << 10}), "separator");
  refused(peers.Unseal(meganode::RemoteMeganode{GlobalPtr{root_region_, 16 << 10}, 1}), "unseal");
  refused(peers.TxnApply(first, "fence00001", 12345, true), "transaction apply");
  refused(peers.TxnStatus(first, "fence00001", 12345).status(), "transaction status");
  ExpectUnchanged();

  // The same calls reach a peer once the server may act: a meganode is made on one. Abandoning it goes out even when
  // the server may not act (it undoes a create nothing names; refused, the meganode would stay sealed there).
  may_act = true;
  auto created = peers.CreateMeganode(info, {});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::map<uint64_t, uint64_t> grown = meganodes_;
  ++grown[table_->GetRegion(created->ptr.region)->owner];
  EXPECT_EQ(Meganodes(), grown);
  may_act = false;
  peers.Abandon(*created);
  ExpectUnchanged();
}

}  // namespace
}  // namespace cell
