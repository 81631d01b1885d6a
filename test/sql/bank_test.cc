// Two processes (test/sql/bank_worker.cc), each with its own SQLite connection and Cell client, run concurrent bank
// transfers as SQL transactions on one cluster of three real servers, retrying on SQLITE_BUSY. The total balance
// holds in every audit and at the end, the ledger accounts for every balance (no transfer half applied), and each
// process sees every transfer the other committed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <sstream>

#include "test/child_process.h"
#include "test/sql/sql_harness.h"

namespace cell::sql::testing {
namespace {

using namespace std::chrono_literals;

// The number after `word` in `text`, or -1.
int64_t After(const std::string& text, const std::string& word) {
  const size_t at = text.find(word + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + word.size() + 1));
}

TEST(SqlBank, TwoProcessesTransferConcurrentlyAndTheTotalHolds) {
  SqlCluster cluster;
  cluster.Start("sql-bank", 3);
  constexpr int kAccounts = 6, kTransfers = 300;
  const std::string prefix = fmt::format("bank-{}", getpid());
  Db db;
  db.Must(
      fmt::format("CREATE VIRTUAL TABLE accounts USING cell({}, prefix='{}-accounts', "
                  "schema='id INTEGER PRIMARY KEY, balance INTEGER')",
                  cluster.Where(), prefix));
  db.Must(
      fmt::format("WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < {}) "
                  "INSERT INTO accounts SELECT i, 1000 FROM s",
                  kAccounts - 1));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<cell::testing::ChildProcess>> workers;
  for (int w = 1; w <= 2; ++w) {
    workers.push_back(std::make_unique<cell::testing::ChildProcess>(std::vector<std::string>{
        SQL_BANK_WORKER, cluster.cluster(), cluster.key_file(), prefix, std::to_string(w), std::to_string(3 - w),
        std::to_string(kTransfers), std::to_string(kAccounts), std::to_string(w * 7919)}));
    ASSERT_TRUE(workers.back()->ok());
  }
  std::string out[2];
  for (int w = 0; w < 2; ++w) {
    out[w] = workers[w]->ReadAll(300s);
    EXPECT_EQ(workers[w]->Wait(10s), 0) << "worker " << w + 1 << ":\n" << out[w];
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int w = 0; w < 2; ++w) {
    fmt::print("worker {}: {}", w + 1, out[w]);
    EXPECT_EQ(out[w].find("audit_failed"), std::string::npos) << out[w];
    EXPECT_EQ(After(out[w], "committed"), kTransfers) << out[w];
    EXPECT_GT(After(out[w], "txn_audits"), 0) << out[w];
    // Each sees all of the other's committed transfers.
    EXPECT_EQ(After(out[w], "sees_other"), kTransfers) << out[w];
  }
  fmt::print("2 x {} transfers in {:.1f} s ({} + {} retries on SQLITE_BUSY)\n", kTransfers, seconds,
             After(out[0], "retries"), After(out[1], "retries"));
  // The end state: the total, and every balance as the ledger says.
  db.Must(
      fmt::format("CREATE VIRTUAL TABLE ledger USING cell({}, prefix='{}-ledger', "
                  "schema='id TEXT PRIMARY KEY, worker INTEGER, src INTEGER, dst INTEGER, amount INTEGER')",
                  cluster.Where(), prefix));
  EXPECT_EQ(db.Int("SELECT sum(balance) FROM accounts"), 1000 * kAccounts);
  EXPECT_EQ(db.Int("SELECT count(*) FROM ledger WHERE src >= 0"), 2 * kTransfers);
  std::map<int64_t, int64_t> expected;
  for (int i = 0; i < kAccounts; ++i) expected[i] = 1000;
  for (const Row& r : db.Must("SELECT src, dst, amount FROM ledger WHERE src >= 0")) {
    expected[r[0].integer] -= r[2].integer;
    expected[r[1].integer] += r[2].integer;
  }
  for (const Row& r : db.Must("SELECT id, balance FROM accounts")) {
    EXPECT_EQ(r[1].integer, expected[r[0].integer]) << "account " << r[0].integer;
  }
}

}  // namespace
}  // namespace cell::sql::testing
