// Opens the store cell-bench measures (--store): a Cell cluster through cell::Client (bench/cell_store.h), a Redis
// (bench/redis_store.h), or a PostgreSQL (bench/postgres_store.h), the latter either at --postgres or started for
// the run (bench/private_postgres.h) with --durability's settings. Apart from cell_bench.cc so that the harness's
// main stays about workloads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/private_postgres.h"
#include "bench/store.h"
#include "cell/client.h"

namespace cell::bench {

struct StoreConfig {
  std::string kind = "cell";  // cell, redis or postgres
  ClientOptions client;       // cell (its transports and timeout are set here)
  std::string transport = "shm";
  std::string redis_address;
  std::string postgres_conninfo;   // "": start a private server
  std::string postgres_bin;        // the private server's binaries ("": found)
  std::vector<int> postgres_cpus;  // the private server's CPUs (empty: any)
  std::string durability = "sync";
  int threads = 1;  // the private server allows as many connections, and some
};

// The store, and what the summary says of it. Destroying it closes the store first, then stops the private server.
struct OpenedStore {
  std::unique_ptr<PrivatePostgres> private_postgres;  // declared first: it outlives the store
  std::unique_ptr<Store> store;
  Client* client = nullptr;   // Cell's client, owned by `store` (null for the others): for what only Cell has
  std::string search;         // the summary's "search" ("none" but for Cell)
  std::string transport;      // Cell's, tcp or unix (Redis), unix (a private PostgreSQL) or libpq
  std::string postgres_json;  // ,"postgres":{the server's version, fsync, synchronous_commit, full_page_writes}
};

// InvalidArgument for a malformed address; otherwise the store's error (Unavailable when nothing answers), or the
// private server's (see PrivatePostgres::Start).
StatusOr<OpenedStore> OpenStore(const StoreConfig& config);

}  // namespace cell::bench
