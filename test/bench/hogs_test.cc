// CPU hogs: the schedule's syntax, and real processes pinned, started and stopped on it.
#include "bench/hogs.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>

namespace cell::bench {
namespace {

TEST(HogPeriod, ParsesTheScheduleAndRefusesNonsense) {
  auto p = ParseHogPeriod("10:5:0");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->start_s, 10);
  EXPECT_EQ(p->duration_s, 5);
  EXPECT_EQ(p->cpus, std::vector<int>{0});
  p = ParseHogPeriod("2.5:0.5:0+1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cpus, (std::vector<int>{0, 1}));
  for (const char* bad :
       {"", "10", "10:5", "10:5:", "-1:5:0", "1:0:0", "1:nan:0", "x:5:0", "1:5:a", "1:5:0+", "1:5:-2"}) {
    auto q = ParseHogPeriod(bad);
    EXPECT_FALSE(q.ok()) << bad;
    if (!q.ok()) {
      EXPECT_NE(q.status().message().find("start_s:duration_s:cpu"), std::string::npos);
    }
  }
}

// The CPUs a process may run on, from /proc ("" once it is gone).
std::string AllowedCpus(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) return line.substr(line.find_last_of(" \t") + 1);
  }
  return "";
}

TEST(Hogs, RunPinnedDuringTheirPeriodAndAreGoneAfter) {
  Hogs hogs({HogPeriod{1.0, 2.0, {0}}});
  ASSERT_TRUE(hogs.Update(0.5).ok());
  EXPECT_EQ(hogs.running(), 0) << "not yet";
  ASSERT_TRUE(hogs.Update(1.0).ok());
  ASSERT_EQ(hogs.running(), 1);
  const pid_t pid = hogs.pids().front();
  // The child pins itself just after it starts: poll, with a deadline, for the pinning to show.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (AllowedCpus(pid) != "0" && std::chrono::steady_clock::now() < deadline) {
  }
  EXPECT_EQ(AllowedCpus(pid), "0");
  ASSERT_TRUE(hogs.Update(2.9).ok());
  EXPECT_EQ(hogs.running(), 1);
  ASSERT_TRUE(hogs.Update(3.0).ok());
  EXPECT_EQ(hogs.running(), 0);
  EXPECT_EQ(kill(pid, 0), -1) << "killed and reaped";
  EXPECT_EQ(errno, ESRCH);
}

TEST(Hogs, AHogThatCannotBePinnedIsReported) {
  Hogs hogs({HogPeriod{0, 10, {CPU_SETSIZE - 1}}});  // no machine here has that CPU
  Status s = hogs.Update(0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s.ok() && std::chrono::steady_clock::now() < deadline) s = hogs.Update(0.1);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(hogs.running(), 0);
}

}  // namespace
}  // namespace cell::bench
