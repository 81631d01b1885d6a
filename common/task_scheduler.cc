// TaskScheduler and its lanes (see task_scheduler.h).
//
// One mutex guards everything: the lanes' tasks and the queue of lanes ready to run. A lane is in that queue, keyed
// by its first task's due time, exactly while it has tasks and none of them is running; a thread takes the lane at
// the head once it is due, runs its first task, and queues the lane again if it has more. So a lane's tasks run one at
// a time and in order, and different lanes' tasks run on different threads.
#include "common/task_scheduler.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace cell {

using Tasks = std::multimap<TaskScheduler::Clock::time_point, std::function<void()>>;

struct TaskScheduler::LaneState {
  // Guarded by Core::mu.
  Tasks tasks;           // not yet run (the running one is not here)
  bool stopped = false;  // Lane::Stop was called
  bool running = false;  // a task of this lane is running, on thread `runner`
  std::thread::id runner;
  bool queued = false;  // in Core::ready, at `ready_at`
  std::multimap<Clock::time_point, std::shared_ptr<LaneState>>::iterator ready_at;
  std::condition_variable idle;  // a task of a stopped lane ended (Stop waits for the last)
};

struct TaskScheduler::Core : std::enable_shared_from_this<Core> {
  Core(AtStop a, size_t max, std::function<void()> start)
      : at_stop(a), max_threads(max == 0 ? 1 : max), on_start(std::move(start)) {}

  // A lane's tasks are dropped or run now: it was stopped, or the scheduler was.
  bool Stopped(const LaneState& lane) const { return stopping || lane.stopped; }
  // Puts `lane` in the ready queue at `at` (moving it if it is there), waking a thread if it is the new head.
  void Queue(const std::shared_ptr<LaneState>& lane, Clock::time_point at);
  void StartThread() {
    threads.emplace_back([core = shared_from_this()] { core->Work(); });
  }
  // A thread of the pool: runs due tasks until the scheduler stops and nothing is left to run.
  void Work();
  // Runs `lane`'s first task (mu held, unlocked meanwhile), then queues the lane again if it has tasks left.
  void RunOne(std::unique_lock<std::mutex>& lock, const std::shared_ptr<LaneState>& lane);

  const AtStop at_stop;
  const size_t max_threads;
  const std::function<void()> on_start;
  std::mutex mu;  // guards what follows, and every LaneState
  std::condition_variable work;
  // Lanes with tasks and none running, by the due time of their first task (the earliest time: a stopped lane whose
  // tasks run now).
  std::multimap<Clock::time_point, std::shared_ptr<LaneState>> ready;
  std::vector<std::thread> threads;  // only grows, and not once stopping
  size_t running = 0;                // threads running a task
  bool stopping = false;
  std::mutex join_mu;  // one Stop at a time joins the threads
};

void TaskScheduler::Core::Queue(const std::shared_ptr<LaneState>& lane, Clock::time_point at) {
  if (lane->queued) ready.erase(lane->ready_at);
  lane->ready_at = ready.emplace(at, lane);
  lane->queued = true;
  if (lane->ready_at == ready.begin()) work.notify_one();
}

void TaskScheduler::Core::Work() {
  if (on_start) on_start();
  std::unique_lock lock(mu);
  while (true) {
    if (ready.empty()) {
      if (stopping) return;
      work.wait(lock);
      continue;
    }
    const auto head = ready.begin();
    if (!stopping && head->first > Clock::now()) {
      // A copy: wait_until reads its time point again after waking, when the lane may have left `ready` (a Stop).
      const Clock::time_point due = head->first;
      work.wait_until(lock, due);
      continue;
    }
    const std::shared_ptr<LaneState> lane = std::move(head->second);
    ready.erase(head);
    lane->queued = false;
    // Another thread watches the next lane; and if every thread is busy now, one more is started (up to the most).
    if (!ready.empty()) work.notify_one();
    if (!stopping && running + 1 == threads.size() && threads.size() < max_threads) StartThread();
    RunOne(lock, lane);
  }
}

void TaskScheduler::Core::RunOne(std::unique_lock<std::mutex>& lock, const std::shared_ptr<LaneState>& lane) {
  const auto first = lane->tasks.begin();
  std::function<void()> task = std::move(first->second);
  lane->tasks.erase(first);
  lane->running = true;
  lane->runner = std::this_thread::get_id();
  ++running;
  lock.unlock();
  task();
  task = nullptr;  // its captures are released outside the lock too
  lock.lock();
  if (Stopped(*lane) && at_stop == AtStop::kDrop && !lane->tasks.empty()) {
    // Posted before the stop, while this task ran (Stop drops a lane's tasks, but the scheduler's reaches only the
    // lanes queued): dropped before the lane's Stop may return.
    Tasks dropped;
    dropped.swap(lane->tasks);
    lock.unlock();
    dropped.clear();
    lock.lock();
  }
  --running;
  lane->running = false;
  if (!lane->tasks.empty()) Queue(lane, Stopped(*lane) ? Clock::time_point::min() : lane->tasks.begin()->first);
  if (lane->stopped) lane->idle.notify_all();
}

TaskScheduler::TaskScheduler(AtStop at_stop, size_t max_threads, std::function<void()> on_start)
    : core_(std::make_shared<Core>(at_stop, max_threads, std::move(on_start))) {
  {
    std::lock_guard lock(core_->mu);
    core_->StartThread();
  }
  own_ = std::make_unique<Lane>(*this);
}

TaskScheduler::~TaskScheduler() { Stop(); }

void TaskScheduler::PostAt(Clock::time_point due, std::function<void()> task) { own_->PostAt(due, std::move(task)); }

void TaskScheduler::Stop() {
  Core& core = *core_;
  std::vector<Tasks> dropped;
  {
    std::lock_guard lock(core.mu);
    if (!core.stopping) {
      core.stopping = true;
      if (core.at_stop == AtStop::kDrop) {
        for (auto& queued : core.ready) {
          LaneState& lane = *queued.second;
          dropped.push_back(std::move(lane.tasks));
          lane.tasks.clear();
          lane.queued = false;
        }
        core.ready.clear();
      }
      core.work.notify_all();  // with kRunNow the threads run what is queued, due or not, then end
    }
  }
  dropped.clear();
  // No thread is started once stopping is set, so `threads` holds still.
  std::lock_guard join(core.join_mu);
  for (std::thread& t : core.threads) {
    if (!t.joinable()) continue;
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();  // the caller, in a task: it ends when the task returns (it holds the core)
    } else {
      t.join();
    }
  }
}

size_t TaskScheduler::threads() const {
  std::lock_guard lock(core_->mu);
  return core_->threads.size();
}

TaskScheduler::Lane::Lane(TaskScheduler& scheduler) : core_(scheduler.core_), state_(std::make_shared<LaneState>()) {}

TaskScheduler::Lane::~Lane() { Stop(); }

void TaskScheduler::Lane::PostAt(Clock::time_point due, std::function<void()> task) {
  {
    std::lock_guard lock(core_->mu);
    LaneState& lane = *state_;
    if (!core_->Stopped(lane)) {
      lane.tasks.emplace(due, std::move(task));
      // A running lane is queued again when its task ends; a queued one moves up if this task is due first.
      const Clock::time_point first = lane.tasks.begin()->first;
      if (!lane.running && (!lane.queued || first < lane.ready_at->first)) core_->Queue(state_, first);
      return;
    }
  }
  if (core_->at_stop == AtStop::kRunNow) task();
}

void TaskScheduler::Lane::Stop() {
  Tasks dropped;
  {
    std::unique_lock lock(core_->mu);
    LaneState& lane = *state_;
    lane.stopped = true;
    if (core_->at_stop == AtStop::kDrop) {
      dropped.swap(lane.tasks);
      if (lane.queued) {
        core_->ready.erase(lane.ready_at);
        lane.queued = false;
      }
    } else if (lane.queued) {
      core_->Queue(state_, Clock::time_point::min());  // its tasks run now
    }
    // (A stopped scheduler's lanes hold no tasks: its threads ran or dropped them all before they ended.)
    if (!(lane.running && lane.runner == std::this_thread::get_id())) {
      lane.idle.wait(lock, [&] { return !lane.running && lane.tasks.empty(); });
    }
  }
}

}  // namespace cell
