// TaskScheduler (see task_scheduler.h).
#include "common/task_scheduler.h"

#include <vector>

namespace cell {

TaskScheduler::TaskScheduler(AtStop at_stop, std::function<void()> on_start)
    : at_stop_(at_stop), on_start_(std::move(on_start)) {
  thread_ = std::thread([this] { Loop(); });
}

TaskScheduler::~TaskScheduler() { Stop(); }

void TaskScheduler::PostAt(Clock::time_point due, std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      const bool first = tasks_.empty() || due < tasks_.begin()->first;
      tasks_.emplace(due, std::move(task));
      if (first) cv_.notify_one();
      return;
    }
  }
  if (at_stop_ == AtStop::kRunNow) task();
}

void TaskScheduler::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void TaskScheduler::Loop() {
  if (on_start_) on_start_();
  std::unique_lock lock(mu_);
  while (true) {
    std::vector<std::function<void()>> due;
    if (stopping_) {
      if (at_stop_ == AtStop::kDrop || tasks_.empty()) {
        tasks_.clear();
        return;
      }
      for (auto& [when, task] : tasks_) due.push_back(std::move(task));
      tasks_.clear();
    } else if (tasks_.empty()) {
      cv_.wait(lock);
      continue;
    } else if (const Clock::time_point first = tasks_.begin()->first; first > Clock::now()) {
      cv_.wait_until(lock, first);
      continue;
    } else {
      const auto end = tasks_.upper_bound(Clock::now());
      for (auto it = tasks_.begin(); it != end; ++it) due.push_back(std::move(it->second));
      tasks_.erase(tasks_.begin(), end);
    }
    lock.unlock();
    for (auto& task : due) task();
    lock.lock();
  }
}

}  // namespace cell
