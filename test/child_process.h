// A helper process for tests, with its stdout piped back line by line; killed (SIGKILL) and reaped when the object
// goes, so an early ASSERT never leaves it running.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

extern char** environ;

namespace cell::testing {

class ChildProcess {
 public:
  // With `merge_stderr`, its stderr comes down the same pipe (for checking error messages).
  explicit ChildProcess(const std::vector<std::string>& args, bool merge_stderr = false) {
    int out[2];
    if (pipe(out) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    if (merge_stderr) posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = 0;
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    fd_ = out[0];
  }
  ~ChildProcess() {
    Kill();
    if (fd_ >= 0) close(fd_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool ok() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // The next line it writes (without the newline); nullopt at end of output or after `timeout`.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) != 1) return std::nullopt;
      char chunk[4096];
      const ssize_t n = read(fd_, chunk, sizeof(chunk));
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // Forgets everything it has written so far.
  void DrainOutput() {
    const int flags = fcntl(fd_, F_GETFL);
    fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
    char chunk[4096];
    while (read(fd_, chunk, sizeof(chunk)) > 0) {
    }
    fcntl(fd_, F_SETFL, flags);
    buffer_.clear();
  }

  // Everything it writes until it exits (or `timeout` passes).
  std::string ReadAll(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string all;
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      auto line = ReadLine(left);
      if (!line) break;
      all += *line + "\n";
    }
    return all + buffer_;
  }

  // Waits (at most `timeout`) for it to exit: its exit code, or 128 + the signal that ended it. A process still
  // running at the timeout is killed and reported as -1.
  int Wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(60000)) {
    if (pid_ <= 0) return -1;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        Kill();
        return -1;
      }
      // Polling a child's exit with a deadline; there is no portable waitpid with a timeout.
      usleep(5000);
    }
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // SIGKILL, and reap it.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  pid_t pid_ = 0;
  int fd_ = -1;
  std::string buffer_;
};

}  // namespace cell::testing
