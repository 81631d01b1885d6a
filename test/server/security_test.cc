// Trust at the server (docs/DESIGN.md, "Security"): a cell-server with keys serves only connections that prove one,
// refuses the requests servers send each other (MEGA_*) to anything but the peer key, and changes nothing for those
// it refuses; one without keys says so and stays on loopback. Real servers: in this process where the test needs the
// tree's own consistency check, as processes where it needs only what a user sees.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>

#include "cell/client.h"
#include "rpc/proto/store.pb.h"
#include "rpc/transport.h"
#include "server/cell_server.h"
#include "test/membership/cluster_table.h"
#include "test/membership/zk_harness.h"
#include "test/server/server_harness.h"

namespace cell::server {
namespace {

using namespace std::chrono_literals;

rpc::Key ClientKey() { return *rpc::ReadKeyFile(testing::ClientKeyFile(), rpc::kClientKeyName); }
rpc::Key PeerKey() { return *rpc::ReadKeyFile(testing::TestKeys::Get().peer_file, rpc::kPeerKeyName); }

class Security : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig config;
    config.listen = {"tcp://127.0.0.1:0", "shm://" + testing::ShmPath("security")};
    config.client_key_file = testing::ClientKeyFile();
    config.peer_key_file = testing::TestKeys::Get().peer_file;
    config.store.meganode_bytes = 16 << 10;  // many meganodes after a few thousand keys
    config.store.meganodes = 4096;
    config.store.extent_region_bytes = uint64_t{64} << 20;
    auto server = CellServer::Start(config);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    ClientOptions options;
    options.cluster = server_->uris()[0];
    options.key_file = testing::ClientKeyFile();
    auto client = Client::Open(options);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    for (int i = 0; i < 3000; ++i) {
      const std::string key = fmt::format("sec{:05}", i);
      ASSERT_TRUE(client_->Put(key, "value-" + key).ok());
      model_[key] = "value-" + key;
    }
  }

  // What the tree holds is what the model says, and the tree passes its full consistency check.
  void ExpectUnchanged(size_t meganodes) {
    EXPECT_EQ(server_->store().meganodes_in_use(), meganodes);
    Status check = server_->store().CheckInvariants();
    EXPECT_TRUE(check.ok()) << check.ToString();
    using Pairs = std::vector<std::pair<std::string, std::string>>;
    Pairs pairs;
    ASSERT_TRUE(client_->Scan("", "", 100000, &pairs).ok());
    EXPECT_EQ(pairs, Pairs(model_.begin(), model_.end()));
  }

  std::unique_ptr<rpc::Connection> Connect(const std::string& uri, rpc::Key key) {
    rpc::ConnectOptions options;
    options.key = std::move(key);
    auto c = rpc::Connect(uri, options);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // One plausible request of every peer method, aimed at this server's meganodes.
  std::map<uint16_t, std::string> PeerRequests() {
    const uint32_t region = server_->store().node_region();
    const uint64_t first = GlobalPtr{region, 0}.Pack();
    const uint64_t second = GlobalPtr{region, 16 << 10}.Pack();
    proto::MegaCreate create;
    create.mutable_info()->set_min("a");
    create.mutable_info()->set_max("b");
    proto::MegaFill fill;
    fill.set_meganode(second);
    auto* entry = fill.add_entries();
    entry->set_key("sec00001");
    entry->set_value("forged");
    proto::MegaRef ref;
    ref.set_meganode(second);
    proto::SeparatorRequest separator;
    separator.set_at(first);
    separator.set_level(1);
    separator.set_separator("sec01000");
    separator.set_child(second);
    return {{proto::MEGA_CREATE, create.SerializeAsString()},
            {proto::MEGA_FILL, fill.SerializeAsString()},
            {proto::MEGA_UNSEAL, ref.SerializeAsString()},
            {proto::MEGA_ABANDON, ref.SerializeAsString()},
            {proto::MEGA_INSERT_SEPARATOR, separator.SerializeAsString()}};
  }

  std::unique_ptr<CellServer> server_;
  std::unique_ptr<Client> client_;
  std::map<std::string, std::string> model_;
};

TEST_F(Security, EveryPeerMethodWithTheClientKeyIsRefusedAndChangesNothing) {
  const size_t meganodes = server_->store().meganodes_in_use();
  ASSERT_GT(meganodes, 10u) << "the test wants a tree of many meganodes";
  ExpectUnchanged(meganodes);
  for (const std::string& uri : server_->uris()) {
    for (const auto& [method, request] : PeerRequests()) {
      auto c = Connect(uri, ClientKey());  // a refusal closes the connection: a new one for each
      ASSERT_NE(c, nullptr);
      auto reply = rpc::CallSync(*c, method, request);
      ASSERT_FALSE(reply.ok()) << uri << " served " << proto::StoreMethod_Name(method) << " to the client key";
      EXPECT_TRUE(reply.status().IsPermissionDenied()) << reply.status().ToString();
      EXPECT_NE(reply.status().message().find("needs the peer key"), std::string::npos) << reply.status().ToString();
      auto after = rpc::CallSync(*c, proto::STORE_STATS, "");
      EXPECT_TRUE(after.status().IsUnavailable()) << "the connection was not closed: " << after.status().ToString();
    }
  }
  ExpectUnchanged(meganodes);

  // The same check sees a change when there is one: the peer key may create a meganode, and abandon it again.
  auto peer = Connect(server_->uris()[0], PeerKey());
  ASSERT_NE(peer, nullptr);
  auto created = rpc::CallSync(*peer, proto::MEGA_CREATE, PeerRequests()[proto::MEGA_CREATE]);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(server_->store().meganodes_in_use(), meganodes + 1);
  proto::MegaReply made;
  ASSERT_TRUE(made.ParseFromString(*created));
  proto::MegaRef ref;
  ref.set_meganode(made.meganode());
  ref.set_generation(made.generation());
  ASSERT_TRUE(rpc::CallSync(*peer, proto::MEGA_ABANDON, ref.SerializeAsString()).ok());
  ExpectUnchanged(meganodes);
}

TEST_F(Security, WithoutTheKeyOrWithAnotherNothingIsServed) {
  const size_t meganodes = server_->store().meganodes_in_use();
  const std::string wrong = testing::ProcessDir() + "/wrong.key";
  unlink(wrong.c_str());
  ASSERT_TRUE(WriteNewKeyFile(wrong).ok());
  for (const std::string& uri : server_->uris()) {
    for (const std::string& key_file : {std::string(), wrong}) {
      ClientOptions options;
      options.cluster = uri;
      options.key_file = key_file;
      unsetenv("CELL_KEY_FILE");
      auto client = Client::Open(options);
      ASSERT_FALSE(client.ok()) << uri << " served a client "
                                << (key_file.empty() ? "without a key" : "with a wrong key");
      EXPECT_TRUE(client.status().IsPermissionDenied()) << client.status().ToString();
      EXPECT_NE(client.status().message().find("client"), std::string::npos) << client.status().ToString();
      // Nor a store request on a raw connection.
      rpc::ConnectOptions raw;
      if (!key_file.empty()) raw.key = *rpc::ReadKeyFile(key_file, rpc::kClientKeyName);
      auto c = rpc::Connect(uri, raw);
      ASSERT_FALSE(c.ok());
      EXPECT_TRUE(c.status().IsPermissionDenied()) << c.status().ToString();
    }
  }
  // The peer key is no client key: a client that holds it under the client's name is refused too.
  ClientOptions peer_as_client;
  peer_as_client.cluster = server_->uris()[0];
  peer_as_client.key_file = testing::TestKeys::Get().peer_file;
  auto refused = Client::Open(peer_as_client);
  EXPECT_TRUE(refused.status().IsPermissionDenied()) << refused.status().ToString();
  // CELL_KEY_FILE is the key when ClientOptions names none.
  setenv("CELL_KEY_FILE", testing::ClientKeyFile().c_str(), 1);
  ClientOptions from_env;
  from_env.cluster = server_->uris()[1];
  auto allowed = Client::Open(from_env);
  unsetenv("CELL_KEY_FILE");
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  std::string value;
  ASSERT_TRUE((*allowed)->Get("sec00042", &value).ok());
  EXPECT_EQ(value, "value-sec00042");
  ExpectUnchanged(meganodes);
}

// As a user runs them: cell-server and cellctl processes.
TEST(SecurityProcesses, KeysAreCheckedAtStartAndCellctlPassesItsKey) {
  using testing::Cellctl;
  const auto& keys = testing::TestKeys::Get();
  auto server = testing::StartServer(
      {"--listen=tcp://127.0.0.1:0", "--client-key-file=" + keys.client_file, "--peer-key-file=" + keys.peer_file});
  ASSERT_FALSE(server.ready.empty());
  const std::string cluster = "--cluster=" + server.uris[0];
  auto [put_rc, put_out] = Cellctl({cluster, "--key-file=" + keys.client_file, "put", "k1", "v1"});
  EXPECT_EQ(put_rc, 0) << put_out;
  auto [get_rc, get_out] = Cellctl({cluster, "--key-file=" + keys.client_file, "--search=client", "get", "k1"});
  EXPECT_EQ(get_rc, 0) << get_out;
  EXPECT_NE(get_out.find("v1"), std::string::npos) << get_out;
  auto [none_rc, none_out] = Cellctl({cluster, "get", "k1"});
  EXPECT_EQ(none_rc, 1) << none_out;
  EXPECT_NE(none_out.find("PermissionDenied"), std::string::npos) << none_out;
  EXPECT_NE(none_out.find("--key-file"), std::string::npos) << "the message must say how to give the key: " << none_out;
  EXPECT_EQ(none_out.find("v1"), std::string::npos) << none_out;

  const std::string open_key = testing::ProcessDir() + "/open.key";
  unlink(open_key.c_str());
  ASSERT_TRUE(WriteNewKeyFile(open_key).ok());
  chmod(open_key.c_str(), 0644);
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--client-key-file=" + keys.client_file}, "go together"},
      {{"--client-key-file=" + keys.client_file, "--peer-key-file=" + keys.client_file}, "are the same"},
      {{"--client-key-file=" + open_key, "--peer-key-file=" + keys.peer_file}, "chmod 600"},
      {{"--listen=tcp://0.0.0.0:0"}, "--insecure"},
  };
  for (const auto& [args, says] : refused) {
    std::vector<std::string> argv = {CELL_SERVER_BINARY, "--listen=tcp://127.0.0.1:0"};
    argv.insert(argv.end(), args.begin(), args.end());
    testing::ChildProcess p(argv, /*merge_stderr=*/true);
    const std::string out = p.ReadAll(30s);
    EXPECT_EQ(p.Wait(), 1) << out;
    EXPECT_NE(out.find(says), std::string::npos) << out;
  }
  // Without keys on loopback it runs, and says loudly that it accepts anyone.
  testing::ChildProcess open({CELL_SERVER_BINARY, "--listen=tcp://127.0.0.1:0"}, /*merge_stderr=*/true);
  bool warned = false;
  while (auto line = open.ReadLine(30s)) {
    warned |= line->find("NO KEYS") != std::string::npos;
    if (line->rfind("ready ", 0) == 0) break;
  }
  EXPECT_TRUE(warned);
}

// With keys, the cluster's znodes are writable only by the peer key's ZooKeeper identity: anyone may read the table,
// nobody else may change it.
TEST(SecurityProcesses, WithKeysZooKeeperTakesWritesOnlyFromThePeerKey) {
  auto& zk = testing::ZooKeeperHarness::Shared();
  ASSERT_FALSE(zk.connect().empty()) << zk.error();
  const std::string cluster = fmt::format("zk://{}/cell/security-{}", zk.connect(), getpid());
  std::vector<std::string> args = {"--listen=tcp://127.0.0.1:0", "--membership=" + cluster, "--id=1"};
  for (const std::string& a : testing::ServerKeyArgs()) args.push_back(a);
  auto server = testing::StartServer(args);
  ASSERT_FALSE(server.ready.empty());
  auto outsider = testing::OpenClusterTable(cluster);
  ASSERT_TRUE(outsider.ok()) << outsider.status().ToString();
  auto regions = (*outsider)->ListRegions();
  ASSERT_TRUE(regions.ok()) << regions.status().ToString();
  ASSERT_FALSE(regions->empty());
  const membership::RegionEntry r = regions->front();
  auto taken = (*outsider)->ChangeOwner(r.region, r.epoch, 99);
  EXPECT_FALSE(taken.ok()) << "a ZooKeeper client without the peer key changed a region's owner";
  auto after = (*outsider)->GetRegion(r.region);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->owner, r.owner);
  EXPECT_EQ(after->epoch, r.epoch);
}

}  // namespace
}  // namespace cell::server
