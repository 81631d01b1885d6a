// A PostgreSQL server of the caller's own, for cell-bench --store=postgres without --postgres, and for tests: initdb
// in a new temporary directory, then `postgres` on a Unix socket in that directory only (listen_addresses='', so no
// TCP port is taken and nothing else can connect), with the durability asked for:
//
//   durability  fsync  synchronous_commit  full_page_writes   (Cell: cell-server --durability)
//   sync        on     on                  on                 a commit is acknowledged once on disk
//   async       on     off                 on                 acknowledged at once, on disk soon after
//   off         off    off                 off                nothing is made durable (Cell: no --data-dir)
//
// Start waits until the server accepts connections (PQping, bounded); Stop (and the destructor, so every error path
// of the caller too) shuts it down fast (SIGINT: open sessions are ended), waits for it (bounded; then SIGKILL) and
// removes the directory. The server is a child process that dies with its parent (PR_SET_PDEATHSIG, SIGQUIT: an
// immediate shutdown) if the caller is killed; only the directory stays behind then. (The signal follows the thread
// that called Start: call it from a thread that outlives the server, such as main.)
//
// Root: PostgreSQL refuses to run as root. When the caller is root (CI's Debian container is), initdb and postgres
// run as the `postgres` system user instead, which Debian's postgresql-common package (a dependency of
// postgresql-15, deploy/install-deps.sh) creates; the directory is handed to that user. Without such a user, Start
// fails saying so. The caller connects over the socket as database user "cell" (initdb -U cell, trust
// authentication), whoever it runs as.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cell/status.h"

namespace cell::bench {

struct PrivatePostgresOptions {
  std::string durability = "sync";  // sync, async or off (the table above)
  // Where initdb and postgres are: "" finds them in the newest /usr/lib/postgresql/<version>/bin (Debian's place),
  // else on PATH.
  std::string bin_dir;
  int max_connections = 300;  // cell-bench's --threads go up to 256, one connection each
  std::chrono::seconds start_timeout{60};
  std::string run_as_when_root = "postgres";
  // The CPUs its processes run on (empty: any): the server's CPUs of an experiment, apart from the harness's.
  std::vector<int> cpus;
};

class PrivatePostgres {
 public:
  // InvalidArgument for an unknown durability; FailedPrecondition if the binaries or (as root) the user are missing;
  // Internal if initdb or postgres fails, with the end of its log; DeadlineExceeded if it does not accept
  // connections within the timeout.
  static StatusOr<std::unique_ptr<PrivatePostgres>> Start(const PrivatePostgresOptions& options = {});
  ~PrivatePostgres();
  PrivatePostgres(const PrivatePostgres&) = delete;
  PrivatePostgres& operator=(const PrivatePostgres&) = delete;

  // Stops the server and removes the directory (again: nothing). Internal if it had to be killed.
  Status Stop();

  // libpq's connection string for it: "host=<dir> port=5432 user=cell dbname=postgres".
  const std::string& conninfo() const { return conninfo_; }
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return pid_; }  // the postmaster's; -1 once stopped

 private:
  explicit PrivatePostgres(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_, conninfo_;
  pid_t pid_ = -1;
};

}  // namespace cell::bench
