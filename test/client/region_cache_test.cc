// The client's region cache: hits cost no table read; "wrong owner" and failed connections send the next lookup to
// the table; a stale entry never outlives the complaint that exposes it.
#include "client/region_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "membership/in_memory_membership.h"
#include "membership/zookeeper_membership.h"

namespace cell::client {
namespace {

using membership::InMemoryMembership;
using membership::ServerInfo;

ServerInfo Server(uint64_t id) {
  return ServerInfo{id, {{"tcp", "tcp://127.0.0.1:" + std::to_string(7000 + id)}}, 1u << 30};
}

// The table, counting the reads the cache makes of it.
class CountingTable final : public membership::RegionTableReader {
 public:
  explicit CountingTable(membership::RegionTableReader* table) : table_(table) {}
  StatusOr<std::vector<ServerInfo>> ListServers() override {
    ++reads;
    return table_->ListServers();
  }
  StatusOr<membership::RegionEntry> GetRegion(uint32_t region) override {
    ++reads;
    return table_->GetRegion(region);
  }
  StatusOr<std::vector<membership::RegionEntry>> ListRegions() override {
    ++reads;
    return table_->ListRegions();
  }
  StatusOr<uint32_t> RootRegion() override {
    ++reads;
    return table_->RootRegion();
  }
  std::atomic<int> reads{0};

 private:
  membership::RegionTableReader* table_;
};

class RegionCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(table_.RegisterServer(Server(1)).ok());
    ASSERT_TRUE(table_.RegisterServer(Server(2)).ok());
    auto id = table_.AllocateRegionId();
    ASSERT_TRUE(id.ok());
    region_ = *id;
    ASSERT_TRUE(table_.CreateRegion(region_, 1).ok());
  }
  InMemoryMembership table_;
  CountingTable counting_{&table_};
  RegionCache cache_{&counting_};
  uint32_t region_ = 0;
};

TEST_F(RegionCacheTest, ASecondLookupIsServedFromTheCache) {
  auto first = cache_.Lookup(region_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->entry.owner, 1u);
  EXPECT_EQ(first->entry.epoch, 1u);
  EXPECT_EQ(first->owner(), Server(1));
  const int reads = counting_.reads.load();
  EXPECT_EQ(reads, 2);  // the entry, and the servers (whose addresses were unknown)
  for (int i = 0; i < 100; ++i) {
    auto again = cache_.Lookup(region_);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->entry, first->entry);
  }
  EXPECT_EQ(counting_.reads.load(), reads);
  EXPECT_EQ(cache_.stats().hits, 1u);  // the first hit, under the lock; the thread remembers the route after it
}

TEST_F(RegionCacheTest, WrongOwnerSendsTheNextLookupToTheTable) {
  ASSERT_TRUE(cache_.Lookup(region_).ok());
  ASSERT_TRUE(table_.ChangeOwner(region_, 1, 2).ok());
  // The cache does not know yet: it still routes to server 1 ...
  EXPECT_EQ(cache_.Lookup(region_)->entry.owner, 1u);
  // ... which answers "not mine; I know the region at epoch 2".
  cache_.OnWrongOwner(region_, 1, 2);
  auto route = cache_.Lookup(region_);
  ASSERT_TRUE(route.ok());
  EXPECT_EQ(route->entry.owner, 2u);
  EXPECT_EQ(route->entry.epoch, 2u);
  EXPECT_EQ(route->owner(), Server(2));
  EXPECT_EQ(cache_.stats().invalidations, 1u);
}

// A thread's remembered routes are its cache's: a new cache (at the same address, as it may well be) reads the table,
// and routes by it, though the thread remembers the same region's route from the old cache at the same generation.
TEST_F(RegionCacheTest, ANewCacheDoesNotUseAnotherCachesRememberedRoutes) {
  std::optional<RegionCache> cache;
  cache.emplace(&counting_);
  ASSERT_TRUE(cache->Lookup(region_).ok());
  ASSERT_EQ(cache->Lookup(region_)->entry.owner, 1u);  // remembered now
  ASSERT_TRUE(table_.ChangeOwner(region_, 1, 2).ok());
  cache.emplace(&counting_);
  ASSERT_EQ(cache->Lookup(region_)->entry.owner, 2u);  // a miss: read from the table
  const int reads = counting_.reads.load();
  EXPECT_EQ(cache->Lookup(region_)->entry.owner, 2u);
  EXPECT_EQ(cache->Lookup(region_)->entry.owner, 2u);
  EXPECT_EQ(counting_.reads.load(), reads);
}

TEST_F(RegionCacheTest, AComplaintOlderThanTheCachedEntryIsIgnored) {
  ASSERT_TRUE(table_.ChangeOwner(region_, 1, 2).ok());
  ASSERT_TRUE(cache_.Lookup(region_).ok());  // epoch 2, owner 2
  const int reads = counting_.reads.load();
  // Server 1 has not heard of the move (it knows epoch 1): the cache already routes elsewhere.
  cache_.OnWrongOwner(region_, 1, 1);
  EXPECT_EQ(cache_.Lookup(region_)->entry.owner, 2u);
  EXPECT_EQ(counting_.reads.load(), reads);
  // The owner itself complaining is always believed, whatever epoch it names (it may lag the table).
  cache_.OnWrongOwner(region_, 2, 1);
  EXPECT_EQ(cache_.Lookup(region_)->entry.owner, 2u);
  EXPECT_GT(counting_.reads.load(), reads);
}

TEST_F(RegionCacheTest, AnUnreachableServersRegionsAndAddressesAreReadAgain) {
  ASSERT_TRUE(cache_.Lookup(region_).ok());
  ASSERT_TRUE(cache_.Lookup(region_).ok());  // a hit: remembered by this thread
  // Server 1 dies and comes back at another address; meanwhile its region moved to server 2.
  ASSERT_TRUE(table_.UnregisterServer(1).ok());
  ServerInfo moved = Server(1);
  moved.addresses["tcp"] = "tcp://127.0.0.1:9999";
  ASSERT_TRUE(table_.RegisterServer(moved).ok());
  auto region2 = table_.AllocateRegionId();
  ASSERT_TRUE(region2.ok());
  ASSERT_TRUE(table_.CreateRegion(*region2, 1).ok());
  ASSERT_TRUE(table_.ChangeOwner(region_, 1, 2).ok());

  cache_.OnServerUnreachable(1);
  auto route = cache_.Lookup(region_);
  ASSERT_TRUE(route.ok());
  EXPECT_EQ(route->entry.owner, 2u);
  auto other = cache_.Lookup(*region2);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->owner().addresses.at("tcp"), "tcp://127.0.0.1:9999");
}

TEST_F(RegionCacheTest, RegionsWithoutALiveOwnerAreUnavailableAndUnknownOnesNotFound) {
  EXPECT_TRUE(cache_.Lookup(region_ + 100).status().IsNotFound());
  ASSERT_TRUE(table_.UnregisterServer(1).ok());
  Status s = cache_.Lookup(region_).status();
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("server 1"), std::string::npos) << s.message();
  ASSERT_TRUE(table_.ChangeOwner(region_, 1, 0).ok());
  s = cache_.Lookup(region_).status();
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("no owner"), std::string::npos) << s.message();
}

// Owners keep moving while readers look up and complain, as clients do. After a reader's complaint about an epoch,
// its next lookup never returns an entry older than that epoch (a stale entry costs a retry, never more), and the
// cache never goes back in epochs for a reader that saw a newer one.
TEST_F(RegionCacheTest, ConcurrentMovesAndComplaintsNeverGoBackInEpochs) {
  constexpr int kReaders = 3, kMoves = 5000;
  std::atomic<bool> moved_all{false};
  std::atomic<int> readers_started{0};
  std::atomic<uint64_t> table_epoch{1};
  std::thread mover([&] {
    while (readers_started.load() < kReaders) std::this_thread::yield();
    uint64_t epoch = 1;
    for (int i = 0; i < kMoves; ++i) {
      auto moved = table_.ChangeOwner(region_, epoch, epoch % 2 == 1 ? 2 : 1);
      if (!moved.ok()) {
        ADD_FAILURE() << moved.status().ToString();
        break;  // still let the readers finish
      }
      epoch = moved->epoch;
      table_epoch.store(epoch);
      std::this_thread::yield();
    }
    moved_all = true;
  });
  std::vector<std::thread> readers;
  std::atomic<int> retries{0};
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&] {
      ++readers_started;
      uint64_t seen = 0;
      while (!moved_all.load()) {
        auto route = cache_.Lookup(region_);
        if (!route.ok()) {
          // Only "moved while being looked up": retry.
          ASSERT_TRUE(route.status().IsUnavailable()) << route.status().ToString();
          continue;
        }
        ASSERT_GE(route->entry.epoch, seen);
        seen = route->entry.epoch;
        // The "server" checks: if the table has moved on, it complains with the current epoch.
        auto current = table_.GetRegion(region_);
        ASSERT_TRUE(current.ok());
        if (current->epoch != route->entry.epoch) {
          cache_.OnWrongOwner(region_, route->entry.owner, current->epoch);
          ++retries;
          auto again = cache_.Lookup(region_);
          if (!again.ok()) continue;
          ASSERT_GE(again->entry.epoch, current->epoch);
          seen = again->entry.epoch;
        }
      }
    });
  }
  for (auto& r : readers) r.join();
  mover.join();
  EXPECT_GT(retries.load(), 0);
  EXPECT_EQ(table_epoch.load(), 1u + kMoves);
  auto final_route = cache_.Lookup(region_);
  ASSERT_TRUE(final_route.ok());
  cache_.OnWrongOwner(region_, final_route->entry.owner, table_epoch.load());
  EXPECT_EQ(cache_.Lookup(region_)->entry.epoch, table_epoch.load());
}

TEST(ParseZooKeeperUri, ReadsHostsAndTheClusterPath) {
  auto o = membership::ParseZooKeeperUri("zk://127.0.0.1:2181,10.0.0.2:2182/prod/cell/east");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->connect, "127.0.0.1:2181,10.0.0.2:2182");
  EXPECT_EQ(o->root, "/prod/cell");
  EXPECT_EQ(o->cluster, "east");
  o = membership::ParseZooKeeperUri("zk://localhost:2181");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->root, "/cell");
  EXPECT_EQ(o->cluster, "default");
  for (const char* bad : {"tcp://127.0.0.1:2181", "zk://", "zk://host", "zk://host:port/a/b", "zk://h:1/onlyone",
                          "zk://h:1,/a/b", "zk://h:1/a//b"}) {
    auto r = membership::ParseZooKeeperUri(bad);
    EXPECT_TRUE(r.status().IsInvalidArgument()) << bad;
    EXPECT_NE(r.status().message().find("zk://127.0.0.1:2181/cell/default"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace cell::client
