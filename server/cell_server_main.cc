// cell-server: one server of a Cell cluster. See --help, and docs/DESIGN.md for what it does.
//
// On start it prints one line per listener, "listening <uri>", then "ready server=<id> ..." on stdout (logs go to
// stderr), and runs until SIGINT or SIGTERM, when it leaves the membership cleanly and exits 0.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/diagnostics.h"
#include "server/cell_server.h"

namespace {

// The options CLI11 parses into plain values, turned into the config's types once parsed (ApplyParsedOptions).
struct ParsedOptions {
  int64_t session_ms = 0;
  int64_t poll_us = 0;
  std::string durability = "sync";
  int64_t flush_ms = 0;
};

// Declares every command-line option, with its help text, bound to `config` (or to `raw`).
// The regions' sizes. Those not given stay 0: a restart takes the recorded ones, a fresh start sizes to the machine
// (StoreConfig).
void DeclareSizeOptions(CLI::App& app, cell::server::StoreConfig& store) {
  store.meganode_bytes = 0;
  store.meganodes = 0;
  store.extent_region_bytes = 0;
  const char* kSizes =
      "; default: as recorded on a restart, else sized to the machine (records and nodes in 3/8 of its memory each)";
  app.add_option("--meganode-size", store.meganode_bytes,
                 std::string("bytes of one meganode (e.g. 64MiB)") + "; default: as recorded on a restart, else 64MiB")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option(
         "--meganodes", store.meganodes,
         std::string("room for this many meganodes in the node region (memory is committed as it is used)") + kSizes)
      ->check(CLI::Range(1u, 1u << 20));
  app.add_option(
         "--region-size", store.extent_region_bytes,
         std::string("bytes of the extent region that holds the records (e.g. 1GiB; committed as it is used)") + kSizes)
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
}

void DeclareOptions(CLI::App& app, cell::server::ServerConfig& config, ParsedOptions& raw) {
  raw.session_ms = config.zk_session_timeout.count();
  raw.flush_ms = config.store.async_flush_interval.count();
  raw.poll_us = config.poll.count();
  app.option_defaults()->always_capture_default();
  app.add_option("--listen", config.listen,
                 "a transport URI to serve, once per transport: tcp://host:port, shm:///path/to/socket, "
                 "verbs://host:port (port 0: any free port)")
      ->default_str("tcp://127.0.0.1:7000");
  app.add_option(
      "--membership", config.membership,
      "'embedded' (this server alone holds the region table; no ZooKeeper) or "
      "zk://host:port[,host:port...][/root/cluster] (the cluster's path in ZooKeeper, default /cell/default)");
  app.add_option("--id", config.id, "this server's id, nonzero and unique in the cluster (embedded: default 1)");
  app.add_option("--client-key-file", config.client_key_file,
                 "file holding the cluster's client key (mode 0600; `cellctl keygen FILE` makes one): connections "
                 "proving it may use the store; with --peer-key-file")
      ->envname("CELL_CLIENT_KEY_FILE");
  app.add_option("--peer-key-file", config.peer_key_file,
                 "file holding the cluster's peer key: connections proving it may also make the requests servers "
                 "send each other, and this server proves it to its peers. Without both keys the server accepts "
                 "anyone and listens only on loopback addresses")
      ->envname("CELL_PEER_KEY_FILE");
  app.add_flag("--insecure", config.insecure,
               "without keys, listen on non-loopback addresses anyway (anyone who can reach them may do anything)");
  app.add_option("--shm-group", config.shm_group,
                 "shm: members of this group may connect too (the socket file is mode 0660 with this group; "
                 "otherwise 0600: this user only)");
  app.add_option("--zk-auth", config.zk_auth,
                 "user:password: authenticate to ZooKeeper (digest); the cluster's znodes become writable only by "
                 "this identity (default with keys: one derived from the peer key)");
  app.add_option("--zk-session-timeout-ms", raw.session_ms,
                 "ZooKeeper session timeout; a server cut off longer is fenced")
      ->check(CLI::Range(int64_t{1000}, int64_t{60000}));
  app.add_option("--capacity", config.capacity_bytes, "memory this server offers for regions (e.g. 1GiB)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--workers", config.workers, "threads that serve RPCs (the server's CPU cores)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--worker-cpus", config.worker_cpus, "pin the workers to these CPUs, in turn (e.g. 0,1)")
      ->delimiter(',')
      ->check(CLI::Range(0, 4095));
  app.add_option(
         "--poll-us", raw.poll_us,
         "how long a worker (and a tcp NIC thread) keeps polling for requests after its last before it sleeps: for "
         "a server whose workers have cores of their own (--worker-cpus), requests taken without a wake-up (fewer "
         "microseconds each, and none of the client's CPU spent waking the worker), at the price of those "
         "cores while they poll; 0: sleep at once")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  app.add_option("--nic-model", config.nic_model,
                 "shm: make one-sided reads obey a NIC model shared by all shm clients, "
                 "reads_per_s=R,bytes_per_s=B,latency_us=L (any subset)");
  app.add_option("--search-cpu-us", config.store.search_cpu_us,
                 "experiments: every get, put, delete and scan searched on this server burns this many more "
                 "microseconds of its worker's CPU (a slower CPU; the counterpart of --nic-model)")
      ->check(CLI::Range(0.0, 100000.0));
  DeclareSizeOptions(app, config.store);
  app.add_flag("--huge-pages", config.store.huge_pages,
               "put the regions on 2 MiB huge pages (reserve them first: vm.nr_hugepages); fewer TLB misses for "
               "one-sided reads");
  app.add_option("--data-dir", config.data_dir,
                 "directory for this server's write-ahead log and checkpoints (must exist and be writable); a "
                 "restarted server recovers its regions from it. Without it nothing is logged")
      ->check(CLI::ExistingDirectory);
  app.add_option("--durability", raw.durability,
                 "with --data-dir: 'sync' (a put or delete is acknowledged once it is on disk) or 'async' "
                 "(acknowledged at once, on disk within --async-flush-ms plus one fdatasync)")
      ->check(CLI::IsMember({"sync", "async"}));
  app.add_option("--async-flush-ms", raw.flush_ms, "async durability: how often the log is synced")
      ->check(CLI::Range(int64_t{1}, int64_t{10000}));
  app.add_option("--checkpoint-every", config.store.checkpoint_log_bytes,
                 "take a checkpoint (and drop the log before it) once the log has grown by this much (e.g. 256MiB), "
                 "and by as much as the store held at the last checkpoint")
      ->transform(CLI::AsSizeValue(false));
}

void ApplyParsedOptions(const ParsedOptions& raw, cell::server::ServerConfig& config) {
  if (config.listen.empty()) config.listen.push_back("tcp://127.0.0.1:7000");
  config.zk_session_timeout = std::chrono::milliseconds(raw.session_ms);
  config.poll = std::chrono::microseconds(raw.poll_us);
  config.store.durability = *cell::logging::ParseDurability(raw.durability);  // checked by IsMember above
  config.store.async_flush_interval = std::chrono::milliseconds(raw.flush_ms);
}

}  // namespace

int main(int argc, char** argv) {
  cell::server::ServerConfig config;
  CLI::App app{"cell-server: a server of a Cell cluster (a distributed, in-memory, sorted key-value store)"};
  ParsedOptions raw;
  DeclareOptions(app, config, raw);
  CLI11_PARSE(app, argc, argv);
  ApplyParsedOptions(raw, config);

  // Signals are taken synchronously by the main thread; every thread started from here on inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = cell::server::CellServer::Start(config);
  if (!server.ok()) {
    std::fprintf(stderr, "cell-server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  for (const std::string& uri : (*server)->uris()) std::printf("listening %s\n", uri.c_str());
  std::printf("ready server=%llu membership=%s\n", static_cast<unsigned long long>((*server)->id()),
              config.membership.c_str());
  std::fflush(stdout);
  cell::diag::Info("server {} ready (membership {})", (*server)->id(), config.membership);

  // Until told to stop (the server watches its own fencing on a thread of its own).
  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  cell::diag::Info("server {}: signal {}, leaving", (*server)->id(), sig);
  (*server)->Stop();
  return 0;
}
