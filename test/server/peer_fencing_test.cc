// Fencing between servers (server/peers.h, "Fencing"): a server that may not act (its lease gone, as for one paused
// past its ZooKeeper session) sends its peers nothing, and a peer refuses a separator whose sender claims a region at
// an epoch the table has moved on from. (The takeover test's paused root server, resumed in the middle of a split,
// once sent the parent's server a separator naming a meganode its survivor never had: a dangling pointer.) Two real
// cell-server processes and a real ZooKeeper; the asking server is a ServerPeers in this process, with the peer key.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "membership/zookeeper_membership.h"
#include "rpc/key.h"
#include "rpc/proto/store.pb.h"
#include "rpc/transport.h"
#include "server/peers.h"
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
    auto zk_options = membership::ParseZooKeeperUri(cluster_);
    ASSERT_TRUE(zk_options.ok());
    zk_options->create_layout = false;
    auto table = membership::ZooKeeperMembership::Open(*zk_options);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    table_ = std::move(*table);
    auto root = table_->RootRegion();
    ASSERT_TRUE(root.ok()) << root.status().ToString();
    root_region_ = *root;
    auto root_entry = table_->GetRegion(root_region_);
    ASSERT_TRUE(root_entry.ok()) << root_entry.status().ToString();
    root_server_ = root_entry->owner;
    ASSERT_GE(root_server_, 1u);
    ASSERT_LE(root_server_, 2u);
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
  uint64_t root_server_ = 0;
  std::map<uint64_t, uint64_t> meganodes_;
};

TEST_F(PeerFencing, AServerThatMayNotActAsksNothingOfItsPeers) {
  bool may_act = false;
  server::ServerPeers::Fencing fencing{
      .region = root_region_,
      .epoch = [] { return uint64_t{1}; },
      .may_act = [&may_act] { return may_act ? Status::OK() : Status::Unavailable("paused past its session"); }};
  // Server 99 is no server of the cluster's: both are its peers.
  server::ServerPeers peers(table_.get(), 99, 5000ms, PeerKey(), std::move(fencing));
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

  // The same calls reach a peer once the server may act: a meganode is made on one, and abandoned again.
  may_act = true;
  auto created = peers.CreateMeganode(info, {});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::map<uint64_t, uint64_t> grown = meganodes_;
  ++grown[table_->GetRegion(created->ptr.region)->owner];
  EXPECT_EQ(Meganodes(), grown);
  peers.Abandon(*created);
  ExpectUnchanged();
}

TEST_F(PeerFencing, APeerRefusesASeparatorFromARegionsDeposedOwner) {
  // Sent to the root's server, at its first meganode; the sender claims the other server's region.
  auto regions = table_->ListRegions();
  ASSERT_TRUE(regions.ok()) << regions.status().ToString();
  membership::RegionEntry sender;
  for (const auto& r : *regions) {
    if (r.owner != root_server_) sender = r;
  }
  ASSERT_NE(sender.region, 0u) << "the other server holds no region";
  ASSERT_GE(sender.epoch, 1u);
  rpc::ConnectOptions options;
  options.key = PeerKey();
  auto peer = rpc::Connect(servers_[root_server_ - 1].uris[0], options);
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  const auto send = [&](uint32_t region, uint64_t epoch) {
    proto::SeparatorRequest r;
    r.set_at(GlobalPtr{root_region_, 0}.Pack());
    r.set_level(0);  // which the tree refuses, once past the sender's check: the request changes nothing either way
    r.set_separator("fence01000");
    r.set_child(GlobalPtr{sender.region, 16 << 10}.Pack());
    r.set_sender_region(region);
    r.set_sender_epoch(epoch);
    return rpc::CallSync(**peer, proto::MEGA_INSERT_SEPARATOR, r.SerializeAsString()).status();
  };
  const Status deposed = send(sender.region, sender.epoch - 1);
  EXPECT_EQ(deposed.code(), Status::Code::kFailedPrecondition) << deposed.ToString();
  EXPECT_NE(deposed.message().find(fmt::format("gives the region to server {} at epoch {}: its sender was deposed",
                                               sender.owner, sender.epoch)),
            std::string::npos)
      << deposed.ToString();
  const Status anonymous = send(0, 0);
  EXPECT_TRUE(anonymous.IsInvalidArgument()) << anonymous.ToString();
  EXPECT_NE(anonymous.message().find("must name its sender's region"), std::string::npos) << anonymous.ToString();
  // The region's owner at the table's epoch passes this check: the tree judges the separator itself.
  const Status current = send(sender.region, sender.epoch);
  EXPECT_TRUE(current.IsInvalidArgument()) << current.ToString();
  EXPECT_NE(current.message().find("a separator needs a level of 1.."), std::string::npos) << current.ToString();
  ExpectUnchanged();
}

}  // namespace
}  // namespace cell
