// One process of the SQL bank test (test/sql/bank_test.cc): its own SQLite connection and Cell client, running bank
// transfers as SQL transactions on the accounts table the test made, retried on SQLITE_BUSY, and auditing the total.
//
//   sql_bank_worker CLUSTER KEY_FILE PREFIX WORKER OTHER TRANSFERS ACCOUNTS SEED
//
// Each transfer is BEGIN; UPDATE accounts (debit); UPDATE accounts (credit); INSERT INTO ledger; COMMIT. Every few
// transfers it audits the sum of the balances twice: with a SELECT outside BEGIN (validated at its end), and inside a
// transaction that also writes a row (so its COMMIT validates the read). At the end it writes its done-marker, waits
// for the other worker's, and counts the other's transfers in the ledger. It prints:
//   audit_failed SUM WHERE        for each audit that saw a wrong total (none may)
//   committed N retries R audits A txn_audits T
//   sees_other N
#include <fmt/format.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>

#include "sql/cell_vtab.h"

namespace {

struct Worker {
  sqlite3* db = nullptr;
  int id = 0, other = 0, accounts = 0;
  int64_t total = 0;
  long retries = 0, audits = 0, txn_audits = 0;
  std::mt19937_64 rng;

  // SQLITE_OK, or the failed statement's code (and the message on stderr unless it is SQLITE_BUSY).
  int Exec(const std::string& sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) fmt::print(stderr, "worker {}: {}: {}\n", id, sql, err ? err : "");
    sqlite3_free(err);
    return rc;
  }
  // The integer a query returns, or the error code as a negative number.
  int64_t Query(const std::string& sql, int* rc) {
    sqlite3_stmt* stmt = nullptr;
    *rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
    int64_t v = 0;
    if (*rc == SQLITE_OK) {
      *rc = sqlite3_step(stmt);
      if (*rc == SQLITE_ROW) v = sqlite3_column_int64(stmt, 0);
      if (*rc == SQLITE_ROW) *rc = sqlite3_step(stmt);
      *rc = *rc == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    }
    sqlite3_finalize(stmt);
    return v;
  }
  void Backoff() { std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 3000)); }

  // One transfer, until it commits. False on an error other than SQLITE_BUSY.
  bool Transfer(int n) {
    const int from = static_cast<int>(rng() % accounts);
    const int to = (from + 1 + static_cast<int>(rng() % (accounts - 1))) % accounts;
    const int amount = 1 + static_cast<int>(rng() % 10);
    const std::string statements[] = {
        "BEGIN", fmt::format("UPDATE accounts SET balance = balance - {} WHERE id = {}", amount, from),
        fmt::format("UPDATE accounts SET balance = balance + {} WHERE id = {}", amount, to),
        fmt::format("INSERT INTO ledger VALUES ('w{}-{}', {}, {}, {}, {})", id, n, id, from, to, amount), "COMMIT"};
    while (true) {
      int rc = SQLITE_OK;
      for (const std::string& s : statements) {
        if ((rc = Exec(s)) != SQLITE_OK) break;
      }
      if (rc == SQLITE_OK) return true;
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);  // may say no transaction is active
      if (rc != SQLITE_BUSY) return false;
      ++retries;
      Backoff();
    }
  }

  // Both audits; false on an error other than SQLITE_BUSY.
  bool Audit(int n) {
    for (int attempt = 0;; ++attempt) {
      int rc = SQLITE_OK;
      const int64_t sum = Query("SELECT sum(balance) FROM accounts", &rc);
      if (rc == SQLITE_OK) {
        if (sum != total) fmt::print("audit_failed {} select\n", sum);
        ++audits;
        break;
      }
      if (rc != SQLITE_BUSY || attempt > 100) return false;
      Backoff();
    }
    for (int attempt = 0;; ++attempt) {
      int rc = Exec("BEGIN");
      const int64_t sum = rc == SQLITE_OK ? Query("SELECT sum(balance) FROM accounts", &rc) : 0;
      if (rc == SQLITE_OK) rc = Exec(fmt::format("INSERT INTO audits VALUES ('w{}-{}', {})", id, n, sum));
      if (rc == SQLITE_OK) rc = Exec("COMMIT");
      if (rc == SQLITE_OK) {
        if (sum != total) fmt::print("audit_failed {} transaction\n", sum);
        ++txn_audits;
        return true;
      }
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      if (rc != SQLITE_BUSY || attempt > 100) return false;
      Backoff();
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9) {
    fmt::print(stderr, "usage: {} CLUSTER KEY_FILE PREFIX WORKER OTHER TRANSFERS ACCOUNTS SEED\n", argv[0]);
    return 2;
  }
  const std::string cluster = argv[1], key_file = argv[2], prefix = argv[3];
  Worker w;
  w.id = std::atoi(argv[4]);
  w.other = std::atoi(argv[5]);
  const int transfers = std::atoi(argv[6]);
  w.accounts = std::atoi(argv[7]);
  w.rng.seed(std::strtoull(argv[8], nullptr, 10));
  w.total = int64_t{1000} * w.accounts;
  if (sqlite3_open(":memory:", &w.db) != SQLITE_OK || cell::sql::Register(w.db) != SQLITE_OK) return 1;
  const std::string where = fmt::format("cluster='{}', key_file='{}'", cluster, key_file);
  for (const auto& [table, schema] :
       {std::pair<std::string, std::string>{"accounts", "id INTEGER PRIMARY KEY, balance INTEGER"},
        {"ledger", "id TEXT PRIMARY KEY, worker INTEGER, src INTEGER, dst INTEGER, amount INTEGER"},
        {"audits", "id TEXT PRIMARY KEY, total INTEGER"}}) {
    if (w.Exec(fmt::format("CREATE VIRTUAL TABLE {} USING cell({}, prefix='{}-{}', schema='{}')", table, where, prefix,
                           table, schema)) != SQLITE_OK) {
      return 1;
    }
  }
  for (int n = 0; n < transfers; ++n) {
    if (!w.Transfer(n)) return 1;
    if (n % 10 == 9 && !w.Audit(n)) return 1;
  }
  fmt::print("committed {} retries {} audits {} txn_audits {}\n", transfers, w.retries, w.audits, w.txn_audits);
  fflush(stdout);
  while (w.Exec(fmt::format("INSERT INTO ledger VALUES ('done-{}', {}, -1, -1, 0)", w.id, w.id)) == SQLITE_BUSY) {
    w.Backoff();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int rc = SQLITE_OK;
  while (w.Query(fmt::format("SELECT count(*) FROM ledger WHERE id = 'done-{}'", w.other), &rc) != 1) {
    if (std::chrono::steady_clock::now() > deadline) return 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int64_t seen = -1;
  for (int attempt = 0; attempt < 100; ++attempt) {
    seen = w.Query(fmt::format("SELECT count(*) FROM ledger WHERE worker = {} AND src >= 0", w.other), &rc);
    if (rc == SQLITE_OK) break;
    w.Backoff();
  }
  fmt::print("sees_other {}\n", rc == SQLITE_OK ? seen : -1);
  sqlite3_close(w.db);
  return 0;
}
