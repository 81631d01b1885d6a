// The connection cache: one connection per server, dialed once and handed out until it fails or is dropped; a
// thread's remembered answer (the lock-free fast path) never outlives a change of the cache.
#include "rpc/connection_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace cell::rpc {
namespace {

// A connection that does nothing but report the health it is given (a unit test's fake: no transport).
class FakeConnection final : public Connection {
 public:
  explicit FakeConnection(int serial) : uri_("fake://" + std::to_string(serial)) {}
  void Call(uint16_t, std::string_view, RpcCallback done, Clock::time_point) override {
    done(Status::FailedPrecondition("a fake connection sends nothing"), {});
  }
  void Read(GlobalPtr, uint32_t, void*, ReadCallback done) override {
    done(Status::FailedPrecondition("a fake connection sends nothing"));
  }
  Status health() const override { return failed_.load() ? Status::Unavailable("failed") : Status::OK(); }
  const std::string& uri() const override { return uri_; }
  void Close() override {
    if (!healthy_when_closed_.load()) failed_.store(true);
  }
  void Fail() { failed_.store(true); }
  void KeepHealthyWhenClosed() { healthy_when_closed_.store(true); }

 private:
  const std::string uri_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> healthy_when_closed_{false};
};

class ConnectionCacheTest : public ::testing::Test {
 protected:
  // Gets `server`'s connection, dialing a new FakeConnection if the cache has none.
  std::shared_ptr<Connection> Get(ConnectionCache& cache, uint64_t server) {
    auto c = cache.Get(server, [this]() -> StatusOr<std::unique_ptr<Connection>> {
      ++dials_;
      return std::unique_ptr<Connection>(std::make_unique<FakeConnection>(dials_.load()));
    });
    return c.ok() ? *c : nullptr;
  }
  std::atomic<int> dials_{0};
};

TEST_F(ConnectionCacheTest, AServerIsDialedOnceAndItsConnectionHandedOutAgain) {
  ConnectionCache cache;
  auto first = Get(cache, 1);
  ASSERT_NE(first, nullptr);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(Get(cache, 1), first);
  EXPECT_EQ(dials_.load(), 1);
  auto other = Get(cache, 2);  // another server: a connection of its own
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other, first);
  EXPECT_EQ(Get(cache, 1), first);
  EXPECT_EQ(dials_.load(), 2);
}

TEST_F(ConnectionCacheTest, ADroppedConnectionIsNotHandedOutEvenWhileItLivesOn) {
  ConnectionCache cache;
  auto first = Get(cache, 1);
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(Get(cache, 1), first);  // remembered by this thread now
  cache.Drop(1, first.get());       // `first` stays alive (held here) and healthy
  auto second = Get(cache, 1);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second, first);
  EXPECT_EQ(dials_.load(), 2);
  cache.Drop(1, first.get());  // the failed one only: the fresh one stays
  EXPECT_EQ(Get(cache, 1), second);
}

TEST_F(ConnectionCacheTest, AFailedConnectionIsDialedAgain) {
  ConnectionCache cache;
  auto first = Get(cache, 1);
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(Get(cache, 1), first);
  static_cast<FakeConnection*>(first.get())->Fail();
  auto second = Get(cache, 1);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second, first);
  EXPECT_TRUE(second->health().ok());
}

// A thread's remembered answers are its cache's: a new cache at the same address, at the same generation, dials its own
// connection, though the old cache's is alive and healthy and remembered by this thread.
TEST_F(ConnectionCacheTest, ANewCacheNeverHandsOutAnotherCachesConnection) {
  std::optional<ConnectionCache> cache;
  cache.emplace();
  auto first = Get(*cache, 1);
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(Get(*cache, 1), first);  // remembered now
  static_cast<FakeConnection*>(first.get())->KeepHealthyWhenClosed();
  cache.emplace();  // the old one closes `first`, which stays healthy here
  ASSERT_TRUE(first->health().ok());
  auto second = Get(*cache, 1);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second, first);
  EXPECT_EQ(Get(*cache, 1), second);
  EXPECT_EQ(dials_.load(), 2);
}

TEST_F(ConnectionCacheTest, AClosedCacheHandsOutNothing) {
  ConnectionCache cache;
  auto first = Get(cache, 1);
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(Get(cache, 1), first);
  cache.Close();
  EXPECT_FALSE(first->health().ok());  // closed with the cache
  auto after = cache.Get(1, []() -> StatusOr<std::unique_ptr<Connection>> {
    return std::unique_ptr<Connection>(std::make_unique<FakeConnection>(0));
  });
  EXPECT_FALSE(after.ok());
}

// Threads getting while others drop: every connection handed out is the cache's one at some moment, and none is
// handed out after it was dropped and replaced (each thread sees the generations in order).
TEST_F(ConnectionCacheTest, GetsRacingDropsNeverGoBackToADroppedConnection) {
  ConnectionCache cache;
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> getters;
  for (int t = 0; t < 3; ++t) {
    getters.emplace_back([&] {
      int last = 0;
      while (!stop.load()) {
        auto c = Get(cache, 1);
        if (c == nullptr) continue;
        const int serial = std::stoi(c->uri().substr(7));
        if (serial < last) wrong.fetch_add(1);
        last = serial;
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    auto c = Get(cache, 1);
    if (c != nullptr) cache.Drop(1, c.get());
    std::this_thread::yield();
  }
  stop.store(true);
  for (auto& t : getters) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GE(dials_.load(), 100);
}

}  // namespace
}  // namespace cell::rpc
