// A real Cell cluster for the SQL tests (a ZooKeeper and cell-server processes, as test/txn/ starts them, with keys),
// and SQLite connections with the module registered.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sql/cell_vtab.h"
#include "test/membership/zk_harness.h"
#include "test/server/server_harness.h"
#include "test/sql/result_compare.h"

namespace cell::sql::testing {

// `servers` cell-server processes in ZooKeeper cluster /cell/<name>, by default with meganodes of 16 KiB so that rows
// spread over the servers through meganode splits (`meganode_size` "64MiB": one meganode holds every row).
class SqlCluster {
 public:
  void Start(const std::string& name, int servers, const std::string& meganode_size = "16KiB") {
    auto& zk = cell::testing::ZooKeeperHarness::Shared();
    ASSERT_FALSE(zk.connect().empty()) << zk.error();
    name_ = fmt::format("{}-{}", name, getpid());
    cluster_ = fmt::format("zk://{}/cell/{}", zk.connect(), name_);
    servers_.resize(servers);
    std::vector<std::thread> starting;
    for (int i = 0; i < servers; ++i) {
      starting.emplace_back([this, i, meganode_size] {
        std::vector<std::string> args = {"--listen=tcp://127.0.0.1:0",
                                         "--listen=shm://" + cell::testing::ShmPath(fmt::format("{}-{}", name_, i + 1)),
                                         "--membership=" + cluster_,
                                         fmt::format("--id={}", i + 1),
                                         "--workers=2",
                                         "--region-size=256MiB",
                                         "--meganode-size=" + meganode_size,
                                         meganode_size == "16KiB" ? "--meganodes=16384" : "--meganodes=16"};
        for (const std::string& a : cell::testing::ServerKeyArgs()) args.push_back(a);
        servers_[i] = cell::testing::StartServer(args);
      });
    }
    for (auto& t : starting) t.join();
    for (const auto& s : servers_) ASSERT_FALSE(s.ready.empty()) << "a cell-server did not start";
  }

  const std::string& cluster() const { return cluster_; }
  const std::string& key_file() const { return cell::testing::ClientKeyFile(); }
  // The module arguments naming this cluster and its key.
  std::string Where() const { return fmt::format("cluster='{}', key_file='{}'", cluster_, key_file()); }

 private:
  std::string name_, cluster_;
  std::vector<cell::testing::RunningServer> servers_;
};

// An in-memory SQLite database, with the cell module registered.
class Db {
 public:
  Db() {
    EXPECT_EQ(sqlite3_open(":memory:", &db_), SQLITE_OK);
    EXPECT_EQ(Register(db_), SQLITE_OK);
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* get() const { return db_; }
  Outcome Run(const std::string& sql) const { return testing::Run(db_, sql); }
  // Runs a statement that must succeed; its rows. Outside BEGIN, SQLITE_BUSY (Cell's optimistic transactions ask
  // for it, e.g. while a key stays locked by a transaction the servers' resolver has yet to end) runs it again.
  std::vector<Row> Must(const std::string& sql) const {
    Outcome o = Run(sql);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (o.code == SQLITE_BUSY && sqlite3_get_autocommit(db_) && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      o = Run(sql);
    }
    EXPECT_TRUE(o.ok()) << sql << ": " << o.error;
    return o.rows;
  }
  // The single value a statement returns (an integer), or -1.
  int64_t Int(const std::string& sql) const {
    std::vector<Row> rows = Must(sql);
    if (rows.size() != 1 || rows[0].size() != 1) return -1;
    return rows[0][0].type == SQLITE_INTEGER ? rows[0][0].integer : -1;
  }
  std::string Text(const std::string& sql) const {
    std::vector<Row> rows = Must(sql);
    return rows.size() == 1 && rows[0].size() == 1 ? rows[0][0].bytes : std::string();
  }
  // One counter of cell_sql_counters('table').
  uint64_t Counter(const std::string& table, const std::string& name) const {
    const std::string all = Text(fmt::format("SELECT cell_sql_counters('{}')", table));
    const size_t at = all.find(name + "=");
    return at == std::string::npos ? 0 : std::stoull(all.substr(at + name.size() + 1));
  }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace cell::sql::testing
