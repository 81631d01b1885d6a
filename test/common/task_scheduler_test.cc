// TaskScheduler: tasks run in order of their due times, never early, on one thread; at stop, pending tasks are
// dropped or run according to AtStop; posts from many threads at once all run. Lanes: each runs its tasks one at a
// time in due order, lanes run in parallel (a blocked lane holds up no other), Stop waits for the running task (but
// not from inside it) and drops or runs what is pending; and all of it under many lanes, posts and stops at once.
#include "common/task_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cell {
namespace {

using Clock = TaskScheduler::Clock;
using Lane = TaskScheduler::Lane;
using std::chrono::milliseconds;
constexpr auto kAtStops = {TaskScheduler::AtStop::kDrop, TaskScheduler::AtStop::kRunNow};
// How long a test waits for what must happen before it calls it a failure (rather than hang).
constexpr auto kPatience = std::chrono::seconds(60);

// `n` threads meet: each waits until all have arrived, or gives up after kPatience (false), so that a test whose
// tasks cannot all run at once fails instead of hanging.
class Meeting {
 public:
  explicit Meeting(int n) : left_(n) {}
  bool ArriveAndWait() {
    std::unique_lock lock(mu_);
    if (--left_ == 0) cv_.notify_all();
    return cv_.wait_for(lock, kPatience, [&] { return left_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

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

TEST(TaskSchedulerLane, RunsItsTasksOneAtATimeInDueOrder) {
  // Four threads: a lane that let two tasks run at once, or out of order, would show it.
  TaskScheduler scheduler(TaskScheduler::AtStop::kDrop, 4);
  Lane lane(scheduler);
  constexpr int kTasks = 60;
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::mutex mu;
  std::vector<int> order;
  std::promise<void> last;
  // Due times fall as i grows, three tasks at each: they must run by due time, and in posting order among equals.
  const Clock::time_point start = Clock::now() + milliseconds(200);
  std::vector<std::pair<Clock::time_point, int>> expected;
  for (int i = 0; i < kTasks; ++i) {
    const Clock::time_point due = start - milliseconds(i / 3);
    expected.emplace_back(due, i);
    lane.PostAt(due, [&, i] {
      if (inside.fetch_add(1) != 0) overlapped = true;
      std::this_thread::yield();
      {
        std::lock_guard lock(mu);
        order.push_back(i);
        if (order.size() == kTasks) last.set_value();
      }
      inside.fetch_sub(1);
    });
  }
  std::stable_sort(expected.begin(), expected.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  ASSERT_EQ(last.get_future().wait_for(kPatience), std::future_status::ready);
  std::vector<int> expected_order;
  for (const auto& e : expected) expected_order.push_back(e.second);
  std::lock_guard lock(mu);
  EXPECT_EQ(order, expected_order);
  EXPECT_FALSE(overlapped.load());
}

TEST(TaskSchedulerLane, LanesRunInParallelAndTheThreadsGrowToTheMost) {
  // Three lanes' tasks each wait for the other two: they meet only if all three run at once. The pool started with
  // one thread, grew as each thread took a task, and stops at its most.
  TaskScheduler scheduler(TaskScheduler::AtStop::kDrop, 3);
  EXPECT_EQ(scheduler.threads(), 1u);
  Lane a(scheduler), b(scheduler), c(scheduler);
  Meeting meeting(3);
  std::atomic<int> met{0};
  std::latch finished(3);
  for (Lane* lane : {&a, &b, &c}) {
    lane->PostAfter(milliseconds(0), [&] {
      if (meeting.ArriveAndWait()) met.fetch_add(1);
      finished.count_down();
    });
  }
  finished.wait();
  EXPECT_EQ(met.load(), 3);
  EXPECT_EQ(scheduler.threads(), 3u);
}

TEST(TaskSchedulerLane, ABlockedLaneHoldsUpNoOtherLane) {
  // The scheduler's own lane blocks until another lane's hundredth task releases it.
  TaskScheduler scheduler(TaskScheduler::AtStop::kDrop, 2);
  Lane other(scheduler);
  std::promise<void> release;
  std::promise<bool> released;
  scheduler.PostAfter(milliseconds(0), [&] {
    released.set_value(release.get_future().wait_for(kPatience) == std::future_status::ready);
  });
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    other.PostAfter(milliseconds(i % 5), [&] {
      if (ran.fetch_add(1) + 1 == 100) release.set_value();
    });
  }
  EXPECT_TRUE(released.get_future().get());
  EXPECT_EQ(ran.load(), 100);
}

TEST(TaskSchedulerLane, StopWaitsForTheRunningTaskAndDropsOrRunsWhatIsPending) {
  for (const auto at_stop : kAtStops) {
    TaskScheduler scheduler(at_stop, 2);
    Lane lane(scheduler);
    std::promise<void> started, release;
    std::atomic<bool> done{false};
    lane.PostAfter(milliseconds(0), [&] {
      started.set_value();
      release.get_future().wait();
      done = true;
    });
    std::atomic<int> pending_ran{0};
    std::thread::id pending_on;
    lane.PostAfter(std::chrono::hours(1), [&] {
      pending_on = std::this_thread::get_id();
      pending_ran.fetch_add(1);
    });
    started.get_future().wait();
    bool done_when_stopped = false;
    std::thread::id stopper_id;
    std::thread stopper([&] {
      stopper_id = std::this_thread::get_id();
      lane.Stop();
      done_when_stopped = done.load();
    });
    release.set_value();
    stopper.join();
    EXPECT_TRUE(done_when_stopped);
    if (at_stop == TaskScheduler::AtStop::kDrop) {
      EXPECT_EQ(pending_ran.load(), 0);
    } else {
      EXPECT_EQ(pending_ran.load(), 1);  // before Stop returned, on a thread of the pool
      EXPECT_NE(pending_on, stopper_id);
      EXPECT_NE(pending_on, std::this_thread::get_id());
    }
    // Posted after the stop: dropped, or run at once on the caller's thread.
    lane.PostAfter(std::chrono::hours(1), [&] {
      pending_on = std::this_thread::get_id();
      pending_ran.fetch_add(1);
    });
    if (at_stop == TaskScheduler::AtStop::kDrop) {
      EXPECT_EQ(pending_ran.load(), 0);
    } else {
      EXPECT_EQ(pending_ran.load(), 2);
      EXPECT_EQ(pending_on, std::this_thread::get_id());
    }
  }
}

TEST(TaskSchedulerLane, StopFromATaskOfTheLaneDoesNotWaitForThatTask) {
  for (const auto at_stop : kAtStops) {
    TaskScheduler scheduler(at_stop, 2);
    Lane lane(scheduler);
    std::atomic<int> later_ran{0};
    std::promise<void> returned;
    lane.PostAfter(std::chrono::hours(1), [&] { later_ran.fetch_add(1); });
    lane.PostAfter(milliseconds(0), [&] {
      lane.Stop();                                                       // would wait for itself if it waited here
      lane.PostAfter(milliseconds(0), [&] { later_ran.fetch_add(1); });  // dropped, or run at once
      returned.set_value();
    });
    ASSERT_EQ(returned.get_future().wait_for(kPatience), std::future_status::ready);
    lane.Stop();  // from outside: waits for the task, and with kRunNow for the pending one, run once it returned
    EXPECT_EQ(later_ran.load(), at_stop == TaskScheduler::AtStop::kDrop ? 0 : 2);
  }
}

TEST(TaskSchedulerLane, ATaskMayDestroyItsLaneOrStopItsScheduler) {
  auto scheduler = std::make_unique<TaskScheduler>(TaskScheduler::AtStop::kDrop, 2);
  auto lane = std::make_unique<Lane>(*scheduler);
  std::atomic<int> dropped_ran{0};
  std::promise<void> destroyed;
  lane->PostAfter(std::chrono::hours(1), [&] { dropped_ran.fetch_add(1); });
  lane->PostAfter(milliseconds(0), [&] {
    lane.reset();
    destroyed.set_value();
  });
  ASSERT_EQ(destroyed.get_future().wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(lane == nullptr);
  EXPECT_EQ(dropped_ran.load(), 0);
  // Stop from the scheduler's own task: it joins the other threads, and its own ends after the task.
  std::promise<void> stopped;
  scheduler->PostAfter(milliseconds(0), [&] {
    scheduler->Stop();
    scheduler->PostAfter(milliseconds(0), [&] { dropped_ran.fetch_add(1); });  // stopped: dropped
    stopped.set_value();
  });
  ASSERT_EQ(stopped.get_future().wait_for(kPatience), std::future_status::ready);
  scheduler.reset();
  EXPECT_EQ(dropped_ran.load(), 0);
}

TEST(TaskSchedulerLane, ALaneOutlivesItsSchedulerStopped) {
  for (const auto at_stop : kAtStops) {
    auto scheduler = std::make_unique<TaskScheduler>(at_stop, 2);
    Lane lane(*scheduler);
    std::atomic<int> ran{0};
    lane.PostAfter(std::chrono::hours(1), [&] { ran.fetch_add(1); });
    scheduler.reset();  // stops every lane: the pending task is dropped, or run now
    EXPECT_EQ(ran.load(), at_stop == TaskScheduler::AtStop::kDrop ? 0 : 1);
    lane.PostAfter(std::chrono::hours(1), [&] { ran.fetch_add(1); });
    EXPECT_EQ(ran.load(), at_stop == TaskScheduler::AtStop::kDrop ? 0 : 2);
    lane.Stop();
  }
}

// Many lanes on a few threads, posted to from several threads at once, a third of them stopped from another thread
// and a third from one of their own tasks while the posts go on. Every lane runs one task at a time on the pool (a
// task posted to a stopped lane with kRunNow runs on its poster's thread, outside the lane); a lane never
// stopped runs all its tasks, each poster's in order; no task of a stopped lane runs on the pool once its Stop has
// returned; with kRunNow every task posted runs exactly once.
TEST(TaskSchedulerStress, ManyLanesPostsAndStopsAtOnce) {
  constexpr int kLanes = 24, kPosters = 4, kPerPoster = 400;
  for (const auto at_stop : kAtStops) {
    static thread_local bool on_pool = false;
    TaskScheduler scheduler(at_stop, 6, [] { on_pool = true; });
    struct PerLane {
      std::unique_ptr<Lane> lane;
      std::atomic<int> posted{0}, ran{0}, inside{0};
      std::atomic<bool> overlapped{false}, stop_returned{false}, ran_after_stop{false}, out_of_order{false};
      std::array<std::atomic<int>, kPosters>
          last{};  // each poster's last sequence number run (never stopped: in order)
    };
    std::vector<PerLane> lanes(kLanes);
    for (auto& l : lanes) {
      l.lane = std::make_unique<Lane>(scheduler);
      for (auto& last : l.last) last = -1;
    }
    const auto stopped_by_stopper = [](int l) { return l % 3 == 0; };
    const auto stopped_from_inside = [](int l) { return l % 3 == 1; };
    constexpr int kNeverStopped = kLanes / 3;  // l % 3 == 2
    std::latch halfway(kPosters), never_stopped_done(kNeverStopped);
    const Clock::time_point base = Clock::now();
    const auto task = [&](int l, int p, int i) {
      PerLane& lane = lanes[l];
      if (on_pool && lane.inside.fetch_add(1) != 0) lane.overlapped = true;
      if (on_pool && lane.stop_returned.load()) lane.ran_after_stop = true;
      if (lane.last[p].exchange(i) > i) lane.out_of_order = true;
      if (on_pool) lane.inside.fetch_sub(1);
      if (stopped_from_inside(l) && p == 0 && i == kPerPoster / 3) lane.lane->Stop();
      if (lane.ran.fetch_add(1) + 1 == kPosters * kPerPoster && l % 3 == 2) never_stopped_done.count_down();
    };
    std::vector<std::thread> posters;
    for (int p = 0; p < kPosters; ++p) {
      posters.emplace_back([&, p] {
        for (int i = 0; i < kPerPoster; ++i) {
          if (i == kPerPoster / 2) halfway.count_down();
          for (int l = 0; l < kLanes; ++l) {
            lanes[l].posted.fetch_add(1);
            // Due times rise with i: each poster's tasks for a lane are due in the order posted.
            lanes[l].lane->PostAt(base + std::chrono::microseconds(20 * i), [&task, l, p, i] { task(l, p, i); });
          }
        }
      });
    }
    std::thread stopper([&] {
      halfway.wait();
      for (int l = 0; l < kLanes; ++l) {
        if (!stopped_by_stopper(l) && !stopped_from_inside(l)) continue;
        lanes[l].lane->Stop();
        lanes[l].stop_returned = true;
      }
    });
    for (auto& t : posters) t.join();
    stopper.join();
    never_stopped_done.wait();
    scheduler.Stop();
    for (int l = 0; l < kLanes; ++l) {
      const PerLane& lane = lanes[l];
      SCOPED_TRACE(testing::Message() << "lane " << l
                                      << (at_stop == TaskScheduler::AtStop::kDrop ? " kDrop" : " kRunNow"));
      EXPECT_FALSE(lane.overlapped.load());
      EXPECT_FALSE(lane.ran_after_stop.load());
      EXPECT_EQ(lane.posted.load(), kPosters * kPerPoster);
      if (l % 3 == 2) {
        EXPECT_EQ(lane.ran.load(), kPosters * kPerPoster);
        EXPECT_FALSE(lane.out_of_order.load());
      } else if (at_stop == TaskScheduler::AtStop::kRunNow) {
        EXPECT_EQ(lane.ran.load(), kPosters * kPerPoster);
      } else if (stopped_from_inside(l)) {
        // Poster 0's tasks due after the one that stopped the lane (or after the stopper's Stop, before it) never ran.
        EXPECT_LE(lane.ran.load(), kPosters * kPerPoster - (kPerPoster - 1 - kPerPoster / 3));
      }
    }
    EXPECT_LE(scheduler.threads(), 6u);
  }
}

}  // namespace
}  // namespace cell
