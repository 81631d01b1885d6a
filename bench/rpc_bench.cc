// cell-rpc-bench: RPC round trips and 1 KB one-sided reads over one transport, server in its own process.
//
//   cell-rpc-bench --transport=tcp|shm|verbs [--workers=1] [--server-cpu=0] [--client-cpu=1]
//                  [--outstanding=1,2,4,8,16,32,50,64] [--seconds=1] [--read-bytes=1024] [--read-outstanding=32]
//                  [--region-mb=64] [--backing=memfd|hugetlb] [--host=127.0.0.1] [--nic-model=...]
//
// The server process (forked first, pinned to --server-cpu) holds 100,000 keys with 100-byte values in a hash map
// and answers method 1 (GET key -> value), like redis-server answering redis-benchmark's GET -d 100; it registers a
// memfd region of --region-mb for one-sided reads. The client (pinned to --client-cpu) keeps N requests in flight,
// reissuing each from its completion, for --seconds per N. Reads are 1 KB-aligned at random offsets.
//
// Prints one JSON object as its last line: per N, ops/s and latency p50/p99; read latency (1 outstanding) and read
// throughput (--read-outstanding in flight, from one client thread); server worker and NIC-thread CPU seconds.
#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rpc/transport.h"

namespace {

using cell::GlobalPtr;
using cell::Status;
using cell::rpc::Clock;

constexpr uint16_t kGet = 1;
constexpr int kKeys = 100000;

struct Flags {
  std::string transport = "tcp";
  std::string host = "127.0.0.1";
  int workers = 1;
  int server_cpu = 0;
  int client_cpu = 1;
  std::vector<int> outstanding = {1, 2, 4, 8, 16, 32, 50, 64};
  double seconds = 1.0;
  uint32_t read_bytes = 1024;
  int read_outstanding = 32;
  uint64_t region_mb = 64;
  std::string backing = "memfd";  // or "hugetlb": a memfd of 2 MiB pages (needs vm.nr_hugepages reserved)
  std::string nic_model;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "cell-rpc-bench: %s\nusage: cell-rpc-bench --transport=tcp|shm|verbs [--workers=N] [--server-cpu=C] "
               "[--client-cpu=C] [--outstanding=1,2,...] [--seconds=S] [--read-bytes=B] [--read-outstanding=N] "
               "[--region-mb=M] [--backing=memfd|hugetlb] [--host=IP] "
               "[--nic-model=reads_per_s=..,bytes_per_s=..,latency_us=..]\n",
               why.c_str());
  std::exit(2);
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) Usage("bad argument '" + arg + "'");
    const std::string name = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
    auto number = [&](double lo, double hi) {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || v < lo || v > hi)
        Usage(fmt::format("--{} must be in [{}, {}]", name, lo, hi));
      return v;
    };
    if (name == "transport") {
      f.transport = value;
    } else if (name == "host") {
      f.host = value;
    } else if (name == "workers") {
      f.workers = static_cast<int>(number(1, 1024));
    } else if (name == "server-cpu") {
      f.server_cpu = static_cast<int>(number(-1, 4096));
    } else if (name == "client-cpu") {
      f.client_cpu = static_cast<int>(number(-1, 4096));
    } else if (name == "seconds") {
      f.seconds = number(0.05, 3600);
    } else if (name == "read-bytes") {
      f.read_bytes = static_cast<uint32_t>(number(1, 1 << 20));
    } else if (name == "read-outstanding") {
      f.read_outstanding = static_cast<int>(number(1, 4096));
    } else if (name == "region-mb") {
      f.region_mb = static_cast<uint64_t>(number(1, 1 << 16));
    } else if (name == "backing") {
      if (value != "memfd" && value != "hugetlb") Usage("--backing is memfd or hugetlb");
      f.backing = value;
    } else if (name == "nic-model") {
      f.nic_model = value;
    } else if (name == "outstanding") {
      f.outstanding.clear();
      size_t at = 0;
      while (at <= value.size()) {
        const size_t comma = value.find(',', at);
        const std::string item = value.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        const int n = std::atoi(item.c_str());
        if (n < 1 || n > 4096) Usage("--outstanding takes a list of 1..4096");
        f.outstanding.push_back(n);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    } else {
      Usage("unknown flag --" + name);
    }
  }
  if (f.transport != "tcp" && f.transport != "shm" && f.transport != "verbs") Usage("unknown transport " + f.transport);
  return f;
}

void PinProcess(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) std::fprintf(stderr, "cannot pin to CPU %d\n", cpu);
}

std::string KeyOf(int i) { return fmt::format("key:{:012d}", i); }

class GetHandler final : public cell::rpc::RpcHandler {
 public:
  GetHandler() {
    for (int i = 0; i < kKeys; ++i) map_[KeyOf(i)] = std::string(100, static_cast<char>('a' + i % 26));
  }
  void Handle(uint16_t method, std::string_view request, cell::rpc::Responder responder) override {
    if (method != kGet) return responder.Fail(Status::InvalidArgument("unknown method"));
    auto it = map_.find(absl::string_view(request.data(), request.size()));
    if (it == map_.end()) return responder.Fail(Status::NotFound("no such key"));
    responder.Reply(it->second);
  }

 private:
  absl::flat_hash_map<std::string, std::string> map_;
};

// Child process: serves until its control pipe closes, then writes its stats as JSON and exits.
[[noreturn]] void RunServer(const Flags& f, int uri_out, int control_in) {
  PinProcess(f.server_cpu);
  GetHandler handler;
  const uint64_t size = f.region_mb << 20;
  const int fd = memfd_create("cell-bench-region", MFD_CLOEXEC | (f.backing == "hugetlb" ? MFD_HUGETLB : 0));
  void* mapped = fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0
                     ? MAP_FAILED
                     : mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (mapped == MAP_FAILED) {
    const std::string line =
        fmt::format("ERROR cannot create a {} MB {} region: {}{}\n", f.region_mb, f.backing, std::strerror(errno),
                    f.backing == "hugetlb" ? " (reserve pages: sysctl vm.nr_hugepages=N)" : "");
    [[maybe_unused]] ssize_t n = write(uri_out, line.data(), line.size());
    std::_Exit(1);
  }
  auto* base = static_cast<char*>(mapped);
  for (uint64_t i = 0; i < size; i += 8) std::memcpy(base + i, &i, 8);
  cell::rpc::ServerOptions options;
  options.workers = f.workers;
  if (f.server_cpu >= 0) options.worker_cpus = options.nic_cpus = {f.server_cpu};
  options.nic_model = f.nic_model;
  const std::string listen = f.transport == "shm" ? fmt::format("shm:///tmp/cell-rpc-bench-{}.sock", getpid())
                                                  : fmt::format("{}://{}:0", f.transport, f.host);
  auto server = cell::rpc::Listen(listen, options, &handler);
  std::string line;
  if (!server.ok()) {
    line = "ERROR " + server.status().ToString() + "\n";
  } else if (Status s = (*server)->RegisterRegion({1, base, size, fd}); !s.ok()) {
    line = "ERROR " + s.ToString() + "\n";
  } else {
    line = (*server)->uri() + "\n";
  }
  [[maybe_unused]] ssize_t n = write(uri_out, line.data(), line.size());
  if (!server.ok()) std::_Exit(1);
  char c;
  while (read(control_in, &c, 1) > 0) {
  }
  const cell::rpc::ServerStats s = (*server)->stats();
  (*server)->Stop();
  line = fmt::format("{{\"requests\":{},\"reads\":{},\"worker_cpu_s\":{:.3f},\"nic_cpu_s\":{:.3f}}}\n", s.requests,
                     s.reads, s.worker_cpu_seconds, s.nic_cpu_seconds);
  n = write(uri_out, line.data(), line.size());
  std::_Exit(0);
}

std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

// Keeps `depth` operations in flight: each completion issues the next, until `stop`. Completions that run inline
// (shm reads) are turned into a loop rather than a recursion by a per-thread trampoline.
class Driver {
 public:
  using IssueFn = std::function<void(Driver*)>;
  Driver(IssueFn issue, bool record) : issue_(std::move(issue)), record_(record) {}

  void Run(int depth, double seconds) {
    std::thread timer([&] {
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // the measurement window
      stop_.store(true);
    });
    start_ = Clock::now();
    for (int i = 0; i < depth; ++i) {
      inflight_.fetch_add(1);
      Issue();
    }
    timer.join();
    std::unique_lock lock(mu_);
    drained_.wait(lock, [&] { return inflight_.load() == 0; });
    elapsed_ = std::chrono::duration<double>(last_ - start_).count();
  }

  // Called by an operation's completion.
  void Done(const Status& s, Clock::time_point issued) {
    if (!s.ok()) {
      std::fprintf(stderr, "cell-rpc-bench: operation failed: %s\n", s.ToString().c_str());
      std::_Exit(1);  // from a transport thread: no destructors, no joins
    }
    completed_.fetch_add(1, std::memory_order_relaxed);
    if (record_) {
      const auto now = Clock::now();
      std::lock_guard lock(mu_);
      latencies_us_.push_back(std::chrono::duration<double, std::micro>(now - issued).count());
    }
    if (!stop_.load(std::memory_order_relaxed)) {
      Issue();
      return;
    }
    const auto now = Clock::now();
    std::lock_guard lock(mu_);
    last_ = std::max(last_, now);
    if (inflight_.fetch_sub(1) == 1) drained_.notify_all();
  }

  // Whether completions record latency (throughput runs skip the clock reads).
  bool recording() const { return record_; }
  double ops_per_s() const { return static_cast<double>(completed_.load()) / elapsed_; }
  double Percentile(double p) {
    if (latencies_us_.empty()) return 0;
    std::sort(latencies_us_.begin(), latencies_us_.end());
    return latencies_us_[std::min(latencies_us_.size() - 1, static_cast<size_t>(p * latencies_us_.size()))];
  }

 private:
  void Issue() {
    thread_local bool in_issue = false;
    thread_local int deferred = 0;
    if (in_issue) {
      ++deferred;
      return;
    }
    in_issue = true;
    issue_(this);
    while (deferred > 0) {
      --deferred;
      issue_(this);
    }
    in_issue = false;
  }

  IssueFn issue_;
  const bool record_;
  std::atomic<bool> stop_{false};
  std::atomic<int> inflight_{0};
  std::atomic<uint64_t> completed_{0};
  std::mutex mu_;
  std::condition_variable drained_;
  std::vector<double> latencies_us_;
  Clock::time_point start_, last_;
  double elapsed_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const Flags f = ParseFlags(argc, argv);
  int uri_pipe[2], control_pipe[2];
  if (pipe(uri_pipe) != 0 || pipe(control_pipe) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    close(uri_pipe[0]);
    close(control_pipe[1]);
    RunServer(f, uri_pipe[1], control_pipe[0]);
  }
  close(uri_pipe[1]);
  close(control_pipe[0]);
  PinProcess(f.client_cpu);
  const std::string uri = ReadLine(uri_pipe[0]);
  if (uri.empty() || uri.rfind("ERROR", 0) == 0) {
    std::fprintf(stderr, "cell-rpc-bench: server failed: %s\n", uri.c_str());
    return 1;
  }
  auto connection = cell::rpc::Connect(uri);
  if (!connection.ok()) {
    std::fprintf(stderr, "cell-rpc-bench: %s\n", connection.status().ToString().c_str());
    return 1;
  }
  cell::rpc::Connection* c = connection->get();

  std::string json = fmt::format(
      "{{\"bench\":\"cell-rpc-bench\",\"transport\":\"{}\",\"workers\":{},\"seconds\":{}"
      ",\"value_bytes\":100,\"rpc\":[",
      f.transport, f.workers, f.seconds);
  std::mt19937_64 rng(1);
  std::vector<std::string> keys;
  for (int i = 0; i < 4096; ++i) keys.push_back(KeyOf(static_cast<int>(rng() % kKeys)));
  for (size_t level = 0; level < f.outstanding.size(); ++level) {
    std::atomic<uint64_t> next{0};
    Driver driver(
        [&](Driver* d) {
          const auto issued = Clock::now();
          c->Call(kGet, keys[next.fetch_add(1, std::memory_order_relaxed) % keys.size()],
                  [d, issued](const Status& s, std::string_view) { d->Done(s, issued); });
        },
        /*record=*/true);
    driver.Run(f.outstanding[level], f.seconds);
    json += fmt::format("{}{{\"outstanding\":{},\"ops_per_s\":{:.0f},\"p50_us\":{:.1f},\"p99_us\":{:.1f}}}",
                        level ? "," : "", f.outstanding[level], driver.ops_per_s(), driver.Percentile(0.5),
                        driver.Percentile(0.99));
  }

  const uint64_t slots = (f.region_mb << 20) / 1024 - (f.read_bytes + 1023) / 1024;
  std::vector<char> buffers(static_cast<size_t>(f.read_outstanding) * f.read_bytes);
  std::atomic<uint64_t> slot_rng{88172645463325252ull};
  auto read_issue = [&](Driver* d) {
    thread_local int slot = 0;
    uint64_t x = slot_rng.load(std::memory_order_relaxed);  // xorshift; races only perturb the sequence
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    slot_rng.store(x, std::memory_order_relaxed);
    char* dest = buffers.data() + static_cast<size_t>(slot++ % f.read_outstanding) * f.read_bytes;
    const auto issued = d->recording() ? Clock::now() : Clock::time_point();
    c->Read(GlobalPtr{1, (x % slots) * 1024}, f.read_bytes, dest, [d, issued](const Status& s) { d->Done(s, issued); });
  };
  Driver latency(read_issue, /*record=*/true);
  latency.Run(1, f.seconds);
  Driver throughput(read_issue, /*record=*/false);
  throughput.Run(f.read_outstanding, f.seconds);
  json += fmt::format(
      "],\"read\":{{\"bytes\":{},\"region_mb\":{},\"backing\":\"{}\",\"p50_us\":{:.2f},\"p99_us\":{:.2f},"
      "\"latency_run_ops_per_s\":{:.0f},\"outstanding\":{},\"ops_per_s\":{:.0f}}}",
      f.read_bytes, f.region_mb, f.backing, latency.Percentile(0.5), latency.Percentile(0.99), latency.ops_per_s(),
      f.read_outstanding, throughput.ops_per_s());

  connection->reset();
  close(control_pipe[1]);
  const std::string server_stats = ReadLine(uri_pipe[0]);
  int status = 0;
  waitpid(child, &status, 0);
  json += fmt::format(",\"server\":{}}}", server_stats.empty() ? "null" : server_stats);
  std::printf("%s\n", json.c_str());
  return 0;
}
