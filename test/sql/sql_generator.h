// A seeded generator of random SQL for the differential test: CREATE and DROP of tables, INSERT (OR IGNORE, OR
// REPLACE, with and without keys), UPDATE (of columns and of the key), DELETE, point and range SELECTs with ORDER BY
// ASC or DESC and LIMIT/OFFSET, aggregates (COUNT, SUM, TOTAL, AVG, MIN, MAX), GROUP BY, joins, and BEGIN, COMMIT,
// ROLLBACK, SAVEPOINT, ROLLBACK TO, RELEASE. Each statement runs as it is against a native SQLite table and against a
// Cell table of the same schema (only CREATE differs), so their outcomes must be the same.
//
// Values come from small domains, so that keys collide (constraint errors, OR REPLACE), indexed values repeat, and
// ranges meet; they mix types the way SQLite's affinity rules care about ('12' into an INTEGER column, 3.0 into an
// INTEGER key, 5 into a TEXT key, 'x' into an INTEGER column). REALs are multiples of 0.25 of modest size, so sums
// are exact whatever order the rows are added in. Statements whose result would depend on an unspecified order are
// not generated (LIMIT only under a total ORDER BY; a key changed only in one row at a time). Bulk loads of 200 rows
// (keys outside the small domain, which writes keep off) grow tables to hundreds of rows; transactions stay within
// Cell's limits of keys read and written per transaction (cell/transaction.h).
#pragma once

#include <fmt/format.h>

#include <random>
#include <string>
#include <vector>

namespace cell::sql::testing {

struct TableSpec {
  enum class Key { kInteger, kText, kRowid };
  std::string name;
  std::string prefix;  // unique in the cluster
  Key key = Key::kInteger;
  std::vector<std::string> indexes;  // among name, n, score
  int bulk_rows = 0;                 // rows loaded by Bulk(), keys from 1000 (integers) or 'zz0000' (text)

  // A condition true of the small-domain rows only: writes keep off the bulk rows, so that no transaction
  // writes more than Cell's kMaxTransactionWrites keys.
  std::string SmallRows(const std::string& alias = "") const {
    return key == Key::kText ? alias + "k < 'z'" : alias + key_column() + " < 1000";
  }

  std::string key_column() const { return key == Key::kInteger ? "id" : key == Key::kText ? "k" : "rowid"; }
  // Every column, in declared order (the rowid is not one).
  std::vector<std::pair<std::string, std::string>> columns() const {
    std::vector<std::pair<std::string, std::string>> c;
    if (key == Key::kInteger) c.push_back({"id", "INTEGER"});
    if (key == Key::kText) c.push_back({"k", "TEXT"});
    c.push_back({"name", "TEXT"});
    c.push_back({"score", "REAL"});
    c.push_back({"n", "INTEGER"});
    if (key == Key::kInteger) c.push_back({"b", "BLOB"});
    return c;
  }
  std::string Schema() const {
    std::string s;
    for (const auto& [col, type] : columns()) {
      s += (s.empty() ? "" : ", ") + col + " " + type + (col == key_column() ? " PRIMARY KEY" : "");
    }
    return s;
  }
  std::vector<std::string> NativeDdl() const {
    std::string ddl = "CREATE TABLE " + name + "(" + Schema() + ")";
    if (key == Key::kText) {  // SQLite lets a rowid table's TEXT PRIMARY KEY be NULL; a Cell key never is
      std::string schema = Schema();
      schema.replace(schema.find(" PRIMARY KEY"), 12, " PRIMARY KEY NOT NULL");
      ddl = "CREATE TABLE " + name + "(" + schema + ") WITHOUT ROWID";
    }
    std::vector<std::string> out = {ddl};
    for (const std::string& i : indexes) out.push_back(fmt::format("CREATE INDEX {0}_{1} ON {0}({1})", name, i));
    return out;
  }
  std::string CellDdl(const std::string& where) const {
    std::string s =
        fmt::format("CREATE VIRTUAL TABLE {} USING cell({}, prefix='{}', schema='{}'", name, where, prefix, Schema());
    for (const std::string& i : indexes) s += ", index='" + i + "'";
    return s + ")";
  }
  // What a full, ordered comparison of the table selects.
  std::string SelectAll() const {
    return fmt::format("SELECT {}* FROM {} ORDER BY {}", key == Key::kRowid ? "rowid, " : "", name, key_column());
  }
};

struct Statement {
  static Statement Of(std::string sql) {
    Statement s;
    s.sql = std::move(sql);
    return s;
  }
  std::string sql;                  // for both databases, unless `native` is set
  std::vector<std::string> native;  // the native database's statements instead (CREATE)
  bool ordered = false;             // compare rows in order
  enum class Effect { kNone, kCreate, kDrop } effect = Effect::kNone;
  TableSpec table;  // kCreate, kDrop
};

class SqlGenerator {
 public:
  SqlGenerator(uint64_t seed, std::string prefix_base) : rng_(seed), prefix_base_(std::move(prefix_base)) {}

  const std::vector<TableSpec>& tables() const { return tables_; }

  // The next statement; `in_txn`: the databases are inside BEGIN. Call Applied() once both have run it.
  Statement Next(bool in_txn) {
    if (!in_txn) savepoints_ = 0;
    in_txn_ = in_txn;
    txn_statements_ = in_txn ? txn_statements_ + 1 : 0;
    if (tables_.size() < 2 || (!in_txn && tables_.size() < 4 && Chance(0.004))) return Create();
    if (!in_txn && tables_.size() > 2 && Chance(0.002)) return Drop();
    const int r = Pick(100);
    // Transactions stay short: within Cell's limits of reads and writes per transaction.
    if (r < 8 || txn_statements_ > 8) return Transaction(in_txn && txn_statements_ <= 8);
    TableSpec& t = tables_[Pick(tables_.size())];
    if (!in_txn && t.bulk_rows < 200 && Chance(0.02)) return Bulk(t);
    if (r < 30) return Insert(t);
    if (r < 42) return Update(t);
    if (r < 47) return UpdateKey(t);
    if (r < 53) return Delete(t);
    return Select(t);
  }

  // Records a CREATE or DROP that both databases carried out.
  void Applied(const Statement& s) {
    if (s.effect == Statement::Effect::kCreate) tables_.push_back(s.table);
    if (s.effect == Statement::Effect::kDrop) {
      std::erase_if(tables_, [&](const TableSpec& t) { return t.name == s.table.name; });
    }
  }

 private:
  size_t Pick(size_t n) { return static_cast<size_t>(rng_() % n); }
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int Between(int lo, int hi) { return lo + Pick(hi - lo + 1); }

  static std::string Quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
  }
  std::string Word(const char* alphabet, int min_len, int max_len) {
    std::string s;
    const std::string a(alphabet);
    for (int i = Between(min_len, max_len); i > 0; --i) s += a[Pick(a.size())];
    return s;
  }
  std::string Real() { return fmt::format("{:.2f}", Between(-40, 40) / 4.0); }

  // Values of each column's domain.
  std::string IntKey() {
    const int r = Pick(20);
    if (r == 0) return Quote(std::to_string(Between(0, 59)));  // '12' becomes 12
    if (r == 1) return fmt::format("{}.0", Between(0, 59));    // 3.0 becomes 3
    return std::to_string(Between(-3, 59));
  }
  std::string TextKey() {
    if (Pick(25) == 0) return std::to_string(Between(0, 9));  // 5 becomes '5'
    return Quote(Word("abcd", 1, 3));
  }
  std::string Key(const TableSpec& t) { return t.key == TableSpec::Key::kText ? TextKey() : IntKey(); }
  std::string Name() {
    const int r = Pick(20);
    if (r < 3) return "NULL";
    if (r == 3) return std::to_string(Between(0, 20));  // a number into a TEXT column
    if (r == 4) return "'it''s'";
    return Quote(Word("abc", 0, 3));
  }
  std::string Score() {
    const int r = Pick(10);
    if (r < 2) return "NULL";
    if (r == 2) return std::to_string(Between(-5, 5));  // an integer into a REAL column
    return Real();
  }
  std::string N() {
    const int r = Pick(30);
    if (r < 4) return "NULL";
    if (r == 4) return Quote(std::to_string(Between(0, 20)));  // '7' becomes 7
    if (r == 5) return fmt::format("{}.0", Between(0, 20));    // 4.0 becomes 4
    if (r == 6) return fmt::format("{}.5", Between(0, 5));     // stays REAL
    if (r == 7) return "'x'";                                  // stays TEXT
    return std::to_string(Between(-10, 30));
  }
  std::string Blob() {
    const int r = Pick(6);
    if (r == 0) return "NULL";
    if (r == 1) return "x''";
    if (r == 2) return Quote(Word("pq", 1, 2));
    std::string hex;
    for (int i = Between(1, 4); i > 0; --i) hex += fmt::format("{:02x}", Pick(4) * 60);
    return "x'" + hex + "'";
  }
  std::string ValueOf(const std::string& column, const TableSpec& t) {
    if (column == t.key_column()) return Key(t);
    if (column == "name") return Name();
    if (column == "score") return Score();
    if (column == "n") return N();
    return Blob();
  }

  // A key literal for comparisons, now and then of another type than the key's.
  std::string KeyLiteral(const TableSpec& t) {
    const int r = Pick(25);
    if (t.key == TableSpec::Key::kText) return r == 0 ? std::to_string(Between(0, 9)) : Quote(Word("abcd", 1, 2));
    if (r == 0) return fmt::format("{}.5", Between(0, 59));
    if (r == 1) return Quote(std::to_string(Between(0, 59)));
    if (r == 2) return "'zz'";
    return std::to_string(Between(-3, 62));
  }

  std::string Predicate(const TableSpec& t) {
    const std::string key = t.key_column();
    switch (Pick(16)) {
      case 0:
      case 1:
        return fmt::format("{} = {}", key, KeyLiteral(t));
      case 2:
        return fmt::format("{} > {}", key, KeyLiteral(t));
      case 3:
        return fmt::format("{} <= {}", key, KeyLiteral(t));
      case 4:
        return fmt::format("{} >= {} AND {} < {}", key, KeyLiteral(t), key, KeyLiteral(t));
      case 5:
        return fmt::format("{} BETWEEN {} AND {}", key, KeyLiteral(t), KeyLiteral(t));
      case 6:
        return fmt::format("{} IN ({}, {}, {})", key, KeyLiteral(t), KeyLiteral(t), KeyLiteral(t));
      case 7:
        return fmt::format("name = {}", Name());
      case 8:
        return fmt::format("name > {} AND name <= {}", Quote(Word("abc", 0, 2)), Quote(Word("abc", 1, 3)));
      case 9:
        return Chance(0.5) ? "name IS NULL" : "name LIKE 'a%'";
      case 10:
        return fmt::format("n = {}", N());
      case 11:
        return fmt::format("n > {}", N());
      case 12:
        return fmt::format("n BETWEEN {} AND {}", Between(-10, 10), Between(0, 30));
      case 13:
        return fmt::format("score >= {}", Real());
      case 14:
        return fmt::format("({} OR {})", Predicate(t), Predicate(t));
      default:
        return "1";
    }
  }

  std::string Columns(const TableSpec& t) {
    if (Chance(0.5)) return t.key == TableSpec::Key::kRowid ? "rowid, *" : "*";
    std::string s = t.key_column();
    for (const char* c : {"name", "n", "score"}) {
      if (Chance(0.5)) s += std::string(", ") + c;
    }
    return s;
  }

  Statement Create() {
    TableSpec t;
    t.name = fmt::format("t{}", created_);
    t.prefix = fmt::format("{}-{}", prefix_base_, created_++);
    t.key = tables_.empty() ? TableSpec::Key::kInteger : static_cast<TableSpec::Key>(Pick(3));
    for (const char* c : {"name", "n", "score"}) {
      if (Chance(0.4)) t.indexes.push_back(c);
    }
    Statement s;
    s.native = t.NativeDdl();
    s.effect = Statement::Effect::kCreate;
    s.table = t;
    return s;  // sql: set by the caller (it knows the cluster)
  }

  Statement Drop() {
    Statement s;
    s.table = tables_[Pick(tables_.size())];
    s.sql = "DROP TABLE " + s.table.name;
    s.effect = Statement::Effect::kDrop;
    return s;
  }

  Statement Transaction(bool may_continue) {
    Statement s;
    if (!in_txn_) {
      s.sql = "BEGIN";
    } else if (!may_continue) {
      s.sql = Chance(0.7) ? "COMMIT" : "ROLLBACK";
    } else if (savepoints_ < 3 && Chance(0.3)) {
      s.sql = "SAVEPOINT sp";
      ++savepoints_;
    } else if (savepoints_ > 0 && Chance(0.4)) {
      s.sql = Chance(0.5) ? "ROLLBACK TO sp" : "RELEASE sp";
      if (s.sql[0] == 'R' && s.sql[1] == 'E') --savepoints_;
    } else {
      s.sql = Chance(0.7) ? "COMMIT" : "ROLLBACK";
    }
    return s;
  }

  // 200 rows at once (outside BEGIN), keys beyond the small domain: tables of hundreds of rows, which meganodes of
  // 16 KiB split over the servers, and scans of several pages.
  Statement Bulk(TableSpec& t) {
    const int from = t.bulk_rows, to = t.bulk_rows + 199;
    t.bulk_rows += 200;
    std::string key = t.key == TableSpec::Key::kText ? "printf('zz%04d', i)" : "1000 + i";
    std::string cols = t.key_column() + ", name, score, n";
    std::string values = key + ", 'b' || (i % 5), (i % 40) / 4.0, i % 13";
    if (t.key == TableSpec::Key::kInteger) {
      cols += ", b";
      values += ", NULL";
    }
    return Statement::Of(
        fmt::format("INSERT INTO {}({}) SELECT {} FROM (WITH RECURSIVE s(i) AS (SELECT {} UNION ALL "
                    "SELECT i + 1 FROM s WHERE i < {}) SELECT i FROM s)",
                    t.name, cols, values, from, to));
  }

  Statement Insert(const TableSpec& t) {
    std::vector<std::string> cols;
    const bool auto_key = t.key != TableSpec::Key::kText && Chance(0.15);
    if (t.key == TableSpec::Key::kRowid && !auto_key) cols.push_back("rowid");
    for (const auto& [c, type] : t.columns()) {
      if (!(auto_key && c == t.key_column())) cols.push_back(c);
    }
    std::string sql = "INSERT";
    const int mode = Pick(10);
    if (mode == 0) sql += " OR IGNORE";
    if (mode == 1) sql += " OR REPLACE";
    sql += " INTO " + t.name + "(";
    for (size_t i = 0; i < cols.size(); ++i) sql += (i ? ", " : "") + cols[i];
    sql += ") VALUES ";
    for (int row = Between(1, 3); row > 0; --row) {
      sql += "(";
      for (size_t i = 0; i < cols.size(); ++i) {
        sql += (i ? ", " : "") + (cols[i] == "rowid" ? IntKey() : ValueOf(cols[i], t));
      }
      sql += row > 1 ? "), " : ")";
    }
    return Statement::Of(sql);
  }

  Statement Update(const TableSpec& t) {
    std::string set;
    switch (Pick(4)) {
      case 0:
        set = "name = " + Name();
        break;
      case 1:
        set = "n = n + 1, score = " + Score();
        break;
      case 2:
        set = "name = name || 'x', n = " + N();
        break;
      default:
        set = "score = score * 2";
    }
    return Statement::Of(fmt::format("UPDATE {} SET {} WHERE ({}) AND {}", t.name, set, Predicate(t), t.SmallRows()));
  }

  Statement UpdateKey(const TableSpec& t) {
    const std::string key = t.key_column();
    const std::string how = Chance(0.2) ? "UPDATE OR REPLACE " : "UPDATE ";
    std::string to;
    if (t.key == TableSpec::Key::kText) {
      to = Chance(0.5) ? "k || 'z'" : TextKey();
    } else {
      to = Chance(0.5) ? fmt::format("{} + {}", key, Between(-3, 10)) : std::to_string(Between(0, 59));
    }
    return Statement::Of(fmt::format("{}{} SET {} = {} WHERE {} = {}", how, t.name, key, to, key, Key(t)));
  }

  Statement Delete(const TableSpec& t) {
    return Statement::Of(fmt::format("DELETE FROM {} WHERE ({}) AND {}", t.name, Predicate(t), t.SmallRows()));
  }

  Statement Select(const TableSpec& t) {
    const std::string key = t.key_column();
    Statement s;
    switch (Pick(8)) {
      case 0:
      case 1: {
        s.sql = fmt::format("SELECT {} FROM {} WHERE {} ORDER BY {}{}", Columns(t), t.name, Predicate(t), key,
                            Chance(0.5) ? " DESC" : "");
        if (Chance(0.5)) s.sql += fmt::format(" LIMIT {}", Between(0, 8));
        if (Chance(0.2) && s.sql.find("LIMIT") != std::string::npos) s.sql += fmt::format(" OFFSET {}", Between(0, 4));
        s.ordered = true;
        return s;
      }
      case 2:
        s.sql = fmt::format("SELECT {} FROM {} WHERE {}", Columns(t), t.name, Predicate(t));
        return s;
      case 3:
        s.sql = fmt::format("SELECT count(*), sum(n), total(score), avg(score), min(name), max(score) FROM {} WHERE {}",
                            t.name, Predicate(t));
        s.ordered = true;
        return s;
      case 4:
        s.sql = fmt::format("SELECT name, count(*), sum(score) FROM {} WHERE {} GROUP BY name", t.name, Predicate(t));
        return s;
      case 5:
        s.sql = fmt::format("SELECT {} FROM {} WHERE {} = {}", Columns(t), t.name, key, Key(t));
        return s;
      case 6: {
        if (in_txn_) return Select(t);  // a join reads many keys: not within one transaction's limit
        const TableSpec& u = tables_[Pick(tables_.size())];
        s.sql = fmt::format("SELECT a.{}, b.{}, a.n FROM {} a JOIN {} b ON b.{} = a.{} WHERE {}{}", key, u.key_column(),
                            t.name, u.name, Chance(0.5) ? "n" : "name", Chance(0.5) ? "n" : "name", t.SmallRows("a."),
                            Chance(0.5) ? "" : " AND a.n > 3");
        return s;
      }
      default:
        s.sql = fmt::format("SELECT {}, name FROM {} WHERE {} ORDER BY name DESC, {} LIMIT {}", key, t.name,
                            Predicate(t), key, Between(1, 10));
        s.ordered = true;
        return s;
    }
  }

  std::mt19937_64 rng_;
  std::string prefix_base_;
  std::vector<TableSpec> tables_;
  int created_ = 0;
  int savepoints_ = 0;
  bool in_txn_ = false;
  int txn_statements_ = 0;
};

}  // namespace cell::sql::testing
