// cell-sql-bench's stores (bench/sql_stores.h): SQLite, with the Cell module's table or its own, and a private
// PostgreSQL over libpq.
#include "bench/sql_stores.h"

#include <endian.h>
#include <fmt/format.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <utility>

#include "cell/client.h"
#include "sql/cell_vtab.h"
#include "sql/client_registry.h"

namespace cell::bench {

namespace {

constexpr const char* kSelect = "SELECT id, name, score FROM t";

std::string RangeSql(uint64_t limit) {
  std::string sql = std::string(kSelect) + " WHERE id >= ? AND id < ? ORDER BY id";
  if (limit > 0) sql += fmt::format(" LIMIT {}", limit);
  return sql;
}

// 'text' as an SQL string literal (a quote inside doubled), as the module's arguments take it.
std::string Quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// --- SQLite: the Cell module's table, or SQLite's own -------------------------------------------------------------

class SqliteStore final : public SqlStore {
 public:
  static StatusOr<std::unique_ptr<SqlStore>> Open(bool cell, const SqlStoreOptions& options) {
    auto store = std::unique_ptr<SqliteStore>(new SqliteStore(cell));
    CELL_RETURN_IF_ERROR(store->Create(options));
    return std::unique_ptr<SqlStore>(std::move(store));
  }
  ~SqliteStore() override {
    for (sqlite3_stmt* s : {point_, range_, insert_, counters_}) sqlite3_finalize(s);
    sqlite3_close(db_);
  }

  Status Load(const std::vector<SqlRow>& rows, size_t batch) override {
    for (size_t begin = 0; begin < rows.size(); begin += batch) {
      CELL_RETURN_IF_ERROR(Exec("BEGIN"));
      for (size_t i = begin; i < std::min(rows.size(), begin + batch); ++i) {
        sqlite3_bind_int64(insert_, 1, rows[i].id);
        sqlite3_bind_text(insert_, 2, rows[i].name.data(), static_cast<int>(rows[i].name.size()), SQLITE_STATIC);
        sqlite3_bind_double(insert_, 3, rows[i].score);
        const int rc = sqlite3_step(insert_);
        Status s = rc == SQLITE_DONE ? Status::OK() : Error(fmt::format("INSERT of row {}", rows[i].id));
        sqlite3_reset(insert_);
        if (!s.ok()) {
          (void)Exec("ROLLBACK");  // the INSERT's error is the one to report
          return s;
        }
      }
      CELL_RETURN_IF_ERROR(Exec("COMMIT"));
    }
    return Status::OK();
  }

  Status CheckPlans() override {
    // SQLite's plan of each query; the Cell module names its own (sql/scan_plan.h, ScanPlan::Describe).
    const std::string point_wants = cell_ ? ":key =" : "USING INTEGER PRIMARY KEY (rowid=?)";
    const std::string range_wants = cell_ ? ":key >= <" : "USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)";
    for (const auto& [stmt, wants] : {std::pair{point_, point_wants}, std::pair{range_, range_wants}}) {
      CELL_ASSIGN_OR_RETURN(std::string plan, Plan(sqlite3_sql(stmt)));
      if (plan.find(wants) == std::string::npos || plan.find("TEMP B-TREE") != std::string::npos) {
        return Status::FailedPrecondition(
            fmt::format("{}: '{}' is planned as '{}', not '{}'", name(), sqlite3_sql(stmt), plan, wants));
      }
    }
    return Status::OK();
  }

  Status Point(int64_t id, SqlRows* out) override {
    sqlite3_bind_int64(point_, 1, id);
    return Rows(point_, out);
  }

  Status Range(int64_t lower, int64_t upper, SqlRows* out) override {
    sqlite3_bind_int64(range_, 1, lower);
    sqlite3_bind_int64(range_, 2, upper);
    return Rows(range_, out);
  }

  std::map<std::string, uint64_t> Counters() override {
    std::map<std::string, uint64_t> out;
    if (!cell_) return out;
    // "gets=1 scans=2 ..." (sql/cell_vtab.h).
    if (sqlite3_step(counters_) == SQLITE_ROW) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(counters_, 0));
      std::string all = text != nullptr ? text : "";
      for (size_t at = 0; at < all.size();) {
        size_t end = all.find(' ', at);
        if (end == std::string::npos) end = all.size();
        const std::string field = all.substr(at, end - at);
        if (const size_t eq = field.find('='); eq != std::string::npos) {
          out[field.substr(0, eq)] = std::stoull(field.substr(eq + 1));
        }
        at = end + 1;
      }
    }
    sqlite3_reset(counters_);
    const Client::Stats stats = client_->stats();
    out["server_searches"] = stats.server_searches;
    out["client_searches"] = stats.client_searches;
    out["retries"] = stats.retries;
    return out;
  }

 private:
  explicit SqliteStore(bool cell) : cell_(cell) {}
  const char* name() const { return cell_ ? "cell" : "sqlite"; }

  Status Error(const std::string& what) const {
    return Status::Internal(fmt::format("{}: {}: {}", name(), what, sqlite3_errmsg(db_)));
  }

  Status Exec(const std::string& sql) {
    char* message = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) == SQLITE_OK) return Status::OK();
    Status s = Status::Internal(fmt::format("{}: {}: {}", name(), sql, message != nullptr ? message : "?"));
    sqlite3_free(message);
    return s;
  }

  Status Prepare(const std::string& sql, sqlite3_stmt** stmt) {
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, stmt, nullptr) == SQLITE_OK) return Status::OK();
    return Error("preparing " + sql);
  }

  Status Create(const SqlStoreOptions& options) {
    if (sqlite3_open(":memory:", &db_) != SQLITE_OK) return Error("opening an in-memory database");
    constexpr const char* kColumns = "id INTEGER PRIMARY KEY, name TEXT, score REAL";
    if (cell_) {
      if (const int rc = cell::sql::Register(db_); rc != SQLITE_OK) return Error("registering the cell module");
      std::string where = "cluster=" + Quoted(options.cluster) + ", prefix=" + Quoted(options.prefix);
      if (!options.key_file.empty()) where += ", key_file=" + Quoted(options.key_file);
      if (!options.search.empty()) where += ", search=" + Quoted(options.search);
      CELL_RETURN_IF_ERROR(
          Exec(fmt::format("CREATE VIRTUAL TABLE t USING cell({}, schema={})", where, Quoted(kColumns))));
      // The module's client (one per cluster and key file in the process, sql/client_registry.h): the same one
      // while the table holds it, for its search counters.
      CELL_ASSIGN_OR_RETURN(client_, cell::sql::SharedClient(options.cluster, options.key_file, options.search));
      CELL_RETURN_IF_ERROR(Prepare("SELECT cell_sql_counters('t')", &counters_));
    } else {
      CELL_RETURN_IF_ERROR(Exec(fmt::format("CREATE TABLE t({})", kColumns)));
    }
    CELL_RETURN_IF_ERROR(Prepare("INSERT INTO t VALUES (?, ?, ?)", &insert_));
    CELL_RETURN_IF_ERROR(Prepare(std::string(kSelect) + " WHERE id = ?", &point_));
    return Prepare(RangeSql(options.range_limit), &range_);
  }

  Status Rows(sqlite3_stmt* stmt, SqlRows* out) {
    out->count = 0;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      SqlRow& row = out->Next();
      row.id = sqlite3_column_int64(stmt, 0);
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1));
      row.name.assign(text != nullptr ? text : "", static_cast<size_t>(sqlite3_column_bytes(stmt, 1)));
      row.score = sqlite3_column_double(stmt, 2);
    }
    Status s = rc == SQLITE_DONE ? Status::OK() : Error(sqlite3_sql(stmt));
    sqlite3_reset(stmt);
    return s;
  }

  StatusOr<std::string> Plan(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    CELL_RETURN_IF_ERROR(Prepare("EXPLAIN QUERY PLAN " + sql, &stmt));
    std::string plan;
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      const auto* detail = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3));
      plan += std::string(plan.empty() ? "" : "; ") + (detail != nullptr ? detail : "");
    }
    sqlite3_finalize(stmt);
    return plan;
  }

  const bool cell_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt *point_ = nullptr, *range_ = nullptr, *insert_ = nullptr, *counters_ = nullptr;
  std::shared_ptr<Client> client_;
};

// --- PostgreSQL ---------------------------------------------------------------------------------------------------

// PostgreSQL's type OIDs (pg_type.h, a server header; these never change).
constexpr Oid kInt8Oid = 20, kTextOid = 25, kFloat8Oid = 701;
constexpr int kBinary = 1;

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

// Binary int8 and float8: 8 bytes, big-endian.
uint64_t BigEndian64(const char* bytes) {
  uint64_t v;
  std::memcpy(&v, bytes, sizeof(v));
  return be64toh(v);
}

class PostgresSqlStore final : public SqlStore {
 public:
  static StatusOr<std::unique_ptr<SqlStore>> Open(const SqlStoreOptions& options) {
    CELL_ASSIGN_OR_RETURN(std::unique_ptr<PrivatePostgres> server, PrivatePostgres::Start(options.postgres));
    std::fprintf(stderr, "postgres: started a private server in %s (durability %s)\n", server->dir().c_str(),
                 options.postgres.durability.c_str());
    auto store = std::unique_ptr<PostgresSqlStore>(new PostgresSqlStore(std::move(server)));
    CELL_RETURN_IF_ERROR(store->Create(options.range_limit));
    return std::unique_ptr<SqlStore>(std::move(store));
  }
  ~PostgresSqlStore() override {
    if (conn_ != nullptr) PQfinish(conn_);
    if (Status s = server_->Stop(); !s.ok()) std::fprintf(stderr, "postgres: %s\n", s.ToString().c_str());
  }

  Status Load(const std::vector<SqlRow>& rows, size_t batch) override {
    for (size_t begin = 0; begin < rows.size(); begin += batch) {
      CELL_RETURN_IF_ERROR(Command("BEGIN"));
      for (size_t i = begin; i < std::min(rows.size(), begin + batch); ++i) {
        const uint64_t id = htobe64(static_cast<uint64_t>(rows[i].id));
        const uint64_t score = htobe64(std::bit_cast<uint64_t>(rows[i].score));
        const char* values[] = {reinterpret_cast<const char*>(&id), rows[i].name.data(),
                                reinterpret_cast<const char*>(&score)};
        const int lengths[] = {8, static_cast<int>(rows[i].name.size()), 8};
        const int formats[] = {kBinary, kBinary, kBinary};
        ResultPtr r(PQexecPrepared(conn_, "insert", 3, values, lengths, formats, kBinary));
        if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return Error(fmt::format("INSERT of row {}", rows[i].id), r);
      }
      CELL_RETURN_IF_ERROR(Command("COMMIT"));
    }
    loaded_ += rows.size();
    return Command("ANALYZE t");  // statistics for the planner, as a loaded table would have them
  }

  Status CheckPlans() override {
    for (const char* explain : {"EXPLAIN EXECUTE point(1)", "EXPLAIN EXECUTE range(1, 101)"}) {
      ResultPtr r(PQexec(conn_, explain));
      if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return Error(explain, r);
      std::string plan;
      for (int i = 0; i < PQntuples(r.get()); ++i) plan += std::string(i > 0 ? "; " : "") + PQgetvalue(r.get(), i, 0);
      // A table of a few pages is rightly read whole (and sorted) by PostgreSQL's planner: the plan is enforced
      // from kIndexedFrom rows on.
      const bool indexed = plan.find("Index Scan using t_pkey") != std::string::npos;
      if (loaded_ >= kIndexedFrom && (!indexed || plan.find("Sort") != std::string::npos)) {
        return Status::FailedPrecondition(
            fmt::format("postgres: {}: '{}', not an index scan of t_pkey", explain, plan));
      }
    }
    return Status::OK();
  }

  Status Point(int64_t id, SqlRows* out) override {
    const uint64_t key = htobe64(static_cast<uint64_t>(id));
    const char* values[] = {reinterpret_cast<const char*>(&key)};
    const int lengths[] = {8}, formats[] = {kBinary};
    return Rows(ResultPtr(PQexecPrepared(conn_, "point", 1, values, lengths, formats, kBinary)), out);
  }

  Status Range(int64_t lower, int64_t upper, SqlRows* out) override {
    const uint64_t keys[] = {htobe64(static_cast<uint64_t>(lower)), htobe64(static_cast<uint64_t>(upper))};
    const char* values[] = {reinterpret_cast<const char*>(&keys[0]), reinterpret_cast<const char*>(&keys[1])};
    const int lengths[] = {8, 8}, formats[] = {kBinary, kBinary};
    return Rows(ResultPtr(PQexecPrepared(conn_, "range", 2, values, lengths, formats, kBinary)), out);
  }

 private:
  explicit PostgresSqlStore(std::unique_ptr<PrivatePostgres> server) : server_(std::move(server)) {}

  static Status Error(const std::string& what, const ResultPtr& r) {
    std::string message = r != nullptr ? PQresultErrorMessage(r.get()) : "no result";
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    return Status::Internal(fmt::format("postgres: {}: {}", what, message));
  }

  Status Command(const std::string& sql) {
    ResultPtr r(PQexec(conn_, sql.c_str()));
    return PQresultStatus(r.get()) == PGRES_COMMAND_OK ? Status::OK() : Error(sql, r);
  }

  Status Prepare(const char* name, const std::string& sql, std::initializer_list<Oid> types) {
    const std::vector<Oid> t(types);
    ResultPtr r(PQprepare(conn_, name, sql.c_str(), static_cast<int>(t.size()), t.data()));
    return PQresultStatus(r.get()) == PGRES_COMMAND_OK ? Status::OK() : Error("preparing " + sql, r);
  }

  Status Create(uint64_t range_limit) {
    conn_ = PQconnectdb(server_->conninfo().c_str());
    if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
      return Status::Unavailable(fmt::format("postgres: cannot connect to '{}': {}", server_->conninfo(),
                                             conn_ != nullptr ? PQerrorMessage(conn_) : "out of memory"));
    }
    CELL_RETURN_IF_ERROR(Command("CREATE TABLE t(id BIGINT PRIMARY KEY, name TEXT, score DOUBLE PRECISION)"));
    CELL_RETURN_IF_ERROR(Prepare("insert", "INSERT INTO t VALUES ($1, $2, $3)", {kInt8Oid, kTextOid, kFloat8Oid}));
    CELL_RETURN_IF_ERROR(Prepare("point", std::string(kSelect) + " WHERE id = $1", {kInt8Oid}));
    std::string range = RangeSql(range_limit);
    range.replace(range.find('?'), 1, "$1");
    range.replace(range.find('?'), 1, "$2");
    return Prepare("range", range, {kInt8Oid, kInt8Oid});
  }

  Status Rows(const ResultPtr& r, SqlRows* out) {
    out->count = 0;
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return Error("a query", r);
    const int n = PQntuples(r.get());
    if (n > 0 && (PQgetlength(r.get(), 0, 0) != 8 || PQgetlength(r.get(), 0, 2) != 8)) {
      return Status::Internal("postgres: id or score is not 8 bytes in binary");
    }
    for (int i = 0; i < n; ++i) {
      SqlRow& row = out->Next();
      row.id = static_cast<int64_t>(BigEndian64(PQgetvalue(r.get(), i, 0)));
      row.name.assign(PQgetvalue(r.get(), i, 1), static_cast<size_t>(PQgetlength(r.get(), i, 1)));
      row.score = std::bit_cast<double>(BigEndian64(PQgetvalue(r.get(), i, 2)));
    }
    return Status::OK();
  }

  static constexpr size_t kIndexedFrom = 1000;
  std::unique_ptr<PrivatePostgres> server_;  // declared first: stopped after the connection is closed
  PGconn* conn_ = nullptr;
  size_t loaded_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<SqlStore>> OpenSqlStore(const std::string& kind, const SqlStoreOptions& options) {
  if (kind == "cell" || kind == "sqlite") return SqliteStore::Open(kind == "cell", options);
  if (kind == "postgres") return PostgresSqlStore::Open(options);
  return Status::InvalidArgument(fmt::format("a store is cell, sqlite or postgres, not '{}'", kind));
}

}  // namespace cell::bench
