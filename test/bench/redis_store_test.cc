// cell-bench's Redis store against a real redis-server of the test's own (on a Unix socket in a temporary directory,
// or a free loopback port; nothing saved): puts and gets, scans in key order, not-found, error replies, the failures
// a run must report rather than hang on (a dead port, a server that dies with operations pending), and transactions
// (WATCH, MULTI, EXEC): their own writes, conflicts retried, phantoms in a scanned range, the bank's total.
#include "bench/redis_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/txn_workload.h"
#include "test/bench/bank_stress.h"

namespace cell::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr RedisStoreOptions kOptions{.timeout = std::chrono::milliseconds(3000)};

// redis-server from PATH, or "" (it is a declared dependency: deploy/install-deps.sh installs it).
std::string FindRedisServer() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/redis-server";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// A TCP port on the loopback that nothing listens on: bound (so nobody else takes it) but never listening, so a
// connection to it is refused. The port is free again once this goes.
class DeadPort {
 public:
  DeadPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(a);
    if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &length) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  ~DeadPort() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A redis-server child process: started, answering PING, and killed and reaped when this goes (a crashed test takes
// it along too: PDEATHSIG).
class RedisServer {
 public:
  // On a Unix socket in a new temporary directory, or (tcp) on a free loopback port. *error says why not.
  static std::unique_ptr<RedisServer> Start(bool tcp, std::string* error) {
    const std::string binary = FindRedisServer();
    if (binary.empty()) {
      *error = "redis-server is not on PATH: it is a declared dependency (deploy/install-deps.sh installs it)";
      return nullptr;
    }
    std::string dir_template = (std::filesystem::temp_directory_path() / "cell-redis-test-XXXXXX").string();
    if (mkdtemp(dir_template.data()) == nullptr) {
      *error = "mkdtemp failed";
      return nullptr;
    }
    std::unique_ptr<RedisServer> server(new RedisServer(dir_template));
    // A port found free may be taken before redis-server binds it: then it exits, and another port is tried.
    for (int attempt = 0; attempt < 5; ++attempt) {
      int port = 0;
      if (tcp) {
        DeadPort free;  // bound only to learn a free port, released before redis-server binds it
        port = free.port();
      }
      if (server->Spawn(binary, port, error) && server->AwaitPing(error)) return server;
      if (!tcp) break;
    }
    return nullptr;
  }

  ~RedisServer() {
    Kill();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  const std::string& address() const { return address_; }

  // SIGKILL and reap (the store's clients see their connections close).
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  explicit RedisServer(std::string dir) : dir_(std::move(dir)) {}

  bool Spawn(const std::string& binary, int port, std::string* error) {
    const std::string socket_path = dir_ + "/redis.sock", log = dir_ + "/redis.log";
    address_ = port > 0 ? "127.0.0.1:" + std::to_string(port) : "unix:" + socket_path;
    std::vector<std::string> args = {binary,  "--port", std::to_string(port), "--save", "", "--appendonly", "no",
                                     "--dir", dir_,     "--daemonize",        "no"};
    if (port > 0) {
      args.insert(args.end(), {"--bind", "127.0.0.1"});
    } else {
      args.insert(args.end(), {"--unixsocket", socket_path, "--unixsocketperm", "700"});
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) {
      *error = "fork failed";
      return false;
    }
    if (pid_ == 0) {  // the child: only async-signal-safe calls until exec
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      execv(argv[0], argv.data());
      _exit(127);
    }
    return true;
  }

  // Polls PING until it answers, redis-server exits, or 10 s pass.
  bool AwaitPing(std::string* error) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    Status last;
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *error = "redis-server exited at start: " + Log();
        return false;
      }
      auto store = RedisStore::Open(address_, kOptions);
      if (store.ok()) return true;
      last = store.status();
      // Between attempts only: readiness is PING's answer, not this pause.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    *error = "redis-server did not answer PING within 10 s (" + last.ToString() + "): " + Log();
    Kill();
    return false;
  }

  std::string Log() const {
    std::ifstream in(dir_ + "/redis.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  const std::string dir_;
  std::string address_;
  pid_t pid_ = -1;
};

// Runs a driven session until `done` reaches `want` (each wait is bounded by the store's timeout).
void AwaitCount(StoreSession& session, const int& done, int want) {
  for (int waits = 0; done < want && waits < 100000; ++waits) session.AwaitCompletion();
}

std::string KeyOf(int i) {
  char key[16];
  std::snprintf(key, sizeof(key), "key%03d", i);
  return key;
}
std::string ValueOf(const std::string& key, int version = 0) {
  return "value of " + key + " v" + std::to_string(version);
}

class RedisStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    server_ = RedisServer::Start(/*tcp=*/false, &error);
    ASSERT_NE(server_, nullptr) << error;
    auto store = RedisStore::Open(server_->address(), kOptions);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    auto session = store_->NewSession();
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    session_ = std::move(*session);
  }

  // Puts keys 0..n-1 (in a shuffled order, all in flight at once) and waits for every reply.
  void Load(int n, bool insert = true) {
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(7));
    int done = 0, failed = 0;
    for (int i : order) {
      const std::string key = KeyOf(i);
      session_->Put(key, ValueOf(key), insert, [&](const Status& s) {
        ++done;
        if (!s.ok()) ++failed;
      });
    }
    AwaitCount(*session_, done, n);
    ASSERT_EQ(done, n);
    ASSERT_EQ(failed, 0);
  }

  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<RedisStore> store_;
  std::unique_ptr<StoreSession> session_;
};

TEST_F(RedisStoreTest, PutsThenGetsReturnTheValues) {
  ASSERT_TRUE(session_->completes_in_caller()) << "the harness must drive a Redis session";
  Load(500);
  // Gets, all in flight at once: each completes once, in the calling thread, with its own key's value.
  const std::thread::id caller = std::this_thread::get_id();
  int done = 0, wrong = 0, elsewhere = 0;
  for (int i = 0; i < 500; ++i) {
    const std::string key = KeyOf(i);
    session_->Get(key, [&, key](const Status& s, std::string_view value) {
      ++done;
      if (std::this_thread::get_id() != caller) ++elsewhere;
      if (!s.ok() || value != ValueOf(key)) ++wrong;
    });
  }
  AwaitCount(*session_, done, 500);
  EXPECT_EQ(done, 500);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(elsewhere, 0);
  // An update replaces the value; another session (connection) sees it.
  int updated = 0;
  session_->Put(KeyOf(7), ValueOf(KeyOf(7), 2), /*insert=*/false, [&](const Status& s) { updated += s.ok(); });
  AwaitCount(*session_, updated, 1);
  ASSERT_EQ(updated, 1);
  auto other = store_->NewSession();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  std::string seen;
  int got = 0;
  (*other)->Get(KeyOf(7), [&](const Status& s, std::string_view value) {
    ++got;
    seen = s.ok() ? std::string(value) : s.ToString();
  });
  AwaitCount(**other, got, 1);
  EXPECT_EQ(seen, ValueOf(KeyOf(7), 2));
  EXPECT_TRUE(session_->status().ok());
}

TEST_F(RedisStoreTest, AScanReturnsPairsInKeyOrderFromTheStartKey) {
  Load(200);
  std::vector<std::pair<std::string, std::string>> pairs;
  ASSERT_TRUE(session_->Scan(KeyOf(50), 10, &pairs).ok());
  ASSERT_EQ(pairs.size(), 10u);
  for (int j = 0; j < 10; ++j) {
    EXPECT_EQ(pairs[j].first, KeyOf(50 + j));
    EXPECT_EQ(pairs[j].second, ValueOf(KeyOf(50 + j)));
  }
  // A start key that is not stored: the scan begins at the next key.
  pairs.clear();
  ASSERT_TRUE(session_->Scan(KeyOf(50) + "5", 3, &pairs).ok());
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0].first, KeyOf(51));
  EXPECT_EQ(pairs[2].first, KeyOf(53));
  // Near the end: what there is; past it: nothing; the pairs are appended to what *out held.
  pairs.clear();
  ASSERT_TRUE(session_->Scan(KeyOf(195), 100, &pairs).ok());
  ASSERT_EQ(pairs.size(), 5u);
  EXPECT_EQ(pairs.back().first, KeyOf(199));
  ASSERT_TRUE(session_->Scan("key9", 10, &pairs).ok());
  EXPECT_EQ(pairs.size(), 5u);
  ASSERT_TRUE(session_->Scan("", 3, &pairs).ok());
  ASSERT_EQ(pairs.size(), 8u);
  EXPECT_EQ(pairs[5].first, KeyOf(0));
  // A scan waits behind operations started before it, which complete first; a put that is not an insert leaves
  // the scan index alone (the harness inserts every key it later scans for).
  int done = 0;
  session_->Put(KeyOf(120), ValueOf(KeyOf(120), 5), /*insert=*/false, [&](const Status& s) { done += s.ok(); });
  session_->Put("key120x", "new", /*insert=*/false, [&](const Status& s) { done += s.ok(); });
  pairs.clear();
  ASSERT_TRUE(session_->Scan(KeyOf(120), 2, &pairs).ok());
  EXPECT_EQ(done, 2);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].second, ValueOf(KeyOf(120), 5));
  EXPECT_EQ(pairs[1].first, KeyOf(121));
}

TEST_F(RedisStoreTest, AGetOfAMissingKeyIsNotFound) {
  Load(10);
  Status status;
  int done = 0;
  session_->Get("key-never-put", [&](const Status& s, std::string_view) {
    ++done;
    status = s;
  });
  AwaitCount(*session_, done, 1);
  ASSERT_EQ(done, 1);
  EXPECT_TRUE(status.IsNotFound()) << status.ToString();
  EXPECT_TRUE(session_->status().ok()) << "not found is an answer, not a failure";
}

TEST_F(RedisStoreTest, AnErrorReplyFailsItsOperationOnly) {
  Load(3);
  // The scan index is a sorted set: GET of it is Redis's WRONGTYPE error.
  Status status;
  int done = 0;
  session_->Get(RedisStore::kKeySet, [&](const Status& s, std::string_view) {
    ++done;
    status = s;
  });
  AwaitCount(*session_, done, 1);
  ASSERT_EQ(done, 1);
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(status.IsNotFound());
  EXPECT_NE(status.message().find("WRONGTYPE"), std::string::npos) << status.ToString();
  // An insert's second command can fail alone: SET makes the index a string, and ZADD into a string is WRONGTYPE.
  Status put;
  session_->Put(RedisStore::kKeySet, "x", /*insert=*/true, [&](const Status& s) { put = s, ++done; });
  AwaitCount(*session_, done, 2);
  ASSERT_EQ(done, 2);
  EXPECT_FALSE(put.ok());
  EXPECT_NE(put.message().find("ZADD"), std::string::npos) << put.ToString();
  EXPECT_NE(put.message().find("WRONGTYPE"), std::string::npos) << put.ToString();
  // The session goes on: the next get answers.
  std::string value;
  session_->Get(KeyOf(1), [&](const Status& s, std::string_view v) {
    ++done;
    value = s.ok() ? std::string(v) : s.ToString();
  });
  AwaitCount(*session_, done, 3);
  EXPECT_EQ(value, ValueOf(KeyOf(1)));
  EXPECT_TRUE(session_->status().ok());
}

TEST_F(RedisStoreTest, AServerThatDiesFailsPendingAndLaterOperations) {
  Load(10);
  server_->Kill();
  Status first;
  int done = 0;
  session_->Get(KeyOf(1), [&](const Status& s, std::string_view) {
    ++done;
    first = s;
  });
  AwaitCount(*session_, done, 1);  // bounded: the connection's end is seen, or the timeout fails the session
  ASSERT_EQ(done, 1);
  EXPECT_TRUE(first.IsUnavailable()) << first.ToString();
  EXPECT_NE(first.message().find(server_->address()), std::string::npos) << first.ToString();
  EXPECT_FALSE(session_->status().ok());
  // Later operations complete at once with the same failure; a scan returns it.
  Status later;
  session_->Put(KeyOf(2), "v", /*insert=*/true, [&](const Status& s) { later = s, ++done; });
  EXPECT_EQ(done, 2) << "completed in the call";
  EXPECT_EQ(later, session_->status());
  std::vector<std::pair<std::string, std::string>> pairs;
  EXPECT_FALSE(session_->Scan(KeyOf(0), 5, &pairs).ok());
  EXPECT_TRUE(pairs.empty());
  auto again = store_->NewSession();
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("cannot connect to redis at " + server_->address()), std::string::npos)
      << again.status().ToString();
}

// A put on `session`, waited for.
Status PutNow(StoreSession& session, std::string_view key, std::string_view value, bool insert) {
  Status result = Status::Internal("no reply");
  int done = 0;
  session.Put(key, value, insert, [&](const Status& s) { result = s, ++done; });
  AwaitCount(session, done, 1);
  return result;
}
std::string GetNow(StoreSession& session, std::string_view key) {
  std::string result = "no reply";
  int done = 0;
  session.Get(key,
              [&](const Status& s, std::string_view v) { result = s.ok() ? std::string(v) : s.ToString(), ++done; });
  AwaitCount(session, done, 1);
  return result;
}

TEST_F(RedisStoreTest, ATransactionSeesItsOwnWritesAndCommitsThemTogether) {
  Load(20);
  int attempts = 0;
  std::vector<std::pair<std::string, std::string>> seen;
  const Status s = session_->RunTransaction(
      [&](TxnOps& txn) -> Status {
        std::string v;
        CELL_RETURN_IF_ERROR(txn.Get(KeyOf(5), &v));
        if (v != ValueOf(KeyOf(5))) return Status::Internal("read " + v);
        CELL_RETURN_IF_ERROR(txn.Put(KeyOf(5), "new"));
        CELL_RETURN_IF_ERROR(txn.Put(KeyOf(5) + "x", "inserted"));
        CELL_RETURN_IF_ERROR(txn.Get(KeyOf(5), &v));
        if (v != "new") return Status::Internal("its own write is not seen: " + v);
        seen.clear();
        return txn.Scan(KeyOf(5), 3, &seen);
      },
      &attempts);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(attempts, 1);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], std::make_pair(KeyOf(5), std::string("new")));
  EXPECT_EQ(seen[1], std::make_pair(KeyOf(5) + "x", std::string("inserted")));
  EXPECT_EQ(seen[2], std::make_pair(KeyOf(6), ValueOf(KeyOf(6))));
  // Committed: another connection sees both writes, and the new key is in the scan index.
  auto other = store_->NewSession();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(GetNow(**other, KeyOf(5)), "new");
  std::vector<std::pair<std::string, std::string>> pairs;
  ASSERT_TRUE((*other)->Scan(KeyOf(5), 2, &pairs).ok());
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[1], std::make_pair(KeyOf(5) + "x", std::string("inserted")));
}

TEST_F(RedisStoreTest, AFailedTransactionWritesNothingAndLeavesNoWatchBehind) {
  Load(5);
  int attempts = 0;
  Status s = session_->RunTransaction(
      [&](TxnOps& txn) -> Status {
        std::string v;
        CELL_RETURN_IF_ERROR(txn.Get(KeyOf(1), &v));
        CELL_RETURN_IF_ERROR(txn.Put(KeyOf(1), "never"));
        return Status::FailedPrecondition("the body gives up");
      },
      &attempts);
  EXPECT_EQ(s.message(), "the body gives up");
  EXPECT_EQ(attempts, 1) << "only a conflict is run again";
  // Another connection changes the key the failed transaction watched: the next transaction here, on other keys,
  // must not be failed by that old watch.
  auto other = store_->NewSession();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_TRUE(PutNow(**other, KeyOf(1), "other's", /*insert=*/false).ok());
  s = session_->RunTransaction(
      [&](TxnOps& txn) -> Status {
        std::string v;
        CELL_RETURN_IF_ERROR(txn.Get(KeyOf(2), &v));
        return txn.Put(KeyOf(2), v + "!");
      },
      &attempts);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(attempts, 1);
  EXPECT_EQ(GetNow(*session_, KeyOf(1)), "other's");
  EXPECT_EQ(GetNow(*session_, KeyOf(2)), ValueOf(KeyOf(2)) + "!");
}

TEST_F(RedisStoreTest, AnInsertIntoAScannedRangeIsAConflictAndAnUpdateOfAnotherKeyIsNot) {
  Load(20);
  auto other = store_->NewSession();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  // While the transaction runs (after its scan of keys 0..9), another connection updates key 15 (its ZADD finds the
  // key in the index already) and, in the first attempt only, inserts a key between 5 and 6.
  int attempts = 0;
  std::vector<size_t> scanned;
  const Status s = session_->RunTransaction(
      [&](TxnOps& txn) -> Status {
        std::vector<std::pair<std::string, std::string>> pairs;
        CELL_RETURN_IF_ERROR(txn.Scan(KeyOf(0), 10, &pairs));
        scanned.push_back(pairs.size());
        CELL_RETURN_IF_ERROR(PutNow(**other, KeyOf(15), "updated", /*insert=*/true));
        if (scanned.size() == 1) CELL_RETURN_IF_ERROR(PutNow(**other, KeyOf(5) + "5", "phantom", /*insert=*/true));
        return txn.Put(KeyOf(19), "written");
      },
      &attempts);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(attempts, 2) << "the insert must fail the first EXEC, and the update of key 15 the second must not";
  EXPECT_EQ(GetNow(*session_, KeyOf(19)), "written");
}

TEST_F(RedisStoreTest, TwoTransfersThatReadBeforeEitherWritesConflictAndBothCommit) {
  const Bank bank(4);
  ASSERT_TRUE(LoadInTransactions(*session_, bank.accounts(), [&](uint64_t i) {
                return std::make_pair(bank.Key(i), bank.InitialValue());
              }).ok());
  const ForcedConflictResult r = RunForcedConflict(*store_, bank);
  ASSERT_TRUE(r.first.ok()) << r.first.ToString();
  ASSERT_TRUE(r.second.ok()) << r.second.ToString();
  EXPECT_GE(r.attempts[0] + r.attempts[1], 3) << "the second EXEC must have found a watched key changed";
  EXPECT_EQ(r.a, "998");
  EXPECT_EQ(r.b, "1002");
}

TEST_F(RedisStoreTest, ConcurrentTransfersAndAuditsKeepTheTotal) {
  const Bank bank(20);
  ASSERT_TRUE(LoadInTransactions(*session_, bank.accounts(), [&](uint64_t i) {
                return std::make_pair(bank.Key(i), bank.InitialValue());
              }).ok());
  const BankStressResult r = RunBankStress(*store_, bank, 300);
  for (const std::string& e : r.errors) ADD_FAILURE() << e;
  ASSERT_TRUE(r.final_total.has_value());
  EXPECT_EQ(*r.final_total, bank.expected_total());
  EXPECT_TRUE(r.check.ok) << r.check.summary;
  EXPECT_GT(r.check.checked_txns, r.committed);  // the final total too
  EXPECT_EQ(r.committed, 4u * 300);
  EXPECT_GT(r.audits, 0u);
  EXPECT_GT(r.aborts, 0u) << "two threads on the same two accounts never conflicted";
}

TEST(RedisStore, AStoreAtADeadPortReportsAnError) {
  DeadPort dead;
  ASSERT_NE(dead.port(), 0);
  const std::string address = "127.0.0.1:" + std::to_string(dead.port());
  auto store = RedisStore::Open(address, kOptions);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(store.status().IsUnavailable()) << store.status().ToString();
  EXPECT_EQ(store.status().message().rfind("cannot connect to redis at " + address + ": ", 0), 0u)
      << store.status().ToString();
  EXPECT_NE(store.status().message().find("refused"), std::string::npos) << store.status().ToString();
  auto missing = RedisStore::Open("unix:/nonexistent/cell-bench-redis.sock", kOptions);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message().rfind("cannot connect to redis at unix:/nonexistent/cell-bench-redis.sock: ", 0),
            0u)
      << missing.status().ToString();
}

TEST(RedisStore, OverTcpPutsGetsAndScansWork) {
  std::string error;
  auto server = RedisServer::Start(/*tcp=*/true, &error);
  ASSERT_NE(server, nullptr) << error;
  auto store = RedisStore::Open(server->address(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto session = (*store)->NewSession();
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  int done = 0, ok = 0;
  for (int i = 0; i < 50; ++i) {
    const std::string key = KeyOf(i);
    (*session)->Put(key, ValueOf(key), /*insert=*/true, [&](const Status& s) { ++done, ok += s.ok(); });
  }
  std::string value;
  (*session)->Get(KeyOf(42), [&](const Status& s, std::string_view v) {
    ++done;
    value = s.ok() ? std::string(v) : s.ToString();
  });
  AwaitCount(**session, done, 51);
  EXPECT_EQ(ok, 50);
  EXPECT_EQ(value, ValueOf(KeyOf(42)));
  std::vector<std::pair<std::string, std::string>> pairs;
  ASSERT_TRUE((*session)->Scan(KeyOf(48), 10, &pairs).ok());
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[1], std::make_pair(KeyOf(49), ValueOf(KeyOf(49))));
}

TEST(RedisAddress, ParsesHostPortAndUnixSocketsAndRefusesTheRest) {
  auto a = ParseRedisAddress("127.0.0.1:6379");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 6379);
  EXPECT_EQ(a->ToString(), "127.0.0.1:6379");
  a = ParseRedisAddress("[::1]:7000");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->ToString(), "[::1]:7000");
  a = ParseRedisAddress("unix:/tmp/redis.sock");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->host.empty());
  EXPECT_EQ(a->unix_path, "/tmp/redis.sock");
  EXPECT_EQ(a->ToString(), "unix:/tmp/redis.sock");
  for (const char* bad :
       {"", "localhost", ":6379", "host:", "host:0", "host:65536", "host:12x", "::1:6379", "[::1:6379", "unix:"}) {
    auto b = ParseRedisAddress(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_TRUE(b.status().IsInvalidArgument()) << bad;
    EXPECT_NE(b.status().message().find("HOST:PORT"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace cell::bench
