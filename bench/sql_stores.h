// The three stores of cell-sql-bench (bench/sql_bench.cc), each holding one table of (id, name, score) rows and
// answering the same two queries with a statement prepared once and bound again for each query:
//
//   point  SELECT id, name, score FROM t WHERE id = ?
//   range  SELECT id, name, score FROM t WHERE id >= ? AND id < ? ORDER BY id   (+ LIMIT n with range_limit)
//
//   cell      SQLite (an in-memory database of this process) with CREATE VIRTUAL TABLE t USING cell(cluster=...,
//             prefix=..., schema='id INTEGER PRIMARY KEY, name TEXT, score REAL') (sql/cell_vtab.h): every query
//             goes through the module to a Cell cluster. The module opens its own cell::Client, with the default
//             options (search "adaptive"): its arguments (sql/table_options.h) have no search mode to choose.
//   sqlite    SQLite's own table in the same kind of in-memory database: CREATE TABLE t(id INTEGER PRIMARY KEY,
//             name TEXT, score REAL), a B-tree in this process's memory (id is the rowid).
//   postgres  a private PostgreSQL (bench/private_postgres.h) with CREATE TABLE t(id BIGINT PRIMARY KEY, name TEXT,
//             score DOUBLE PRECISION), queried over its Unix socket with libpq prepared statements (PQprepare once,
//             PQexecPrepared per query, binary parameters and results).
//
// Load inserts rows one INSERT (prepared) at a time, `batch` rows per transaction (BEGIN ... COMMIT), in id order;
// PostgreSQL then runs ANALYZE, inside the load's time. CheckPlans asks each store how it runs the two queries
// (EXPLAIN QUERY PLAN; PostgreSQL's EXPLAIN) and fails unless the point query is a lookup of the key and the range a
// scan of a key range with no sort: a full scan would still give right answers, only slowly, so it is refused here
// (on PostgreSQL from 1,000 rows on: below, its planner rightly reads the table's few pages whole).
// Counters: what the store reports having done (cell: the module's cell_sql_counters of t, and the shared client's
// server- and client-side searches), so that the caller can check that each query read what it should.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/private_postgres.h"
#include "cell/status.h"

namespace cell::bench {

struct SqlRow {
  int64_t id = 0;
  std::string name;
  double score = 0;
};

// Rows of one query: rows[0 .. count) are the answer. Kept between queries so that the strings' memory is reused
// (the same for every store).
struct SqlRows {
  std::vector<SqlRow> rows;
  size_t count = 0;
  SqlRow& Next() {
    if (rows.size() <= count) rows.emplace_back();
    return rows[count++];
  }
};

class SqlStore {
 public:
  virtual ~SqlStore() = default;
  // Inserts `rows` (their ids in order) in transactions of `batch` rows.
  virtual Status Load(const std::vector<SqlRow>& rows, size_t batch) = 0;
  // FailedPrecondition, with the plan, unless both queries use the key as they should.
  virtual Status CheckPlans() = 0;
  // The answer to the point query for `id` / the range query for [lower, upper), in out (count reset first).
  virtual Status Point(int64_t id, SqlRows* out) = 0;
  virtual Status Range(int64_t lower, int64_t upper, SqlRows* out) = 0;
  // What the store has done so far (empty: it counts nothing).
  virtual std::map<std::string, uint64_t> Counters() { return {}; }
};

struct SqlStoreOptions {
  std::string cluster;       // cell: ClientOptions::cluster (the module's cluster='...')
  std::string key_file;      // cell: the module's key_file='...' ("" : CELL_KEY_FILE, if set)
  std::string search;        // cell: the module's search='...' ("": its default, adaptive)
  std::string prefix;        // cell: the table's tuple prefix (a run of its own: its rows are not deleted)
  uint64_t range_limit = 0;  // > 0: the range query ends with LIMIT range_limit (every store)
  PrivatePostgresOptions postgres;
};

// kind: "cell", "sqlite" or "postgres". InvalidArgument for another; the store's error if it cannot be opened.
StatusOr<std::unique_ptr<SqlStore>> OpenSqlStore(const std::string& kind, const SqlStoreOptions& options);

}  // namespace cell::bench
