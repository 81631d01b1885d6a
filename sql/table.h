// A Cell table as the module's methods see it: SQLite's sqlite3_vtab with the table's definition, key layout, shared
// client and counters; and the mapping of Cell's Status to SQLite's result codes and messages.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cell/client.h"
#include "cell/status.h"
#include "sql/connection.h"
#include "sql/row_codec.h"
#include "sql/sqlite_api.h"
#include "sql/table_options.h"

namespace cell::sql {

// What a table has done since it was connected (cell_sql_counters('t') shows them).
struct TableCounters {
  uint64_t gets = 0;         // point reads of rows: key lookups, and rows found through an index
  uint64_t scans = 0;        // iterators opened over rows
  uint64_t index_scans = 0;  // iterators opened over an index
  uint64_t rows = 0;         // rows returned to SQLite
  uint64_t commits = 0;      // Cell transactions this table committed (xSync)
  uint64_t busy = 0;         // statements or commits reported as SQLITE_BUSY
  uint64_t validations = 0;  // read-only transactions of statements outside BEGIN, validated at their end
};

struct Table : sqlite3_vtab {
  Table(Connection* c, std::string n, TableOptions o, std::shared_ptr<Client> cl)
      : sqlite3_vtab{},
        connection(c),
        name(std::move(n)),
        options(std::move(o)),
        layout(options.prefix),
        client(std::move(cl)) {}

  const Schema& schema() const { return options.schema; }

  Connection* const connection;
  const std::string name;
  const TableOptions options;
  const KeyLayout layout;
  const std::shared_ptr<Client> client;
  TableCounters counters;
};

// The SQLite result code for a Cell error: SQLITE_BUSY for Aborted and DeadlineExceeded (run the statement or
// transaction again), SQLITE_TOOBIG, SQLITE_FULL, SQLITE_AUTH, SQLITE_IOERR (Unavailable), else SQLITE_ERROR.
int SqliteCode(const Status& status);
// Sets the table's error message ("cell table t: ...") and returns `code`.
int Fail(sqlite3_vtab* vtab, int code, const std::string& message);
// Fail with SqliteCode(status) and the status's text.
int Fail(sqlite3_vtab* vtab, const Status& status);

}  // namespace cell::sql
