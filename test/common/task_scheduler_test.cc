// TaskScheduler: tasks run in order of their due times, never early, on one thread; at stop, pending tasks are
// dropped or run according to AtStop; posts from many threads at once all run.
#include "common/task_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace cell {
namespace {

using Clock = TaskScheduler::Clock;
using std::chrono::milliseconds;

TEST(TaskScheduler, TasksRunInDueOrderAndNeverEarly) {
  TaskScheduler scheduler(TaskScheduler::AtStop::kDrop);
  std::mutex mu;
  std::vector<int> order;
  std::vector<bool> early;
  std::promise<void> last;
  const Clock::time_point start = Clock::now();
  // Posted out of order: due at 30, 10 and 20 ms.
  for (int i : {3, 1, 2}) {
    const Clock::time_point due = start + milliseconds(10 * i);
    scheduler.PostAt(due, [&, i, due] {
      std::lock_guard lock(mu);
      order.push_back(i);
      early.push_back(Clock::now() < due);
      if (order.size() == 3) last.set_value();
    });
  }
  last.get_future().wait();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(early, (std::vector<bool>{false, false, false}));
}

TEST(TaskScheduler, StopDropsOrRunsWhatIsPendingAsAsked) {
  for (const auto at_stop : {TaskScheduler::AtStop::kDrop, TaskScheduler::AtStop::kRunNow}) {
    std::atomic<int> ran{0};
    std::thread::id ran_on;
    {
      TaskScheduler scheduler(at_stop);
      scheduler.PostAfter(std::chrono::hours(1), [&] { ran.fetch_add(1); });
      scheduler.Stop();
      // Posted after the stop: run at once on this thread (kRunNow), or dropped.
      scheduler.PostAfter(std::chrono::hours(1), [&] {
        ran_on = std::this_thread::get_id();
        ran.fetch_add(1);
      });
    }
    if (at_stop == TaskScheduler::AtStop::kDrop) {
      EXPECT_EQ(ran.load(), 0);
    } else {
      EXPECT_EQ(ran.load(), 2);
      EXPECT_EQ(ran_on, std::this_thread::get_id());
    }
  }
}

TEST(TaskScheduler, PostsFromManyThreadsAllRunOnTheSchedulersOneThread) {
  constexpr int kThreads = 4, kPerThread = 500;
  std::atomic<int> ran{0};
  std::mutex mu;
  std::vector<std::thread::id> runners;
  std::promise<void> all;
  TaskScheduler scheduler(TaskScheduler::AtStop::kDrop);
  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        scheduler.PostAfter(milliseconds((t + i) % 3), [&] {
          {
            std::lock_guard lock(mu);
            runners.push_back(std::this_thread::get_id());
          }
          if (ran.fetch_add(1) + 1 == kThreads * kPerThread) all.set_value();
        });
      }
    });
  }
  for (auto& p : posters) p.join();
  all.get_future().wait();
  EXPECT_EQ(ran.load(), kThreads * kPerThread);
  std::lock_guard lock(mu);
  for (const auto& id : runners) EXPECT_EQ(id, runners.front());
  EXPECT_NE(runners.front(), std::this_thread::get_id());
}

}  // namespace
}  // namespace cell
