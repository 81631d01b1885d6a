// TaskScheduler: one thread that runs tasks at their due times, in order. Every background retry and timer of a
// component is a task on its scheduler (the tree's remote splits and separator sends, the client's retries), so none
// of them sleeps on a thread of its own and a component stops them all in one place.
//
// Tasks run one at a time on the scheduler's thread and should not block for long: a task waiting on the network
// holds up every task due after it. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace cell {

class TaskScheduler {
 public:
  using Clock = std::chrono::steady_clock;
  // What Stop does with tasks not yet run: drop them, or run them at once (on the scheduler's thread), for tasks
  // that must always complete (an operation's retry that fails it once its owner closes).
  enum class AtStop { kDrop, kRunNow };

  // `on_start`, if set, runs first on the scheduler's thread (e.g. to mark it as such for checks).
  explicit TaskScheduler(AtStop at_stop, std::function<void()> on_start = {});
  ~TaskScheduler();  // Stop()
  TaskScheduler(const TaskScheduler&) = delete;
  TaskScheduler& operator=(const TaskScheduler&) = delete;

  // Runs `task` at `due` or later, after every task due before it. Once stopped: AtStop::kRunNow runs it at once on
  // the caller's thread; kDrop drops it.
  void PostAt(Clock::time_point due, std::function<void()> task);
  void PostAfter(Clock::duration delay, std::function<void()> task) { PostAt(Clock::now() + delay, std::move(task)); }

  // Ends the thread, after the task it is running; pending tasks are dropped or run now (AtStop). Idempotent.
  void Stop();

 private:
  void Loop();

  const AtStop at_stop_;
  std::function<void()> on_start_;
  std::mutex mu_;  // guards what follows
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace cell
