// Takeover (issue 7): three real cell-servers sharing a real ZooKeeper and one data directory (the shared storage
// their logs live on), with meganodes small enough that the tree spreads over all three. Under a write-heavy load
// one server is killed with SIGKILL (or paused with SIGSTOP); once its ZooKeeper session expires, a survivor takes its
// regions over (an epoch bump in the region table), recovers them from its log into a log directory of its own and
// serves them. Measured: the time from the kill until the table names the new owner, and until every key answers
// again. Checked: every key holds what its last acknowledged write left (or what an unacknowledged one would have), a
// paused server resumed acknowledges nothing and exits, and the victim, restarted, is fenced: the table keeps its old
// regions with the survivor, and it starts with new ones.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
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
#include "rpc/key.h"
#include "server/store_service.h"
#include "test/join_at_end.h"
#include "test/membership/cluster_table.h"
#include "test/membership/zk_harness.h"
#include "test/server/server_harness.h"

namespace cell {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Under ThreadSanitizer a third: every phase of these tests (load, warm-ups, checks) reads or writes each key, and
// there the keys' number, not the takeover, sets the run's length.
#if defined(__SANITIZE_THREAD__)
constexpr uint64_t kKeys = 1000;
#else
constexpr uint64_t kKeys = 3000;
#endif
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
    auto table = testing::OpenClusterTable(cluster_);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    table_ = std::move(*table);
  }
  void TearDown() override {
    servers_.clear();
    std::filesystem::remove_all(dir_);
  }

  testing::RunningServer Start(int id) {
    std::vector<std::string> args = {
        "--listen=tcp://127.0.0.1:0",   "--membership=" + cluster_, fmt::format("--id={}", id), "--workers=2",
        "--zk-session-timeout-ms=2000", "--data-dir=" + dir_,       "--meganode-size=16KiB",    "--meganodes=4096",
        "--region-size=64MiB"};
    for (const std::string& a : testing::ServerKeyArgs()) args.push_back(a);  // the cluster runs with keys
    if (shm_) args.push_back("--listen=shm://" + testing::ShmPath(fmt::format("{}-{}", name_, id)));
    return testing::StartServer(args);
  }
  bool shm_ = false;  // servers listen on shm too (clients prefer it: one-sided reads of a mapping)
  // Which keys node region `region` holds: a Get of each through a cold client, whose path cache then names each
  // key's leaf meganode.
  std::vector<bool> KeysOf(uint32_t region) {
    std::vector<bool> out(kKeys);
    auto locator = NewStoreClient();
    if (locator == nullptr) return out;
    for (uint64_t k = 0; k < kKeys; ++k) {
      std::string value;
      const Status s = locator->Get(Key(k), &value);
      EXPECT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
      out[k] = locator->CachedLeaf(Key(k)).region == region;
    }
    return out;
  }
  // A cold client's engine, whose path cache and connections a test can look at.
  std::unique_ptr<client::StoreClient> NewStoreClient() {
    client::StoreClientOptions options;
    auto key = rpc::ReadKeyFile(testing::ClientKeyFile(), rpc::kClientKeyName);
    EXPECT_TRUE(key.ok()) << key.status().ToString();
    options.key = key.ok() ? *key : rpc::Key{};
    auto client = client::StoreClient::Create(table_.get(), options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
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
  // `what`: the operation, for the example (empty: none named).
  void Add(const Status& s, const std::string& what = "") {
    std::lock_guard lock(mu_);
    seen_.emplace(s.code(), what.empty() ? s.ToString() : what + ": " + s.ToString());  // the first of each code
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
  // One example of each code seen.
  std::string Examples() const {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& [code, example] : seen_) out += example + "; ";
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
  // The victim's keys: a Get of each through a cold client, whose path cache then names each key's leaf meganode.
  // Taken now, just before the failure, and once a survivor serves the victim's region (splits move keys onto the
  // victim until it fails, the servers' background splits too; none after): a key the victim's region held at any of
  // those times counts as the victim's.
  std::vector<bool> victims(kKeys);
  const auto classify = [&] {
    const std::vector<bool> now = KeysOf(victim_node);
    for (uint64_t k = 0; k < kKeys; ++k) victims[k] = victims[k] || now[k];
  };
  classify();
  const std::vector<bool> victims_at_load = victims;
  const auto victims_key = [&](uint64_t k) { return k < kKeys && victims[k]; };
  // A scan of [k, k + 20) may meet the victim's meganodes if a key in it, the one before or the one at its end (the
  // leaf holding its end bound) is the victim's.
  const auto victims_range = [&](uint64_t k) {
    for (uint64_t i = k == 0 ? 0 : k - 1; i <= k + 20; ++i) {
      if (victims_key(std::min(i, kKeys - 1))) return true;
    }
    return false;
  };
  std::vector<uint64_t> others_at_load;
  for (uint64_t k = 0; k < kKeys; ++k) {
    if (!victims_at_load[k]) others_at_load.push_back(k);
  }
  ASSERT_FALSE(others_at_load.empty());
  ASSERT_LT(others_at_load.size(), kKeys);

  std::atomic<uint64_t> acked{0}, failed{0}, reads{0};
  std::atomic<bool> stop{false};
  std::atomic<int> warm{0};  // clients whose path caches know every key's leaf
  Failures write_failures, read_failures;
  // Every failed operation: its key (a scan's first), whether a scan, and what it got; sorted out once the victim's
  // keys are known (after the second classify()).
  struct Failed {
    uint64_t key;
    bool scan;
    Status status;
  };
  std::mutex failures_mu;
  std::vector<Failed> failures;
  const auto note_failure = [&](uint64_t k, bool scan, const Status& s) {
    std::lock_guard lock(failures_mu);
    failures.push_back({k, scan, s});
  };
  // Each get of another server's key: when it began, how long it took (microseconds) and the key, per reader.
  struct Timed {
    Clock::time_point began;
    double us;
    uint64_t key;
  };
  std::vector<std::vector<Timed>> latencies(3);
  std::atomic<uint64_t> timed{0};
  std::vector<std::thread> writers;
  // Every client first reads every key, so that its path cache starts each operation at the key's leaf: then only an
  // operation on the victim's keys has reason to meet the victim (a cold one would begin at the root's server).
  const auto warm_up = [&](Client* client) {
    for (uint64_t k = 0; k < kKeys; ++k) {
      std::string value;
      (void)client->Get(Key(k), &value);
    }
    warm.fetch_add(1);
  };
  // Just before the failure the writers are held (splits move keys between servers, and leave path caches pointing
  // left of a key's meganode), every client reads every key again, and the victim's keys are found again; the writers
  // go on once the victim has failed.
  std::mutex settle_mu;
  std::condition_variable settle_cv;
  bool settle = false;      // guarded by settle_mu: hold the writers, and warm every client up again
  int settled = 0;          // guarded by settle_mu: clients warmed up again
  bool classified = false;  // guarded by settle_mu: the victim's keys found again, just before the failure
  std::vector<uint64_t> others_at_failure;  // guarded by settle_mu until `classified`; then read-only
  const auto settle_if_asked = [&](Client* client, bool writer) {
    std::unique_lock lock(settle_mu);
    if (!settle) return;
    lock.unlock();
    warm_up(client);
    lock.lock();
    ++settled;
    settle_cv.notify_all();
    settle_cv.wait(lock, [&] { return (writer ? !settle : classified) || stop.load(); });
  };
  // Readers with the mode under test: gets and short scans all through the takeover. A read may fail while its
  // keys' region moves, but only as Unavailable or DeadlineExceeded (never, say, a one-sided read's refusal of a
  // region the new owner has not registered yet), and only if it is on the victim's keys. Reader 0 gets and scans
  // every key; readers 1 and 2 only get keys other servers hold (at the load, and from just before the failure), so
  // that no wait for the victim holds them up: their latencies are the other servers' keys' p99.
  for (int t = 0; t < 3; ++t)
    writers.emplace_back([&, t] {
      auto client = Open(5s, search);
      ASSERT_NE(client, nullptr);
      warm_up(client.get());
      std::mt19937_64 r(7 + t);
      bool resettled = false;
      const std::vector<uint64_t>* others = &others_at_load;
      while (!stop.load()) {
        if (!resettled) {
          std::unique_lock lock(settle_mu);
          if (settle) {
            lock.unlock();
            settle_if_asked(client.get(), false);
            resettled = true;
            if (!stop.load()) others = &others_at_failure;
          }
        }
        const uint64_t k = t == 0 ? r() % kKeys : (*others)[r() % others->size()];
        Status s;
        const auto began = Clock::now();
        const bool scan = t == 0 && r() % 8 == 0;  // (a scan may span the victim's keys)
        if (scan) {
          std::vector<std::pair<std::string, std::string>> out;
          s = client->Scan(Key(k), Key(k + 20), 20, &out);
        } else {
          std::string value;
          s = client->Get(Key(k), &value);
          if (s.IsNotFound()) s = Status::OK();
          if (s.ok() && t != 0) {
            latencies[t].push_back({began, std::chrono::duration<double, std::micro>(Clock::now() - began).count(), k});
            timed.fetch_add(1);
          }
        }
        if (s.ok()) {
          reads.fetch_add(1);
        } else {
          read_failures.Add(s);
          note_failure(k, scan, s);
        }
      }
    });
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&, t] {
      auto client = Open();
      ASSERT_NE(client, nullptr);
      warm_up(client.get());
      std::mt19937_64 r(100 + t);
      bool resettled = false;
      for (uint64_t n = 0; !stop.load(); ++n) {
        if (!resettled) {
          std::unique_lock lock(settle_mu);
          if (settle) {
            lock.unlock();
            settle_if_asked(client.get(), true);
            resettled = true;
          }
        }
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
          note_failure(k, false, s);
        }
      }
    });
  }
  testing::JoinAtEnd join_at_end{stop, writers};
  struct ReleaseWriters {  // (destroyed before join_at_end joins them: held writers must not block the join)
    std::mutex& mu;
    std::condition_variable& cv;
    bool& settle;
    bool& classified;
    ~ReleaseWriters() {
      std::lock_guard lock(mu);
      settle = false;
      classified = true;
      cv.notify_all();
    }
  } release_writers{settle_mu, settle_cv, settle, classified};
  ASSERT_TRUE(WaitFor([&] { return warm.load() == 5; })) << "the clients did not warm up";
  const auto measured_from = Clock::now();
  const uint64_t timed_before = timed.load();
  // 5,000 timed gets before the failure (some 3,000 of them of keys that stay other servers'): a p99 of 30, not 8.
  // Under ThreadSanitizer, which asserts no p99, 500: enough for the gets during the takeover to be counted.
#if defined(__SANITIZE_THREAD__)
  constexpr uint64_t kTimedBefore = 500;
#else
  constexpr uint64_t kTimedBefore = 5000;
#endif
  ASSERT_TRUE(WaitFor([&] { return acked.load() >= 300 && timed.load() >= timed_before + kTimedBefore; }))
      << "the load did not start";
  const auto settled_at = Clock::now();
  {
    std::unique_lock lock(settle_mu);
    settle = true;
    ASSERT_TRUE(settle_cv.wait_for(lock, 60s, [&] { return settled == 5; })) << "the clients did not settle";
  }
  classify();
  {
    std::lock_guard lock(settle_mu);
    for (uint64_t k = 0; k < kKeys; ++k) {
      if (!victims[k]) others_at_failure.push_back(k);
    }
    ASSERT_FALSE(others_at_failure.empty());
    classified = true;
    settle_cv.notify_all();
  }

  const auto killed = Clock::now();
  if (pause) {
    ASSERT_EQ(kill(servers_[victim - 1].process->pid(), SIGSTOP), 0);
  } else {
    servers_[victim - 1].process->Kill();
  }
  {
    std::lock_guard lock(settle_mu);
    settle = false;  // the writers go on
    settle_cv.notify_all();
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
#if !defined(__SANITIZE_THREAD__)  // (whose slowdown of recovery, 5-15x, is no measure of it)
    EXPECT_LT(to_served, 2.0 + 5.0) << "a survivor took too long to serve a paused server's keys";
#endif
    ASSERT_EQ(kill(servers_[victim - 1].process->pid(), SIGCONT), 0);
    EXPECT_EQ(servers_[victim - 1].process->Wait(30s), 2) << "the resumed server did not exit as fenced";
  }
  classify();  // (no thread reads `victims` before they are joined)
  // The load goes on against the new owner for a while.
  const uint64_t after_takeover = acked.load();
  ASSERT_TRUE(WaitFor([&] { return acked.load() >= after_takeover + 1000; })) << "writes stalled after the takeover";
  stop = true;
  for (auto& w : writers) w.join();
  EXPECT_EQ(write_failures.Unexpected(), "") << "writes failed otherwise than Unavailable or DeadlineExceeded";
  EXPECT_EQ(read_failures.Unexpected(), "") << search << " reads failed otherwise than Unavailable or DeadlineExceeded";
  Failures others_failures;
  for (const Failed& f : failures) {
    if (f.scan ? !victims_range(f.key) : !victims_key(f.key)) {
      others_failures.Add(f.status, fmt::format("{} {}", f.scan ? "a scan from" : "an operation on", Key(f.key)));
    }
  }
  EXPECT_EQ(others_failures.count(), 0u) << "operations on other servers' keys failed: " << others_failures.Examples();
  EXPECT_GT(reads.load(), 0u);
  // Gets of other servers' keys: their 99th percentile before the failure, and from it until every key was served.
  std::vector<double> before, during;
  const auto served_at = killed + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(to_served));
  for (const auto& reader : latencies) {
    for (const Timed& op : reader) {
      if (victims_key(op.key)) continue;  // (the victim's by the time of the failure)
      if (op.began >= measured_from && op.began < settled_at) before.push_back(op.us);
      if (op.began >= killed && op.began < served_at) during.push_back(op.us);
    }
  }
  const auto p99 = [](std::vector<double> v) {
    if (v.empty()) return -1.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, v.size() * 99 / 100)];
  };
  const double p99_before = p99(before), p99_during = p99(during);
  const double max_during = during.empty() ? -1.0 : *std::max_element(during.begin(), during.end());
  // Gets of other servers' keys go on during the takeover: at least 100 of them (a stall behind the victim, as a path
  // cache that lost its entries caused, left 7 in 2.6 s; runs without such a stall made 20,000 to 100,000, and 2,000
  // on a machine overloaded three times over), and their p99 stays within ten times what it was before the failure. A
  // get that waits on the dead server waits for its connection's failure or its 5 s deadline, thousands of times the
  // p99 before it; the survivor's recovery, on the same two cores, slows the others' gets by a few times at most
  // (docs/BENCHMARKS.md, "Takeover"). Not under ThreadSanitizer, whose slowdown of the survivor's recovery is no
  // measure of it.
  ASSERT_FALSE(before.empty());
  EXPECT_GE(during.size(), 100u) << "gets of other servers' keys stalled during the takeover: " << during.size()
                                 << " in " << to_served << " s, against " << before.size() << " in "
                                 << std::chrono::duration<double>(settled_at - measured_from).count() << " s before";
#if !defined(__SANITIZE_THREAD__)
  EXPECT_LE(p99_during, 10 * p99_before) << "other servers' gets slowed during the takeover: p99 " << p99_before
                                         << " us before, " << p99_during << " us during";
#endif

  const auto check = [&](const char* when) {
    auto client = Open();
    ASSERT_NE(client, nullptr);
    for (uint64_t k = 0; k < kKeys; ++k) {
      std::string value;
      const Status s = client->Get(Key(k), &value);
      ASSERT_TRUE(s.ok() || s.IsNotFound()) << when << ": " << Key(k) << ": " << s.ToString();
      const std::optional<std::string> got = s.ok() ? std::optional<std::string>(value) : std::nullopt;
      ASSERT_TRUE(allowed[k].contains(got))
          << when << ": " << Key(k) << " holds " << (got ? "'" + *got + "'" : "nothing")
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
    EXPECT_TRUE(
        std::filesystem::exists(server::StoreService::LogDir(dir_, victim_node, entry->log_epoch) + "/MANIFEST"));
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
  std::printf(
      "{\"victim\":\"%s\",\"failure\":\"%s\",\"search\":\"%s\",\"kill_to_new_owner_s\":%.2f,"
      "\"kill_to_served_s\":%.2f,"
      "\"others_get_p99_us_before\":%.0f,\"during\":%.0f,\"max_during\":%.0f,\"gets_before\":%zu,"
      "\"during\":%zu,"
      "\"victim_keys\":%llu,"
      "\"acked_writes\":%llu,\"unacknowledged_writes\":%llu,\"reads\":%llu,\"failed_reads\":%llu,"
      "\"keys_checked\":%llu}\n",
      kill_root ? "root server" : "other server", pause ? "paused" : "killed", search.c_str(), to_owner, to_served,
      p99_before, p99_during, max_during, before.size(), during.size(),
      static_cast<unsigned long long>(std::count(victims.begin(), victims.end(), true)),
      static_cast<unsigned long long>(acked.load()), static_cast<unsigned long long>(failed.load()),
      static_cast<unsigned long long>(reads.load()), static_cast<unsigned long long>(read_failures.count()),
      static_cast<unsigned long long>(2 * kKeys));
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

// One-sided reads and a deposed owner (docs/DESIGN.md): a client that searched a server's memory (over shm: a mapping
// of it, which stays readable while the server is stopped) must not trust it once the server is paused past its
// session and a survivor, having taken its regions over, acknowledged a newer write: its lease on the server has run
// out, and renewing it finds the server gone.
class TakeoverShm : public Takeover {
 protected:
  void SetUp() override {
    shm_ = true;
    Takeover::SetUp();
  }
};

TEST_F(TakeoverShm, AClientSideReadNeverReturnsAPausedOwnersValueAfterASurvivorsWrite) {
  {
    auto loader = Open();
    ASSERT_NE(loader, nullptr);
    for (uint64_t i = 0; i < kKeys; ++i) ASSERT_TRUE(loader->Put(Key(i), "before").ok());
  }
  auto root = table_->RootRegion();
  ASSERT_TRUE(root.ok());
  const uint64_t victim = table_->GetRegion(*root)->owner == 2 ? 3 : 2;
  const uint32_t victim_node = server::StoreService::RecordedRegions(dir_, victim)->first;
  const std::vector<bool> held = KeysOf(victim_node);
  const auto k = static_cast<uint64_t>(std::find(held.begin(), held.end(), true) - held.begin());
  ASSERT_LT(k, kKeys) << "the victim holds no key";
  auto reader = Open(30s, "client");
  ASSERT_NE(reader, nullptr);
  std::string value;
  ASSERT_TRUE(reader->Get(Key(k), &value).ok());
  ASSERT_EQ(value, "before");
  // Another reader searches the key from the paused server's memory all along (renewing its lease while the server
  // is registered): none of its gets that begins after the survivor acknowledged the write may see the old value.
  // (That needs the survivor to wait out the leases before it takes writes.)
  std::atomic<bool> stop{false};
  std::atomic<Clock::rep> written_at{Clock::time_point::max().time_since_epoch().count()};
  std::atomic<uint64_t> after_write{0}, stale{0}, failed{0}, looped{0};
  std::vector<std::thread> threads;
  testing::JoinAtEnd join_at_end{stop, threads};
  threads.emplace_back([&] {
    auto looper = Open(30s, "client");
    ASSERT_NE(looper, nullptr);
    while (!stop.load()) {
      const auto began = Clock::now().time_since_epoch().count();
      std::string v;
      const Status got = looper->Get(Key(k), &v);
      looped.fetch_add(1);
      if (began <= written_at.load()) continue;
      after_write.fetch_add(1);
      if (!got.ok()) {
        failed.fetch_add(1);
      } else if (v != "after") {
        stale.fetch_add(1);
      }
    }
  });
  ASSERT_TRUE(WaitFor([&] { return looped.load() >= 10; })) << "the looping reader did not start";
  ASSERT_EQ(kill(servers_[victim - 1].process->pid(), SIGSTOP), 0);
  // Until a survivor serves the region (the table names its log directory), then a write there.
  bool published = false;
  for (const auto start = Clock::now(); !published && Clock::now() - start < 60s;) {
    auto entry = table_->GetRegion(victim_node);
    published = entry.ok() && entry->owner != victim && entry->log_epoch != 0;
    if (!published) std::this_thread::sleep_for(10ms);  // polling the table for the takeover's end
  }
  ASSERT_TRUE(published) << "no survivor took the paused server's region over";
  auto writer = Open();
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Put(Key(k), "after").ok());
  written_at = Clock::now().time_since_epoch().count();
  const Status s = reader->Get(Key(k), &value);
  ASSERT_TRUE(WaitFor([&] { return after_write.load() >= 100; })) << "the looping reader stalled";
  stop = true;
  for (auto& t : threads) t.join();
  ASSERT_EQ(kill(servers_[victim - 1].process->pid(), SIGCONT), 0);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(value, "after") << "a client-side read returned the deposed owner's memory after a survivor's write";
  EXPECT_EQ(stale.load(), 0u) << "of " << after_write.load() << " gets begun after the survivor's write";
  EXPECT_EQ(failed.load(), 0u);
  EXPECT_EQ(servers_[victim - 1].process->Wait(30s), 2) << "the resumed server did not exit as fenced";
}

// The client's retries are timers, not a thread that waits: with one server paused (its kernel accepts connections, it
// answers nothing), a cold client's asynchronous gets of that server's keys wait for a connection, then for the
// takeover, while its gets of a third server's keys, each also redirected there from the root server, complete at
// once: all of them while the paused server still owns its region in the table. (With one retry thread that waits,
// the third server's gets queued behind the first paused one until the takeover.) The third server's keys are those
// whose way down from the root passes no meganode of the paused server: a cold client's get of each, before the
// pause, connected to the root and third servers only.
TEST_F(Takeover, AnOperationWaitingOnAPausedServerHoldsUpNoOtherServersOperation) {
  {
    auto loader = Open();
    ASSERT_NE(loader, nullptr);
    for (uint64_t i = 0; i < kKeys; ++i) ASSERT_TRUE(loader->Put(Key(i), fmt::format("v-{}", i)).ok());
  }
  auto root = table_->RootRegion();
  ASSERT_TRUE(root.ok());
  const uint64_t root_server = table_->GetRegion(*root)->owner;
  const uint64_t victim = root_server == 2 ? 3 : 2;
  const uint64_t third = 6 - root_server - victim;
  const uint32_t victim_node = server::StoreService::RecordedRegions(dir_, victim)->first;
  const uint32_t third_node = server::StoreService::RecordedRegions(dir_, third)->first;
  const std::vector<bool> victims = KeysOf(victim_node), thirds = KeysOf(third_node);
  std::vector<uint64_t> victim_keys, third_keys;
  for (uint64_t k = 0; k < kKeys; ++k) {
    if (victims[k] && victim_keys.size() < 50) victim_keys.push_back(k);
    if (!thirds[k] || third_keys.size() >= 50) continue;
    auto probe = NewStoreClient();
    ASSERT_NE(probe, nullptr);
    std::string value;
    ASSERT_TRUE(probe->Get(Key(k), &value).ok());
    const std::vector<uint64_t> visited = probe->ConnectedServers();
    if (std::find(visited.begin(), visited.end(), victim) == visited.end()) third_keys.push_back(k);
  }
  ASSERT_FALSE(victim_keys.empty()) << "server " << victim << " holds no key";
  ASSERT_FALSE(third_keys.empty()) << "server " << third << " holds no key reached without server " << victim;
  auto client = Open(30s, "server");  // cold: every get starts at the root server
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(kill(servers_[victim - 1].process->pid(), SIGSTOP), 0);
  std::mutex mu;
  std::condition_variable cv;
  size_t victim_done = 0, third_done = 0;
  std::vector<std::string> wrong;
  auto get = [&](uint64_t k, size_t* count) {
    client->GetAsync(Key(k), [&, k, count](const Status& s, std::string_view value) {
      std::lock_guard lock(mu);
      if (!s.ok() || value != fmt::format("v-{}", k)) wrong.push_back(Key(k) + ": " + s.ToString());
      ++*count;
      cv.notify_all();
    });
  };
  for (uint64_t k : victim_keys) get(k, &victim_done);
  for (uint64_t k : third_keys) get(k, &third_done);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return third_done == third_keys.size(); }));
    EXPECT_EQ(victim_done, 0u) << "a get of the paused server's keys completed before the takeover";
  }
  // Still the paused server's: so none of the third server's gets waited for its takeover.
  auto entry = table_->GetRegion(victim_node);
  ASSERT_TRUE(entry.ok()) << entry.status().ToString();
  EXPECT_EQ(entry->owner, victim) << "the third server's gets completed only after the paused server's takeover";
  {
    // Then the paused server's gets complete too, served by the survivor that took its region over.
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return victim_done == victim_keys.size(); }));
    EXPECT_TRUE(wrong.empty()) << wrong.size() << " gets failed or were wrong, e.g. " << wrong.front();
  }
  EXPECT_NE(table_->GetRegion(victim_node)->owner, victim);
  EXPECT_GT(client->stats().retries, 0u);
  ASSERT_EQ(kill(servers_[victim - 1].process->pid(), SIGCONT), 0);
  EXPECT_EQ(servers_[victim - 1].process->Wait(30s), 2) << "the resumed server did not exit as fenced";
}

// Under ThreadSanitizer, which looks for races rather than latencies, adaptive alone: it runs both searches, and the
// takeover it meets is the same one. The Release run keeps each search on its own (the p99 is asserted per search).
#if defined(__SANITIZE_THREAD__)
const std::vector<std::string> kSearchesUnderLoad = {"adaptive"};
#else
const std::vector<std::string> kSearchesUnderLoad = {"server", "client", "adaptive"};
#endif
INSTANTIATE_TEST_SUITE_P(Search, TakeoverUnderLoad, ::testing::ValuesIn(kSearchesUnderLoad),
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
