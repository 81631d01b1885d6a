// The shm transport's NIC model: parsing, pacing arithmetic, and reads that really wait for it.
#include "rpc/shm/nic_model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test/rpc/test_handler.h"

namespace cell::rpc::shm {
namespace {

TEST(NicModel, ParsesAnySubsetAndRejectsNonsense) {
  auto m = NicModel::Parse("reads_per_s=1040000,bytes_per_s=2.5e9,latency_us=3");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->reads_per_s, 1040000);
  EXPECT_EQ(m->bytes_per_s, 2.5e9);
  EXPECT_EQ(m->latency_us, 3);
  EXPECT_TRUE(m->enabled());
  auto off = NicModel::Parse("");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->enabled());
  for (const char* bad : {"reads_per_s", "reads_per_s=", "reads_per_s=-1", "speed=3", "latency_us=1x"}) {
    auto r = NicModel::Parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.status().IsInvalidArgument()) << bad;
  }
}

TEST(NicModel, BusyTimeIsTheSlowerOfRateAndBandwidth) {
  NicModel m{1e6, 1e9, 0};             // 1 us per read, 1 ns per byte
  EXPECT_EQ(m.BusyNanos(100), 1000);   // rate-bound
  EXPECT_EQ(m.BusyNanos(4096), 4096);  // bandwidth-bound
}

TEST(NicModel, ReservationsQueueBehindEachOther) {
  std::atomic<int64_t> busy_until{0};
  const auto first = ReserveNic(&busy_until, 10000, 500);
  const auto second = ReserveNic(&busy_until, 10000, 500);
  // The second read starts when the first leaves the NIC: its completion is exactly one busy time later.
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::nanoseconds>(second - first).count(), 10000);
}

TEST(NicModel, ShmReadsWaitForTheModelAndStayCorrect) {
  cell::testing::TestHandler handler;
  cell::testing::TestRegion region(1, 1 << 20, 5);
  ServerOptions options;
  options.nic_model = "reads_per_s=2000,latency_us=1000";  // 500 us per read on the NIC, then 1 ms of wire
  const std::string uri = fmt::format("shm:///tmp/cell-nic-model-test-{}.sock", getpid());
  auto server = Listen(uri, options, &handler);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->RegisterRegion(region.registration()).ok());
  auto c = Connect(uri);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  constexpr int kReads = 20;
  std::vector<std::string> buffers(kReads, std::string(1024, '\0'));
  const auto start = Clock::now();
  std::mutex mu;
  std::condition_variable cv;
  int done = 0, errors = 0;
  for (int i = 0; i < kReads; ++i) {
    (*c)->Read(GlobalPtr{1, static_cast<uint64_t>(i) * 1024}, 1024, buffers[i].data(), [&](const Status& s) {
      std::lock_guard lock(mu);
      if (!s.ok()) errors++;
      done++;
      cv.notify_all();
    });
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == kReads; }));
  }
  // 20 reads at 2,000/s cannot finish before 20 x 500 us + 1 ms (a lower bound: a slow machine only adds).
  EXPECT_GE(Clock::now() - start, std::chrono::microseconds(kReads * 500 + 1000));
  EXPECT_EQ(errors, 0);
  for (int i = 0; i < kReads; ++i) {
    EXPECT_EQ(0, std::memcmp(buffers[i].data(), region.base() + i * 1024, 1024)) << i;
  }
}

TEST(NicModel, ReadsWaitedForArePacedAndCloseReleasesTheirThreads) {
  cell::testing::TestHandler handler;
  cell::testing::TestRegion region(1, 1 << 20, 5);
  ServerOptions options;
  options.nic_model = "reads_per_s=4000";  // 250 us per read on the NIC
  const std::string uri = fmt::format("shm:///tmp/cell-nic-model-now-test-{}.sock", getpid());
  auto server = Listen(uri, options, &handler);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->RegisterRegion(region.registration()).ok());
  auto c = Connect(uri);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // Paced in the caller's thread: 40 reads at 4,000/s take at least 10 ms, and each copies the right bytes.
  std::string buffer(1024, '\0');
  const auto start = Clock::now();
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE((*c)->ReadNow(GlobalPtr{1, static_cast<uint64_t>(i) * 1024}, 1024, buffer.data()).ok());
    ASSERT_EQ(0, std::memcmp(buffer.data(), region.base() + i * 1024, 1024)) << i;
  }
  EXPECT_GE(Clock::now() - start, std::chrono::microseconds(40 * 250));

  // A slow NIC: each read holds it 2 s. One read queued ahead, so a read waited for is due 4 s out; closing the
  // connection must release its thread at once (whether it was already waiting or not yet begun), with an error.
  options.nic_model = "reads_per_s=0.5";
  const std::string slow_uri = fmt::format("shm:///tmp/cell-nic-model-slow-test-{}.sock", getpid());
  auto slow_server = Listen(slow_uri, options, &handler);
  ASSERT_TRUE(slow_server.ok()) << slow_server.status().ToString();
  ASSERT_TRUE((*slow_server)->RegisterRegion(region.registration()).ok());
  auto slow = Connect(slow_uri);
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  std::promise<Status> ahead;
  (*slow)->Read(GlobalPtr{1, 0}, 1024, buffer.data(), [&](const Status& s) { ahead.set_value(s); });
  const auto began = Clock::now();
  std::promise<Status> waited;
  std::string other(1024, '\0');
  std::atomic<pid_t> reader_tid{0};
  std::thread reader([&] {
    reader_tid = static_cast<pid_t>(syscall(SYS_gettid));
    waited.set_value((*slow)->ReadNow(GlobalPtr{1, 1024}, 1024, other.data()));
  });
  // Close once the reader is asleep in its wait (its state in /proc is 'S'; the region is mapped already, so the
  // wait is the only place it sleeps), so that the close meets a waiting read.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    if (const pid_t tid = reader_tid.load(); tid != 0) {
      std::ifstream stat(fmt::format("/proc/self/task/{}/stat", tid));
      std::string line;
      std::getline(stat, line);
      const size_t paren = line.rfind(')');
      if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'S') break;
    }
    std::this_thread::yield();
  }
  (*slow)->Close();
  auto result = waited.get_future();
  ASSERT_EQ(result.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  reader.join();
  EXPECT_FALSE(result.get().ok());
  EXPECT_LT(Clock::now() - began, std::chrono::seconds(2)) << "released by Close, not by the NIC's due time";
  EXPECT_FALSE(ahead.get_future().get().ok()) << "the queued read fails too";
}

}  // namespace
}  // namespace cell::rpc::shm
