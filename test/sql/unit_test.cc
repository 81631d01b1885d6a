// The SQL layer's pure parts, without a cluster: schema and option parsing, the planner's choices, and the key
// encodings and ranges checked against SQLite's own comparisons (a range may hold more keys than match, never fewer).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "sql/key_range.h"
#include "sql/row_codec.h"
#include "sql/scan_plan.h"
#include "sql/schema.h"
#include "sql/table_options.h"

namespace cell::sql {
namespace {

TEST(SqlSchema, ParsesColumnsKeysAndNotNull) {
  auto s = ParseSchema("id INTEGER PRIMARY KEY, \"full name\" TEXT NOT NULL, score real, photo BLOB, n INT");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->columns.size(), 5u);
  EXPECT_EQ(s->primary_key, 0);
  EXPECT_EQ(s->columns[1].name, "full name");
  EXPECT_TRUE(s->columns[1].not_null);
  EXPECT_EQ(s->columns[2].type, ColumnType::kReal);
  EXPECT_EQ(s->columns[4].type, ColumnType::kInteger);
  EXPECT_EQ(s->Find("FULL NAME"), 1);
  EXPECT_EQ(s->Declaration(),
            "CREATE TABLE x(\"id\" INTEGER PRIMARY KEY, \"full name\" TEXT, \"score\" REAL, \"photo\" BLOB, \"n\" "
            "INTEGER) WITHOUT ROWID");
  auto rowid = ParseSchema("a TEXT, b REAL");
  ASSERT_TRUE(rowid.ok());
  EXPECT_TRUE(rowid->has_rowid());
  EXPECT_EQ(rowid->Declaration(), "CREATE TABLE x(\"a\" TEXT, \"b\" REAL)");
}

TEST(SqlSchema, RefusesWhatItCannotStoreSayingWhy) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "no columns"},
      {"id REAL PRIMARY KEY", "a key is INTEGER or TEXT"},
      {"a INTEGER PRIMARY KEY, b TEXT PRIMARY KEY", "two PRIMARY KEY columns"},
      {"a VARCHAR(10)", "type 'VARCHAR(10)' is not supported"},
      {"a", "has no type"},
      {"a INTEGER, a TEXT", "declared twice"},
      {"a INTEGER, PRIMARY KEY(a)", "table constraints are not supported"},
      {"a INTEGER DEFAULT 3", "'DEFAULT' is not supported"},
      {"a INTEGER,, b TEXT", "empty column definition"},
      {"\"a TEXT", "unterminated quote"},
  };
  for (const auto& [text, why] : bad) {
    auto s = ParseSchema(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(s.status().message().find(why), std::string::npos) << text << ": " << s.status().message();
  }
}

TEST(SqlTableOptions, ParsesArgumentsAndRefusesBadOnes) {
  auto o = ParseTableOptions("t", {"cluster='zk://h:1/cell/x'", " schema = 'id INTEGER PRIMARY KEY, name TEXT' ",
                                   "key_file=\"/k\"", "index='name'"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->cluster, "zk://h:1/cell/x");
  EXPECT_EQ(o->key_file, "/k");
  EXPECT_EQ(o->prefix, "t");  // the table's name
  EXPECT_EQ(o->indexes, std::vector<int>{1});
  auto quoted = ParseTableOptions("t", {"cluster=tcp://h:1", "schema='a TEXT'", "prefix='it''s'"});
  ASSERT_TRUE(quoted.ok());
  EXPECT_EQ(quoted->prefix, "it's");
  EXPECT_EQ(quoted->search, "") << "the client's default";
  auto client = ParseTableOptions("t", {"cluster=tcp://h:1", "schema='a TEXT'", "search=client"});
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(client->search, "client");
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"schema='a TEXT'"}, "no cluster"},
      {{"cluster='c'"}, "no schema"},
      {{"cluster='c'", "schema='a TEXT'", "colour='red'"}, "unknown option 'colour'"},
      {{"cluster='c'", "cluster='d'", "schema='a TEXT'"}, "given twice"},
      {{"cluster='c'", "schema='a TEXT'", "index='b'"}, "names no column"},
      {{"cluster='c'", "schema='a TEXT PRIMARY KEY'", "index='a'"}, "needs no index"},
      {{"cluster='c'", "schema='a REAL PRIMARY KEY'"}, "a key is INTEGER or TEXT"},
      {{"cluster='c'", "schema='a TEXT'", "bare"}, "not an option=value pair"},
      {{"cluster='c", "schema='a TEXT'"}, "not one quoted string"},
      {{"cluster='c'", "schema='a TEXT'", "prefix='" + std::string(200, 'p') + "'"}, "at most 130"},
      {{"cluster='c'", "schema='a TEXT'", "search='sideways'"}, "search 'sideways' is not one of"},
  };
  for (const auto& [args, why] : bad) {
    auto r = ParseTableOptions("t", args);
    ASSERT_FALSE(r.ok()) << args.back();
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  }
}

// Planner input helpers: constraint (column, op, usable) and ORDER BY terms.
PlanInput Input(std::vector<PlanInput::Constraint> c, std::vector<PlanInput::OrderTerm> order = {}) {
  return {std::move(c), std::move(order)};
}
PlanInput::Constraint On(int column, int op, bool usable = true) { return {column, op, usable, true, false}; }

TEST(SqlScanPlan, PrefersAKeyLookupThenAnIndexThenARangeThenAFullScan) {
  Schema schema = *ParseSchema("id INTEGER PRIMARY KEY, name TEXT, n INTEGER");
  const std::vector<int> indexes = {1};
  auto eq = ChoosePlan(
      schema, indexes,
      Input({On(1, SQLITE_INDEX_CONSTRAINT_EQ), On(0, SQLITE_INDEX_CONSTRAINT_GT), On(0, SQLITE_INDEX_CONSTRAINT_EQ)}));
  EXPECT_EQ(eq.plan.kind, ScanPlan::Kind::kKeyEq);
  EXPECT_EQ(eq.argv, std::vector<int>{2});
  EXPECT_TRUE(eq.unique);
  auto index =
      ChoosePlan(schema, indexes, Input({On(0, SQLITE_INDEX_CONSTRAINT_GT), On(1, SQLITE_INDEX_CONSTRAINT_EQ)}));
  EXPECT_EQ(index.plan.kind, ScanPlan::Kind::kIndexEq);
  EXPECT_EQ(index.plan.index_column, 1);
  auto range = ChoosePlan(
      schema, indexes,
      Input({On(0, SQLITE_INDEX_CONSTRAINT_GE), On(2, SQLITE_INDEX_CONSTRAINT_EQ), On(0, SQLITE_INDEX_CONSTRAINT_LT)}));
  EXPECT_EQ(range.plan.kind, ScanPlan::Kind::kKeyRange);
  EXPECT_EQ(range.argv, (std::vector<int>{0, 2}));
  EXPECT_EQ(range.plan.lower, CompareOp::kGe);
  EXPECT_EQ(range.plan.upper, CompareOp::kLt);
  EXPECT_LT(eq.cost, index.cost);
  EXPECT_LT(index.cost, range.cost);
  auto full =
      ChoosePlan(schema, indexes, Input({On(2, SQLITE_INDEX_CONSTRAINT_EQ), On(0, SQLITE_INDEX_CONSTRAINT_EQ, false)}));
  EXPECT_EQ(full.plan.kind, ScanPlan::Kind::kFullScan);  // no usable constraint on the key or an index
  EXPECT_GT(full.cost, range.cost);
  // A non-BINARY collation, or an index on another column, is no help.
  PlanInput nocase = Input({On(1, SQLITE_INDEX_CONSTRAINT_EQ)});
  nocase.constraints[0].binary = false;
  EXPECT_EQ(ChoosePlan(schema, indexes, nocase).plan.kind, ScanPlan::Kind::kFullScan);
}

TEST(SqlScanPlan, ConsumesAnOrderByOnTheKeyAndPassesLimitOnlyThen) {
  Schema schema = *ParseSchema("name TEXT, n INTEGER");  // rowid table: the key is column -1
  const std::vector<int> indexes = {1};
  auto desc = ChoosePlan(
      schema, indexes, Input({On(-1, SQLITE_INDEX_CONSTRAINT_LE), On(0, SQLITE_INDEX_CONSTRAINT_LIMIT)}, {{-1, true}}));
  EXPECT_EQ(desc.plan.kind, ScanPlan::Kind::kKeyRange);
  EXPECT_TRUE(desc.order_consumed);
  EXPECT_TRUE(desc.plan.descending);
  EXPECT_TRUE(desc.plan.limit);
  EXPECT_EQ(desc.argv, (std::vector<int>{0, 1}));
  // Ordered by another column: SQLite sorts, so the LIMIT says nothing about how much to read.
  auto other = ChoosePlan(schema, indexes, Input({On(0, SQLITE_INDEX_CONSTRAINT_LIMIT)}, {{0, false}}));
  EXPECT_FALSE(other.order_consumed);
  EXPECT_FALSE(other.plan.limit);
  // An index range comes in index order; an IN list in several scans: neither consumes ORDER BY the key.
  auto index_range = ChoosePlan(schema, indexes, Input({On(1, SQLITE_INDEX_CONSTRAINT_GT)}, {{-1, false}}));
  EXPECT_EQ(index_range.plan.kind, ScanPlan::Kind::kIndexRange);
  EXPECT_FALSE(index_range.order_consumed);
  PlanInput in = Input({On(-1, SQLITE_INDEX_CONSTRAINT_EQ)}, {{-1, false}});
  in.constraints[0].in = true;
  auto in_plan = ChoosePlan(schema, indexes, in);
  EXPECT_EQ(in_plan.plan.kind, ScanPlan::Kind::kKeyEq);
  EXPECT_FALSE(in_plan.order_consumed);
  EXPECT_FALSE(in_plan.unique);
  auto index_eq = ChoosePlan(schema, indexes, Input({On(1, SQLITE_INDEX_CONSTRAINT_EQ)}, {{-1, true}}));
  EXPECT_TRUE(index_eq.order_consumed);  // one value's entries are in key order
}

TEST(SqlScanPlan, EncodesIntoIdxNumAndBack) {
  for (int kind = 0; kind <= 4; ++kind) {
    ScanPlan p;
    p.kind = static_cast<ScanPlan::Kind>(kind);
    p.index_column = kind >= 3 ? 1234 : -1;
    p.lower = kind % 2 ? CompareOp::kGt : CompareOp::kGe;
    p.upper = kind % 2 ? std::optional<CompareOp>() : CompareOp::kLe;
    p.descending = kind % 2;
    p.limit = kind > 1;
    p.offset = kind > 2;
    const ScanPlan q = ScanPlan::Decode(p.Encode());
    EXPECT_EQ(q.kind, p.kind);
    EXPECT_EQ(q.index_column, p.index_column);
    EXPECT_EQ(q.lower, p.lower);
    EXPECT_EQ(q.upper, p.upper);
    EXPECT_EQ(q.descending, p.descending);
    EXPECT_EQ(q.limit, p.limit);
    EXPECT_EQ(q.offset, p.offset);
  }
}

// SQLite itself, to ask how it compares values and to make sqlite3_value objects.
class SqliteOracle {
 public:
  SqliteOracle() { sqlite3_open(":memory:", &db_); }
  ~SqliteOracle() {
    sqlite3_finalize(stmt_);
    sqlite3_close(db_);
  }
  // The value of a literal (valid until the next call).
  sqlite3_value* Value(const std::string& literal) {
    sqlite3_finalize(stmt_);
    sqlite3_prepare_v2(db_, ("SELECT " + literal).c_str(), -1, &stmt_, nullptr);
    sqlite3_step(stmt_);
    return sqlite3_column_value(stmt_, 0);
  }
  // The rowids of table t whose column `column` satisfies "column op literal", as SQLite evaluates it.
  std::set<int64_t> Matching(const std::string& column, const std::string& op, const std::string& literal) {
    std::set<int64_t> out;
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db_, ("SELECT rowid FROM t WHERE " + column + " " + op + " " + literal).c_str(), -1, &s,
                       nullptr);
    while (sqlite3_step(s) == SQLITE_ROW) out.insert(sqlite3_column_int64(s, 0));
    sqlite3_finalize(s);
    return out;
  }
  void Exec(const std::string& sql) { sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr); }
  sqlite3* db() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

struct OpCase {
  const char* sql;
  CompareOp op;
};
const OpCase kOps[] = {{"=", CompareOp::kEq},
                       {">", CompareOp::kGt},
                       {">=", CompareOp::kGe},
                       {"<", CompareOp::kLt},
                       {"<=", CompareOp::kLe}};

bool InRange(const SuffixRange& r, const std::string& element) {
  if (r.empty) return false;
  return (!r.lower || *r.lower <= element) && (!r.upper || element < *r.upper);
}

// For each stored value and each constraint "col op literal": the element's place in the computed range against
// SQLite's verdict. Returns how many keys the range admitted that do not match (the rest must be exact).
int CheckRanges(SqliteOracle& sqlite, const std::string& column, ColumnType type, bool key,
                const std::vector<std::string>& stored, const std::vector<std::string>& literals) {
  sqlite.Exec("DROP TABLE IF EXISTS t");
  sqlite.Exec("CREATE TABLE t(" + column + " " + std::string(TypeName(type)) + ")");
  std::vector<std::string> elements;
  for (size_t i = 0; i < stored.size(); ++i) {
    sqlite.Exec("INSERT INTO t(rowid, " + column + ") VALUES (" + std::to_string(i + 1) + ", " + stored[i] + ")");
    SqlValue v = WithAffinity(sqlite.Value(stored[i]), type);
    elements.push_back(key ? EncodePrimaryKey(v) : EncodeIndexValue(v) + EncodePrimaryKey(SqlValue::Integer(i)));
  }
  int extra = 0;
  for (const std::string& literal : literals) {
    for (const OpCase& op : kOps) {
      const std::set<int64_t> match = sqlite.Matching(column, op.sql, literal);
      sqlite3_value* rhs = sqlite.Value(literal);
      const Narrowing n = key ? NarrowKey(type, op.op, rhs) : NarrowIndex(type, op.op, rhs);
      SuffixRange range;
      range.Apply(n);
      for (size_t i = 0; i < stored.size(); ++i) {
        const bool in = InRange(range, elements[i]);
        const bool matches = match.count(static_cast<int64_t>(i + 1)) != 0;
        EXPECT_TRUE(in || !matches) << column << " " << op.sql << " " << literal << " misses the stored " << stored[i];
        extra += in && !matches ? 1 : 0;
      }
    }
  }
  return extra;
}

TEST(SqlKeyRange, IntegerKeyRangesHoldEveryMatchingKeyAndExactlyThoseForIntegers) {
  SqliteOracle sqlite;
  const std::vector<std::string> keys = {"-9223372036854775808", "-5", "-1", "0", "1", "2", "3", "10",
                                         "9223372036854775807"};
  // Exact for integers (and text that reads as one).
  EXPECT_EQ(CheckRanges(sqlite, "id", ColumnType::kInteger, true, keys, {"-1", "0", "2", "11", "'3'", "2.0"}), 0);
  // Reals, text, blobs and NULL: never fewer keys than SQLite matches.
  CheckRanges(sqlite, "id", ColumnType::kInteger, true, keys,
              {"2.5", "-0.5", "1e19", "-1e19", "-9.3e18", "9.2233720368547758e18", "'abc'", "x'00'", "NULL", "'2.5'"});
}

TEST(SqlKeyRange, TextKeyRangesHoldEveryMatchingKey) {
  SqliteOracle sqlite;
  const std::vector<std::string> keys = {"''",  "'a'",  "'a' || char(0)", "'ab'",  "'b'",
                                         "'5'", "'10'", "x'00'",          "x'61'", "'zz'"};
  EXPECT_EQ(CheckRanges(sqlite, "k", ColumnType::kText, true, keys, {"'a'", "''", "'ab'", "'c'", "x'61'", "x''"}), 0);
  CheckRanges(sqlite, "k", ColumnType::kText, true, keys, {"5", "10", "2.5", "NULL", "'a' || char(0)"});
}

TEST(SqlKeyRange, IndexRangesHoldEveryMatchingEntry) {
  SqliteOracle sqlite;
  const std::vector<std::string> mixed = {"NULL", "-3",  "0",     "-0.0", "2", "2.5", "9007199254740993",
                                          "'x'",  "'7'", "x'01'", "1e300"};
  for (ColumnType type : {ColumnType::kInteger, ColumnType::kReal}) {
    CheckRanges(sqlite, "n", type, false, mixed,
                {"2", "2.0", "2.5", "-0.0", "'7'", "'x'", "'y'", "x'01'", "NULL", "9007199254740992", "1e300"});
  }
  const std::vector<std::string> texts = {"NULL", "''", "'a'", "'ab'", "'b'", "'12'", "x'00'"};
  CheckRanges(sqlite, "name", ColumnType::kText, false, texts, {"'a'", "'ab'", "''", "x'00'", "12", "NULL"});
  CheckRanges(sqlite, "b", ColumnType::kBlob, false, {"NULL", "x'00'", "x'0001'", "'a'", "3"},
              {"x'00'", "x''", "'a'", "3"});
}

// Every pair of values one key column may hold (integers; or texts and blobs in a TEXT key) compares as SQLite
// compares them, and decodes to itself.
void CheckOrder(SqliteOracle& sqlite, const std::vector<std::string>& values) {
  for (const std::string& a : values) {
    for (const std::string& b : values) {
      sqlite3_stmt* s = nullptr;
      sqlite3_prepare_v2(sqlite.db(), ("SELECT " + a + " < " + b).c_str(), -1, &s, nullptr);
      sqlite3_step(s);
      const bool less = sqlite3_column_int(s, 0) != 0;
      sqlite3_finalize(s);
      const std::string ea = EncodePrimaryKey(FromSqlite(sqlite.Value(a)));
      const std::string eb = EncodePrimaryKey(FromSqlite(sqlite.Value(b)));
      EXPECT_EQ(ea < eb, less) << a << " < " << b;
      SqlValue back;
      ASSERT_TRUE(DecodePrimaryKey(ea, &back).ok());
      EXPECT_EQ(EncodePrimaryKey(back), ea);
    }
  }
}

TEST(SqlRowCodec, KeyElementsSortAsSqliteOrdersTheValues) {
  SqliteOracle sqlite;
  CheckOrder(sqlite, {"-9223372036854775808", "-70000", "-1", "0", "1", "255", "256", "9223372036854775807"});
  CheckOrder(sqlite, {"''", "'a'", "'a' || char(0)", "'ab'", "'b'", "x''", "x'00'", "x'0000'", "x'01'"});
}

TEST(SqlRowCodec, RowsAndIndexEntriesRoundTripAndStayApart) {
  const KeyLayout layout("t");
  const std::vector<SqlValue> row = {SqlValue::Integer(7), SqlValue::Text("x"), SqlValue::Null(), SqlValue::Real(1.5),
                                     SqlValue::Blob(std::string("\0\1", 2))};
  std::vector<SqlValue> back(5);
  ASSERT_TRUE(DecodeRow(EncodeRow(row, 0), 5, 0, &back).ok());
  for (size_t i = 1; i < row.size(); ++i) EXPECT_EQ(EncodeIndexValue(back[i]), EncodeIndexValue(row[i])) << i;
  EXPECT_FALSE(DecodeRow(EncodeRow(row, 0), 6, 0, &back).ok());  // another schema
  const std::string pk = EncodePrimaryKey(SqlValue::Text("k"));
  const std::string entry = layout.IndexPrefix("name") + EncodeIndexValue(SqlValue::Text("x")) + pk;
  auto found = PrimaryKeyOfIndexEntry(entry, layout.IndexPrefix("name"));
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, pk);
  // Rows lie in [RowsBegin, RowsEnd); index entries and the table record do not.
  const std::string row_key = layout.RowKey(pk);
  EXPECT_TRUE(layout.RowsBegin() <= row_key && row_key < layout.RowsEnd());
  EXPECT_TRUE(entry < layout.RowsBegin());
  EXPECT_TRUE(layout.table_key() < layout.RowsBegin());
  EXPECT_EQ(layout.PrimaryKeyOf(row_key), pk);
}

}  // namespace
}  // namespace cell::sql
