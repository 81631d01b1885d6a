// CPU hogs (see hogs.h).
#include "bench/hogs.h"

#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

namespace cell::bench {

StatusOr<HogPeriod> ParseHogPeriod(std::string_view text) {
  const auto bad = [&] {
    return Status::InvalidArgument(
        fmt::format("--hog '{}' is not start_s:duration_s:cpu[+cpu...] (e.g. 10:5:0 or 2:3:0+1)", text));
  };
  HogPeriod p;
  const size_t a = text.find(':');
  const size_t b = a == std::string_view::npos ? a : text.find(':', a + 1);
  if (b == std::string_view::npos) return bad();
  const std::string start(text.substr(0, a)), duration(text.substr(a + 1, b - a - 1));
  char* end = nullptr;
  p.start_s = std::strtod(start.c_str(), &end);
  if (start.empty() || *end != '\0' || !std::isfinite(p.start_s) || p.start_s < 0) return bad();
  p.duration_s = std::strtod(duration.c_str(), &end);
  if (duration.empty() || *end != '\0' || !std::isfinite(p.duration_s) || p.duration_s <= 0) return bad();
  std::string_view cpus = text.substr(b + 1);
  while (!cpus.empty()) {
    const size_t plus = cpus.find('+');
    const std::string one(cpus.substr(0, plus));
    const long cpu = std::strtol(one.c_str(), &end, 10);
    if (one.empty() || *end != '\0' || cpu < 0 || cpu >= CPU_SETSIZE) return bad();
    p.cpus.push_back(static_cast<int>(cpu));
    if (plus == std::string_view::npos) break;
    cpus = cpus.substr(plus + 1);
    if (cpus.empty()) return bad();  // a trailing plus
  }
  if (p.cpus.empty()) return bad();
  return p;
}

Hogs::~Hogs() { StopAll(); }

Status Hogs::Update(double t_s) {
  for (size_t i = 0; i < periods_.size(); ++i) {
    const HogPeriod& p = periods_[i];
    const bool on = t_s >= p.start_s && t_s < p.start_s + p.duration_s;
    if (on && pids_[i].empty()) {
      for (int cpu : p.cpus) {
        const pid_t parent = getpid();
        const pid_t pid = fork();
        if (pid < 0) return Status::Internal(fmt::format("fork for a CPU hog: {}", std::strerror(errno)));
        if (pid == 0) {
          // The child: die with the harness, run on `cpu` only, spin.
          prctl(PR_SET_PDEATHSIG, SIGKILL);
          if (getppid() != parent) _exit(0);
          cpu_set_t set;
          CPU_ZERO(&set);
          CPU_SET(cpu, &set);
          if (sched_setaffinity(0, sizeof(set), &set) != 0) _exit(2);
          volatile uint64_t spins = 0;
          while (true) spins = spins + 1;
        }
        pids_[i].push_back(pid);
      }
    } else if (!on && !pids_[i].empty()) {
      for (pid_t pid : pids_[i]) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
      pids_[i].clear();
    }
  }
  // A hog that exited by itself could not be pinned.
  for (auto& pids : pids_) {
    for (size_t j = 0; j < pids.size(); ++j) {
      if (waitpid(pids[j], nullptr, WNOHANG) == pids[j]) {
        pids.erase(pids.begin() + static_cast<std::ptrdiff_t>(j));
        return Status::InvalidArgument("a CPU hog could not be pinned to its CPU (no such CPU for this process?)");
      }
    }
  }
  return Status::OK();
}

int Hogs::running() const {
  int n = 0;
  for (const auto& pids : pids_) n += static_cast<int>(pids.size());
  return n;
}

std::vector<pid_t> Hogs::pids() const {
  std::vector<pid_t> out;
  for (const auto& pids : pids_) out.insert(out.end(), pids.begin(), pids.end());
  return out;
}

void Hogs::StopAll() {
  for (auto& pids : pids_) {
    for (pid_t pid : pids) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    pids.clear();
  }
}

}  // namespace cell::bench
