// cellctl: Cell from a terminal. Exit status 0 on success, 1 when the operation failed (the reason on stderr),
// 2 for a usage error, 3 when get or del found no such key.
//
//   cellctl --cluster=zk://127.0.0.1:2181/cell/default servers
//   cellctl --cluster=tcp://127.0.0.1:7000 regions
//   cellctl --cluster=tcp://127.0.0.1:7000 put user1 hello
//   cellctl --cluster=tcp://127.0.0.1:7000 --search=client get user1
//   cellctl --cluster=tcp://127.0.0.1:7000 scan user0 user9 --limit=10
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cell/client.h"

namespace {

int Fail(const cell::Status& status) {
  std::fprintf(stderr, "cellctl: %s\n", status.ToString().c_str());
  return 1;
}

std::string Bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char out[32];
  std::snprintf(out, sizeof out, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return out;
}

int Servers(cell::Client& client) {
  auto servers = client.Servers();
  if (!servers.ok()) return Fail(servers.status());
  std::printf("%-8s %-14s %s\n", "SERVER", "CAPACITY", "ADDRESSES");
  for (const auto& s : *servers) {
    std::string addresses;
    for (const auto& [transport, uri] : s.addresses) addresses += (addresses.empty() ? "" : " ") + uri;
    std::printf("%-8llu %-14s %s\n", static_cast<unsigned long long>(s.id), Bytes(s.capacity_bytes).c_str(),
                addresses.c_str());
  }
  std::printf("%zu live server(s)\n", servers->size());
  return 0;
}

int Regions(cell::Client& client) {
  auto regions = client.Regions();
  if (!regions.ok()) return Fail(regions.status());
  std::printf("%-8s %-8s %-8s %s\n", "REGION", "OWNER", "EPOCH", "");
  for (const auto& r : *regions) {
    std::string owner = r.owner == 0 ? "-" : std::to_string(r.owner);
    std::printf("%-8u %-8s %-8llu %s\n", r.id, owner.c_str(), static_cast<unsigned long long>(r.epoch),
                r.root ? "root" : "");
  }
  std::printf("%zu region(s)\n", regions->size());
  return 0;
}

int Get(cell::Client& client, const std::string& key) {
  std::string value;
  cell::Status s = client.Get(key, &value);
  if (s.IsNotFound()) {
    std::fprintf(stderr, "cellctl: no key '%s'\n", key.c_str());
    return 3;
  }
  if (!s.ok()) return Fail(s);
  std::fwrite(value.data(), 1, value.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

int Put(cell::Client& client, const std::string& key, const std::string& value) {
  cell::Status s = client.Put(key, value);
  if (!s.ok()) return Fail(s);
  return 0;
}

int Del(cell::Client& client, const std::string& key) {
  cell::Status s = client.Delete(key);
  if (s.IsNotFound()) {
    std::fprintf(stderr, "cellctl: no key '%s'\n", key.c_str());
    return 3;
  }
  if (!s.ok()) return Fail(s);
  return 0;
}

int Scan(cell::Client& client, const std::string& start, const std::string& end, size_t limit) {
  std::vector<std::pair<std::string, std::string>> pairs;
  cell::Status s = client.Scan(start, end, limit, &pairs);
  if (!s.ok()) return Fail(s);
  for (const auto& [k, v] : pairs) std::printf("%s\t%s\n", k.c_str(), v.c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "%zu pair(s)\n", pairs.size());
  return 0;
}

int Stats(cell::Client& client) {
  auto stats = client.StoreStats();
  if (!stats.ok()) return Fail(stats.status());
  std::printf("%-8s %-10s %-8s %-14s %-12s %-12s %-10s %-12s %-12s %-12s %-12s %s\n", "SERVER", "MEGANODES", "SPLITS",
              "REMOTE SPLITS", "ROOT SPLITS", "REQUESTS", "REDIRECTS", "HELD WRITES", "NODES USED", "NODES FREE",
              "RECORDS", "RECORDS FREE");
  for (const auto& s : *stats) {
    std::printf("%-8llu %-10llu %-8llu %-14llu %-12llu %-12llu %-10llu %-12llu %-12s %-12s %-12s %s\n",
                static_cast<unsigned long long>(s.server), static_cast<unsigned long long>(s.meganodes),
                static_cast<unsigned long long>(s.meganode_splits), static_cast<unsigned long long>(s.remote_splits),
                static_cast<unsigned long long>(s.root_splits), static_cast<unsigned long long>(s.requests),
                static_cast<unsigned long long>(s.redirects), static_cast<unsigned long long>(s.held_writes),
                Bytes(s.node_bytes_used).c_str(), Bytes(s.node_bytes_free).c_str(), Bytes(s.extent_bytes_used).c_str(),
                Bytes(s.extent_bytes_free).c_str());
  }
  return 0;
}

int Load(cell::Client& client, const std::string& prefix, size_t count, size_t value_bytes) {
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < count; ++i) {
    char key[300];
    std::snprintf(key, sizeof key, "%s%06zu", prefix.c_str(), i);
    std::string value = "value-of-" + std::string(key);
    value.resize(std::max(value.size(), value_bytes), '.');
    cell::Status s = client.Put(key, value);
    if (!s.ok()) {
      std::fprintf(stderr, "cellctl: after %zu keys: %s\n", i, s.ToString().c_str());
      return 1;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("loaded %zu keys %s%06d..%s%06zu in %.2f s\n", count, prefix.c_str(), 0, prefix.c_str(),
              count == 0 ? 0 : count - 1, seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cellctl: inspect and use a Cell cluster"};
  cell::ClientOptions options;
  app.add_option("--cluster", options.cluster,
                 "zk://host:port[,host:port...][/root/cluster] (default path /cell/default), or an embedded "
                 "server's tcp://host:port (also shm:///path, verbs://host:port)")
      ->envname("CELL_CLUSTER");
  app.add_option("--key-file", options.key_file,
                 "file holding the cluster's client key (the servers' --client-key-file), for clusters with keys")
      ->envname("CELL_KEY_FILE");
  int64_t timeout_ms = options.timeout.count();
  app.add_option("--timeout-ms", timeout_ms, "how long one request may take")->capture_default_str();
  app.require_subcommand(1);
  CLI::App* servers = app.add_subcommand("servers", "list the live servers and their addresses");
  CLI::App* regions = app.add_subcommand("regions", "list the region table: each region's owner and epoch");
  app.add_option("--search", options.search,
                 "how gets and scans search: adaptive, server, client, dex or fixed:<fraction>")
      ->capture_default_str();
  std::string key, value, start, end;
  size_t limit = 100;
  CLI::App* get = app.add_subcommand("get", "print the value of KEY (exit 3 if there is none)");
  get->add_option("key", key)->required();
  CLI::App* put = app.add_subcommand("put", "store VALUE under KEY");
  put->add_option("key", key)->required();
  put->add_option("value", value)->required();
  CLI::App* del = app.add_subcommand("del", "delete KEY (exit 3 if there was none)");
  del->add_option("key", key)->required();
  CLI::App* scan = app.add_subcommand("scan", "print up to LIMIT pairs with START <= key < END, one per line");
  scan->add_option("start", start, "first key (default: the smallest)");
  scan->add_option("end", end, "end key, excluded (default: no bound)");
  scan->add_option("--limit", limit, "at most this many pairs")->capture_default_str();
  CLI::App* stats = app.add_subcommand(
      "stats", "per server: meganodes in use, splits, requests, node and record bytes used and free");
  std::string prefix = "user";
  size_t count = 1000, value_bytes = 0;
  std::string key_path;
  CLI::App* keygen = app.add_subcommand("keygen",
                                        "write a new random key to FILE (mode 0600), for the servers' "
                                        "--client-key-file and --peer-key-file and the clients' --key-file");
  keygen->add_option("file", key_path)->required();
  CLI::App* load = app.add_subcommand("load", "put COUNT sample keys PREFIX000000, PREFIX000001, ...");
  load->add_option("--prefix", prefix)->capture_default_str();
  load->add_option("--count", count)->capture_default_str();
  load->add_option("--value-bytes", value_bytes, "pad values to at least this size")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (keygen->parsed()) {
    cell::Status s = cell::WriteNewKeyFile(key_path);
    if (!s.ok()) return Fail(s);
    std::printf("wrote a new key to %s\n", key_path.c_str());
    return 0;
  }
  if (options.cluster.empty()) {  // every command but keygen talks to a cluster
    std::fprintf(stderr, "cellctl: --cluster is required (or the CELL_CLUSTER environment variable); see --help\n");
    return 2;
  }
  options.timeout = std::chrono::milliseconds(timeout_ms);
  auto client = cell::Client::Open(options);
  if (!client.ok()) return Fail(client.status());
  if (servers->parsed()) return Servers(**client);
  if (regions->parsed()) return Regions(**client);
  if (get->parsed()) return Get(**client, key);
  if (put->parsed()) return Put(**client, key, value);
  if (del->parsed()) return Del(**client, key);
  if (scan->parsed()) return Scan(**client, start, end, limit);
  if (load->parsed()) return Load(**client, prefix, count, value_bytes);
  if (stats->parsed()) return Stats(**client);
  return 2;
}
