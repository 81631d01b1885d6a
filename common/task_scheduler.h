// TaskScheduler: a small pool of threads that runs tasks at their due times, in serial lanes (what Boost.Asio calls
// strands). Every background retry and timer of a component is a task on a lane (the tree's remote splits and
// separator sends, the client's retries, a server's fencing check, takeovers, checkpoints and lease renewal), so none
// of them sleeps on a thread of its own, and a component stops all of its tasks in one place.
//
// A lane runs its tasks one at a time, in order of their due times (tasks due at the same time in the order they
// were posted), never before they are due. Different lanes run in parallel on the pool's threads, so a lane whose
// task blocks (a takeover recovering a region for seconds, a checkpoint, a ZooKeeper call) holds up only its own
// later tasks. The pool starts with one thread and starts another whenever every thread it has is running a task, up
// to `max_threads`: while fewer than max_threads tasks block at once, a task that is due finds a thread at once. A
// scheduler with max_threads = 1 is one thread that runs every task of every lane in due order.
//
// The scheduler has a lane of its own (PostAt, PostAfter): a component that needs one lane needs nothing else.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

namespace cell {

class TaskScheduler {
 public:
  using Clock = std::chrono::steady_clock;
  // What stopping a lane (or the scheduler) does with its tasks not yet run: drop them, or run them at once (on the
  // pool's threads), for tasks that must always complete (an operation's retry that fails it once its owner closes).
  enum class AtStop { kDrop, kRunNow };

  class Lane;

  // `on_start`, if set, runs first on each of the pool's threads (e.g. to mark it as such for checks).
  explicit TaskScheduler(AtStop at_stop, std::function<void()> on_start = {})
      : TaskScheduler(at_stop, 1, std::move(on_start)) {}
  TaskScheduler(AtStop at_stop, size_t max_threads, std::function<void()> on_start = {});
  ~TaskScheduler();  // Stop()
  TaskScheduler(const TaskScheduler&) = delete;
  TaskScheduler& operator=(const TaskScheduler&) = delete;

  // The scheduler's own lane (Lane::PostAt, Lane::PostAfter).
  void PostAt(Clock::time_point due, std::function<void()> task);
  void PostAfter(Clock::duration delay, std::function<void()> task) { PostAt(Clock::now() + delay, std::move(task)); }

  // Stops every lane: the tasks running finish, pending ones are dropped or run now (AtStop), and the threads end;
  // from then on every lane is stopped (Lane::PostAt). Called from a task, the threads but the caller's are joined,
  // and the caller's ends once its task returns. Idempotent.
  void Stop();

  // The threads started so far (at most max_threads).
  size_t threads() const;

 private:
  struct Core;
  struct LaneState;
  std::shared_ptr<Core> core_;  // shared with the lanes, which may outlive the scheduler (they are stopped then)
  std::unique_ptr<Lane> own_;
};

// A serial lane of a scheduler's pool. Stop (or destroy) a lane before what its tasks use; it may outlive its
// scheduler, stopped. A component whose tasks post again through a pointer to their lane stops the lane rather than
// resetting the pointer (a unique_ptr's reset clears it before the lane's destructor waits for the running task).
// Thread-safe.
class TaskScheduler::Lane {
 public:
  explicit Lane(TaskScheduler& scheduler);
  ~Lane();  // Stop()
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  // Runs `task` at `due` or later, after every task of this lane due before it (and posted before it, if due at the
  // same time). Once the lane (or its scheduler) is stopped: AtStop::kRunNow runs it at once on the caller's thread
  // (outside the lane: alongside other such tasks, and alongside the lane's last task while a Stop waits for it);
  // kDrop drops it. Only the tasks run on the pool are the lane's one at a time.
  void PostAt(Clock::time_point due, std::function<void()> task);
  void PostAfter(Clock::duration delay, std::function<void()> task) { PostAt(Clock::now() + delay, std::move(task)); }

  // Stops the lane: pending tasks are dropped (kDrop) or run now on the pool's threads (kRunNow), and Stop returns
  // once the lane's running task (and with kRunNow, every pending one) has finished, so nothing of the lane runs
  // after it. Called from a task of this lane, it does not wait for that task (the caller): it returns at once,
  // pending tasks are dropped at once (kDrop) or run after the calling task returns (kRunNow), and nothing else of
  // the lane runs once they have. Idempotent.
  void Stop();

 private:
  std::shared_ptr<Core> core_;
  std::shared_ptr<LaneState> state_;
};

}  // namespace cell
