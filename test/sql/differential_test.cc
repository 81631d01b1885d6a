// The SQL differential test: seeded random SQL (test/sql/sql_generator.h) run against native SQLite tables in one
// in-memory database and Cell tables of the same schemas in another, against three real cell-server processes with
// 16 KiB meganodes (so rows spread over the servers and meganodes split while it runs). Every statement must succeed
// or fail in both, and every result set must be the same (row by row where the ORDER BY is total, as multisets
// otherwise); at the end of each seed every table is compared whole. The comparer itself is shown to fail on results
// that differ. SQLITE_BUSY, the module's answer to a conflict, is handled as a caller would: a statement outside
// BEGIN runs again, a transaction is rolled back (on both sides); both are counted and printed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <thread>

#include "test/sql/sql_generator.h"
#include "test/sql/sql_harness.h"

namespace cell::sql::testing {
namespace {

TEST(SqlComparer, RejectsResultsThatDiffer) {
  Outcome a, b;
  a.rows = {{Value::Int(1), Value::Text("x")}, {Value::Int(2), Value::Null()}};
  b = a;
  EXPECT_EQ(Compare(a, b, true), "");
  // Another value, another type (1.0 is not 1), a missing row, another order, one failure.
  b.rows[1][1] = Value::Text("");
  EXPECT_NE(Compare(a, b, true), "");
  b = a;
  b.rows[0][0] = Value::Real(1.0);
  EXPECT_NE(Compare(a, b, false), "");
  b = a;
  b.rows.pop_back();
  EXPECT_NE(Compare(a, b, false), "");
  b = a;
  std::swap(b.rows[0], b.rows[1]);
  EXPECT_NE(Compare(a, b, /*ordered=*/true), "");
  EXPECT_EQ(Compare(a, b, /*ordered=*/false), "");  // as multisets they agree
  b = a;
  b.code = SQLITE_CONSTRAINT;
  EXPECT_NE(Compare(a, b, false), "");
  a.code = SQLITE_ERROR;
  EXPECT_EQ(Compare(a, b, false), "");  // both failed
  // And on real databases: a native table and a Cell-less copy that differs in one row.
  Db x, y;
  x.Must("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
  y.Must("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
  x.Must("INSERT INTO t VALUES (1, 'a'), (2, 'b')");
  y.Must("INSERT INTO t VALUES (1, 'a'), (2, 'c')");
  EXPECT_NE(Compare(x.Run("SELECT * FROM t ORDER BY id"), y.Run("SELECT * FROM t ORDER BY id"), true), "");
}

class SqlDifferential : public ::testing::Test {
 protected:
  void TearDown() override {
    delete cluster_;
    cluster_ = nullptr;
  }

  struct Totals {
    size_t statements = 0, compared = 0, rows = 0, failed_both = 0, selects = 0;
    size_t busy_retries = 0, busy_rollbacks = 0;
  };

  // A statement on the Cell side. Outside BEGIN, one that gets SQLITE_BUSY has done nothing and runs again (a key
  // can stay locked until the servers' resolver ends a lock its transaction left behind, up to the transaction
  // timeout plus a second); inside, SQLITE_BUSY is returned.
  static Outcome RunCell(const Db& cell, const std::string& sql, bool in_txn, Totals* totals) {
    Outcome b = cell.Run(sql);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (b.code == SQLITE_BUSY && !in_txn && std::chrono::steady_clock::now() < give_up) {
      ++totals->busy_retries;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      b = cell.Run(sql);
    }
    return b;
  }

  // Runs `count` statements of seed `seed`; false after the first difference (reported).
  bool RunSeed(uint64_t seed, size_t count, Totals* totals) {
    Db native, cell;
    SqlGenerator gen(seed, fmt::format("diff{}-{}", seed, getpid()));
    std::deque<std::string> recent;  // the statements before a difference, to show
    std::string script;              // all of them, to reproduce it (written to a file)
    for (size_t i = 0; i < count; ++i) {
      const bool in_txn = sqlite3_get_autocommit(native.get()) == 0;
      Statement s = gen.Next(in_txn);
      if (s.effect == Statement::Effect::kCreate) s.sql = s.table.CellDdl(cluster_->Where());
      // Cell first: SQLITE_BUSY (an optimistic transaction that must run again) is what the module promises a
      // conflict gives; the native side then follows what the caller does about it.
      Outcome b = RunCell(cell, s.sql, in_txn, totals);
      if (b.code == SQLITE_BUSY && in_txn) {
        native.Run("ROLLBACK");  // the caller's answer to SQLITE_BUSY in a transaction, on both sides
        cell.Run("ROLLBACK");
        ++totals->busy_rollbacks;
        recent.push_back(s.sql + " -- SQLITE_BUSY: rolled back on both sides");
        script += s.sql + "; -- SQLITE_BUSY: rolled back on both sides\nROLLBACK;\n";
        continue;
      }
      Outcome a;
      if (s.effect == Statement::Effect::kCreate) {
        for (const std::string& ddl : s.native) a = native.Run(ddl);
      } else {
        a = native.Run(s.sql);
      }
      recent.push_back(s.sql);
      script += s.sql + ";\n";
      if (recent.size() > 40) recent.pop_front();
      ++totals->statements;
      const std::string diff = Compare(a, b, s.ordered);
      const bool same_txn = sqlite3_get_autocommit(native.get()) == sqlite3_get_autocommit(cell.get());
      if (!diff.empty() || !same_txn) {
        std::string history;
        for (const std::string& r : recent) history += "  " + r + ";\n";
        const std::string file = fmt::format("{}/sql-differential-seed{}.sql", ::testing::TempDir(), seed);
        if (FILE* f = fopen(file.c_str(), "w")) {
          fputs(script.c_str(), f);
          fclose(f);
        }
        ADD_FAILURE() << "seed " << seed << ", statement " << i << ": " << s.sql << "\n"
                      << (diff.empty() ? "one database is in a transaction and the other not" : diff)
                      << "\nlast statements:\n"
                      << history << "all statements of the seed (Cell side): " << file;
        return false;
      }
      ++totals->compared;
      totals->rows += a.rows.size();
      totals->failed_both += a.ok() ? 0 : 1;
      totals->selects += s.sql.rfind("SELECT", 0) == 0 ? 1 : 0;
      if (a.ok()) gen.Applied(s);
    }
    if (sqlite3_get_autocommit(native.get()) == 0) {
      native.Must("COMMIT");
      cell.Must("COMMIT");
    }
    for (const TableSpec& t : gen.tables()) {
      const std::string diff = Compare(native.Run(t.SelectAll()), cell.Run(t.SelectAll()), true);
      if (!diff.empty()) {
        ADD_FAILURE() << "seed " << seed << ": table " << t.name << " differs at the end: " << diff;
        return false;
      }
      totals->rows += native.Run(t.SelectAll()).rows.size();
      ++totals->compared;
    }
    return true;
  }

  SqlCluster* cluster_ = nullptr;

  // Seeds first_seed.. of `statements` each, on a cluster of three servers with meganodes of `meganode_size`.
  void RunSeeds(const std::string& meganode_size, uint64_t first_seed) {
    cluster_ = new SqlCluster;
    cluster_->Start("sql-differential-" + meganode_size, 3, meganode_size);
    const auto start = std::chrono::steady_clock::now();
    Totals totals;
    for (uint64_t seed = first_seed; seed < first_seed + kSeeds; ++seed) {
      if (!RunSeed(seed, kStatements, &totals)) break;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(
        "SQL differential: {} statements ran, {} outcomes compared ({} SELECTs, {} failed on both sides), {} "
        "rows compared, in {:.1f} s; SQLITE_BUSY: {} statements run again, {} transactions rolled back\n",
        totals.statements, totals.compared, totals.selects, totals.failed_both, totals.rows, seconds,
        totals.busy_retries, totals.busy_rollbacks);
    EXPECT_GE(totals.statements, kSeeds * kStatements);
    EXPECT_GT(totals.selects, totals.statements / 3);
  }

  // Two tests of 3 x 2,000 statements each: 12,000 statements a run.
  static constexpr size_t kSeeds = 3, kStatements = 2000;
};

// Meganodes of 16 KiB: tables spread over the three servers, and meganodes split (onto other servers) while
// statements run, bulk loads of 200 rows especially.
TEST_F(SqlDifferential, RandomSqlGivesTheSameResultsOnCellAsOnNativeSqliteWhileMeganodesSplit) { RunSeeds("16KiB", 1); }

// One meganode of 64 MiB per server holds everything: the SQL layer alone, with no split under it.
TEST_F(SqlDifferential, RandomSqlGivesTheSameResultsOnCellAsOnNativeSqliteInOneMeganode) { RunSeeds("64MiB", 101); }

}  // namespace
}  // namespace cell::sql::testing
