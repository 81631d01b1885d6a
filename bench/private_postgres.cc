// A private PostgreSQL server (see private_postgres.h): initdb, postgres, PQping until it answers, fast shutdown.
#include "bench/private_postgres.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

namespace cell::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kPort = 5432;  // only names the socket file: the directory is the server's alone

// Who initdb and postgres run as: the caller, or (when it is root) a user of its own.
struct RunAs {
  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

bool Executable(const fs::path& p) { return access(p.c_str(), X_OK) == 0; }
bool HasBinaries(const fs::path& dir) { return Executable(dir / "initdb") && Executable(dir / "postgres"); }

StatusOr<std::string> FindBinDir(const std::string& given) {
  if (!given.empty()) {
    if (HasBinaries(given)) return given;
    return Status::FailedPrecondition(fmt::format("no executable initdb and postgres in {}", given));
  }
  // Debian keeps them out of PATH, in /usr/lib/postgresql/<major version>/bin: the newest.
  std::error_code ec;
  int best = -1;
  std::string found;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string name = entry.path().filename().string();
    int version = 0;
    const auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), version);
    if (err != std::errc() || end != name.data() + name.size() || version <= best) continue;
    if (HasBinaries(entry.path() / "bin")) best = version, found = (entry.path() / "bin").string();
  }
  if (!found.empty()) return found;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && HasBinaries(dir)) return dir;
  }
  return Status::FailedPrecondition(
      "PostgreSQL's initdb and postgres are neither in /usr/lib/postgresql/<version>/bin nor on PATH: install "
      "postgresql-15 (deploy/install-deps.sh), or give the server's address with --postgres");
}

StatusOr<RunAs> WhoRuns(const std::string& user) {
  RunAs r;
  if (geteuid() != 0) return r;
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* result = nullptr;
  if (getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(), &result) != 0 || result == nullptr) {
    return Status::FailedPrecondition(fmt::format(
        "PostgreSQL refuses to run as root, and there is no '{}' user to run it as: run as another user, install "
        "postgresql-15 (its postgresql-common creates the user; deploy/install-deps.sh), or give the address of a "
        "server with --postgres",
        user));
  }
  r.drop = true;
  r.uid = entry.pw_uid;
  r.gid = entry.pw_gid;
  return r;
}

// A libpq connection-string value, quoted.
std::string Quoted(std::string_view value) {
  std::string q = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') q.push_back('\\');
    q.push_back(c);
  }
  return q + "'";
}

std::string LogTail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  if (s.size() > 2000) s = "..." + s.substr(s.size() - 2000);
  return s.empty() ? "(nothing in " + path + ")" : s;
}

// Starts `args` with stdout and stderr appended to `log`, in a session of its own, as `run_as`; it gets
// `death_signal` when the caller dies.
StatusOr<pid_t> Spawn(std::vector<std::string> args, const std::string& log, const RunAs& run_as, int death_signal,
                      const cpu_set_t& cpus) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return Status::Internal(fmt::format("fork for {}: {}", args[0], std::strerror(errno)));
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    setsid();  // a terminal's Ctrl-C reaches the caller only; the death signal then stops the server
    if (CPU_COUNT(&cpus) > 0 && sched_setaffinity(0, sizeof(cpus), &cpus) != 0) _exit(125);
    if (run_as.drop && (setgroups(1, &run_as.gid) != 0 || setgid(run_as.gid) != 0 || setuid(run_as.uid) != 0)) {
      _exit(126);
    }
    prctl(PR_SET_PDEATHSIG, death_signal);  // after setuid, which clears it
    if (getppid() != parent) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for `pid` to exit until `deadline` (polling); its wait status, or nothing if it still runs.
std::optional<int> AwaitExit(pid_t pid, Clock::time_point deadline) {
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return status;
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // between polls of the child, not synchronisation
  }
}

std::string Described(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("signal {}", WTERMSIG(status));
  return "an unknown status";
}

}  // namespace

StatusOr<std::unique_ptr<PrivatePostgres>> PrivatePostgres::Start(const PrivatePostgresOptions& options) {
  const std::string& d = options.durability;
  if (d != "sync" && d != "async" && d != "off") {
    return Status::InvalidArgument(fmt::format("durability '{}' is not one of sync, async, off", d));
  }
  auto bin = FindBinDir(options.bin_dir);
  if (!bin.ok()) return bin.status();
  auto run_as = WhoRuns(options.run_as_when_root);
  if (!run_as.ok()) return run_as.status();

  std::string dir = (fs::temp_directory_path() / "cell-pg-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    return Status::Internal(fmt::format("mkdtemp {}: {}", dir, std::strerror(errno)));
  }
  std::unique_ptr<PrivatePostgres> server(new PrivatePostgres(dir));  // removes the directory on every path below
  if (dir.size() + 20 > 107) {
    return Status::FailedPrecondition(
        fmt::format("the socket path under {} would be too long for a Unix socket: set TMPDIR shorter", dir));
  }
  if (run_as->drop && chown(dir.c_str(), run_as->uid, run_as->gid) != 0) {
    return Status::Internal(fmt::format("chown {} to the postgres user: {}", dir, std::strerror(errno)));
  }
  const std::string data = dir + "/data", log = dir + "/postgres.log";
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : options.cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return Status::InvalidArgument(fmt::format("no CPU {}", cpu));
    CPU_SET(cpu, &cpus);
  }
  const auto deadline = Clock::now() + options.start_timeout;

  auto initdb = Spawn({*bin + "/initdb", "-D", data, "-U", "cell", "--auth=trust", "--no-locale", "-E", "UTF8",
                       "--no-sync", "--no-instructions"},
                      log, *run_as, SIGKILL, cpus);
  if (!initdb.ok()) return initdb.status();
  const std::optional<int> initdb_status = AwaitExit(*initdb, deadline);
  if (!initdb_status) {
    kill(*initdb, SIGKILL);
    waitpid(*initdb, nullptr, 0);
    return Status::DeadlineExceeded(fmt::format("initdb did not finish in time: {}", LogTail(log)));
  }
  if (*initdb_status != 0) {
    return Status::Internal(fmt::format("initdb failed ({}): {}", Described(*initdb_status), LogTail(log)));
  }

  const char* on_off = d == "off" ? "off" : "on";
  auto pid = Spawn(
      {*bin + "/postgres", "-D", data, "-k", dir, "-p", std::to_string(kPort), "-c", "listen_addresses=", "-c",
       fmt::format("fsync={}", on_off), "-c", fmt::format("synchronous_commit={}", d == "sync" ? "on" : "off"), "-c",
       fmt::format("full_page_writes={}", on_off), "-c", fmt::format("max_connections={}", options.max_connections)},
      log, *run_as, SIGQUIT, cpus);
  if (!pid.ok()) return pid.status();
  server->pid_ = *pid;
  server->conninfo_ = fmt::format("host={} port={} user=cell dbname=postgres", Quoted(dir), kPort);
  for (;;) {
    int status = 0;
    if (waitpid(server->pid_, &status, WNOHANG) == server->pid_) {
      server->pid_ = -1;
      return Status::Internal(fmt::format("postgres exited at start ({}): {}", Described(status), LogTail(log)));
    }
    if (PQping(server->conninfo_.c_str()) == PQPING_OK) return server;
    if (Clock::now() >= deadline) {
      return Status::DeadlineExceeded(fmt::format("postgres did not accept connections within {} s: {}",
                                                  options.start_timeout.count(), LogTail(log)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // between pings only: readiness is the ping
  }
}

Status PrivatePostgres::Stop() {
  Status s;
  if (pid_ > 0) {
    kill(pid_, SIGINT);  // fast shutdown: sessions are ended, then a checkpoint
    if (!AwaitExit(pid_, Clock::now() + std::chrono::seconds(30))) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      s = Status::Internal(fmt::format("postgres (pid {}) did not stop within 30 s of SIGINT: killed", pid_));
    }
    pid_ = -1;
  }
  if (!dir_.empty()) {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
    dir_.clear();
  }
  return s;
}

PrivatePostgres::~PrivatePostgres() { (void)Stop(); }

}  // namespace cell::bench
