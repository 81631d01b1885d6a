// Progress of a long phase (a load of millions of keys), on stderr: when stderr is a terminal, one line rewritten in
// place a few times a second; otherwise (a log file, CI) a line every few seconds. Each line says how many of the
// total are done, the rate so far and the time left at that rate. Single-threaded: call Update from the thread that
// does the work.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace cell::bench {

class Progress {
 public:
  Progress(std::string what, uint64_t total)
      : what_(std::move(what)),
        total_(total),
        terminal_(isatty(STDERR_FILENO) == 1),
        start_(Clock::now()),
        last_(start_) {}
  ~Progress() { Finish(); }

  // `done` of the total are done. Cheap: the clock is read once 1,024 more are done.
  void Update(uint64_t done) {
    if (done < checked_ + 1024) return;
    checked_ = done;
    const auto now = Clock::now();
    if (now - last_ < (terminal_ ? std::chrono::milliseconds(250) : std::chrono::milliseconds(5000))) return;
    last_ = now;
    Print(done, now);
  }
  // Ends the updating line (a terminal's); nothing else.
  void Finish() {
    if (terminal_ && printed_) std::fputc('\n', stderr);
    printed_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  void Print(uint64_t done, Clock::time_point now) {
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate = seconds > 0 ? double(done) / seconds : 0;
    const double left = rate > 0 ? double(total_ - std::min(done, total_)) / rate : 0;
    std::fprintf(stderr, "%s%s: %llu of %llu (%.1f%%), %.0f/s, %.0f s left%s", terminal_ ? "\r" : "", what_.c_str(),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
                 total_ == 0 ? 100.0 : 100.0 * double(done) / double(total_), rate, left, terminal_ ? "   " : "\n");
    std::fflush(stderr);
    printed_ = true;
  }

  std::string what_;
  uint64_t total_;
  bool terminal_;
  Clock::time_point start_, last_;
  uint64_t checked_ = 0;  // `done` when the clock was last read
  bool printed_ = false;
};

}  // namespace cell::bench
