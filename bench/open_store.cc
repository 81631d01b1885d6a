// Opens cell-bench's store (see open_store.h).
#include "bench/open_store.h"

#include <fmt/format.h>

#include <cstdio>

#include "bench/cell_store.h"
#include "bench/postgres_store.h"
#include "bench/redis_store.h"

namespace cell::bench {

namespace {

StatusOr<OpenedStore> OpenPostgres(const StoreConfig& config) {
  OpenedStore out;
  out.search = "none";
  out.transport = "libpq";
  std::string conninfo = config.postgres_conninfo;
  if (conninfo.empty()) {
    PrivatePostgresOptions options;
    options.durability = config.durability;
    options.bin_dir = config.postgres_bin;
    options.cpus = config.postgres_cpus;
    options.max_connections = config.threads + 20;  // the sessions, the loader's and Show's
    auto started = PrivatePostgres::Start(options);
    if (!started.ok()) {
      return Status::FromCode(started.status().code(),
                              "cannot start a private PostgreSQL: " + started.status().message());
    }
    std::fprintf(stderr, "started a private PostgreSQL in %s (durability %s)\n", (*started)->dir().c_str(),
                 config.durability.c_str());
    conninfo = (*started)->conninfo();
    out.transport = "unix";
    out.private_postgres = std::move(*started);
  }
  auto opened = PostgresStore::Open(conninfo);
  if (!opened.ok()) return opened.status();
  std::string settings;
  for (const char* name : {"server_version", "fsync", "synchronous_commit", "full_page_writes"}) {
    auto value = (*opened)->Show(name);
    settings += fmt::format("{}\"{}\":\"{}\"", settings.empty() ? "" : ",", name, value.ok() ? *value : "?");
  }
  out.postgres_json = ",\"postgres\":{" + settings + "}";
  out.store = std::move(*opened);
  return out;
}

}  // namespace

StatusOr<OpenedStore> OpenStore(const StoreConfig& config) {
  if (config.kind == "postgres") return OpenPostgres(config);
  OpenedStore out;
  if (config.kind == "redis") {
    auto opened = RedisStore::Open(config.redis_address, {.timeout = std::chrono::milliseconds(10000)});
    if (!opened.ok()) return opened.status();
    out.search = "none";
    out.transport = (*opened)->address().host.empty() ? "unix" : "tcp";
    out.store = std::move(*opened);
    return out;
  }
  ClientOptions options = config.client;
  options.transports = {config.transport};
  options.timeout = std::chrono::milliseconds(10000);
  auto opened = Client::Open(options);
  if (!opened.ok()) return opened.status();
  out.search = options.search;
  out.transport = config.transport;
  out.client = opened->get();
  out.store = std::make_unique<CellStore>(std::move(*opened));
  return out;
}

}  // namespace cell::bench
