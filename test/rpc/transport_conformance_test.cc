// One conformance suite for every transport: what Connection and Server promise, whatever carries the bytes.
//
// Built twice: rpc_transport_conformance_test runs tcp and shm here; rpc_verbs_conformance_test (CELL_TEST_VERBS)
// runs verbs inside the Soft-RoCE guest (test/rxe/).
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rpc/frame.h"
#include "rpc/socket_channel.h"
#include "rpc/socket_util.h"
#include "test/child_process.h"
#include "test/rpc/test_handler.h"
#include "test/temp_dir.h"
#include "test/test_util.h"

namespace cell::rpc {
namespace {

using cell::testing::TestHandler;
using cell::testing::TestRegion;
using namespace std::chrono_literals;

struct TransportCase {
  std::string name;
  bool stream;       // frames on a socket (tcp, shm): raw malformed-frame tests apply
  bool nic_threads;  // one-sided reads are served by server NIC threads (tcp)
  bool in_place;     // the client can read the server's memory in place (shm)
};

std::string ListenUri(const TransportCase& t) {
  static std::atomic<int> counter{0};
  if (t.name == "tcp") return "tcp://127.0.0.1:0";
  if (t.name == "shm") return fmt::format("shm://{}/rpc-{}.sock", cell::testing::ProcessDir(), counter++);
  const char* ip = std::getenv("CELL_RXE_IP");
  return fmt::format("verbs://{}:0", ip != nullptr ? ip : "127.0.0.1");
}

// Waits for a count of completions with a generous bound, so that a bug fails the test instead of hanging it.
class Completions {
 public:
  void Add() {
    std::lock_guard lock(mu_);
    ++done_;
    cv_.notify_all();
  }
  bool WaitFor(int n, std::chrono::seconds bound = 60s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, bound, [&] { return done_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int done_ = 0;
};

class TransportTest : public ::testing::TestWithParam<TransportCase> {
 protected:
  void SetUp() override { StartServer(ServerOptions{}); }

  void StartServer(ServerOptions options) {
    server_.reset();
    auto server = Listen(ListenUri(GetParam()), options, &handler_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    ASSERT_TRUE(server_->RegisterRegion(region_.registration()).ok());
  }

  std::unique_ptr<Connection> MustConnect(ConnectOptions options = {}) {
    auto c = Connect(server_->uri(), options);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  TestHandler handler_;
  TestRegion region_{1, 4 << 20, 42};
  std::unique_ptr<Server> server_;
};

TEST_P(TransportTest, RoundTripReturnsTheResponse) {
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  auto r = CallSync(*c, testing::kEcho, "hello, cell");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "hello, cell");
  auto empty = CallSync(*c, testing::kEcho, "");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(*empty, "");
  EXPECT_TRUE(c->health().ok());
}

// Echo requests of varied sizes, each reply checked against its own request.
struct Echoes {
  Completions done;
  std::atomic<int> mismatches{0}, errors{0};
  void Send(Connection& c, int i) {
    std::string payload = fmt::format("request {} {}", i, std::string(i % 300, 'p'));
    c.Call(testing::kEcho, payload, [this, payload](const Status& s, std::string_view response) {
      if (!s.ok()) {
        errors++;
      } else if (response != payload) {
        mismatches++;
      }
      done.Add();
    });
  }
};

// A server whose threads poll for requests before they sleep (ServerOptions::poll) answers as one that sleeps at
// once, requests that come while it polls and after it has gone to sleep alike, and stops while it polls.
TEST_P(TransportTest, APollingServerAnswersWhetherItPollsOrSleeps) {
  ServerOptions options;
  options.poll = 20ms;
  StartServer(options);
  Echoes echoes;
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 100; ++i) echoes.Send(*c, i);  // taken while the worker polls
  ASSERT_TRUE(echoes.done.WaitFor(100));
  // Past the poll: the worker sleeps, and the next request must wake it.
  const auto asleep = Clock::now() + 3 * options.poll;
  while (Clock::now() < asleep) std::this_thread::yield();
  auto r = CallSync(*c, testing::kEcho, "after the poll");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "after the poll");
  echoes.Send(*c, 100);  // the worker polls again as the server stops
  ASSERT_TRUE(echoes.done.WaitFor(101));
  EXPECT_EQ(echoes.errors.load(), 0);
  EXPECT_EQ(echoes.mismatches.load(), 0);
  server_->Stop();
}

// (Tests declare what callbacks touch before the connection, so an early return destroys the connection first.)
TEST_P(TransportTest, ThousandPipelinedRequestsEachGetTheirOwnReply) {
  constexpr int kRequests = 1000;
  Echoes echoes;
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < kRequests; ++i) echoes.Send(*c, i);
  ASSERT_TRUE(echoes.done.WaitFor(kRequests));
  EXPECT_EQ(echoes.errors.load(), 0);
  EXPECT_EQ(echoes.mismatches.load(), 0);
}

TEST_P(TransportTest, MessagesAtTheLimitPassAndOverItAreRefused) {
  constexpr uint32_t kLimit = 64 << 10;
  ServerOptions server_options;
  server_options.max_message_bytes = kLimit;
  StartServer(server_options);
  ConnectOptions client_options;
  client_options.max_message_bytes = kLimit;
  auto c = MustConnect(client_options);
  ASSERT_NE(c, nullptr);

  const std::string at_limit(kLimit, 'a');
  auto r = CallSync(*c, testing::kEcho, at_limit);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, at_limit);

  auto over = CallSync(*c, testing::kEcho, std::string(kLimit + 1, 'a'));
  ASSERT_FALSE(over.ok());
  EXPECT_TRUE(over.status().IsInvalidArgument()) << over.status().ToString();
  EXPECT_NE(over.status().message().find("exceeds the message limit"), std::string::npos);

  proto::EchoRequest big_reply;
  big_reply.set_reply_bytes(kLimit + 1);
  auto too_big = CallSync(*c, testing::kSized, big_reply.SerializeAsString());
  ASSERT_FALSE(too_big.ok());
  EXPECT_TRUE(too_big.status().IsResourceExhausted()) << too_big.status().ToString();

  // Neither refusal cost the connection.
  auto after = CallSync(*c, testing::kEcho, "still here");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(*after, "still here");
}

// 64 MiB of replies asked for in one burst: far over the server's per-connection output budget, so it must park
// requests and come back to them as the client drains; every reply still arrives, whole.
TEST_P(TransportTest, BurstOfLargeRepliesAllArrive) {
  constexpr int kCalls = 64;
  Completions done;
  std::atomic<int> wrong{0};
  std::mutex first_mu;
  std::string first_wrong;
  // What is tested is that every reply arrives whole, not how fast: under qemu's TCG on a loaded machine the 64 MiB
  // take over 10 s, so the calls get a generous timeout.
  ConnectOptions patient;
  patient.call_timeout = std::chrono::milliseconds(120000);
  auto c = MustConnect(patient);
  ASSERT_NE(c, nullptr);
  proto::EchoRequest request;
  request.set_reply_bytes(1 << 20);
  const std::string bytes = request.SerializeAsString();
  for (int i = 0; i < kCalls; ++i) {
    c->Call(testing::kSized, bytes, [&](const Status& s, std::string_view response) {
      if (!s.ok() || response.size() != (1u << 20) || response.find_first_not_of('x') != std::string_view::npos) {
        if (wrong++ == 0) {
          std::lock_guard lock(first_mu);
          first_wrong = s.ToString() + ", " + std::to_string(response.size()) + " bytes";
        }
      }
      done.Add();
    });
  }
  ASSERT_TRUE(done.WaitFor(kCalls));
  std::lock_guard lock(first_mu);
  EXPECT_EQ(wrong.load(), 0) << "the first: " << first_wrong;
}

TEST_P(TransportTest, TheClientsLimitBoundsTheServersReplies) {
  ConnectOptions small;
  small.max_message_bytes = 64 << 10;  // the server's limit stays 16 MiB
  auto c = MustConnect(small);
  ASSERT_NE(c, nullptr);
  proto::EchoRequest big_reply;
  big_reply.set_reply_bytes(100 << 10);
  auto r = CallSync(*c, testing::kSized, big_reply.SerializeAsString());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsResourceExhausted()) << r.status().ToString();  // that call fails, not the connection
  auto after = CallSync(*c, testing::kEcho, "still here");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
}

TEST_P(TransportTest, OneSidedReadsReturnExactlyTheRegionBytes) {
  constexpr int kOutstanding = 256;
  std::vector<std::string> buffers(kOutstanding);
  std::vector<uint64_t> offsets(kOutstanding);
  Completions done;
  std::atomic<int> errors{0};
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(1);
  // Synchronous reads at random offsets and lengths (unaligned ones included).
  for (int i = 0; i < 500; ++i) {
    const uint32_t length = 1 + rng() % 8192;
    const uint64_t offset = rng() % (region_.size() - length + 1);
    std::string buffer(length, '\0');
    Status s = ReadSync(*c, GlobalPtr{1, offset}, length, buffer.data());
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(0, std::memcmp(buffer.data(), region_.base() + offset, length)) << "offset " << offset;
  }
  // Many outstanding at once.
  for (int i = 0; i < kOutstanding; ++i) {
    const uint32_t length = 1024;
    offsets[i] = rng() % (region_.size() - length + 1);
    buffers[i].assign(length, '\0');
    c->Read(GlobalPtr{1, offsets[i]}, length, buffers[i].data(), [&](const Status& s) {
      if (!s.ok()) errors++;
      done.Add();
    });
  }
  ASSERT_TRUE(done.WaitFor(kOutstanding));
  EXPECT_EQ(errors.load(), 0);
  for (int i = 0; i < kOutstanding; ++i) {
    ASSERT_EQ(0, std::memcmp(buffers[i].data(), region_.base() + offsets[i], 1024)) << i;
  }
  const ServerStats stats = server_->stats();
  if (GetParam().nic_threads) {
    EXPECT_EQ(stats.reads, 500u + kOutstanding);  // served by NIC threads...
    EXPECT_EQ(stats.requests, 0u);                // ...never by the worker pool
  } else {
    EXPECT_EQ(stats.reads, 0u);  // truly one-sided: the server did nothing
  }
}

TEST_P(TransportTest, ReadsOutsideRegisteredRegionsAreRefused) {
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  std::string buffer(4096, 'z');
  struct Case {
    GlobalPtr at;
    uint32_t length;
    const char* expect;
    Status::Code code;  // a region not served here may be served elsewhere (retry); a read outside one never will
  };
  const uint64_t size = region_.size();
  const Case cases[] = {
      {GlobalPtr{2, 0}, 8, "not registered", Status::Code::kUnavailable},                   // unknown region
      {GlobalPtr{1, size}, 1, "not inside region 1", Status::Code::kInvalidArgument},       // starts at the end
      {GlobalPtr{1, size - 8}, 16, "not inside region 1", Status::Code::kInvalidArgument},  // crosses the end
      {GlobalPtr{1, size + 4096}, 8, "not inside region 1", Status::Code::kInvalidArgument},
  };
  for (const Case& k : cases) {
    Status s = ReadSync(*c, k.at, k.length, buffer.data());
    ASSERT_FALSE(s.ok()) << "read at " << k.at.offset << " of region " << k.at.region << " was served";
    EXPECT_EQ(s.code(), k.code) << s.ToString();
    EXPECT_NE(s.message().find(k.expect), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(buffer, std::string(4096, 'z'));  // nothing was written to the destination
  // The connection still reads and calls.
  ASSERT_TRUE(ReadSync(*c, GlobalPtr{1, size - 8}, 8, buffer.data()).ok());
  EXPECT_EQ(0, std::memcmp(buffer.data(), region_.base() + size - 8, 8));
  EXPECT_TRUE(CallSync(*c, testing::kEcho, "ok").ok());
}

TEST_P(TransportTest, ReadsInPlaceSeeTheServersMemoryOrSayTheyCannot) {
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->reads_in_place(), GetParam().in_place);
  auto region = c->RegionInPlace(1);
  if (!GetParam().in_place) {
    ASSERT_FALSE(region.ok());
    EXPECT_EQ(region.status().code(), Status::Code::kFailedPrecondition) << region.status().ToString();
    EXPECT_NE(region.status().message().find("cannot read in place"), std::string::npos) << region.status().ToString();
    return;
  }
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  // The whole region, as the server has it.
  ASSERT_EQ(region->size(), region_.size());
  const uint64_t offset = 3 * 4096 + 40;
  const char* at = region->data() + offset;
  EXPECT_EQ(0, std::memcmp(at, region_.base() + offset, 64));
  EXPECT_EQ(0, std::memcmp(region->data() + region_.size() - 64, region_.base() + region_.size() - 64, 64));
  // Not a copy: what the server writes next is what the reader sees there.
  region_.writable_base()[offset + 5] = static_cast<char>(~region_.base()[offset + 5]);
  EXPECT_EQ(0, std::memcmp(at, region_.base() + offset, 64));
  // Asked again, the same mapping.
  auto again = c->RegionInPlace(1);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->data(), region->data());
  // A region the server does not serve is refused as Read refuses it.
  auto unknown = c->RegionInPlace(2);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Status::Code::kUnavailable) << unknown.status().ToString();
}

TEST_P(TransportTest, TimeoutFailsOnlyThatRequest) {
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  const auto start = Clock::now();
  auto r = CallSync(*c, testing::kHang, "", std::chrono::microseconds(50000));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsDeadlineExceeded()) << r.status().ToString();
  EXPECT_GE(Clock::now() - start, 50ms);
  auto after = CallSync(*c, testing::kEcho, "alive");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
}

// Requests with different timeouts on one connection: each expires at its own deadline, an earlier one behind a
// later one included and after a request answered before its deadline, and none before it.
TEST_P(TransportTest, EachRequestExpiresAtItsOwnDeadline) {
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  Completions long_done;
  std::atomic<bool> long_expired{false};
  c->Call(
      testing::kHang, "",
      [&](const Status& s, std::string_view) {
        long_expired = s.IsDeadlineExceeded();
        long_done.Add();
      },
      Clock::now() + std::chrono::seconds(60));
  for (const auto timeout : {40ms, 80ms}) {
    for (const auto echo_timeout : {timeout / 2, timeout * 2}) {
      // An echo answered before its deadline (earlier or later than the next request's, so that the channel's bound
      // on the earliest deadline is stale in either direction), then a request that hangs.
      ASSERT_TRUE(CallSync(*c, testing::kEcho, "answered", std::chrono::microseconds(echo_timeout)).ok());
      const auto start = Clock::now();
      auto r = CallSync(*c, testing::kHang, "", std::chrono::microseconds(timeout));
      const auto took = Clock::now() - start;
      EXPECT_TRUE(r.status().IsDeadlineExceeded()) << r.status().ToString();
      EXPECT_GE(took, timeout);
      EXPECT_LT(took, 3s) << "a request expired long after its deadline, behind one with a later deadline";
    }
  }
  EXPECT_FALSE(long_expired.load()) << "the 60 s request expired early";
  c->Close();
  ASSERT_TRUE(long_done.WaitFor(1));
  EXPECT_FALSE(long_expired.load()) << "the 60 s request expired early";
}

TEST_P(TransportTest, RepliesFromAnotherThreadArrive) {
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 20; ++i) {
    auto r = CallSync(*c, testing::kAsyncEcho, fmt::format("async {}", i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, fmt::format("async {}", i));
  }
}

// Large replies from another thread, several at once on one connection: more than the socket takes at once, so the
// answering thread leaves the rest to the worker pool (it never waits for the client), and every byte arrives.
TEST_P(TransportTest, LargeRepliesFromAnotherThreadArriveWhole) {
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  std::vector<std::thread> callers;
  std::atomic<int> whole{0};
  for (int i = 0; i < 4; ++i) {
    callers.emplace_back([&, i] {
      const std::string payload(4 << 20, static_cast<char>('a' + i));
      auto r = CallSync(*c, testing::kAsyncEcho, payload);
      if (r.ok() && *r == payload) whole.fetch_add(1);
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(whole.load(), 4);
}

TEST_P(TransportTest, DroppedRequestAnswersWithAnError) {
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  auto r = CallSync(*c, testing::kDrop, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInternal) << r.status().ToString();
}

TEST_P(TransportTest, WorkerPoolBoundsTheThreadsRunningRequests) {
  ServerOptions options;
  options.workers = 2;
  StartServer(options);
  Completions done;
  std::atomic<int> errors{0};
  std::vector<std::unique_ptr<Connection>> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(MustConnect());
  const int kPerClient = 200 * cell::testing::StressScale();
  std::vector<std::thread> threads;
  for (auto& c : clients) {
    ASSERT_NE(c, nullptr);
    threads.emplace_back([&, conn = c.get()] {
      for (int i = 0; i < kPerClient; ++i) {
        conn->Call(testing::kEcho, "x", [&](const Status& s, std::string_view) {
          if (!s.ok()) errors++;
          done.Add();
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(done.WaitFor(4 * kPerClient));
  EXPECT_EQ(errors.load(), 0);
  EXPECT_LE(handler_.distinct_threads(), 2u);
  EXPECT_GE(server_->stats().requests, static_cast<uint64_t>(4 * kPerClient));
}

TEST_P(TransportTest, ConnectingToNothingFailsClearly) {
  const char* ip = std::getenv("CELL_RXE_IP");
  const std::string uri = GetParam().name == "shm"   ? "shm:///tmp/cell-no-such-server.sock"
                          : GetParam().name == "tcp" ? "tcp://127.0.0.1:1"
                                                     : fmt::format("verbs://{}:1", ip != nullptr ? ip : "127.0.0.1");
  ConnectOptions options;
  options.connect_timeout = 2000ms;
  auto c = Connect(uri, options);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(c.status().IsUnavailable()) << c.status().ToString();
}

// The server is a real process, killed with SIGKILL while requests wait: every caller hears, none hangs.
TEST_P(TransportTest, PeerDeathFailsEveryWaitingCaller) {
  cell::testing::ChildProcess server({CELL_RPC_TEST_SERVER, "--uri=" + ListenUri(GetParam())});
  ASSERT_TRUE(server.ok());
  const std::string line = server.ReadLine(std::chrono::seconds(60)).value_or("(nothing)");
  ASSERT_EQ(line.rfind("READY ", 0), 0u) << "server said: " << line;
  const std::string uri = line.substr(6);

  constexpr int kWaiting = 50;
  Completions done;
  std::atomic<int> unavailable{0};
  auto c = Connect(uri);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::string buffer(64, '\0');
  ASSERT_TRUE(ReadSync(**c, GlobalPtr{1, 0}, 64, buffer.data()).ok());

  for (int i = 0; i < kWaiting; ++i) {
    (*c)->Call(testing::kHang, "", [&](const Status& s, std::string_view) {
      if (s.IsUnavailable()) unavailable++;
      done.Add();
    });
  }
  // The server has the requests when an echo behind them comes back (requests on a connection run in order).
  ASSERT_TRUE(CallSync(**c, testing::kEcho, "barrier").ok());
  server.Kill();
  ASSERT_TRUE(done.WaitFor(kWaiting, 30s)) << "callers still waiting after the server died";
  EXPECT_EQ(unavailable.load(), kWaiting);
  EXPECT_FALSE((*c)->health().ok());
  auto late = CallSync(**c, testing::kEcho, "anyone?");
  EXPECT_TRUE(late.status().IsUnavailable()) << late.status().ToString();
  Status read = ReadSync(**c, GlobalPtr{1, 0}, 64, buffer.data());
  EXPECT_TRUE(read.IsUnavailable()) << read.ToString();
}

TEST_P(TransportTest, ClosingFailsOutstandingRequests) {
  Completions done;
  std::atomic<int> unavailable{0};
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 10; ++i) {
    c->Call(testing::kHang, "", [&](const Status& s, std::string_view) {
      if (s.IsUnavailable()) unavailable++;
      done.Add();
    });
  }
  c->Close();
  ASSERT_TRUE(done.WaitFor(10));
  EXPECT_EQ(unavailable.load(), 10);
  EXPECT_TRUE(CallSync(*c, testing::kEcho, "").status().IsUnavailable());
}

// Held sends (BeginHoldingSends): requests queued behind others and written together are each answered once, after a
// flush or without one; a thread that waits flushes first; a connection closed with requests held fails them.
TEST_P(TransportTest, HeldRequestsAreEachAnsweredAfterAFlush) {
  constexpr int kRequests = 1000;
  Echoes echoes;
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  BeginHoldingSends();
  for (int i = 0; i < kRequests; ++i) echoes.Send(*c, i);
  FlushHeldSends();
  const bool all = echoes.done.WaitFor(kRequests);
  EndHoldingSends();
  ASSERT_TRUE(all);
  EXPECT_EQ(echoes.errors.load(), 0);
  EXPECT_EQ(echoes.mismatches.load(), 0);
}

TEST_P(TransportTest, HeldRequestsGoOutWithoutAFlush) {
  // The first goes at once (nothing in flight); the rest are held behind it and written when its reply comes in.
  constexpr int kRequests = 200;
  Completions done;
  std::atomic<int> errors{0};
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  BeginHoldingSends();
  for (int i = 0; i < kRequests; ++i) {
    c->Call(testing::kEcho, fmt::format("unflushed {}", i), [&](const Status& s, std::string_view) {
      if (!s.ok()) errors++;
      done.Add();
    });
  }
  const bool all = done.WaitFor(kRequests);  // no flush while waiting
  EndHoldingSends();
  ASSERT_TRUE(all);
  EXPECT_EQ(errors.load(), 0);
}

TEST_P(TransportTest, AThreadHoldingItsSendsFlushesBeforeItWaits) {
  // A request that never gets its reply keeps the connection busy, so the echo behind it is held; its deadline is
  // later than that request's, so nothing wakes the connection's I/O thread before that request expires. Unless
  // CallSync flushes, the echo goes out only then.
  std::atomic<bool> expired{false};
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  c->Call(
      testing::kHang, "", [&](const Status&, std::string_view) { expired = true; },
      Clock::now() + std::chrono::seconds(20));
  // Its reply comes after the I/O thread has taken the wake-up the hung request gave it (its deadline wakes nothing).
  ASSERT_TRUE(CallSync(*c, testing::kEcho, "settle", std::chrono::seconds(25)).ok());
  BeginHoldingSends();
  auto r = CallSync(*c, testing::kEcho, "waited for", std::chrono::seconds(30));
  EndHoldingSends();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "waited for");
  EXPECT_FALSE(expired.load()) << "the echo was answered only after the request ahead of it expired";
  c->Close();
}

TEST_P(TransportTest, ClosingWithHeldRequestsFailsThemAndAFlushAfterIsHarmless) {
  Completions done;
  std::atomic<int> unavailable{0}, answered{0};
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  BeginHoldingSends();
  for (int i = 0; i < 10; ++i) {
    c->Call(i == 0 ? testing::kHang : testing::kEcho, "", [&](const Status& s, std::string_view) {
      if (s.IsUnavailable()) unavailable++;
      if (s.ok()) answered++;
      done.Add();
    });
  }
  c.reset();         // destroyed with the echoes held, unless a wake-up of its I/O thread wrote them first
  FlushHeldSends();  // finds the connection gone
  EndHoldingSends();
  ASSERT_TRUE(done.WaitFor(10));
  EXPECT_GE(unavailable.load(), 1);  // the hung request
  EXPECT_EQ(unavailable.load() + answered.load(), 10);
}

// Keys (rpc/auth.h): a server with keys serves only connections that prove one, and each method only to the keys its
// `authorize` allows; a connection that asks for more is refused and closed.
const Key kClientKey{"client", "client-secret-0123456789abcdef"};
const Key kPeerKey{"peer", "peer-secret-0123456789abcdef00"};

ServerOptions KeyedOptions() {
  ServerOptions options;
  options.keys = {kClientKey, kPeerKey};
  options.authorize = [](uint16_t method, const std::string& key) {
    if (method == testing::kSized && key != "peer") return Status::PermissionDenied("kSized needs the peer key");
    return Status::OK();
  };
  return options;
}

ConnectOptions WithKey(Key key) {
  ConnectOptions options;
  options.key = std::move(key);
  return options;
}

TEST_P(TransportTest, AKeyedServerServesTheKeysItKnowsAndNothingElse) {
  StartServer(KeyedOptions());
  auto c = MustConnect(WithKey(kClientKey));
  ASSERT_NE(c, nullptr);
  auto echoed = CallSync(*c, testing::kEcho, "with the key");
  ASSERT_TRUE(echoed.ok()) << echoed.status().ToString();
  EXPECT_EQ(*echoed, "with the key");
  std::string bytes(4096, '\0');
  ASSERT_TRUE(ReadSync(*c, GlobalPtr{1, 8192}, 4096, bytes.data()).ok());
  EXPECT_EQ(0, std::memcmp(bytes.data(), region_.base() + 8192, 4096));

  const uint64_t handled = server_->stats().requests;
  const std::pair<const char*, Key> refused[] = {
      {"no key", Key{}},
      {"the client key's name with another secret", Key{"client", "not-the-client-secret-00000000"}},
      {"a key the server does not know", Key{"admin", "admin-secret-0123456789abcdef"}},
  };
  for (const auto& [what, key] : refused) {
    auto attempt = Connect(server_->uri(), WithKey(key));
    ASSERT_FALSE(attempt.ok()) << what;
    EXPECT_TRUE(attempt.status().IsPermissionDenied()) << what << ": " << attempt.status().ToString();
  }
  EXPECT_EQ(server_->stats().requests, handled) << "a refused connection reached the handler";

  // The client key may not call the peer's method: refused, and its connection closed.
  proto::EchoRequest sized;
  sized.set_reply_bytes(10);
  auto denied = CallSync(*c, testing::kSized, sized.SerializeAsString());
  ASSERT_FALSE(denied.ok());
  EXPECT_TRUE(denied.status().IsPermissionDenied()) << denied.status().ToString();
  auto after = CallSync(*c, testing::kEcho, "still open?");
  EXPECT_TRUE(after.status().IsUnavailable()) << after.status().ToString();
  EXPECT_EQ(server_->stats().requests, handled) << "the refused request reached the handler";

  auto peer = MustConnect(WithKey(kPeerKey));
  ASSERT_NE(peer, nullptr);
  auto allowed = CallSync(*peer, testing::kSized, sized.SerializeAsString());
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  EXPECT_EQ(*allowed, std::string(10, 'x'));
}

TEST_P(TransportTest, AClientWithAKeyRefusesAServerWithout) {
  auto attempt = Connect(server_->uri(), WithKey(kClientKey));  // SetUp's server has no keys
  ASSERT_FALSE(attempt.ok());
  EXPECT_TRUE(attempt.status().IsPermissionDenied()) << attempt.status().ToString();
  EXPECT_NE(attempt.status().message().find("without keys"), std::string::npos) << attempt.status().ToString();
}

#ifdef CELL_TEST_VERBS
INSTANTIATE_TEST_SUITE_P(Verbs, TransportTest, ::testing::Values(TransportCase{"verbs", false, false, false}),
                         [](const auto& info) { return info.param.name; });
#else
INSTANTIATE_TEST_SUITE_P(Stream, TransportTest,
                         ::testing::Values(TransportCase{"tcp", true, true, false},
                                           TransportCase{"shm", true, false, true}),
                         [](const auto& info) { return info.param.name; });

// Malformed input on a raw socket: the server closes that connection, logs why, and keeps serving the others.
class StreamFrameTest : public TransportTest {
 protected:
  int RawConnect() {
    auto endpoint = Endpoint::Parse(server_->uri());
    EXPECT_TRUE(endpoint.ok());
    StatusOr<int> fd = endpoint->scheme == Endpoint::Scheme::kTcp
                           ? ConnectTcp(endpoint->host, endpoint->port, Clock::now() + 5s)
                           : ConnectUnix(endpoint->path, Clock::now() + 5s);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    return fd.ok() ? *fd : -1;
  }

  // True if the server closes `fd` (end of stream) within the bound, reading and discarding anything before it.
  static bool ServerCloses(int fd) {
    const auto deadline = Clock::now() + 30s;
    char buffer[4096];
    while (Clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 1000) <= 0) continue;
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    }
    return false;
  }

  static std::string Hello() {
    proto::Hello hello;
    hello.set_role(proto::ROLE_RPC);
    std::string frame;
    AppendFrame(frame, FrameType::kHello, 0, 0, hello.SerializeAsString());
    return frame;
  }

  void ExpectClosedAndOthersServed(const std::string& bytes, bool then_close_write) {
    auto healthy = MustConnect();
    ASSERT_NE(healthy, nullptr);
    const uint64_t errors_before = server_->stats().connections_closed_for_protocol_errors;
    const int fd = RawConnect();
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAllBy(fd, bytes, Clock::now() + 5s).ok());
    if (then_close_write) shutdown(fd, SHUT_WR);
    EXPECT_TRUE(ServerCloses(fd));
    close(fd);
    auto r = CallSync(*healthy, testing::kEcho, "unaffected");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, "unaffected");
    auto fresh = MustConnect();
    ASSERT_NE(fresh, nullptr);
    EXPECT_TRUE(CallSync(*fresh, testing::kEcho, "new").ok());
    if (!then_close_write) {
      EXPECT_EQ(server_->stats().connections_closed_for_protocol_errors, errors_before + 1);
    }
  }
};

TEST_P(StreamFrameTest, GarbageClosesTheConnection) {
  ExpectClosedAndOthersServed(std::string("GET / HTTP/1.1\r\nHost: cell\r\n\r\n"), false);
}

TEST_P(StreamFrameTest, OversizedFrameClosesTheConnection) {
  std::string bytes = Hello();
  char header[kFrameHeaderBytes];
  EncodeFrameHeader(FrameHeader{FrameType::kRequest, testing::kEcho, kDefaultMaxMessageBytes + 1, 1}, header);
  bytes.append(header, sizeof(header));
  ExpectClosedAndOthersServed(bytes, false);
}

TEST_P(StreamFrameTest, UnknownFrameTypeClosesTheConnection) {
  std::string bytes = Hello();
  char header[kFrameHeaderBytes];
  EncodeFrameHeader(FrameHeader{FrameType::kRequest, 1, 0, 1}, header);
  header[5] = 77;
  bytes.append(header, sizeof(header));
  ExpectClosedAndOthersServed(bytes, false);
}

TEST_P(StreamFrameTest, RequestBeforeHelloClosesTheConnection) {
  std::string bytes;
  AppendFrame(bytes, FrameType::kRequest, testing::kEcho, 1, "no hello");
  ExpectClosedAndOthersServed(bytes, false);
}

TEST_P(StreamFrameTest, TruncatedFrameThenHangUpLeavesOthersServed) {
  std::string bytes = Hello();
  std::string frame;
  AppendFrame(frame, FrameType::kRequest, testing::kEcho, 1, std::string(100, 'q'));
  bytes += frame.substr(0, kFrameHeaderBytes + 10);
  ExpectClosedAndOthersServed(bytes, true);
}

// Nothing but the proof is accepted after a keyed Hello: not a one-sided read (tcp), not a region descriptor (shm).
TEST_P(StreamFrameTest, ReadsAndDescriptorsBeforeTheProofAreRefused) {
  StartServer(KeyedOptions());
  const bool tcp = GetParam().name == "tcp";
  proto::Hello hello;
  hello.set_role(tcp ? proto::ROLE_READ : proto::ROLE_MAP);
  hello.set_key_name("client");
  hello.set_nonce(std::string(32, 'n'));
  std::string bytes;
  AppendFrame(bytes, FrameType::kHello, 0, 0, hello.SerializeAsString());
  proto::ReadRequest read;
  read.set_region(1);
  read.set_length(64);
  proto::MapRequest map;
  map.set_region(1);
  AppendFrame(bytes, tcp ? FrameType::kReadRequest : FrameType::kMapRequest, 0, 7,
              tcp ? read.SerializeAsString() : map.SerializeAsString());
  const int fd = RawConnect();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAllBy(fd, bytes, Clock::now() + 5s).ok());
  FrameDecoder decoder(1 << 20);
  FrameHeader header;
  std::string_view payload;
  ASSERT_TRUE(ReceiveFrameBy(fd, decoder, Clock::now() + 10s, &header, &payload).ok());
  EXPECT_EQ(header.type, FrameType::kHelloReply);
  decoder.Consume();
  ASSERT_TRUE(ReceiveFrameBy(fd, decoder, Clock::now() + 10s, &header, &payload).ok());
  EXPECT_EQ(header.type, FrameType::kError) << "the server answered the request before the proof";
  EXPECT_EQ(header.request_id, 7u);
  EXPECT_TRUE(ErrorFromFrame(header.aux, payload).IsPermissionDenied())
      << ErrorFromFrame(header.aux, payload).ToString();
  EXPECT_TRUE(ServerCloses(fd));
  close(fd);
  EXPECT_EQ(server_->stats().reads, 0u);
}

INSTANTIATE_TEST_SUITE_P(Stream, StreamFrameTest,
                         ::testing::Values(TransportCase{"tcp", true, true, false},
                                           TransportCase{"shm", true, false, true}),
                         [](const auto& info) { return info.param.name; });

// shm hands clients the region's memory itself: only the server's user may connect, and what it gets is read-only.
class ShmSecurity : public ::testing::Test {
 protected:
  void SetUp() override {
    // Another user must reach the socket, so that its own mode and the server's check are what refuse it: the
    // process's directory lets anyone through, though not list it.
    ASSERT_EQ(chmod(cell::testing::ProcessDir().c_str(), 0711), 0);
    auto server = Listen(ListenUri(TransportCase{"shm", true, false, true}), KeyedOptions(), &handler_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    ASSERT_TRUE(server_->RegisterRegion(region_.registration()).ok());
    path_ = server_->uri().substr(strlen("shm://"));
  }

  // In a child process of user and group `id` (nobody): connects to the socket and says Hello with the client key.
  // The child's exit status: 0 connect refused by the file's mode, 1 connected and the Hello refused with
  // PermissionDenied, 2 anything else (served).
  int ConnectAsAnotherUser(uid_t id) {
    std::string hello_frame;
    proto::Hello hello;
    hello.set_role(proto::ROLE_RPC);
    hello.set_key_name("client");
    hello.set_nonce(std::string(32, 'n'));
    AppendFrame(hello_frame, FrameType::kHello, 0, 0, hello.SerializeAsString());
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path_.data(), path_.size());
    const pid_t pid = fork();
    if (pid == 0) {  // only system calls from here on
      if (setgid(id) != 0 || setuid(id) != 0) _exit(3);
      const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
      if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(errno == EACCES ? 0 : 4);
      if (write(fd, hello_frame.data(), hello_frame.size()) != static_cast<ssize_t>(hello_frame.size())) _exit(5);
      char header[kFrameHeaderBytes];
      size_t got = 0;
      while (got < sizeof(header)) {
        const ssize_t n = read(fd, header + got, sizeof(header) - got);
        if (n <= 0) _exit(6);
        got += static_cast<size_t>(n);
      }
      const bool denied = header[5] == static_cast<char>(FrameType::kError) &&
                          header[6] == static_cast<char>(Status::Code::kPermissionDenied);
      _exit(denied ? 1 : 2);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  TestHandler handler_;
  TestRegion region_{1, 4 << 20, 42};
  std::unique_ptr<Server> server_;
  std::string path_;
};

TEST_F(ShmSecurity, TheSocketIsTheServerUsersAloneEvenIfItsModeIsWidened) {
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  if (geteuid() != 0) GTEST_FAIL() << "this test must run as root, to start a process of another user";
  constexpr uid_t kNobody = 65534;
  EXPECT_EQ(ConnectAsAnotherUser(kNobody), 0) << "another user connected through a 0600 socket";
  // Widened by mistake: the file lets anyone connect, and the server's own check (SO_PEERCRED) still refuses.
  ASSERT_EQ(chmod(path_.c_str(), 0666), 0);
  EXPECT_EQ(ConnectAsAnotherUser(kNobody), 1) << "another user was served through a widened socket";
  EXPECT_EQ(server_->stats().requests, 0u);
}

TEST_F(ShmSecurity, RegionDescriptorsCannotBeMappedWritable) {
  auto fd = ConnectUnix(path_, Clock::now() + 5s);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  proto::HelloReply hello_reply;
  ConnectOptions options = WithKey(kClientKey);
  ASSERT_TRUE(ExchangeHello(*fd, server_->uri(), proto::ROLE_MAP, options, &hello_reply).ok());
  proto::MapRequest request;
  request.set_region(1);
  std::string frame;
  AppendFrame(frame, FrameType::kMapRequest, 0, 1, request.SerializeAsString());
  ASSERT_TRUE(SendAllBy(*fd, frame, Clock::now() + 5s).ok());
  char header_bytes[kFrameHeaderBytes];
  int region_fd = -1;
  ASSERT_TRUE(ReceiveWithDescriptor(*fd, header_bytes, sizeof(header_bytes), &region_fd, Clock::now() + 5s).ok());
  FrameHeader header;
  ASSERT_TRUE(DecodeFrameHeader(std::string_view(header_bytes, sizeof(header_bytes)), 1 << 16, &header).ok());
  ASSERT_EQ(header.type, FrameType::kMapReply);
  ASSERT_GE(region_fd, 0);
  EXPECT_EQ(fcntl(region_fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  void* writable = mmap(nullptr, region_.size(), PROT_READ | PROT_WRITE, MAP_SHARED, region_fd, 0);
  EXPECT_EQ(writable, MAP_FAILED) << "a client mapped the region writable";
  if (writable != MAP_FAILED) munmap(writable, region_.size());
  EXPECT_EQ(errno, EACCES);
  void* readable = mmap(nullptr, region_.size(), PROT_READ, MAP_SHARED, region_fd, 0);
  ASSERT_NE(readable, MAP_FAILED);
  EXPECT_EQ(0, std::memcmp(readable, region_.base(), 4096));
  EXPECT_NE(mprotect(readable, region_.size(), PROT_READ | PROT_WRITE), 0) << "the read-only mapping became writable";
  munmap(readable, region_.size());
  close(region_fd);
  close(*fd);
}

// A server (here a fake one) that answers with an error frame whose code is 0 must not make the client report
// success, nor copy the error text into a read's buffer.
TEST(StreamClient, ErrorFrameWithoutACodeIsAnErrorAndWritesNothing) {
  uint16_t port = 0;
  StatusOr<int> listener = ListenTcp("127.0.0.1", 0, &port);
  ASSERT_TRUE(listener.ok());
  std::thread fake([fd = *listener] {
    std::vector<std::thread> conns;
    for (int i = 0; i < 2; ++i) {  // the rpc socket, then the read socket
      const int c = accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (c < 0) return;
      conns.emplace_back([c] {
        FrameDecoder decoder(1 << 20);
        FrameHeader h;
        std::string_view payload;
        const auto deadline = Clock::now() + 30s;
        std::string out;
        if (!ReceiveFrameBy(c, decoder, deadline, &h, &payload).ok()) return close(c), void();
        AppendFrame(out, FrameType::kHelloReply, 0, h.request_id, "");
        decoder.Consume();
        (void)SendAllBy(c, out, deadline);
        out.clear();
        if (ReceiveFrameBy(c, decoder, deadline, &h, &payload).ok()) {
          AppendFrame(out, FrameType::kError, 0, h.request_id, std::string(64 << 10, 'E'));
          (void)SendAllBy(c, out, deadline);
        }
        char byte;
        pollfd p{c, POLLIN, 0};
        poll(&p, 1, 30000);  // until the client hangs up
        (void)recv(c, &byte, 1, 0);
        close(c);
      });
    }
    for (auto& t : conns) t.join();
  });
  struct JoinOnExit {
    std::thread& t;
    int fd;
    ~JoinOnExit() {
      shutdown(fd, SHUT_RDWR);  // ends a pending accept
      t.join();
      close(fd);
    }
  } join{fake, *listener};
  {
    auto c = Connect(fmt::format("tcp://127.0.0.1:{}", port));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto r = CallSync(**c, 1, "x");
    EXPECT_EQ(r.status().code(), Status::Code::kInternal) << r.status().ToString();
    std::string buffer(16, 'b');
    Status s = ReadSync(**c, GlobalPtr{1, 0}, 16, buffer.data());
    EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
    EXPECT_EQ(buffer, std::string(16, 'b'));
  }
}

TEST(VerbsTransport, WithoutADeviceFailsWithNoRdmaDevice) {
  TestHandler handler;
  auto server = Listen("verbs://127.0.0.1:0", ServerOptions{}, &handler);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("no RDMA device"), std::string::npos) << server.status().ToString();
  auto client = Connect("verbs://127.0.0.1:7000");
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("no RDMA device"), std::string::npos) << client.status().ToString();
}
#endif

TEST(EndpointTest, ParsesEveryTransportAndRejectsNonsense) {
  auto tcp = Endpoint::Parse("tcp://10.1.2.3:7070");
  ASSERT_TRUE(tcp.ok());
  EXPECT_EQ(tcp->host, "10.1.2.3");
  EXPECT_EQ(tcp->port, 7070);
  auto shm = Endpoint::Parse("shm:///run/cell/server.sock");
  ASSERT_TRUE(shm.ok());
  EXPECT_EQ(shm->path, "/run/cell/server.sock");
  auto verbs = Endpoint::Parse("verbs://node1:9000");
  ASSERT_TRUE(verbs.ok());
  EXPECT_EQ(verbs->scheme, Endpoint::Scheme::kVerbs);
  for (const char* bad : {"", "tcp://", "tcp://host", "tcp://host:", "tcp://host:70000", "tcp://host:12x", "udp://h:1",
                          "shm://relative", "localhost:80"}) {
    EXPECT_FALSE(Endpoint::Parse(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace cell::rpc
