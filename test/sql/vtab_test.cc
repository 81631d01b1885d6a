// The Cell virtual table against three real cell-server processes: what xBestIndex pushes down (counted, and as
// EXPLAIN QUERY PLAN shows it), secondary indexes against SQLite's own, transactions (conflicts are SQLITE_BUSY; a
// statement that fails halfway leaves nothing of itself), errors for bad input, DROP TABLE, and the loadable
// extension in the sqlite3 shell.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <set>

#include "cell/client.h"
#include "sql/client_registry.h"
#include "sql/row_codec.h"
#include "test/sql/sql_harness.h"
#include "test/temp_dir.h"

namespace cell::sql::testing {
namespace {

class SqlVtab : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new SqlCluster;
    cluster_->Start("sql-vtab", 3);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  // CREATE VIRTUAL TABLE `name` on the cluster, under a prefix of this test's own (or `prefix`).
  static std::string Create(const std::string& name, const std::string& schema, const std::string& extra = "",
                            std::string prefix = "") {
    if (prefix.empty()) {
      prefix = fmt::format("{}-{}-{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), name, getpid());
    }
    return fmt::format("CREATE VIRTUAL TABLE {} USING cell({}, prefix='{}', schema='{}'{})", name, cluster_->Where(),
                       prefix, schema, extra);
  }

  static std::string Plan(const Db& db, const std::string& select) {
    std::string plan;
    for (const Row& r : db.Must("EXPLAIN QUERY PLAN " + select)) plan += r.back().bytes + "\n";
    return plan;
  }

  static SqlCluster* cluster_;
};

SqlCluster* SqlVtab::cluster_ = nullptr;

TEST_F(SqlVtab, AKeyLookupIsOneGetAndRangesAreIteratorsInKeyOrder) {
  Db db;
  db.Must(Create("t", "id INTEGER PRIMARY KEY, name TEXT, score REAL", ", index='name'"));
  db.Must(
      "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 50) "
      "INSERT INTO t SELECT i, 'n' || (i % 7), i / 4.0 FROM s");
  const auto counters = [&] {
    return std::make_tuple(db.Counter("t", "gets"), db.Counter("t", "scans"), db.Counter("t", "index_scans"));
  };
  auto [gets, scans, index_scans] = counters();
  // A point lookup: one Get, no iterator.
  auto rows = db.Must("SELECT id, name FROM t WHERE id = 7");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][1].bytes, "n0");
  EXPECT_EQ(counters(), std::make_tuple(gets + 1, scans, index_scans));
  EXPECT_NE(Plan(db, "SELECT * FROM t WHERE id = 7").find("VIRTUAL TABLE INDEX 1:key ="), std::string::npos);
  // An IN list: a Get per value.
  EXPECT_EQ(db.Must("SELECT id FROM t WHERE id IN (3, 5, 700)").size(), 2u);
  EXPECT_EQ(counters(), std::make_tuple(gets + 4, scans, index_scans));
  // A range, descending: one iterator, already in order (no sort step), LIMIT passed on.
  const std::string range = "SELECT id FROM t WHERE id >= 10 AND id < 20 ORDER BY id DESC LIMIT 4";
  rows = db.Must(range);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0][0].integer, 19);
  EXPECT_EQ(rows[3][0].integer, 16);
  EXPECT_EQ(counters(), std::make_tuple(gets + 4, scans + 1, index_scans));
  const std::string plan = Plan(db, range);
  EXPECT_NE(plan.find("key >= < desc limit"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("TEMP B-TREE"), std::string::npos) << plan;
  // The whole table backwards, across several pages of the iterator.
  rows = db.Must("SELECT id FROM t ORDER BY id DESC");
  ASSERT_EQ(rows.size(), 50u);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i][0].integer, 50 - static_cast<int64_t>(i));
  // The index: one iterator over its entries, a Get per row.
  std::tie(gets, scans, index_scans) = counters();
  EXPECT_EQ(db.Must("SELECT id FROM t WHERE name = 'n3'").size(), 7u);
  EXPECT_EQ(counters(), std::make_tuple(gets + 7, scans, index_scans + 1));
  EXPECT_NE(Plan(db, "SELECT id FROM t WHERE name = 'n3'").find("index name ="), std::string::npos);
  // A text key: the same.
  db.Must(Create("u", "k TEXT PRIMARY KEY, v INTEGER"));
  db.Must("INSERT INTO u VALUES ('apple', 1), ('banana', 2), ('cherry', 3)");
  EXPECT_EQ(db.Must("SELECT v FROM u WHERE k = 'banana'")[0][0].integer, 2);
  EXPECT_EQ(db.Counter("u", "gets"), 4u);  // three inserts checked their key, then the lookup
  EXPECT_EQ(db.Counter("u", "scans"), 0u);
  rows = db.Must("SELECT k FROM u WHERE k > 'apple' ORDER BY k DESC");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0].bytes, "cherry");
}

TEST_F(SqlVtab, ASecondaryIndexAnswersLikeANativeIndexThroughUpdates) {
  Db native, cell;
  native.Must("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, n INTEGER)");
  native.Must("CREATE INDEX t_name ON t(name)");
  native.Must("CREATE INDEX t_n ON t(n)");
  const std::string prefix = fmt::format("index-{}", getpid());
  cell.Must(Create("t", "id INTEGER PRIMARY KEY, name TEXT, n INTEGER", ", index='name', index='n'", prefix));
  std::mt19937_64 rng(7);
  const auto name = [&] { return rng() % 8 == 0 ? std::string("NULL") : fmt::format("'v{}'", rng() % 6); };
  const auto n = [&] {
    return rng() % 9 == 0 ? std::string("NULL") : std::to_string(static_cast<int>(rng() % 12) - 3);
  };
  size_t lookups = 0;
  for (int round = 0; round < 60; ++round) {
    std::vector<std::string> writes;
    for (int i = 0; i < 6; ++i) {
      const int id = static_cast<int>(rng() % 40);
      switch (rng() % 4) {
        case 0:
          writes.push_back(fmt::format("INSERT OR REPLACE INTO t VALUES ({}, {}, {})", id, name(), n()));
          break;
        case 1:
          writes.push_back(fmt::format("UPDATE t SET name = {} WHERE id = {}", name(), id));
          break;
        case 2:
          writes.push_back(fmt::format("UPDATE t SET n = n + 1, name = {} WHERE n = {}", name(), n()));
          break;
        default:
          writes.push_back(fmt::format("DELETE FROM t WHERE id = {}", id));
      }
    }
    if (round % 3 == 0) writes.insert(writes.begin(), "BEGIN");
    if (round % 3 == 0) writes.push_back("COMMIT");
    for (const std::string& w : writes) ASSERT_EQ(Compare(native.Run(w), cell.Run(w), false), "") << w;
    for (const std::string& q :
         {fmt::format("SELECT * FROM t WHERE name = {}", name()), fmt::format("SELECT * FROM t WHERE n = {}", n()),
          fmt::format("SELECT * FROM t WHERE n BETWEEN {} AND {}", n(), n()),
          fmt::format("SELECT id FROM t WHERE n > {}", n()),
          fmt::format("SELECT * FROM t WHERE name > {} AND name < 'v4'", name()),
          std::string("SELECT count(*) FROM t WHERE name IS NULL")}) {
      ASSERT_EQ(Compare(native.Run(q), cell.Run(q), false), "") << q;
      ++lookups;
    }
  }
  EXPECT_GT(cell.Counter("t", "index_scans"), lookups / 2);
  // Every index entry stands for a row, and every row has its entries: read the keys themselves.
  ClientOptions options;
  options.cluster = cluster_->cluster();
  options.key_file = cluster_->key_file();
  auto client = Client::Open(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const KeyLayout layout(prefix);
  for (const char* column : {"name", "n"}) {
    std::set<std::string> expected, found;
    for (const Row& r : native.Must(fmt::format("SELECT id, {} FROM t", column))) {
      SqlValue v = r[1].type == SQLITE_NULL      ? SqlValue::Null()
                   : r[1].type == SQLITE_INTEGER ? SqlValue::Integer(r[1].integer)
                                                 : SqlValue::Text(r[1].bytes);
      expected.insert(layout.IndexPrefix(column) + EncodeIndexValue(v) +
                      EncodePrimaryKey(SqlValue::Integer(r[0].integer)));
    }
    std::vector<std::pair<std::string, std::string>> pairs;
    ASSERT_TRUE((*client)->Scan(layout.IndexPrefix(column), layout.IndexEnd(column), 10000, &pairs).ok());
    for (const auto& kv : pairs) found.insert(kv.first);
    EXPECT_EQ(found, expected) << "the index on " << column;
  }
}

TEST_F(SqlVtab, BadInputGetsClearErrorsAndAppliesNothing) {
  Db db;
  const std::vector<std::pair<std::string, std::string>> bad_tables = {
      {"CREATE VIRTUAL TABLE a USING cell(schema='id INTEGER PRIMARY KEY')", "no cluster"},
      {"CREATE VIRTUAL TABLE a USING cell(" + cluster_->Where() + ", schema='id INTEGER PRIMARY KEY', colour='red')",
       "unknown option 'colour'"},
      {"CREATE VIRTUAL TABLE a USING cell(" + cluster_->Where() + ", schema='id REAL PRIMARY KEY')",
       "a key is INTEGER or TEXT"},
      {"CREATE VIRTUAL TABLE a USING cell(" + cluster_->Where() + ", schema='id INTEGER, id TEXT')", "declared twice"},
      {"CREATE VIRTUAL TABLE a USING cell(" + cluster_->Where() + ", schema='id INTEGER', index='nope')",
       "index='nope' names no column"},
      {"CREATE VIRTUAL TABLE a USING cell(cluster='tcp://127.0.0.1:1', schema='id INTEGER')", "cannot open cluster"},
  };
  for (const auto& [sql, why] : bad_tables) {
    Outcome o = db.Run(sql);
    EXPECT_FALSE(o.ok()) << sql;
    EXPECT_NE(o.error.find(why), std::string::npos) << sql << ": " << o.error;
    EXPECT_NE(o.error.find("cell table a"), std::string::npos) << o.error;
  }
  EXPECT_FALSE(db.Run("SELECT * FROM a").ok());  // no such table
  db.Must(Create("t", "k TEXT PRIMARY KEY, name TEXT, photo BLOB", ", index='name'"));
  db.Must("INSERT INTO t VALUES ('a', 'x', NULL)");
  const std::string long_text = std::string(300, 'k');
  const std::vector<std::tuple<std::string, int, std::string>> bad_rows = {
      {"INSERT INTO t VALUES ('b', 'y', NULL), ('" + long_text + "', 'z', NULL)", SQLITE_TOOBIG, "key column k"},
      {"INSERT INTO t VALUES ('c', '" + long_text + "', NULL)", SQLITE_TOOBIG, "indexed column name"},
      {"INSERT INTO t VALUES ('d', 'w', zeroblob(1100000))", SQLITE_TOOBIG, "over Cell's limit of 1048576 bytes"},
      {"INSERT INTO t VALUES (NULL, 'v', NULL)", SQLITE_CONSTRAINT, "NOT NULL constraint failed: t.k"},
      {"INSERT INTO t VALUES ('a', 'again', NULL)", SQLITE_CONSTRAINT, "UNIQUE constraint failed: t.k"},
      {"UPDATE t SET k = '" + long_text + "' WHERE k = 'a'", SQLITE_TOOBIG, "key column k"},
  };
  for (const auto& [sql, code, why] : bad_rows) {
    Outcome o = db.Run(sql);
    EXPECT_EQ(o.code & 0xff, code) << sql.substr(0, 80) << ": " << o.error;
    EXPECT_NE(o.error.find(why), std::string::npos) << o.error;
  }
  // Nothing of those applied: the one row, unchanged, and its one index entry.
  EXPECT_EQ(db.Int("SELECT count(*) FROM t"), 1);
  EXPECT_EQ(db.Text("SELECT name FROM t WHERE k = 'a'"), "x");
  EXPECT_EQ(db.Int("SELECT count(*) FROM t WHERE name = 'y'"), 0);
  db.Must(Create("i", "id INTEGER PRIMARY KEY, v TEXT"));
  Outcome mismatch = db.Run("INSERT INTO i VALUES ('abc', 'x')");
  EXPECT_EQ(mismatch.code, SQLITE_MISMATCH) << mismatch.error;
  EXPECT_NE(mismatch.error.find("datatype mismatch"), std::string::npos) << mismatch.error;
}

TEST_F(SqlVtab, AConflictingCommitIsBusyAndAppliesNothing) {
  Db a, b;
  const std::string prefix = fmt::format("conflict-{}", getpid());
  a.Must(Create("acct", "id INTEGER PRIMARY KEY, bal INTEGER", "", prefix));
  b.Must(Create("acct", "id INTEGER PRIMARY KEY, bal INTEGER", "", prefix));
  a.Must("INSERT INTO acct VALUES (1, 100), (2, 100), (3, 100)");
  // A write-write conflict: the second commit fails, and A's update is gone.
  a.Must("BEGIN");
  a.Must("UPDATE acct SET bal = bal + 1 WHERE id = 1");
  b.Must("BEGIN");
  b.Must("UPDATE acct SET bal = bal + 10 WHERE id = 1");
  b.Must("COMMIT");
  Outcome commit = a.Run("COMMIT");
  EXPECT_EQ(commit.code, SQLITE_BUSY) << commit.error;
  EXPECT_NE(commit.error.find("run it again"), std::string::npos) << commit.error;
  a.Run("ROLLBACK");
  EXPECT_EQ(a.Int("SELECT bal FROM acct WHERE id = 1"), 110);
  // A read before the first write is validated too: A read 2, B changed it, A's transaction must not commit.
  a.Must("BEGIN");
  EXPECT_EQ(a.Int("SELECT bal FROM acct WHERE id = 2"), 100);
  b.Must("UPDATE acct SET bal = 0 WHERE id = 2");
  a.Must("UPDATE acct SET bal = 200 WHERE id = 3");
  EXPECT_EQ(a.Run("COMMIT").code, SQLITE_BUSY);
  a.Run("ROLLBACK");
  EXPECT_EQ(b.Int("SELECT bal FROM acct WHERE id = 3"), 100);
  // And the two connections see each other's committed rows.
  b.Must("INSERT INTO acct VALUES (4, 4)");
  EXPECT_EQ(a.Int("SELECT sum(bal) FROM acct"), 214);
  EXPECT_GE(a.Counter("acct", "busy"), 2u);
}

TEST_F(SqlVtab, AStatementThatFailsHalfwayLeavesNothingOfItselfAndSavepointsRollBack) {
  Db db;
  db.Must(Create("t", "id INTEGER PRIMARY KEY, v TEXT", ", index='v'"));
  db.Must("BEGIN");
  db.Must("INSERT INTO t VALUES (1, 'a')");
  EXPECT_EQ(db.Run("INSERT INTO t VALUES (2, 'b'), (3, 'c'), (1, 'dup')").code & 0xff, SQLITE_CONSTRAINT);
  EXPECT_EQ(db.Int("SELECT count(*) FROM t"), 1);  // still in the transaction, 2 and 3 undone
  db.Must("SAVEPOINT s");
  db.Must("INSERT INTO t VALUES (5, 'e')");
  db.Must("UPDATE t SET v = 'changed' WHERE id = 1");
  db.Must("ROLLBACK TO s");
  db.Must("INSERT INTO t VALUES (6, 'f')");
  db.Must("RELEASE s");
  db.Must("COMMIT");
  auto rows = db.Must("SELECT id, v FROM t ORDER BY id");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][1].bytes, "a");
  EXPECT_EQ(rows[1][0].integer, 6);
  EXPECT_EQ(db.Int("SELECT count(*) FROM t WHERE v = 'b' OR v = 'changed' OR v = 'e'"), 0);  // nor in the index
  // Outside BEGIN, the statement is the transaction.
  EXPECT_NE(db.Run("INSERT INTO t VALUES (7, 'g'), (6, 'dup')").code, SQLITE_OK);
  EXPECT_EQ(db.Int("SELECT count(*) FROM t"), 2);
  db.Must("INSERT OR IGNORE INTO t VALUES (7, 'g'), (6, 'dup')");
  db.Must("INSERT OR REPLACE INTO t VALUES (1, 'replaced')");
  EXPECT_EQ(db.Text("SELECT group_concat(v, ',') FROM (SELECT v FROM t ORDER BY id)"), "replaced,f,g");
}

TEST_F(SqlVtab, DropTableKeepsTheRowsAndAPrefixHoldsOneDefinition) {
  Db db;
  const std::string prefix = fmt::format("drop-{}", getpid());
  db.Must(Create("t", "id INTEGER PRIMARY KEY, v TEXT", "", prefix));
  db.Must("INSERT INTO t VALUES (1, 'kept')");
  db.Must("DROP TABLE t");
  db.Must(Create("again", "id INTEGER PRIMARY KEY, v TEXT", "", prefix));
  EXPECT_EQ(db.Text("SELECT v FROM again WHERE id = 1"), "kept");
  Outcome other = db.Run(Create("other", "id INTEGER PRIMARY KEY, v BLOB", "", prefix));
  EXPECT_FALSE(other.ok());
  EXPECT_NE(other.error.find("already holds a table defined as"), std::string::npos) << other.error;
  Outcome indexed = db.Run(Create("indexed", "id INTEGER PRIMARY KEY, v TEXT", ", index='v'", prefix));
  EXPECT_FALSE(indexed.ok()) << "an index the rows under the prefix do not have";
}

TEST_F(SqlVtab, ATablesSearchOptionPicksTheSideItsReadsSearch) {
  for (const std::string side : {"server", "client"}) {
    Db db;
    db.Must(Create("t", "id INTEGER PRIMARY KEY, name TEXT", fmt::format(", search='{}'", side), "search-" + side));
    db.Must("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')");
    // The table's client, as the module shares it: one per cluster, key file and search mode.
    auto client = SharedClient(cluster_->cluster(), cluster_->key_file(), side);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    const Client::Stats before = (*client)->stats();
    for (int i = 0; i < 20; ++i) db.Must(fmt::format("SELECT name FROM t WHERE id = {}", 1 + i % 3));
    const Client::Stats after = (*client)->stats();
    const uint64_t server = after.server_searches - before.server_searches;
    const uint64_t client_side = after.client_searches - before.client_searches;
    EXPECT_EQ(side == "server" ? client_side : server, 0u) << side;
    EXPECT_GE(side == "server" ? server : client_side, 20u) << side;
  }
}

TEST_F(SqlVtab, AScanOutsideATransactionIsValidatedInChunks) {
  Db db;
  db.Must(Create("big", "id INTEGER PRIMARY KEY, v INTEGER"));
  for (int chunk = 0; chunk < 9; ++chunk) {
    db.Must(
        fmt::format("WITH RECURSIVE s(i) AS (SELECT {} UNION ALL SELECT i + 1 FROM s WHERE i < {}) "
                    "INSERT INTO big SELECT i, i % 10 FROM s",
                    chunk * 1000, chunk * 1000 + 999));
  }
  const uint64_t before = db.Counter("big", "validations");
  EXPECT_EQ(db.Int("SELECT count(*) FROM big"), 9000);
  EXPECT_EQ(db.Int("SELECT sum(v) FROM big"), 9000 * 45 / 10);
  EXPECT_EQ(db.Counter("big", "validations"), before + 4);  // two chunks each
  EXPECT_EQ(db.Int("SELECT count(*) FROM (SELECT id FROM big ORDER BY id DESC)"), 9000);
}

#ifdef CELL_SQL_EXTENSION  // not in sanitizer builds: the sqlite3 shell cannot load an instrumented library
TEST_F(SqlVtab, TheLoadableExtensionWorksInTheSqliteShell) {
  const std::string script = cell::testing::ProcessDir() + "/shell.sql";
  FILE* f = fopen(script.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::string extension = CELL_SQL_EXTENSION;
  extension = extension.substr(0, extension.size() - 3);  // .load adds the .so
  fmt::print(f,
             ".load {}\n"
             "CREATE VIRTUAL TABLE t USING cell({}, prefix='shell-{}', schema='id INTEGER PRIMARY KEY, name TEXT');\n"
             "BEGIN;\nINSERT INTO t VALUES (1, 'one'), (2, 'two');\nCOMMIT;\n"
             "SELECT id || ':' || name FROM t ORDER BY id DESC;\n",
             extension, cluster_->Where(), getpid());
  fclose(f);
  FILE* out = popen(fmt::format("sqlite3 :memory: < {} 2>&1", script).c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string text;
  char buf[512];
  while (fgets(buf, sizeof(buf), out) != nullptr) text += buf;
  EXPECT_EQ(pclose(out), 0) << text;
  EXPECT_EQ(text, "2:two\n1:one\n");
}
#endif  // CELL_SQL_EXTENSION

}  // namespace
}  // namespace cell::sql::testing
