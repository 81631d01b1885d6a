// Takeover (issue 7): three real cell-servers sharing a real ZooKeeper and one data directory (the shared storage
// their logs live on), with meganodes small enough that the tree spreads over all three. Under a write-heavy load
// one server is killed with SIGKILL (or paused with SIGSTOP); once its ZooKeeper session expires, a survivor takes its
// regions over (an epoch bump in the region table), recovers them from its log into a log directory of its own and
// serves them. Measured: the time from the kill until the table names the new owner, and until every key answers
// again. Checked: every key holds what its last acknowledged write left (or what an unacknowledged one would have), a
// paused server resumed acknowledges nothing and exits, and the victim, restarted, is fenced: the table keeps its old
// regions with the survivor, and it starts with new ones.
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

#include <fmt/format.h>

#include <signal.h>

#include "cell/client.h"
#include "membership/zookeeper_membership.h"
#include "server/store_service.h"
#include "test/join_at_end.h"
#include "test/membership/zk_harness.h"
#include "test/server/server_harness.h"

namespace cell {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kKeys = 3000;
std::string Key(uint64_t i) { return fmt::format("take{:05}", i); }

class Takeover : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& zk = testing::ZooKeeperHarness::Shared();
    ASSERT_FALSE(zk.connect().empty()) << zk.error();
    name_ = fmt::format("{}-{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), getpid());
    std::replace(name_.begin(), name_.end(), '/', '-');  // a parameterized test's name: one path component
    cluster_ = fmt::format("zk://{}/cell/{}", zk.connect(), name_);
    dir_ = fmt::format("{}/cell-takeover-{}", ::testing::TempDir(), name_);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    servers_.resize(3);
    std::vector<std::thread> starting;
    for (int i = 0; i < 3; ++i) starting.emplace_back([this, i] { servers_[i] = Start(i + 1); });
    for (auto& t : starting) t.join();
    for (const auto& s : servers_) ASSERT_FALSE(s.ready.empty()) << "a server did not start";
    auto zk_options = membership::ParseZooKeeperUri(cluster_);
    ASSERT_TRUE(zk_options.ok());
    zk_options->create_layout = false;
    auto table = membership::ZooKeeperMembership::Open(*zk_options);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    table_ = std::move(*table);
  }
  void TearDown() override {
    servers_.clear();
    std::filesystem::remove_all(dir_);
  }

  testing::RunningServer Start(int id) {
    std::vector<std::string> args = {"--listen=tcp://127.0.0.1:0", "--membership=" + cluster_,
                                     fmt::format("--id={}", id), "--workers=2", "--zk-session-timeout-ms=2000",
                                     "--data-dir=" + dir_, "--meganode-size=16KiB", "--meganodes=4096",
                                     "--region-size=64MiB"};
    for (const std::string& a : testing::ServerKeyArgs()) args.push_back(a);  // the cluster runs with keys
    return testing::StartServer(args);
  }
  std::unique_ptr<Client> Open(std::chrono::milliseconds timeout = 30s, const std::string& search = "server") {
    ClientOptions options;
    options.cluster = cluster_;
    options.search = search;
    options.timeout = timeout;
    options.key_file = testing::ClientKeyFile();
    auto client = Client::Open(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::string name_, cluster_, dir_;
  std::vector<testing::RunningServer> servers_;
  std::unique_ptr<membership::ZooKeeperMembership> table_;

  // How the victim fails: killed (SIGKILL), or paused (SIGSTOP) until a survivor serves its regions, then resumed.
  enum class Failure { kKill, kPause };
  // `search`: the readers' search mode (gets and scans during the takeover); the writers search on the servers.
  void Run(bool kill_root, const std::string& search, Failure failure = Failure::kKill);
  // Polls `done` every millisecond for at most 60 s (the writers' progress: a condition, not a timed wait).
  template <typename F>
  static bool WaitFor(F done) {
    const auto deadline = Clock::now() + 60s;
    while (!done()) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }
};

// What failed during a run, by status code, with an example of each.
class Failures {
 public:
  void Add(const Status& s) {
    std::lock_guard lock(mu_);
    seen_.emplace(s.code(), s.ToString());  // the first of each code
    ++counts_[s.code()];
  }
  // Anything but Unavailable (no server could answer now) and DeadlineExceeded (none did in time), described.
  std::string Unexpected() const {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& [code, example] : seen_) {
      if (code != Status::Code::kUnavailable && code != Status::Code::kDeadlineExceeded) out += example + "; ";
    }
    return out;
  }
  uint64_t count() const {
    std::lock_guard lock(mu_);
    uint64_t n = 0;
    for (const auto& [code, c] : counts_) n += c;
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::map<Status::Code, std::string> seen_;
  std::map<Status::Code, uint64_t> counts_;
};

void Takeover::Run(bool kill_root, const std::string& search, Failure failure) {
  const bool pause = failure == Failure::kPause;
  // What each key may hold: after an acknowledged write, exactly its result; an unacknowledged one adds its result.
  std::vector<std::set<std::optional<std::string>>> allowed(kKeys, {std::nullopt});
  {
    auto loader = Open();
    ASSERT_NE(loader, nullptr);
    for (uint64_t i = 0; i < kKeys; ++i) {
      const std::string v = fmt::format("v0-{}", i);
      ASSERT_TRUE(loader->Put(Key(i), v).ok());
      allowed[i] = {v};
    }
    auto stats = loader->StoreStats();
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    int holding = 0;
    for (const auto& s : *stats) holding += s.meganodes > 0;
    ASSERT_EQ(holding, 3) << "the tree should span all three servers";
  }
  // The victim: the root's server (every walk begins at its first meganode), or another.
  auto root = table_->RootRegion();
  ASSERT_TRUE(root.ok());
  const uint64_t root_owner = table_->GetRegion(*root)->owner;
  const uint64_t victim = kill_root ? root_owner : root_owner == 2 ? 3 : 2;
  auto recorded = server::StoreService::RecordedRegions(dir_, victim);
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  const uint32_t victim_node = recorded->first;

  std::atomic<uint64_t> acked{0}, failed{0}, reads{0};
  std::atomic<bool> stop{false};
  Failures write_failures, read_failures;
  std::vector<std::thread> writers;
  // Readers with the mode under test: gets and short scans all through the takeover. A read may fail while its
  // keys' region moves, but only as Unavailable or DeadlineExceeded (never, say, a one-sided read's refusal of a
  // region the new owner has not registered yet).
  for (int t = 0; t < 3; ++t) writers.emplace_back([&, t] {
    auto client = Open(5s, search);
    ASSERT_NE(client, nullptr);
    std::mt19937_64 r(7 + t);
    while (!stop.load()) {
      const uint64_t k = r() % kKeys;
      Status s;
      if (r() % 8 == 0) {
        std::vector<std::pair<std::string, std::string>> out;
        s = client->Scan(Key(k), Key(k + 20), 20, &out);
      } else {
        std::string value;
        s = client->Get(Key(k), &value);
        if (s.IsNotFound()) s = Status::OK();
      }
      if (s.ok()) {
        reads.fetch_add(1);
      } else {
        read_failures.Add(s);
      }
    }
  });
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&, t] {
      auto client = Open();
      ASSERT_NE(client, nullptr);
      std::mt19937_64 r(100 + t);
      for (uint64_t n = 0; !stop.load(); ++n) {
        const uint64_t k = (r() % (kKeys / 2)) * 2 + t;
        std::optional<std::string> after;
        Status s;
        if (r() % 4 == 0) {
          s = client->Delete(Key(k));
          if (s.IsNotFound()) s = Status::OK();
        } else {
          after = fmt::format("w{}-{}-{}", t, n, std::string(r() % 100, 'x'));
          s = client->Put(Key(k), *after);
        }
        if (s.ok()) {
          allowed[k] = {after};
          acked.fetch_add(1);
        } else {
          allowed[k].insert(after);
          failed.fetch_add(1);
          write_failures.Add(s);
        }
      }
    });
  }
  testing::JoinAtEnd join_at_end{stop, writers};
  ASSERT_TRUE(WaitFor([&] { return acked.load() >= 300; })) << "the load did not start";

  const auto killed = Clock::now();
  if (pause) {
    ASSERT_EQ(kill(servers_[victim - 1].process->pid(), SIGSTOP), 0);
  } else {
    servers_[victim - 1].process->Kill();
  }
  // Until the table names a live survivor as the victim's node region's owner.
  double to_owner = -1;
  uint64_t taker = 0;
  while (Clock::now() - killed < 60s) {
    auto entry = table_->GetRegion(victim_node);
    if (entry.ok() && entry->owner != victim && entry->owner != 0) {
      to_owner = std::chrono::duration<double>(Clock::now() - killed).count();
      taker = entry->owner;
      break;
    }
    std::this_thread::sleep_for(10ms);  // polling the table for the change (the measurement's granularity)
  }
  ASSERT_GT(to_owner, 0) << "no survivor took region " << victim_node << " over";
  // Until every key answers (a get of each, by a client with a short timeout, all succeeding in one pass).
  double to_served = -1;
  {
    auto reader = Open(2s);
    ASSERT_NE(reader, nullptr);
    while (Clock::now() - killed < 60s && to_served < 0) {
      bool all = true;
      for (uint64_t k = 0; k < kKeys && all; k += 7) {
        std::string value;
        const Status s = reader->Get(Key(k), &value);
        all = s.ok() || s.IsNotFound();
      }
      if (all) to_served = std::chrono::duration<double>(Clock::now() - killed).count();
    }
  }
  ASSERT_GT(to_served, 0) << "the victim's keys were not served again";
  if (pause) {
    // Ownership is the table's, not a lock the paused process still holds: a survivor serves its keys within the
    // session timeout (2 s) + 5 s. Resumed, the victim finds its region another's, acknowledges nothing it had under
    // way (writes waiting in its sockets: check() below finds any it acknowledged missing), and exits with status 2.
    EXPECT_LT(to_served, 2.0 + 5.0) << "a survivor took too long to serve a paused server's keys";
    ASSERT_EQ(kill(servers_[victim - 1].process->pid(), SIGCONT), 0);
    EXPECT_EQ(servers_[victim - 1].process->Wait(30s), 2) << "the resumed server did not exit as fenced";
  }
  // The load goes on against the new owner for a while.
  const uint64_t after_takeover = acked.load();
  ASSERT_TRUE(WaitFor([&] { return acked.load() >= after_takeover + 1000; })) << "writes stalled after the takeover";
  stop = true;
  for (auto& w : writers) w.join();
  EXPECT_EQ(write_failures.Unexpected(), "") << "writes failed otherwise than Unavailable or DeadlineExceeded";
  EXPECT_EQ(read_failures.Unexpected(), "") << search << " reads failed otherwise than Unavailable or DeadlineExceeded";
  EXPECT_GT(reads.load(), 0u);

  const auto check = [&](const char* when) {
    auto client = Open();
    ASSERT_NE(client, nullptr);
    for (uint64_t k = 0; k < kKeys; ++k) {
      std::string value;
      const Status s = client->Get(Key(k), &value);
      ASSERT_TRUE(s.ok() || s.IsNotFound()) << when << ": " << Key(k) << ": " << s.ToString();
      const std::optional<std::string> got = s.ok() ? std::optional<std::string>(value) : std::nullopt;
      ASSERT_TRUE(allowed[k].contains(got)) << when << ": " << Key(k) << " holds "
                                            << (got ? "'" + *got + "'" : "nothing")
                                            << ", which no acknowledged or unacknowledged write left";
      allowed[k] = {got};
    }
  };
  check("after the takeover");
  {
    // The survivor went on in a log directory of its own, named in the table, and removed the victim's.
    auto entry = table_->GetRegion(victim_node);
    ASSERT_TRUE(entry.ok());
    EXPECT_EQ(entry->owner, taker);
    EXPECT_NE(entry->log_epoch, 0u) << "the table names no log directory of the survivor's";
    EXPECT_TRUE(std::filesystem::exists(server::StoreService::LogDir(dir_, victim_node, entry->log_epoch) +
                                        "/MANIFEST"));
    EXPECT_FALSE(std::filesystem::exists(server::StoreService::LogDir(dir_, victim_node, 0)))
        << "the victim's log directory was left";
  }
  {
    // Every meganode takes writes again: none is left sealed by a remote split the dead server had under way (its
    // survivor unseals those with the peer key). Every 7th key rewritten with what it holds spans every meganode.
    auto writer = Open();
    ASSERT_NE(writer, nullptr);
    for (uint64_t k = 0; k < kKeys; k += 7) {
      if (!allowed[k].begin()->has_value()) continue;
      const Status s = writer->Put(Key(k), **allowed[k].begin());
      ASSERT_TRUE(s.ok()) << Key(k) << " takes no write after the takeover: " << s.ToString();
    }
  }

  // The victim returns: fenced from its old regions (the table keeps them with the survivor), it starts new ones.
  servers_[victim - 1] = Start(static_cast<int>(victim));
  ASSERT_FALSE(servers_[victim - 1].ready.empty()) << "the killed server did not restart";
  auto now = table_->GetRegion(victim_node);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->owner, taker) << "the returning server took its old region back";
  auto renewed = server::StoreService::RecordedRegions(dir_, victim);
  ASSERT_TRUE(renewed.ok());
  EXPECT_NE(renewed->first, victim_node) << "the returning server serves its old region again";
  EXPECT_EQ(table_->GetRegion(renewed->first)->owner, victim);
  check("after the killed server returned");
  std::printf("{\"victim\":\"%s\",\"failure\":\"%s\",\"search\":\"%s\",\"kill_to_new_owner_s\":%.2f,"
              "\"kill_to_served_s\":%.2f,"
              "\"acked_writes\":%llu,\"unacknowledged_writes\":%llu,\"reads\":%llu,\"failed_reads\":%llu,"
              "\"keys_checked\":%llu}\n",
              kill_root ? "root server" : "other server", pause ? "paused" : "killed", search.c_str(), to_owner,
              to_served,
              static_cast<unsigned long long>(acked.load()),
              static_cast<unsigned long long>(failed.load()), static_cast<unsigned long long>(reads.load()),
              static_cast<unsigned long long>(read_failures.count()), static_cast<unsigned long long>(2 * kKeys));
}

// The readers' search mode: on the servers, by one-sided reads, or chosen per server by the selector.
class TakeoverUnderLoad : public Takeover, public ::testing::WithParamInterface<std::string> {};

TEST_P(TakeoverUnderLoad, ADeadServersRegionsAreServedAgainByASurvivorAndItIsFencedWhenItReturns) {
  Run(false, GetParam());
}

TEST_P(TakeoverUnderLoad, TheRootServersRegionsTooAndWithThemTheWholeTree) { Run(true, GetParam()); }

// Paused past its session (SIGSTOP), not killed: the root's server, with adaptive readers.
TEST_F(Takeover, APausedServersRegionsAreServedByASurvivorAndItAcknowledgesNothingOnceResumed) {
  Run(true, "adaptive", Failure::kPause);
}

INSTANTIATE_TEST_SUITE_P(Search, TakeoverUnderLoad, ::testing::Values("server", "client", "adaptive"),
                         [](const auto& info) { return info.param; });

// The killed server comes straight back, racing its own takeover: whichever wins (the server reclaiming its regions
// at a new epoch, or a survivor adopting them), the regions are served, by exactly one of them, with every
// acknowledged write.
TEST_F(Takeover, AQuickRestartRacingTheTakeoverLeavesOneOwnerAndEveryKey) {
  {
    auto loader = Open();
    ASSERT_NE(loader, nullptr);
    for (uint64_t i = 0; i < kKeys; ++i) ASSERT_TRUE(loader->Put(Key(i), fmt::format("v0-{}", i)).ok());
  }
  auto root = table_->RootRegion();
  ASSERT_TRUE(root.ok());
  const uint64_t victim = table_->GetRegion(*root)->owner == 2 ? 3 : 2;
  const uint32_t victim_node = server::StoreService::RecordedRegions(dir_, victim)->first;
  servers_[victim - 1].process->Kill();
  const auto killed = Clock::now();
  servers_[victim - 1] = Start(static_cast<int>(victim));  // waits out its old session, then registers
  ASSERT_FALSE(servers_[victim - 1].ready.empty()) << "the killed server did not restart";
  auto client = Open();
  ASSERT_NE(client, nullptr);
  for (uint64_t i = 0; i < kKeys; ++i) {
    std::string value;
    const Status s = client->Get(Key(i), &value);
    ASSERT_TRUE(s.ok()) << Key(i) << ": " << s.ToString();
    ASSERT_EQ(value, fmt::format("v0-{}", i));
  }
  const double served = std::chrono::duration<double>(Clock::now() - killed).count();
  auto owner = table_->GetRegion(victim_node);
  ASSERT_TRUE(owner.ok());
  auto now_recorded = server::StoreService::RecordedRegions(dir_, victim);
  ASSERT_TRUE(now_recorded.ok());
  if (owner->owner == victim) {
    EXPECT_EQ(now_recorded->first, victim_node) << "it reclaimed its regions";
  } else {
    EXPECT_NE(now_recorded->first, victim_node) << "a survivor won: the returning server started new regions";
  }
  std::printf("{\"quick_restart\":{\"winner\":\"%s\",\"kill_to_all_keys_s\":%.2f}}\n",
              owner->owner == victim ? "the restarted server" : "a survivor", served);
}

}  // namespace
}  // namespace cell
