// cell-durability-bench: what write-ahead logging costs a cell-server's puts over RPC, and how long a server takes to
// recover, on this machine (issue 7's benchmark; docs/BENCHMARKS.md).
//
// Put throughput: for each value shape (Cell's 8..256 bytes, and 1 KiB) and each durability (off: no --data-dir;
// async; sync), a fresh cell-server (embedded membership, TCP on loopback, --workers=2) is preloaded with `--keys`
// keys, and then `--threads` client threads overwrite random keys of that space for `--seconds`, each put
// acknowledged as its mode says. Modes and shapes are interleaved over `--rounds` (the modes' order turning each
// round); medians are reported, with each mode's ratio to off and every run. Recovery: a server with a data directory
// is loaded with `--recovery-keys` keys, killed with SIGKILL and restarted; the time to its "ready" line is recovery
// from the log alone. It then takes a checkpoint (as a restart that replayed records does), is killed and restarted
// again: recovery from the checkpoint.
//
//   cell-durability-bench [--server=PATH] [--threads=8] [--seconds=2] [--rounds=3] [--keys=20000]
//                         [--recovery-keys=200000] [--dir=/tmp/cell-durability-bench]
// The last line of stdout is one JSON object.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cell/client.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Flags {
  std::string server;
  int threads = 8;
  double seconds = 2;
  int rounds = 3;
  uint64_t keys = 20000;
  uint64_t recovery_keys = 200000;
  std::string dir = "/tmp/cell-durability-bench";
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "cell-durability-bench: %s\n", what.c_str());
  std::exit(1);
}

// Where the servers' stderr goes (each start truncates it): what to read when one does not start.
constexpr const char* kServerLog = "/tmp/cell-durability-bench-server.log";

// A cell-server child process: started (its URI read from its stdout, up to its "ready" line, within a minute),
// killed with SIGKILL. The child dies with this process (PR_SET_PDEATHSIG), so an exit here leaves no server behind.
class Server {
 public:
  Server(const std::string& binary, std::vector<std::string> args) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) Die("pipe failed");
    std::vector<char*> argv{const_cast<char*>(binary.c_str())};
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int log = open(kServerLog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const pid_t parent = getpid();
    const auto start = Clock::now();
    pid_ = fork();
    if (pid_ < 0) Die("fork failed");
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);  // the parent died before prctl
      dup2(out[1], STDOUT_FILENO);
      if (log >= 0) dup2(log, STDERR_FILENO);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    if (log >= 0) close(log);
    close(out[1]);
    // Lines from its stdout until "ready", at most a minute.
    std::string buffer;
    bool ready = false;
    const auto deadline = start + std::chrono::minutes(1);
    while (!ready && Clock::now() < deadline) {
      pollfd p{out[0], POLLIN, 0};
      const int left =
          static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
      char chunk[4096];
      const ssize_t n = read(out[0], chunk, sizeof(chunk));
      if (n <= 0) break;  // it exited
      buffer.append(chunk, static_cast<size_t>(n));
      for (size_t nl; !ready && (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1)) {
        const std::string line = buffer.substr(0, nl);
        if (line.rfind("listening ", 0) == 0) uri_ = line.substr(10);
        if (line.rfind("ready ", 0) == 0) ready = true;
      }
    }
    ready_s_ = std::chrono::duration<double>(Clock::now() - start).count();
    close(out[0]);
    if (!ready || uri_.empty()) {
      Kill();
      Die(fmt::format("cell-server did not become ready (its stderr: {})", kServerLog));
    }
  }
  ~Server() { Kill(); }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  const std::string& uri() const { return uri_; }
  double ready_s() const { return ready_s_; }

 private:
  pid_t pid_ = 0;
  std::string uri_;
  double ready_s_ = 0;
};

std::unique_ptr<cell::Client> Connect(const std::string& uri) {
  cell::ClientOptions options;
  options.cluster = uri;
  options.search = "server";
  options.timeout = std::chrono::seconds(30);
  auto c = cell::Client::Open(options);
  if (!c.ok()) Die("client: " + c.status().ToString());
  return std::move(*c);
}

std::string KeyOf(uint64_t k) {
  std::string key = fmt::format("k{:016x}", k * 0x9e3779b97f4a7c15ull);
  key.resize(8 + k % 57, 'x');  // 8..64 bytes
  return key;
}

// Puts keys [0, n) with values of lo..hi bytes, `window` at a time (PutAsync).
void Load(cell::Client& client, uint64_t n, size_t lo, size_t hi, uint64_t seed, size_t window = 64) {
  std::mutex mu;
  std::condition_variable cv;
  size_t outstanding = 0;
  std::string error;
  std::mt19937_64 rng(seed);
  for (uint64_t k = 0; k < n; ++k) {
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return outstanding < window; });
      if (!error.empty()) Die("load: " + error);
      ++outstanding;
    }
    client.PutAsync(KeyOf(k), std::string(lo + rng() % (hi - lo + 1), 'p'), [&](const cell::Status& s) {
      std::lock_guard lock(mu);
      if (!s.ok() && error.empty()) error = s.ToString();
      --outstanding;
      cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return outstanding == 0; });
  if (!error.empty()) Die("load: " + error);
}

// No checkpoint is taken by size during the runs (a checkpoint would be timed as part of whichever run it fell in);
// a restart that replays records still takes one.
std::vector<std::string> ServerArgs(const std::string& mode, const std::string& dir) {
  std::vector<std::string> args = {"--listen=tcp://127.0.0.1:0", "--workers=2", "--region-size=4GiB",
                                   "--checkpoint-every=1048576GiB"};
  if (mode != "off") {
    args.push_back("--data-dir=" + dir);
    args.push_back("--durability=" + mode);
  }
  return args;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string Runs(const std::vector<double>& v) {
  std::string out;
  for (double x : v) out += fmt::format("{}{:.0f}", out.empty() ? "" : ",", x);
  return "[" + out + "]";
}

// What one fdatasync of a 4 KiB append costs in `dir` (this machine's disk): milliseconds, p50 and p99 of 200.
std::pair<double, double> FdatasyncMs(const std::string& dir) {
  const std::string path = dir + "/fdatasync-probe";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) Die("cannot create " + path);
  const std::string block(4096, 'x');
  std::vector<double> ms;
  for (int i = 0; i < 200; ++i) {
    if (write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) Die("write failed");
    const auto start = Clock::now();
    fdatasync(fd);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  close(fd);
  fs::remove(path);
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[ms.size() * 99 / 100]};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cell-durability-bench: cell-server put throughput with logging off, async and sync; recovery time"};
  Flags f;
  f.server = (fs::path(argv[0]).parent_path() / "cell-server").string();
  app.add_option("--server", f.server, "the cell-server binary")->capture_default_str();
  app.add_option("--threads", f.threads, "client threads putting")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--seconds", f.seconds, "each put run's length")->check(CLI::Range(0.1, 600.0))->capture_default_str();
  app.add_option("--rounds", f.rounds, "interleaved rounds (medians reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--keys", f.keys, "key space of the put runs (preloaded)")
      ->check(CLI::Range(100, 10000000))
      ->capture_default_str();
  app.add_option("--recovery-keys", f.recovery_keys, "keys loaded before recovery is timed (0: skip)")
      ->capture_default_str();
  app.add_option("--dir", f.dir, "data directories (emptied first, removed after)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);

  const std::vector<std::string> modes = {"off", "async", "sync"};
  const std::vector<std::tuple<std::string, size_t, size_t>> shapes = {{"cell", 8, 256}, {"1k", 1024, 1024}};
  std::map<std::string, std::vector<double>> rates;
  for (int round = 0; round < f.rounds; ++round) {
    for (const auto& [shape, lo, hi] : shapes) {
      // The modes' order turns each round, so that none always runs first or last.
      std::vector<std::string> order = modes;
      std::rotate(order.begin(), order.begin() + round % order.size(), order.end());
      for (const std::string& mode : order) {
        fs::remove_all(f.dir);
        fs::create_directories(f.dir);
        Server server(f.server, ServerArgs(mode, f.dir));
        auto client = Connect(server.uri());
        Load(*client, f.keys, lo, hi, 1);
        std::atomic<uint64_t> ops{0};
        std::atomic<bool> stop{false};
        std::vector<std::thread> threads;
        const auto start = Clock::now();
        for (int t = 0; t < f.threads; ++t) {
          threads.emplace_back([&, t, lo = lo, hi = hi] {
            std::mt19937_64 rng(round * 1000 + t);
            uint64_t n = 0;
            while (!stop.load(std::memory_order_relaxed)) {
              const cell::Status s =
                  client->Put(KeyOf(rng() % f.keys), std::string(lo + rng() % (hi - lo + 1), 'a' + rng() % 26));
              if (!s.ok()) Die("put: " + s.ToString());
              ++n;
            }
            ops.fetch_add(n);
          });
        }
        std::this_thread::sleep_for(std::chrono::duration<double>(f.seconds));  // the run's length
        stop = true;
        for (auto& t : threads) t.join();
        const double rate =
            static_cast<double>(ops.load()) / std::chrono::duration<double>(Clock::now() - start).count();
        rates[shape + "/" + mode].push_back(rate);
        std::fprintf(stderr, "round %d %s %s: %.0f puts/s\n", round + 1, shape.c_str(), mode.c_str(), rate);
      }
    }
  }
  std::string throughput;
  for (const auto& [shape, lo, hi] : shapes) {
    const double off = Median(rates[shape + "/off"]), async = Median(rates[shape + "/async"]),
                 sync = Median(rates[shape + "/sync"]);
    throughput += fmt::format(
        "{}\"{}\":{{\"off\":{:.0f},\"async\":{:.0f},\"sync\":{:.0f},\"async_vs_off\":{:.3f},"
        "\"sync_vs_off\":{:.3f},\"runs\":{{\"off\":{},\"async\":{},\"sync\":{}}}}}",
        throughput.empty() ? "" : ",", shape, off, async, sync, async / off, sync / off, Runs(rates[shape + "/off"]),
        Runs(rates[shape + "/async"]), Runs(rates[shape + "/sync"]));
  }

  std::string recovery = "null";
  if (f.recovery_keys > 0) {
    fs::remove_all(f.dir);
    fs::create_directories(f.dir);
    double load_s = 0, from_log = 0, from_checkpoint = 0;
    uint64_t log_bytes = 0, checkpoint_bytes = 0;
    {
      Server server(f.server, ServerArgs("async", f.dir));
      auto client = Connect(server.uri());
      const auto start = Clock::now();
      Load(*client, f.recovery_keys, 8, 256, 2, 256);
      load_s = std::chrono::duration<double>(Clock::now() - start).count();
      client.reset();
      server.Kill();  // SIGKILL: the log is in the page cache, as after any killed process
    }
    std::string log_dir;
    std::vector<fs::path> first_logs;
    for (const auto& e : fs::recursive_directory_iterator(f.dir)) {
      if (e.is_regular_file() && e.path().extension() == ".log") {
        log_bytes += e.file_size();
        log_dir = e.path().parent_path().string();
        first_logs.push_back(e.path());
      }
    }
    uint64_t log_bytes_after = 0;
    {
      Server server(f.server, ServerArgs("async", f.dir));
      from_log = server.ready_s();
      // The restart replayed records, so it takes a checkpoint at once: wait until it has its name and the log it
      // holds is gone (polling the directory: the server's own progress).
      const auto give_up = Clock::now() + std::chrono::minutes(5);
      const auto done = [&] {
        bool image = false;
        for (const auto& e : fs::directory_iterator(log_dir)) {
          if (e.path().extension() == ".img") {
            image = true;
            checkpoint_bytes = e.file_size();
          }
        }
        return image &&
               std::none_of(first_logs.begin(), first_logs.end(), [](const fs::path& p) { return fs::exists(p); });
      };
      while (!done()) {
        if (Clock::now() > give_up) Die("the restarted server took no checkpoint");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling the directory for the checkpoint
      }
      auto client = Connect(server.uri());
      std::string value;
      const cell::Status s = client->Get(KeyOf(f.recovery_keys - 1), &value);
      if (!s.ok()) Die("the last key loaded is missing after recovery: " + s.ToString());
      client.reset();
      server.Kill();
    }
    for (const auto& e : fs::directory_iterator(log_dir)) {
      if (e.path().extension() == ".log") log_bytes_after += e.file_size();
    }
    {
      Server server(f.server, ServerArgs("async", f.dir));
      from_checkpoint = server.ready_s();
      auto client = Connect(server.uri());
      std::string value;
      const cell::Status s = client->Get(KeyOf(f.recovery_keys - 1), &value);
      if (!s.ok()) Die("the last key loaded is missing after recovery from the checkpoint: " + s.ToString());
    }
    recovery = fmt::format(
        "{{\"keys\":{},\"load_s\":{:.2f},\"log_bytes\":{},\"from_log_s\":{:.2f},"
        "\"checkpoint_bytes\":{},\"log_bytes_after_checkpoint\":{},\"from_checkpoint_s\":{:.2f}}}",
        f.recovery_keys, load_s, log_bytes, from_log, checkpoint_bytes, log_bytes_after, from_checkpoint);
  }
  fs::create_directories(f.dir);
  const auto [sync_p50, sync_p99] = FdatasyncMs(f.dir);
  fs::remove_all(f.dir);
  std::printf(
      "{\"bench\":\"durability\",\"threads\":%d,\"seconds\":%.1f,\"rounds\":%d,\"keys\":%llu,"
      "\"fdatasync_ms\":{\"p50\":%.3f,\"p99\":%.3f},\"puts_per_s\":{%s},\"recovery\":%s}\n",
      f.threads, f.seconds, f.rounds, static_cast<unsigned long long>(f.keys), sync_p50, sync_p99, throughput.c_str(),
      recovery.c_str());
  return 0;
}
