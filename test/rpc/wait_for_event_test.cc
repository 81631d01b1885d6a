// WaitForEvent (rpc/socket_util.h): a server thread's wait for work, polling before it sleeps.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <thread>

#include "rpc/socket_util.h"

namespace cell::rpc {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

double CpuSecondsOf(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// An epoll set watching one eventfd.
struct EventSet {
  EventSet() {
    event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 7;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, event_fd, &ev);
  }
  ~EventSet() {
    close(event_fd);
    close(epoll_fd);
  }
  void Signal() const {
    const uint64_t one = 1;
    ASSERT_EQ(write(event_fd, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
  }
  int event_fd = -1, epoll_fd = -1;
};

// The CPU the waiting thread spends before an event that comes only once it has spent `cpu_wanted` (or after
// `bound`, if it never does): a thread that polls spends it, one that sleeps does not. The wait must return that event.
double CpuBeforeALateEvent(std::chrono::microseconds poll, double cpu_wanted, std::chrono::seconds bound) {
  int result = 0;
  uint64_t data = 0;
  EventSet set;
  std::atomic<bool> started{false};
  clockid_t waiter_clock{};
  double before = 0, spent = 0;
  std::thread waiter([&] {
    pthread_getcpuclockid(pthread_self(), &waiter_clock);
    before = CpuSecondsOf(waiter_clock);
    started.store(true);
    epoll_event ev{};
    result = WaitForEvent(set.epoll_fd, &ev, poll);
    data = ev.data.u64;
    spent = CpuSecondsOf(waiter_clock) - before;
  });
  while (!started.load()) std::this_thread::yield();
  const auto give_up = SteadyClock::now() + bound;
  while (CpuSecondsOf(waiter_clock) - before < cpu_wanted && SteadyClock::now() < give_up) std::this_thread::yield();
  set.Signal();
  waiter.join();
  EXPECT_EQ(result, 1);
  EXPECT_EQ(data, 7u);
  return spent;
}

TEST(WaitForEvent, PollsForItsTimeBeforeItSleeps) {
  // Polling for up to 10 s: the event comes once the waiter has spent 20 ms of CPU looking for it.
  const double polled = CpuBeforeALateEvent(10s, 0.020, 30s);
  EXPECT_GE(polled, 0.020);
}

TEST(WaitForEvent, WithoutAPollItSleepsAtOnce) {
  // Not polling, the waiter never spends the 20 ms: the event comes after the bound, and finds it asleep.
  const double slept = CpuBeforeALateEvent(0us, 0.020, 1s);
  EXPECT_LT(slept, 0.020);
}

TEST(WaitForEvent, SleepsOnceItsPollHasPassedAndStillTakesTheEvent) {
  // A 1 ms poll ends long before the event (which waits for 0.5 s of the waiter's CPU, then 5 s at most: a waiter
  // that never stopped polling would spend the 0.5 s even on a busy machine).
  const double spent = CpuBeforeALateEvent(1ms, 0.5, 5s);
  EXPECT_LT(spent, 0.5);
}

TEST(WaitForEvent, AnEventAlreadyThereIsTakenAtOnce) {
  EventSet set;
  set.Signal();
  for (const auto poll : {0us, 100us}) {
    epoll_event ev{};
    EXPECT_EQ(WaitForEvent(set.epoll_fd, &ev, poll), 1);
    EXPECT_EQ(ev.data.u64, 7u);
  }
}

}  // namespace
}  // namespace cell::rpc
