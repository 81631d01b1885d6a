// Transactions through failures, with real processes: three cell-servers sharing a real ZooKeeper and one data
// directory (--durability=sync, a 2 s ZooKeeper session), as in test/server/takeover_test.cc, with enough keys that
// the tree spans all three servers.
//   - A client that dies holding locks. Simulated exactly with the protocol's own steps (TXN_PREPARE of every key,
//     with the primary naming its secondaries, and then nothing; or TXN_DECIDE at the primary too, and then
//     nothing), for each placement of the primary and the secondaries on the root's server and the others. Until the
//     locks expire, plain reads of the keys wait and the servers count the locks; within a bound after the expiry
//     (the resolver runs every 100 ms) the locks are gone, ended by the resolvers, and the keys hold the old values
//     (undecided: rolled back) or the new ones (decided: rolled forward, across servers by TXN_STATUS / TXN_APPLY).
//   - A server that dies holding locks (prepared and decided transactions) and is taken over by a survivor, or
//     restarted on its data directory: its locks come back from its log and are finished the same way.
//   - After a takeover, compare-and-swaps, transactions and batches on the taken-over region's keys commit.
//   - The bank under a SIGKILL of a server (the root's or another) while transfers run, with a takeover or a restart:
//     the transfers go on, the total holds in every audit and at the end, every account is readable, and no lock is
//     counted 5 s after the run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cell/client.h"
#include "client/store_client.h"
#include "common/wall_clock.h"
#include "rpc/key.h"
#include "rpc/proto/store.pb.h"
#include "server/store_service.h"
#include "test/join_at_end.h"
#include "test/membership/cluster_table.h"
#include "test/membership/zk_harness.h"
#include "test/server/server_harness.h"

namespace cell {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using proto::StoreMethod;

// The keys of the tests of locks left behind (in 32 KiB meganodes, so that a lock stays where it was taken: in 16 KiB
// ones, whose 16 slots a node tree of two levels mostly fills with its reserve, nearly every write splits its
// meganode, moving keys and their locks to other servers), and the accounts of the bank (long: few fit a 16 KiB
// meganode, so that 400 of them spread over all three servers and meganodes split as transfers run).
std::string Key(int i) { return fmt::format("key{:05d}", i) + std::string(30, '.'); }
std::string Value(int i) { return fmt::format("old-{}", i); }
std::string Account(int i) { return fmt::format("acct{:06d}", i) + std::string(100, '.'); }
std::string Short(const std::string& key) { return key.substr(0, key.find('.')); }

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Polls `done` every 20 ms until it holds or `timeout` passes (a condition with a deadline, not a timed wait).
template <typename F>
bool WaitFor(std::chrono::milliseconds timeout, F done) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

class TxnFailures : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& zk = testing::ZooKeeperHarness::Shared();
    ASSERT_FALSE(zk.connect().empty()) << zk.error();
    name_ = fmt::format("{}-{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), getpid());
    std::replace(name_.begin(), name_.end(), '/', '-');  // a parameterized test's name: one path component
    cluster_ = fmt::format("zk://{}/cell/{}", zk.connect(), name_);
    dir_ = fmt::format("{}/cell-txn-failures-{}", ::testing::TempDir(), name_);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    servers_.resize(3);
    std::vector<std::thread> starting;
    for (int i = 0; i < 3; ++i) starting.emplace_back([this, i] { servers_[i] = Start(i + 1); });
    for (auto& t : starting) t.join();
    for (const auto& s : servers_) ASSERT_FALSE(s.ready.empty()) << "a server did not start";
    auto table = testing::OpenClusterTable(cluster_);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    table_ = std::move(*table);
  }
  void TearDown() override {
    servers_.clear();
    std::filesystem::remove_all(dir_);
  }

  testing::RunningServer Start(int id) {
    std::vector<std::string> args = {"--listen=tcp://127.0.0.1:0",
                                     "--membership=" + cluster_,
                                     fmt::format("--id={}", id),
                                     "--workers=2",
                                     "--zk-session-timeout-ms=2000",
                                     "--data-dir=" + dir_,
                                     "--durability=sync",
                                     "--meganode-size=" + meganode_size_,
                                     "--meganodes=4096",
                                     "--region-size=64MiB"};
    for (const std::string& a : testing::ServerKeyArgs()) args.push_back(a);
    return testing::StartServer(args);
  }

  std::unique_ptr<Client> Open(std::chrono::milliseconds timeout = 20s, const std::string& search = "server") {
    ClientOptions options;
    options.cluster = cluster_;
    options.search = search;
    options.timeout = timeout;
    options.key_file = testing::ClientKeyFile();
    auto client = Client::Open(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // A client's engine, whose path cache names each key's leaf meganode and which can send a transaction's steps.
  std::unique_ptr<client::StoreClient> NewStoreClient(std::chrono::milliseconds timeout = 10s) {
    client::StoreClientOptions options;
    options.timeout = timeout;
    auto key = rpc::ReadKeyFile(testing::ClientKeyFile(), rpc::kClientKeyName);
    EXPECT_TRUE(key.ok()) << key.status().ToString();
    options.key = key.ok() ? *key : rpc::Key{};
    auto client = client::StoreClient::Create(table_.get(), options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }

  uint64_t RootOwner() {
    auto root = table_->RootRegion();
    EXPECT_TRUE(root.ok()) << root.status().ToString();
    if (!root.ok()) return 0;
    auto entry = table_->GetRegion(*root);
    return entry.ok() ? entry->owner : 0;
  }

  // The server holding each key now: a Get through a cold client, whose path cache then names the key's leaf.
  std::map<std::string, uint64_t> Locate(const std::vector<std::string>& keys) {
    std::map<std::string, uint64_t> out;
    auto locator = NewStoreClient();
    if (locator == nullptr) return out;
    for (const std::string& k : keys) {
      std::string value;
      const Status s = locator->Get(k, &value);
      EXPECT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
      auto entry = table_->GetRegion(locator->CachedLeaf(k).region);
      out[k] = entry.ok() ? entry->owner : 0;
    }
    return out;
  }

  // Puts every pair, from four threads (their fdatasyncs shared by group commit).
  void Load(const std::vector<std::pair<std::string, std::string>>& pairs) {
    auto client = Open();
    ASSERT_NE(client, nullptr);
    std::atomic<size_t> next{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (size_t i = next.fetch_add(1); i < pairs.size(); i = next.fetch_add(1)) {
          const Status s = client->Put(pairs[i].first, pairs[i].second);
          ASSERT_TRUE(s.ok()) << s.ToString();
        }
      });
    }
    for (auto& t : threads) t.join();
  }

  // Each live server's stats, by id (empty on an error, which is reported).
  std::map<uint64_t, Client::ServerStats> Stats(Client& client) {
    std::map<uint64_t, Client::ServerStats> out;
    auto stats = client.StoreStats();
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    if (stats.ok()) {
      for (const auto& s : *stats) out[s.server] = s;
    }
    return out;
  }
  static uint64_t Sum(const std::map<uint64_t, Client::ServerStats>& stats, uint64_t Client::ServerStats::*field) {
    uint64_t n = 0;
    for (const auto& [id, s] : stats) n += s.*field;
    return n;
  }

  // Until the servers' background splits after a load are over.
  void Settle(Client& client) { EXPECT_TRUE(testing::WaitForSplitsToSettle(client)) << "meganodes kept splitting"; }

  // The bank under a server failure (see the tests).
  enum class Victim { kOther, kRoot };
  enum class Recovery { kTakeover, kRestart };
  void RunBank(Victim victim_kind, Recovery recovery);

  std::string meganode_size_ = "16KiB";
  std::string name_, cluster_, dir_;
  std::vector<testing::RunningServer> servers_;
  std::unique_ptr<membership::ZooKeeperMembership> table_;
};

// A transaction's steps, sent as a client's commit sends them.
struct Write {
  std::string key;
  std::optional<std::string> value;  // nullopt: a delete
};

Status Prepare(client::StoreClient& store, uint64_t txid, const Write& w, const std::string& primary,
               const std::vector<std::string>& secondaries, uint64_t expires_us) {
  proto::StoreReply reply;
  CELL_RETURN_IF_ERROR(store.RunKeyStep(
      StoreMethod::TXN_PREPARE, /*idempotent=*/true, w.key,
      [&](proto::KeyRequest* r) {
        proto::TxnStep* t = r->mutable_txn();
        t->set_txid(txid);
        t->set_expect(0);  // read nothing
        t->set_put(w.value.has_value());
        if (w.value) r->set_value(*w.value);
        t->set_primary(primary);
        for (const std::string& s : secondaries) t->add_secondaries(s);
        t->set_expires_us(expires_us);
      },
      Clock::now() + 10s, &reply));
  if (!reply.conflict().empty()) return Status::Aborted(reply.conflict());
  return Status::OK();
}

// Prepares every write (the first is the primary) with the lock expiring at `expires_us`; with `decide`, turns the
// primary's lock committed too. Then nothing more: the client has died.
void LockAndDie(client::StoreClient& store, uint64_t txid, const std::vector<Write>& writes, uint64_t expires_us,
                bool decide) {
  std::vector<std::string> secondaries;
  for (size_t i = 1; i < writes.size(); ++i) secondaries.push_back(writes[i].key);
  for (size_t i = 0; i < writes.size(); ++i) {
    const Status s =
        Prepare(store, txid, writes[i], writes[0].key, i == 0 ? secondaries : std::vector<std::string>{}, expires_us);
    ASSERT_TRUE(s.ok()) << "TXN_PREPARE of " << Short(writes[i].key) << ": " << s.ToString();
  }
  if (!decide) return;
  proto::StoreReply reply;
  const Status s = store.RunKeyStep(
      StoreMethod::TXN_DECIDE, /*idempotent=*/true, writes[0].key,
      [&](proto::KeyRequest* r) { r->mutable_txn()->set_txid(txid); }, Clock::now() + 10s, &reply);
  ASSERT_TRUE(s.ok()) << "TXN_DECIDE: " << s.ToString();
  ASSERT_TRUE(reply.committed()) << "TXN_DECIDE did not commit";
}

// What a key holds through a client (nullopt: absent), or the error.
StatusOr<std::optional<std::string>> Read(Client& client, const std::string& key) {
  std::string value;
  const Status s = client.Get(key, &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return s;
  return std::optional<std::string>(value);
}

std::string Show(const StatusOr<std::optional<std::string>>& v) {
  if (!v.ok()) return v.status().ToString();
  return *v ? "'" + **v + "'" : "absent";
}

// ---------------------------------------------------------------------------------------------------------------
// A client that dies holding locks.

enum class Placement { kRoot, kOther, kPrimaryRootSecondariesOther, kPrimaryOtherSecondariesRoot, kTwoOthers };

struct DeadClientCase {
  Placement placement;
  bool decided;  // TXN_DECIDE made (rolled forward) or not (rolled back)
};

std::string PlacementName(Placement p) {
  switch (p) {
    case Placement::kRoot:
      return "AllOnTheRootServer";
    case Placement::kOther:
      return "AllOnAnotherServer";
    case Placement::kPrimaryRootSecondariesOther:
      return "PrimaryOnTheRootServerSecondariesOnAnother";
    case Placement::kPrimaryOtherSecondariesRoot:
      return "PrimaryOnAnotherServerSecondariesOnTheRoot";
    case Placement::kTwoOthers:
      return "PrimaryAndSecondariesOnTwoOtherServers";
  }
  return "?";
}

class DeadClient : public TxnFailures, public ::testing::WithParamInterface<DeadClientCase> {
 protected:
  DeadClient() { meganode_size_ = "32KiB"; }
};

TEST_P(DeadClient, ItsLocksExpireAndTheResolversFinishItsTransaction) {
  constexpr int kKeys = 1500;
  const auto [placement, decided] = GetParam();
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) {
    pairs.emplace_back(Key(i), Value(i));
    keys.push_back(Key(i));
  }
  ASSERT_NO_FATAL_FAILURE(Load(pairs));
  auto client = Open();
  ASSERT_NE(client, nullptr);
  Settle(*client);
  const uint64_t root = RootOwner();
  ASSERT_NE(root, 0u);
  std::vector<uint64_t> others;
  for (uint64_t id = 1; id <= 3; ++id) {
    if (id != root) others.push_back(id);
  }
  // Where the keys are now; the primary's server and the secondaries'.
  const std::map<std::string, uint64_t> where = Locate(keys);
  uint64_t p_server = root, s_server = root;
  switch (placement) {
    case Placement::kRoot:
      break;
    case Placement::kOther:
      p_server = s_server = others[0];
      break;
    case Placement::kPrimaryRootSecondariesOther:
      s_server = others[0];
      break;
    case Placement::kPrimaryOtherSecondariesRoot:
      p_server = others[0];
      break;
    case Placement::kTwoOthers:
      p_server = others[0];
      s_server = others[1];
      break;
  }
  std::map<uint64_t, std::vector<int>> on;
  for (int i = 0; i < kKeys; ++i) on[where.at(Key(i))].push_back(i);
  for (uint64_t id = 1; id <= 3; ++id)
    fmt::print("server {}{}: {} keys\n", id, id == root ? " (root)" : "", on[id].size());
  ASSERT_GE(on[p_server].size(), 3u) << "server " << p_server << " holds too few keys";
  ASSERT_GE(on[s_server].size(), 3u) << "server " << s_server << " holds too few keys";
  // Keys from the middle of each server's share (the lock's fields say which is the primary).
  const int p = on[p_server][on[p_server].size() / 2];
  const int s1 = on[s_server][on[s_server].size() / 2 + 1], s2 = on[s_server][on[s_server].size() / 2 + 2];
  // Before: p and s2 hold their old values; s1 is absent. The transaction puts p and s1 and deletes s2.
  ASSERT_TRUE(client->Delete(Key(s1)).ok());
  const std::vector<Write> writes = {{Key(p), "new-p"}, {Key(s1), "new-s1"}, {Key(s2), std::nullopt}};
  const std::vector<std::optional<std::string>> old_values = {Value(p), std::nullopt, Value(s2)};
  const std::vector<std::optional<std::string>> new_values = {"new-p", "new-s1", std::nullopt};
  const std::vector<std::optional<std::string>>& expected = decided ? new_values : old_values;
  fmt::print("primary {} on server {}, secondaries {} and {} on server {}; {}\n", Short(Key(p)), p_server,
             Short(Key(s1)), Short(Key(s2)), s_server, decided ? "decided (commit)" : "undecided (abort)");

  auto store = NewStoreClient();
  ASSERT_NE(store, nullptr);
  std::mt19937_64 rng(std::random_device{}());
  const uint64_t txid = rng() | 1;
  constexpr auto kExpiry = 2s;
  const uint64_t expires_us = WallMicros() + std::chrono::duration_cast<std::chrono::microseconds>(kExpiry).count();
  const auto locked_at = Clock::now();
  ASSERT_NO_FATAL_FAILURE(LockAndDie(*store, txid, writes, expires_us, decided));

  // Meanwhile: readers wait. Each key is read by a client with a long timeout, which must come back only once the
  // lock is gone, with what the transaction's outcome leaves.
  auto patient = Open(10s);
  ASSERT_NE(patient, nullptr);
  std::vector<StatusOr<std::optional<std::string>>> waited(writes.size(), Status::Internal("not read"));
  std::vector<uint64_t> returned_us(writes.size());
  std::atomic<bool> unused_stop{false};
  std::vector<std::thread> readers;
  testing::JoinAtEnd join_readers{unused_stop, readers};
  for (size_t i = 0; i < writes.size(); ++i) {
    readers.emplace_back([&, i] {
      waited[i] = Read(*patient, writes[i].key);
      returned_us[i] = WallMicros();
    });
  }
  // A reader with a short timeout gives up.
  auto hasty = Open(300ms);
  ASSERT_NE(hasty, nullptr);
  for (const Write& w : writes) {
    const auto got = Read(*hasty, w.key);
    EXPECT_TRUE(got.status().IsUnavailable() || got.status().IsDeadlineExceeded())
        << Short(w.key) << " is locked, yet a plain read got " << Show(got);
  }
  // The servers count the locks where the keys are.
  auto during = Stats(*client);
  const bool before_expiry = Clock::now() < locked_at + kExpiry;
  EXPECT_TRUE(before_expiry) << "too slow to look at the locks before they expired";
  if (before_expiry && !during.empty()) {
    // At least these (a lock that a meganode split moved to another server since is counted there too, and still at
    // its first server until it expires there).
    std::map<uint64_t, uint64_t> expected_locks = {{p_server, 1}};
    expected_locks[s_server] += 2;
    for (const auto& [id, n] : expected_locks) {
      EXPECT_GE(during[id].txn_locks, n) << "locks on server " << id;
    }
  }
  fmt::print("locks per server while held:");
  for (const auto& [id, s] : during) fmt::print(" {}: {}", id, s.txn_locks);
  fmt::print("\n");

  // Within the bound, the locks are gone, ended by the resolvers.
  const auto bound = kExpiry + 3s;
  std::map<uint64_t, Client::ServerStats> after;
  const bool ended =
      WaitFor(std::chrono::duration_cast<std::chrono::milliseconds>(locked_at + bound - Clock::now()), [&] {
        after = Stats(*client);
        return !after.empty() && Sum(after, &Client::ServerStats::txn_locks) == 0 &&
               Sum(after, &Client::ServerStats::txn_resolved) > 0;
      });
  const double ended_s = Seconds(Clock::now() - locked_at);
  fmt::print("locks {} {:.2f} s after they were taken (expiry {} s); resolved per server:", ended ? "gone" : "NOT gone",
             ended_s, kExpiry.count());
  for (const auto& [id, s] : after) fmt::print(" {}: {} (locks {})", id, s.txn_resolved, s.txn_locks);
  fmt::print("\n");
  EXPECT_EQ(Sum(after, &Client::ServerStats::txn_locks), 0u) << "locks still counted after the bound";
  EXPECT_GT(Sum(after, &Client::ServerStats::txn_resolved), 0u) << "no resolver ended a lock";
  // The keys hold what the outcome leaves, and are readable (not locked) now.
  auto fresh = Open(1s);
  ASSERT_NE(fresh, nullptr);
  for (size_t i = 0; i < writes.size(); ++i) {
    const auto got = Read(*fresh, writes[i].key);
    ASSERT_TRUE(got.ok()) << Short(writes[i].key) << " is not readable " << ended_s << " s after it was locked (expiry "
                          << kExpiry.count() << " s): " << got.status().ToString();
    EXPECT_EQ(*got, expected[i]) << Short(writes[i].key);
  }
  for (auto& r : readers) r.join();
  for (size_t i = 0; i < writes.size(); ++i) {
    ASSERT_TRUE(waited[i].ok()) << "the patient read of " << Short(writes[i].key) << ": "
                                << waited[i].status().ToString();
    EXPECT_EQ(*waited[i], expected[i]) << "the patient read of " << Short(writes[i].key);
    EXPECT_GE(returned_us[i], expires_us)
        << "the patient read of " << Short(writes[i].key) << " came back before the lock could have been resolved";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Placements, DeadClient,
    ::testing::Values(DeadClientCase{Placement::kRoot, false}, DeadClientCase{Placement::kRoot, true},
                      DeadClientCase{Placement::kOther, false}, DeadClientCase{Placement::kOther, true},
                      DeadClientCase{Placement::kPrimaryRootSecondariesOther, false},
                      DeadClientCase{Placement::kPrimaryRootSecondariesOther, true},
                      DeadClientCase{Placement::kPrimaryOtherSecondariesRoot, false},
                      DeadClientCase{Placement::kPrimaryOtherSecondariesRoot, true},
                      DeadClientCase{Placement::kTwoOthers, false}, DeadClientCase{Placement::kTwoOthers, true}),
    [](const ::testing::TestParamInfo<DeadClientCase>& info) {
      return PlacementName(info.param.placement) + (info.param.decided ? "_Decided" : "_Undecided");
    });

// ---------------------------------------------------------------------------------------------------------------
// A server that dies holding locks.

struct DeadServerCase {
  bool root;     // the victim is the root's server (else another)
  bool restart;  // restarted on its data directory (else taken over by a survivor)
};

class DeadServer : public TxnFailures, public ::testing::WithParamInterface<DeadServerCase> {
 protected:
  DeadServer() { meganode_size_ = "32KiB"; }
};

TEST_P(DeadServer, ItsLocksComeBackFromItsLogAndAreFinished) {
  constexpr int kKeys = 1500;
  const auto [kill_root, restart] = GetParam();
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) {
    pairs.emplace_back(Key(i), Value(i));
    keys.push_back(Key(i));
  }
  ASSERT_NO_FATAL_FAILURE(Load(pairs));
  auto client = Open();
  ASSERT_NE(client, nullptr);
  Settle(*client);
  const uint64_t root = RootOwner();
  ASSERT_NE(root, 0u);
  const uint64_t victim = kill_root ? root : (root == 2 ? 3 : 2);
  const std::map<std::string, uint64_t> where = Locate(keys);
  std::vector<int> mine;
  for (int i = 0; i < kKeys; ++i) {
    if (where.at(Key(i)) == victim) mine.push_back(i);
  }
  ASSERT_GE(mine.size(), 8u) << "the victim holds too few keys";
  // Two transactions whose keys are all the victim's: A prepared only (to be rolled back), B decided (to be rolled
  // forward). Each puts its primary and deletes its secondary.
  const size_t mid = mine.size() / 2;
  const int pa = mine[mid], sa = mine[mid + 1], pb = mine[mid + 2], sb = mine[mid + 3];
  auto store = NewStoreClient();
  ASSERT_NE(store, nullptr);
  std::mt19937_64 rng(std::random_device{}());
  constexpr auto kExpiry = 6s;  // long enough for a restart to come back before it
  const uint64_t expires_us = WallMicros() + std::chrono::duration_cast<std::chrono::microseconds>(kExpiry).count();
  const auto locked_at = Clock::now();
  ASSERT_NO_FATAL_FAILURE(
      LockAndDie(*store, rng() | 1, {{Key(pa), "new-pa"}, {Key(sa), std::nullopt}}, expires_us, /*decide=*/false));
  ASSERT_NO_FATAL_FAILURE(
      LockAndDie(*store, rng() | 1, {{Key(pb), "new-pb"}, {Key(sb), std::nullopt}}, expires_us, /*decide=*/true));
  auto during = Stats(*client);
  ASSERT_EQ(during[victim].txn_locks, 4u) << "the victim should hold the four locks";

  auto recorded = server::StoreService::RecordedRegions(dir_, victim);
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  const uint32_t victim_node = recorded->first;
  servers_[victim - 1].process->Kill();
  const auto killed_at = Clock::now();
  if (restart) {
    servers_[victim - 1] = Start(static_cast<int>(victim));
    ASSERT_FALSE(servers_[victim - 1].ready.empty()) << "the victim did not restart";
    const double restart_s = Seconds(Clock::now() - killed_at);
    auto entry = table_->GetRegion(victim_node);
    ASSERT_TRUE(entry.ok());
    ASSERT_EQ(entry->owner, victim) << "a survivor took the victim's region before its restart (" << restart_s << " s)";
    // Its locks are back, from its log, and counted.
    const bool before_expiry = Clock::now() < locked_at + kExpiry;
    auto stats = Stats(*client);
    fmt::print("restarted in {:.2f} s; its locks now: {}\n", restart_s, stats[victim].txn_locks);
    ASSERT_TRUE(before_expiry) << "the restart took too long to see the locks before they expired";
    EXPECT_EQ(stats[victim].txn_locks, 4u) << "the restarted server should have recovered the four locks";
  } else {
    const bool moved = WaitFor(30s, [&] {
      auto entry = table_->GetRegion(victim_node);
      return entry.ok() && entry->owner != victim && entry->owner != 0;
    });
    ASSERT_TRUE(moved) << "no survivor took the victim's region";
    fmt::print("taken over by server {} {:.2f} s after the kill\n", table_->GetRegion(victim_node)->owner,
               Seconds(Clock::now() - killed_at));
  }

  // The recovery ends when the region is served again: when one of the victim's keys that no transaction locked can
  // be read. (A takeover is in the table before the survivor has replayed the region's log; under ThreadSanitizer
  // the replay takes seconds.)
  auto fresh = Open(1s);
  ASSERT_NE(fresh, nullptr);
  const std::string unlocked = Key(mine[0]);
  ASSERT_TRUE(WaitFor(60s, [&] { return Read(*fresh, unlocked).ok(); }))
      << "the victim's region was not served again within 60 s of the kill";
  const auto served_at = Clock::now();
  fmt::print("the region is served again {:.2f} s after the kill\n", Seconds(served_at - killed_at));

  // Within the bound (the expiry, or the recovery if later, plus a few resolver rounds), the keys are readable and
  // hold what each outcome leaves.
  const std::vector<std::pair<std::string, std::optional<std::string>>> expected = {
      {Key(pa), Value(pa)}, {Key(sa), Value(sa)}, {Key(pb), "new-pb"}, {Key(sb), std::nullopt}};
  std::vector<StatusOr<std::optional<std::string>>> got(expected.size(), Status::Internal("not read"));
  const auto bound = std::max(locked_at + kExpiry, served_at) + 3s;
  const bool finished = WaitFor(std::chrono::duration_cast<std::chrono::milliseconds>(bound - Clock::now()), [&] {
    bool all = true;
    for (size_t i = 0; i < expected.size(); ++i) {
      got[i] = Read(*fresh, expected[i].first);
      all = all && got[i].ok();
    }
    return all;
  });
  fmt::print("the keys are {} {:.2f} s after they were locked (expiry {} s)\n", finished ? "readable" : "NOT readable",
             Seconds(Clock::now() - locked_at), kExpiry.count());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << Short(expected[i].first) << " is still locked or unreadable: " << Show(got[i]);
    EXPECT_EQ(*got[i], expected[i].second) << Short(expected[i].first);
  }
  // No server counts a lock any more, and the server that recovered them (the victim restarted, or the survivor that
  // took its region over, whose stats count the regions it took over too) says its resolver ended them.
  auto after = Stats(*client);
  EXPECT_EQ(Sum(after, &Client::ServerStats::txn_locks), 0u);
  const uint64_t recovered_by = restart ? victim : table_->GetRegion(victim_node)->owner;
  EXPECT_GE(after[recovered_by].txn_resolved, 1u) << "server " << recovered_by << "'s resolver ended no lock";
}

INSTANTIATE_TEST_SUITE_P(Failures, DeadServer,
                         ::testing::Values(DeadServerCase{true, true}, DeadServerCase{false, true},
                                           DeadServerCase{true, false}, DeadServerCase{false, false}),
                         [](const ::testing::TestParamInfo<DeadServerCase>& info) {
                           return std::string(info.param.root ? "RootServer" : "OtherServer") +
                                  (info.param.restart ? "_Restarted" : "_TakenOver");
                         });

// After a takeover, the survivor serves the dead server's region beside its own: compare-and-swaps, transactions and
// atomic batches on the region's keys work there as plain puts do (each request names its region, and the survivor
// routes it to the service holding that region).
class TakenOverRegion : public TxnFailures {
 protected:
  TakenOverRegion() { meganode_size_ = "32KiB"; }
};

TEST_F(TakenOverRegion, TakesCompareAndSwapsTransactionsAndBatches) {
  constexpr int kKeys = 1500;
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) {
    pairs.emplace_back(Key(i), Value(i));
    keys.push_back(Key(i));
  }
  ASSERT_NO_FATAL_FAILURE(Load(pairs));
  auto loader = Open();
  ASSERT_NE(loader, nullptr);
  Settle(*loader);
  const uint64_t root = RootOwner();
  ASSERT_NE(root, 0u);
  const uint64_t victim = root == 2 ? 3 : 2;
  const std::map<std::string, uint64_t> where = Locate(keys);
  std::string mine, other;  // a key of the victim's, and one of a survivor's
  for (int i = kKeys / 2; i < kKeys && (mine.empty() || other.empty()); ++i) {
    (where.at(Key(i)) == victim ? mine : other) = Key(i);
  }
  for (int i = 0; i < kKeys && (mine.empty() || other.empty()); ++i) {
    (where.at(Key(i)) == victim ? mine : other) = Key(i);
  }
  ASSERT_FALSE(mine.empty()) << "the victim holds no key";
  ASSERT_FALSE(other.empty());
  auto recorded = server::StoreService::RecordedRegions(dir_, victim);
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  servers_[victim - 1].process->Kill();
  const bool moved = WaitFor(30s, [&] {
    auto entry = table_->GetRegion(recorded->first);
    return entry.ok() && entry->owner != victim && entry->owner != 0;
  });
  ASSERT_TRUE(moved) << "no survivor took the victim's region";
  const uint64_t survivor = table_->GetRegion(recorded->first)->owner;
  auto client = Open(5s);
  ASSERT_NE(client, nullptr);
  // Plain operations (until the survivor serves the region).
  std::string value;
  ASSERT_TRUE(WaitFor(20s, [&] { return client->Get(mine, &value).ok(); })) << "the victim's key never came back";
  ASSERT_TRUE(client->Put(mine, "plain").ok());
  fmt::print("server {}'s region {} taken over by server {}; key {} (server {}'s) answers plain gets and puts\n",
             victim, recorded->first, survivor, Short(mine), victim);
  // A compare-and-swap.
  const Status cas = client->CompareAndSwap(mine, std::string("plain"), std::string("cas"));
  EXPECT_TRUE(cas.ok()) << "a compare-and-swap of the taken-over key: " << cas.ToString();
  // A transaction over it and another server's key.
  const Status txn = RunTransaction(*client, [&](Transaction& t) -> Status {
    std::string v;
    CELL_RETURN_IF_ERROR(t.Get(mine, &v));
    CELL_RETURN_IF_ERROR(t.Put(mine, v + "+txn"));
    return t.Put(other, "txn");
  });
  EXPECT_TRUE(txn.ok()) << "a transaction writing the taken-over key: " << txn.ToString();
  // An atomic batch.
  WriteBatch batch;
  batch.Put(mine, "batch");
  batch.Put(other, "batch");
  const Status written = client->Write(batch);
  EXPECT_TRUE(written.ok()) << "a batch writing the taken-over key: " << written.ToString();
  // What they left (or, where they failed, that they left no lock behind).
  auto fresh = Open(2s);
  ASSERT_NE(fresh, nullptr);
  const auto got = Read(*fresh, mine);
  EXPECT_TRUE(got.ok()) << Short(mine) << ": " << Show(got);
  if (cas.ok() && txn.ok() && written.ok()) {
    EXPECT_EQ(Show(got), "'batch'");
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The bank through a server failure.

// Counts by status, with one example of each code.
class Outcomes {
 public:
  void Add(const Status& s) {
    std::lock_guard lock(mu_);
    examples_.emplace(s.code(), s.ToString());
    ++counts_[s.code()];
  }
  uint64_t Count(Status::Code code) const {
    std::lock_guard lock(mu_);
    auto it = counts_.find(code);
    return it == counts_.end() ? 0 : it->second;
  }
  // Anything but OK, Aborted (gave up on conflicts), Unavailable (outcome unknown, or no server answered) and
  // DeadlineExceeded.
  std::string Unexpected() const {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& [code, example] : examples_) {
      if (code != Status::Code::kOk && code != Status::Code::kAborted && code != Status::Code::kUnavailable &&
          code != Status::Code::kDeadlineExceeded) {
        out += example + "; ";
      }
    }
    return out;
  }
  std::string Examples() const {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& [code, example] : examples_) out += fmt::format("{} x{}; ", example, counts_.at(code));
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::map<Status::Code, std::string> examples_;
  std::map<Status::Code, uint64_t> counts_;
};

void TxnFailures::RunBank(Victim victim_kind, Recovery recovery) {
  constexpr int kAccounts = 400, kInitial = 1000;
  constexpr int64_t kTotal = int64_t{kAccounts} * kInitial;
  constexpr auto kTxnTimeout = 20s;  // the transfers' and audits' (a transaction's deadline)
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> accounts;
  for (int i = 0; i < kAccounts; ++i) {
    pairs.emplace_back(Account(i), std::to_string(kInitial));
    accounts.push_back(Account(i));
  }
  ASSERT_NO_FATAL_FAILURE(Load(pairs));
  auto client = Open();
  ASSERT_NE(client, nullptr);
  Settle(*client);
  int holding = 0;
  for (const auto& [id, s] : Stats(*client)) holding += s.meganodes > 0 ? 1 : 0;
  ASSERT_EQ(holding, 3) << "the accounts should span all three servers";
  const uint64_t root = RootOwner();
  ASSERT_NE(root, 0u);
  std::map<uint64_t, int> held;
  for (const auto& [k, id] : Locate(accounts)) ++held[id];
  uint64_t victim = root;
  if (victim_kind == Victim::kOther) {
    victim = 0;
    for (uint64_t id = 1; id <= 3; ++id) {
      if (id != root && (victim == 0 || held[id] > held[victim])) victim = id;
    }
  }
  fmt::print("accounts per server: 1: {}, 2: {}, 3: {}; root: {}; victim: {}\n", held[1], held[2], held[3], root,
             victim);
  ASSERT_GT(held[victim], 0) << "the victim holds no account";
  auto recorded = server::StoreService::RecordedRegions(dir_, victim);
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  const uint32_t victim_node = recorded->first;

  std::atomic<bool> stop{false};
  // An audit (a scan of all 400 accounts, validated at its commit) rarely commits while four threads transfer: after
  // a few tries alongside them, the auditor holds new transfers back (those under way finish) until it commits.
  std::atomic<bool> hold{false};
  std::atomic<uint64_t> transfers{0}, audits{0}, held_audits{0}, bad_audits{0};
  Outcomes transfer_outcomes, audit_outcomes;
  std::vector<std::thread> threads;
  testing::JoinAtEnd join_threads{stop, threads};
  const char* searches[] = {"server", "client", "adaptive", "server"};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto c = Open(kTxnTimeout, searches[t]);
      ASSERT_NE(c, nullptr);
      std::mt19937_64 rng(t);
      while (!stop.load()) {
        while (hold.load() && !stop.load()) std::this_thread::sleep_for(1ms);  // polling the auditor's flag
        const int from = static_cast<int>(rng() % kAccounts), to = static_cast<int>(rng() % kAccounts);
        if (from == to) continue;
        const int amount = 1 + static_cast<int>(rng() % 10);
        const Status s = RunTransaction(
            *c,
            [&](Transaction& txn) -> Status {
              std::string a, b;
              CELL_RETURN_IF_ERROR(txn.Get(Account(from), &a));
              CELL_RETURN_IF_ERROR(txn.Get(Account(to), &b));
              CELL_RETURN_IF_ERROR(txn.Put(Account(from), std::to_string(std::stoi(a) - amount)));
              return txn.Put(Account(to), std::to_string(std::stoi(b) + amount));
            },
            50);
        transfer_outcomes.Add(s);
        if (s.ok()) transfers.fetch_add(1);
      }
    });
  }
  threads.emplace_back([&] {
    auto c = Open(kTxnTimeout, "server");
    ASSERT_NE(c, nullptr);
    while (!stop.load()) {
      int64_t total = 0;
      size_t seen = 0;
      TransactionOptions read_only;
      read_only.read_only = true;
      const auto audit = [&](Transaction& txn) -> Status {
        total = 0;
        std::vector<std::pair<std::string, std::string>> out;
        CELL_RETURN_IF_ERROR(txn.Scan(Account(0), Account(kAccounts), kAccounts + 1, &out));
        seen = out.size();
        for (const auto& [k, v] : out) total += std::stoll(v);
        return Status::OK();
      };
      Status s = RunTransaction(*c, audit, 5, read_only);
      if (s.IsAborted()) {
        hold.store(true);
        s = RunTransaction(*c, audit, 50, read_only);
        hold.store(false);
        if (s.ok()) held_audits.fetch_add(1);
      }
      audit_outcomes.Add(s);
      if (s.ok()) {
        audits.fetch_add(1);
        if (total != kTotal || seen != kAccounts) {
          bad_audits.fetch_add(1);
          ADD_FAILURE() << "an audit saw " << seen << " accounts holding " << total;
        }
      }
    }
  });
  std::this_thread::sleep_for(2s);  // transfers under way before the failure (a time, not a synchronisation)
  const uint64_t before_kill = transfers.load();
  servers_[victim - 1].process->Kill();
  const auto killed_at = Clock::now();
  if (recovery == Recovery::kRestart) {
    servers_[victim - 1] = Start(static_cast<int>(victim));
    EXPECT_FALSE(servers_[victim - 1].ready.empty()) << "the victim did not restart";
    fmt::print("server {} killed and restarted in {:.2f} s\n", victim, Seconds(Clock::now() - killed_at));
  } else {
    const bool moved = WaitFor(30s, [&] {
      auto entry = table_->GetRegion(victim_node);
      return entry.ok() && entry->owner != victim && entry->owner != 0;
    });
    EXPECT_TRUE(moved) << "no survivor took the victim's region";
    fmt::print("server {} killed; its region taken over by server {} {:.2f} s later\n", victim,
               table_->GetRegion(victim_node)->owner, Seconds(Clock::now() - killed_at));
  }
  const auto recovered_at = Clock::now();
  const uint64_t at_recovery = transfers.load();
  // The transfers go on.
  const bool went_on = WaitFor(30s, [&] { return transfers.load() >= at_recovery + 300; });
  EXPECT_TRUE(went_on) << "transfers did not go on after the recovery";
  std::this_thread::sleep_for(2s);  // and run a while longer
  stop.store(true);
  for (auto& t : threads) t.join();
  const auto ended_at = Clock::now();

  // No lock outlives its bound. A transaction whose commit the failure cut (its outcome unknown to its client) leaves
  // locks the recovered server lists again and resolves once they expire: 1 s past the transaction's deadline, which
  // is 20 s after it began, before the recovery. Every other transaction finished its commits, so its locks are gone
  // at once, or once their resolver ends them.
  constexpr auto kLockGrace = 1s, kResolverSlack = 3s;
  const auto bound = std::max(ended_at + 5s, recovered_at + kTxnTimeout + kLockGrace + kResolverSlack);
  auto checker = Open(20s);
  ASSERT_NE(checker, nullptr);
  std::map<uint64_t, Client::ServerStats> stats;
  const bool unlocked = WaitFor(std::chrono::duration_cast<std::chrono::milliseconds>(bound - Clock::now()), [&] {
    stats = Stats(*checker);
    return !stats.empty() && Sum(stats, &Client::ServerStats::txn_locks) == 0;
  });
  std::string per_server;
  for (const auto& [id, st] : stats) per_server += fmt::format(" server {}: {};", id, st.txn_locks);
  EXPECT_TRUE(unlocked) << "locks still counted " << Seconds(Clock::now() - ended_at) << " s after the run and "
                        << Seconds(Clock::now() - recovered_at) << " s after the recovery:" << per_server;
  fmt::print("the locks were {} {:.1f} s after the run\n", unlocked ? "gone" : "still counted",
             Seconds(Clock::now() - ended_at));
  // Every account is readable at once, and the total holds.
  auto fresh = Open(2s);
  ASSERT_NE(fresh, nullptr);
  int64_t total = 0;
  int unreadable = 0;
  for (int i = 0; i < kAccounts; ++i) {
    std::string v;
    const Status s = fresh->Get(Account(i), &v);
    if (!s.ok()) {
      if (++unreadable <= 5) ADD_FAILURE() << Short(Account(i)) << ": " << s.ToString();
      continue;
    }
    total += std::stoll(v);
  }
  EXPECT_EQ(unreadable, 0);
  std::vector<std::pair<std::string, std::string>> all;
  const Status scanned = checker->Scan(Account(0), Account(kAccounts), kAccounts + 1, &all);
  EXPECT_TRUE(scanned.ok()) << scanned.ToString();
  EXPECT_EQ(all.size(), size_t{kAccounts});
  int64_t scanned_total = 0;
  for (const auto& [k, v] : all) scanned_total += std::stoll(v);
  const uint64_t unknown =
      transfer_outcomes.Count(Status::Code::kUnavailable) + transfer_outcomes.Count(Status::Code::kDeadlineExceeded);
  fmt::print(
      "{} transfers ({} before the kill, {} after the recovery), {} gave up on conflicts, {} of unknown outcome or "
      "failed; {} audits ({} holding transfers back, {} bad); run {:.1f} s after the recovery; resolved per server:",
      transfers.load(), before_kill, transfers.load() - at_recovery, transfer_outcomes.Count(Status::Code::kAborted),
      unknown, audits.load(), held_audits.load(), bad_audits.load(), Seconds(ended_at - recovered_at));
  for (const auto& [id, s] : stats) fmt::print(" {}: {}", id, s.txn_resolved);
  fmt::print("; meganode splits per server (since it started):");
  for (const auto& [id, s] : stats) fmt::print(" {}: {} ({} remote)", id, s.meganode_splits, s.remote_splits);
  fmt::print("\ntransfers: {}\naudits: {}\n", transfer_outcomes.Examples(), audit_outcomes.Examples());
  EXPECT_EQ(transfer_outcomes.Unexpected(), "");
  EXPECT_EQ(audit_outcomes.Unexpected(), "");
  if (unreadable == 0) {
    EXPECT_EQ(total, kTotal) << "the total of the accounts read one by one";
  }
  if (scanned.ok()) {
    EXPECT_EQ(scanned_total, kTotal) << "the total of the accounts scanned";
  }
  EXPECT_EQ(bad_audits.load(), 0u);
  EXPECT_GT(audits.load(), 0u);
  EXPECT_GT(before_kill, 0u);
}

TEST_F(TxnFailures, BankTotalHoldsWhenAnotherServerIsKilledAndTakenOver) {
  RunBank(Victim::kOther, Recovery::kTakeover);
}
TEST_F(TxnFailures, BankTotalHoldsWhenTheRootServerIsKilledAndTakenOver) {
  RunBank(Victim::kRoot, Recovery::kTakeover);
}
TEST_F(TxnFailures, BankTotalHoldsWhenAnotherServerIsKilledAndRestarted) {
  RunBank(Victim::kOther, Recovery::kRestart);
}
TEST_F(TxnFailures, BankTotalHoldsWhenTheRootServerIsKilledAndRestarted) { RunBank(Victim::kRoot, Recovery::kRestart); }

}  // namespace
}  // namespace cell
