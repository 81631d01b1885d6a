// The store service's answers are checked against the server's lease as they are sent (StoreService::Handle): a
// server whose lease lapsed while a write was being made durable (paused, or cut off from the membership past its
// session) must not acknowledge it, nor answer a read, since a survivor may own its regions by then.
#include "server/store_service.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "membership/in_memory_membership.h"
#include "rpc/proto/store.pb.h"

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
    if (GetParam()) {  // with a log: the write's answer waits for its sync, on the log's committer thread
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
    auto reply = std::make_shared<Reply>();
    service_->Handle(method, r.SerializeAsString(), rpc::Responder(reply, 1), /*serving=*/true, &lease_);
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

INSTANTIATE_TEST_SUITE_P(Log, StoreServiceLease, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "logged" : "in_memory"; });

}  // namespace
}  // namespace cell::server
