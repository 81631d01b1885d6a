// The store service's answers are checked against the server's lease as they are sent (StoreService::Handle): a
// server whose lease lapsed while a write was being made durable (paused, or cut off from the membership past its
// session) must not acknowledge it, nor answer a read, since a survivor may own its regions by then. The same holds
// for what it tells other servers (their MEGA_* requests), and it asks nothing of them meanwhile.
//
// A restart reads the files the store keeps beside its log (server/store_files.h), its MANIFEST and its
// server-<id>.regions, in the current format (protobuf text, version 1) and in the unversioned lines of every data
// directory made before it; it refuses a version it does not know, and a garbled file, naming the file.
#include "server/store_service.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "membership/in_memory_membership.h"
#include "rpc/proto/store.pb.h"
#include "test/logging/test_dir.h"

namespace cell::server {
namespace {

class Reply final : public rpc::Responder::Sink {
 public:
  void Send(uint64_t, const Status& status, std::string_view payload) override {
    status_ = status;
    payload_.assign(payload);
    answered_ = true;
  }
  Status status_ = Status::Internal("no reply");
  std::string payload_;
  std::atomic<bool> answered_{false};
};

class StoreServiceLease : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    StoreConfig config;
    config.meganode_bytes = 64 << 10;
    config.meganodes = 16;
    config.extent_region_bytes = 1 << 20;
    config.lease = &lease_;  // what its requests to other servers ask too (ServerPeers)
    if (GetParam()) {        // with a log: the write's answer waits for its sync, on the log's committer thread
      dir_ = fmt::format("{}/cell-lease-{}", ::testing::TempDir(), getpid());
      std::filesystem::remove_all(dir_);
      std::filesystem::create_directories(dir_);
      config.data_dir = dir_;
    }
    ASSERT_TRUE(membership_.RegisterServer(membership::ServerInfo{.id = 1, .addresses = {}}).ok());
    auto service = StoreService::Open(config, &membership_, 1);
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    service_ = std::move(*service);
  }
  void TearDown() override {
    service_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // Sends a request as a transport would; waits for its answer (a logged write is answered on another thread).
  std::shared_ptr<Reply> Send(uint16_t method, const std::string& key, const std::string* value) {
    proto::KeyRequest r;
    r.mutable_target()->set_region(service_->node_region());
    r.mutable_target()->set_epoch(1);
    r.set_key(key);
    if (value != nullptr) r.set_value(*value);
    return SendBytes(method, r.SerializeAsString());
  }
  std::shared_ptr<Reply> SendBytes(uint16_t method, const std::string& request) {
    auto reply = std::make_shared<Reply>();
    service_->Handle(method, request, rpc::Responder(reply, 1), /*serving=*/true, &lease_);
    while (!reply->answered_.load()) std::this_thread::yield();  // the answer comes from the committer thread
    return reply;
  }

  membership::InMemoryMembership membership_;
  std::string dir_;
  std::unique_ptr<StoreService> service_;
  std::atomic<bool> valid_{true};
  const std::function<Status()> lease_ = [this] {
    return valid_.load() ? Status::OK() : Status::Unavailable("test: the lease lapsed");
  };
};

TEST_P(StoreServiceLease, NoAnswerGoesOutOnceTheLeaseHasLapsed) {
  const std::string v = "v1";
  auto put = Send(proto::STORE_PUT, "k", &v);
  ASSERT_TRUE(put->status_.ok()) << put->status_.ToString();
  auto get = Send(proto::STORE_GET, "k", nullptr);
  ASSERT_TRUE(get->status_.ok()) << get->status_.ToString();
  valid_ = false;
  const std::string v2 = "v2";
  for (uint16_t method : {proto::STORE_PUT, proto::STORE_GET, proto::STORE_DELETE}) {
    auto r = Send(method, "k", method == proto::STORE_PUT ? &v2 : nullptr);
    if (method == proto::STORE_GET) {
      EXPECT_TRUE(r->status_.IsUnavailable()) << r->status_.ToString();  // nothing done: the client retries it
      EXPECT_NE(r->status_.message().find("the lease lapsed"), std::string::npos) << r->status_.ToString();
      continue;
    }
    // A write was made before the answer was refused: a reply that says it is not acknowledged, and nothing else, so
    // that the client neither counts it done nor sends it again as if it had not been made.
    ASSERT_TRUE(r->status_.ok()) << method << ": " << r->status_.ToString();
    proto::StoreReply refused;
    ASSERT_TRUE(refused.ParseFromString(r->payload_));
    EXPECT_NE(refused.not_acknowledged().find("the lease lapsed"), std::string::npos) << refused.DebugString();
    EXPECT_FALSE(refused.found());
    EXPECT_EQ(refused.leaf(), 0u);
  }
  valid_ = true;
  auto again = Send(proto::STORE_GET, "k", nullptr);
  ASSERT_TRUE(again->status_.ok()) << again->status_.ToString();
  // (The refused put and delete were made, just not acknowledged: what the key holds now is either's result.)
  proto::StoreReply reply;
  ASSERT_TRUE(reply.ParseFromString(again->payload_));
  EXPECT_TRUE(!reply.found() || reply.value() == "v2") << reply.value();
}

TEST_P(StoreServiceLease, NoPeerIsAnsweredOrAskedOnceTheLeaseHasLapsed) {
  proto::MegaCreate create;
  create.set_token(7);
  create.mutable_info()->set_min("a");
  create.mutable_info()->set_max("b");
  const size_t meganodes = service_->meganodes_in_use();
  valid_ = false;
  // Made, durable, and not answered: its asker abandons it by the token.
  auto refused = SendBytes(proto::MEGA_CREATE, create.SerializeAsString());
  EXPECT_TRUE(refused->status_.IsUnavailable()) << refused->status_.ToString();
  EXPECT_NE(refused->status_.message().find("the lease lapsed"), std::string::npos) << refused->status_.ToString();
  EXPECT_EQ(service_->meganodes_in_use(), meganodes + 1);
  // Nor does it ask anything of another server (this one has no other: with the lease, that is what it is told).
  btree::MeganodeInfo info;
  info.min = "a";
  auto asked = service_->peers_for_test().CreateMeganode(info, {});
  EXPECT_TRUE(asked.status().IsUnavailable()) << asked.status().ToString();
  EXPECT_NE(asked.status().message().find("asks nothing of other servers now"), std::string::npos)
      << asked.status().ToString();
  EXPECT_NE(asked.status().message().find("the lease lapsed"), std::string::npos) << asked.status().ToString();

  valid_ = true;
  create.set_token(8);
  auto answered = SendBytes(proto::MEGA_CREATE, create.SerializeAsString());
  ASSERT_TRUE(answered->status_.ok()) << answered->status_.ToString();
  proto::MegaReply made;
  ASSERT_TRUE(made.ParseFromString(answered->payload_));
  EXPECT_NE(made.meganode(), 0u);
  EXPECT_EQ(service_->meganodes_in_use(), meganodes + 2);
  asked = service_->peers_for_test().CreateMeganode(info, {});
  EXPECT_TRUE(asked.status().IsUnavailable()) << asked.status().ToString();
  EXPECT_NE(asked.status().message().find("no other live server"), std::string::npos) << asked.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(Log, StoreServiceLease, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "logged" : "in_memory"; });

class StoreRestart : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = logging::FreshTestDir("cell_store_restart_test");
    std::filesystem::create_directories(dir_);
    config_.meganode_bytes = 64 << 10;
    config_.meganodes = 16;
    config_.extent_region_bytes = 1 << 20;
    config_.data_dir = dir_;
    ASSERT_TRUE(membership_.RegisterServer(membership::ServerInfo{.id = 1, .addresses = {}}).ok());
    // The first start: regions made, a key written, the service closed.
    auto service = StoreService::Open(config_, &membership_, 1);
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    node_ = (*service)->node_region();
    extent_ = (*service)->extent_region();
    ASSERT_TRUE(Send(**service, proto::STORE_PUT, "v1").ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A put of k = `value` (or a get of k, answered with its value).
  static StatusOr<std::string> Send(StoreService& service, uint16_t method, const std::string& value = "") {
    proto::KeyRequest r;
    r.mutable_target()->set_region(service.node_region());
    r.mutable_target()->set_epoch(1);
    r.set_key("k");
    if (method == proto::STORE_PUT) r.set_value(value);
    auto reply = std::make_shared<Reply>();
    service.Handle(method, r.SerializeAsString(), rpc::Responder(reply, 1), /*serving=*/true);
    while (!reply->answered_.load()) std::this_thread::yield();  // a logged write is answered on another thread
    if (!reply->status_.ok()) return reply->status_;
    proto::StoreReply parsed;
    if (!parsed.ParseFromString(reply->payload_)) return Status::Corruption("unparsable reply");
    return parsed.value();
  }
  std::string ManifestFile() const { return StoreService::LogDir(dir_, node_, 0) + "/MANIFEST"; }
  std::string RegionsFile() const { return fmt::format("{}/server-1.regions", dir_); }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static void Write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }
  // Restarts, expecting the key written before.
  void ExpectRestartRecovers() {
    auto service = StoreService::Open(config_, &membership_, 1);
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    EXPECT_TRUE((*service)->recovery().recovered);
    EXPECT_EQ((*service)->node_region(), node_);
    auto value = Send(**service, proto::STORE_GET);
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    EXPECT_EQ(*value, "v1");
  }
  // Restarts, expecting it refused with `code`, naming `path` and saying `what`.
  void ExpectRestartRefused(Status::Code code, const std::string& path, const std::string& what) {
    auto service = StoreService::Open(config_, &membership_, 1);
    ASSERT_FALSE(service.ok());
    EXPECT_EQ(service.status().code(), code) << service.status().ToString();
    EXPECT_NE(service.status().message().find(path), std::string::npos) << service.status().ToString();
    EXPECT_NE(service.status().message().find(what), std::string::npos) << service.status().ToString();
  }

  std::string dir_;
  StoreConfig config_;
  membership::InMemoryMembership membership_;
  uint32_t node_ = 0;
  uint32_t extent_ = 0;
};

TEST_F(StoreRestart, ReadsTheVersionedTextFilesItWrote) {
  const std::string manifest = Read(ManifestFile());
  EXPECT_NE(manifest.find("version: 1"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find(fmt::format("node_region: {}", node_)), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("meganode_bytes: 65536"), std::string::npos) << manifest;
  const std::string regions = Read(RegionsFile());
  EXPECT_NE(regions.find("version: 1"), std::string::npos) << regions;
  EXPECT_NE(regions.find(fmt::format("extent_region: {}", extent_)), std::string::npos) << regions;
  ExpectRestartRecovers();
}

TEST_F(StoreRestart, ReadsTheUnversionedLinesOfEarlierDataDirectories) {
  const std::string manifest = fmt::format(
      "node_region {}\nextent_region {}\nmeganode_bytes 65536\nmeganodes 16\nextent_region_bytes 1048576\nroot 1\n",
      node_, extent_);
  Write(ManifestFile(), manifest);
  Write(RegionsFile(), fmt::format("node {}\nextent {}\n", node_, extent_));
  ExpectRestartRecovers();
  EXPECT_EQ(Read(ManifestFile()), manifest);  // read, not rewritten
}

TEST_F(StoreRestart, RefusesAManifestVersionItDoesNotKnow) {
  std::string manifest = Read(ManifestFile());
  manifest.replace(manifest.find("version: 1"), 10, "version: 7\nfield_of_version_7: 3");
  Write(ManifestFile(), manifest);
  ExpectRestartRefused(Status::Code::kFailedPrecondition, ManifestFile(), "version 7");
}

TEST_F(StoreRestart, RefusesARegionsFileVersionItDoesNotKnow) {
  Write(RegionsFile(), fmt::format("version: 2\nnode_region: {}\nextent_region: {}\n", node_, extent_));
  ExpectRestartRefused(Status::Code::kFailedPrecondition, RegionsFile(), "version 2");
}

TEST_F(StoreRestart, RefusesAGarbledManifest) {
  Write(ManifestFile(), "version: 1\nnode_region: many\n");
  ExpectRestartRefused(Status::Code::kCorruption, ManifestFile(), "node_region");
  Write(ManifestFile(), "\x01\x7f garbage");
  ExpectRestartRefused(Status::Code::kCorruption, ManifestFile(), "has no node_region");
  Write(ManifestFile(), fmt::format("version: 1\nnode_region: {}\n", node_));  // fields missing
  ExpectRestartRefused(Status::Code::kCorruption, ManifestFile(), "has no extent_region");
}

// What a service's regions hold: node bytes and extent bytes, used and free.
std::pair<uint64_t, uint64_t> Capacity(StoreService& service) {
  auto reply = std::make_shared<Reply>();
  service.Handle(proto::STORE_STATS, "", rpc::Responder(reply, 1), /*serving=*/true);
  EXPECT_TRUE(reply->answered_.load()) << "stats are answered at once";
  proto::StoreStats stats;
  EXPECT_TRUE(stats.ParseFromString(reply->payload_));
  return {stats.node_bytes_used() + stats.node_bytes_free(), stats.extent_bytes_used() + stats.extent_bytes_free()};
}

TEST_F(StoreRestart, SizesNotGivenAreTheRecordedOnes) {
  config_.meganode_bytes = 0;
  config_.meganodes = 0;
  config_.extent_region_bytes = 0;
  auto service = StoreService::Open(config_, &membership_, 1);
  ASSERT_TRUE(service.ok()) << service.status().ToString();
  EXPECT_EQ(Capacity(**service), std::make_pair(uint64_t{16} * (64 << 10), uint64_t{1} << 20));
  auto value = Send(**service, proto::STORE_GET);
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, "v1");
}

TEST_F(StoreRestart, SizesGivenMustBeTheRecordedOnes) {
  config_.meganodes = 32;
  ExpectRestartRefused(Status::Code::kFailedPrecondition, ManifestFile(), "--meganodes");
  config_.meganodes = 0;  // the recorded 16
  config_.extent_region_bytes = 2 << 20;
  ExpectRestartRefused(Status::Code::kFailedPrecondition, ManifestFile(), "--region-size");
}

TEST(StoreSizes, AFreshStartWithoutSizesIsSizedToTheMachine) {
  membership::InMemoryMembership membership;
  ASSERT_TRUE(membership.RegisterServer(membership::ServerInfo{.id = 1, .addresses = {}}).ok());
  StoreConfig config;
  config.meganode_bytes = 0;
  config.meganodes = 0;
  config.extent_region_bytes = 0;
  auto service = StoreService::Open(config, &membership, 1);
  ASSERT_TRUE(service.ok()) << service.status().ToString();
  const auto [nodes, extents] = Capacity(**service);
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  const uint64_t memory = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
  EXPECT_GE(extents, kGiB);
  EXPECT_EQ(extents % kGiB, 0u);
  EXPECT_TRUE(extents == kGiB || extents <= memory / 8 * 3) << extents << " of " << memory;
  EXPECT_EQ(nodes % (uint64_t{64} << 20), 0u) << "64 MiB meganodes";
  EXPECT_EQ(nodes, std::max(uint64_t{16} << 26, extents)) << "as much room for nodes as for records";
}

TEST_F(StoreRestart, RefusesAGarbledRegionsFile) {
  Write(RegionsFile(), "version: 1\nnode_region: [3]\n");
  ExpectRestartRefused(Status::Code::kCorruption, RegionsFile(), "RecordedRegions");
  Write(RegionsFile(), "node 3\n");
  ExpectRestartRefused(Status::Code::kCorruption, RegionsFile(), "has no extent");
}

}  // namespace
}  // namespace cell::server
