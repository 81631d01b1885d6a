// The client's request state machine against a scripted store server (a fake: a real rpc server whose handler answers
// as the test says), for the answers a real cluster gives only in a narrow window: a write made but refused at
// answer time (StoreReply::not_acknowledged), and a server fenced for a while (Unavailable).
#include "client/store_client.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "membership/in_memory_membership.h"
#include "rpc/proto/store.pb.h"
#include "rpc/transport.h"

namespace cell::client {
namespace {

using namespace std::chrono_literals;
using cell::proto::StoreMethod;

class ScriptedServer final : public rpc::RpcHandler {
 public:
  // How to answer each request of `method` (the number of earlier ones of that method given).
  using Script = std::function<void(int seen, rpc::Responder responder)>;
  void Set(uint16_t method, Script script) {
    std::lock_guard lock(mu_);
    scripts_[method] = std::move(script);
  }
  int Seen(uint16_t method) {
    std::lock_guard lock(mu_);
    return seen_[method];
  }
  void Handle(uint16_t method, std::string_view, rpc::Responder responder) override {
    Script script;
    int seen = 0;
    {
      std::lock_guard lock(mu_);
      seen = seen_[method]++;
      script = scripts_[method];
    }
    if (!script) return responder.Fail(Status::InvalidArgument("not scripted"));
    script(seen, std::move(responder));
  }

 private:
  std::mutex mu_;
  std::map<uint16_t, Script> scripts_;
  std::map<uint16_t, int> seen_;
};

std::string Reply(const std::function<void(cell::proto::StoreReply*)>& fill) {
  cell::proto::StoreReply reply;
  fill(&reply);
  return reply.SerializeAsString();
}

class StoreClientScripted : public ::testing::Test {
 protected:
  void SetUp() override {
    auto listening = rpc::Listen("tcp://127.0.0.1:0", rpc::ServerOptions{}, &handler_);
    ASSERT_TRUE(listening.ok()) << listening.status().ToString();
    server_ = std::move(*listening);
    ASSERT_TRUE(table_.RegisterServer(membership::ServerInfo{.id = 1, .addresses = {{"tcp", server_->uri()}}}).ok());
    auto region = table_.AllocateRegionId();
    ASSERT_TRUE(region.ok());
    ASSERT_TRUE(table_.CreateRegion(*region, 1).ok());
    ASSERT_TRUE(table_.ClaimRoot(*region).ok());
    StoreClientOptions options;
    options.transports = {"tcp"};
    options.timeout = 2s;
    auto client = StoreClient::Create(&table_, options);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  ScriptedServer handler_;
  std::unique_ptr<rpc::Server> server_;
  membership::InMemoryMembership table_;
  std::unique_ptr<StoreClient> client_;
};

// A write the server made but may not acknowledge (its lease lapsed before the answer) fails with Unavailable saying
// it may or may not have been applied, and is not sent again: a delete sent again would find its own effect and
// answer NotFound.
TEST_F(StoreClientScripted, AWriteMadeButNotAcknowledgedIsNeitherDoneNorSentAgain) {
  const auto not_acknowledged = [](int, rpc::Responder responder) {
    responder.Reply(Reply([](auto* r) { r->set_not_acknowledged("test: the lease lapsed"); }));
  };
  handler_.Set(StoreMethod::STORE_PUT, not_acknowledged);
  handler_.Set(StoreMethod::STORE_DELETE, not_acknowledged);
  for (const Status& s : {client_->Put("k", "v"), client_->Delete("k")}) {
    EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
    EXPECT_NE(s.message().find("may or may not have been applied"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("the lease lapsed"), std::string::npos) << s.ToString();
  }
  std::promise<Status> async;
  client_->DeleteAsync("k", [&](const Status& s) { async.set_value(s); });
  const Status s = async.get_future().get();
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_EQ(handler_.Seen(StoreMethod::STORE_PUT), 1);
  EXPECT_EQ(handler_.Seen(StoreMethod::STORE_DELETE), 2);
  EXPECT_EQ(client_->stats().retries.load(), 0u);
}

// A server fenced for a while (Unavailable before it did anything) is asked again after a back-off, on the client's
// timer, until it answers; one that stays fenced past the deadline gives Unavailable, and the retries in between are
// counted.
TEST_F(StoreClientScripted, AFencedServerIsAskedAgainUntilItAnswersOrTheDeadlinePasses) {
  handler_.Set(StoreMethod::STORE_GET, [](int seen, rpc::Responder responder) {
    if (seen < 5) return responder.Fail(Status::Unavailable("test: fenced"));
    responder.Reply(Reply([](auto* r) {
      r->set_found(true);
      r->set_value("v");
    }));
  });
  std::string value;
  ASSERT_TRUE(client_->Get("k", &value).ok());
  EXPECT_EQ(value, "v");
  EXPECT_EQ(handler_.Seen(StoreMethod::STORE_GET), 6);
  EXPECT_EQ(client_->stats().retries.load(), 5u);
  handler_.Set(StoreMethod::STORE_PUT,
               [](int, rpc::Responder responder) { responder.Fail(Status::Unavailable("test: fenced")); });
  std::promise<Status> async;
  client_->PutAsync("k", "v", [&](const Status& s) { async.set_value(s); });
  const Status s = async.get_future().get();
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("gave up after 2000 ms"), std::string::npos) << s.ToString();
  // Back-offs of 1, 2, 4, ... 100 ms within 2 s: a couple of dozen attempts, not thousands (no busy retry).
  EXPECT_GT(handler_.Seen(StoreMethod::STORE_PUT), 10);
  EXPECT_LT(handler_.Seen(StoreMethod::STORE_PUT), 40);
}

}  // namespace
}  // namespace cell::client
