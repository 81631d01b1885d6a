// CPU hogs for the harness's contention experiments (Nessie's figure 4): busy processes pinned to given CPUs,
// started and stopped on a schedule. Each hog is a forked child that spins; it dies with the harness (PDEATHSIG)
// and is killed and reaped when its period ends or the Hogs object goes.
#pragma once

#include <sys/types.h>

#include <string_view>
#include <vector>

#include "cell/status.h"

namespace cell::bench {

// "start_s:duration_s:cpu[+cpu...]", e.g. "10:5:0" or "2:3:0+1".
struct HogPeriod {
  double start_s = 0, duration_s = 0;
  std::vector<int> cpus;
};
StatusOr<HogPeriod> ParseHogPeriod(std::string_view text);

class Hogs {
 public:
  explicit Hogs(std::vector<HogPeriod> periods) : periods_(std::move(periods)), pids_(periods_.size()) {}
  ~Hogs();
  Hogs(const Hogs&) = delete;
  Hogs& operator=(const Hogs&) = delete;

  // Starts the periods that have begun and stops those that have ended, `t_s` seconds into the run. Errors: a
  // hog could not be started (fork or affinity failed).
  Status Update(double t_s);
  // How many hog processes are running, and which.
  int running() const;
  std::vector<pid_t> pids() const;
  void StopAll();

 private:
  std::vector<HogPeriod> periods_;
  std::vector<std::vector<pid_t>> pids_;  // per period: its running hogs
};

}  // namespace cell::bench
