// The shm transport's NIC model: parsing, pacing arithmetic, and reads that really wait for it.
#include "rpc/shm/nic_model.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

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
  NicModel m{1e6, 1e9, 0};           // 1 us per read, 1 ns per byte
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

}  // namespace
}  // namespace cell::rpc::shm
