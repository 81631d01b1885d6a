// SQL on Cell: the SQLite virtual table module "cell", which keeps a table's rows in a Cell cluster.
//
//   cell::sql::Register(db);     // or, in the sqlite3 shell: .load build/sql/libcellsql
//   CREATE VIRTUAL TABLE t USING cell(cluster='zk://127.0.0.1:2181/cell/default',
//                                     schema='id INTEGER PRIMARY KEY, name TEXT, score REAL', index='name');
//   BEGIN; UPDATE t SET score = score - 1 WHERE id = 1; UPDATE t SET score = score + 1 WHERE id = 2; COMMIT;
//
// Arguments: sql/table_options.h. Key layout (rows under the tuple (prefix, key), index entries, the table record):
// sql/row_codec.h. Query plans (key lookups, key and index ranges, ORDER BY on the key either way, LIMIT):
// sql/scan_plan.h. Writes and their errors: sql/row_writer.h.
//
// TRANSACTIONS. A SQL transaction is one Cell transaction (cell/transaction.h) on each cluster its tables are on:
// its reads and writes go through it, and COMMIT commits it (xSync), so that a transaction over several rows (and
// tables of one cluster) is atomic and serializable. A commit that conflicts (Aborted) or runs out of time fails with
// SQLITE_BUSY and the message: ROLLBACK and run the transaction again. Outside BEGIN each statement is its own
// transaction; a SELECT outside BEGIN reads a consistent state, validated at its last row (sql/cursor.h). Limits:
// a SQL transaction lasts at most 10 s (sql/session.h), writes at most 1,000 keys (a row and each of its index
// entries are keys) and reads at most 10,000 (cell/transaction.h); tables on two clusters commit one after the
// other, not atomically. SQLite tells a virtual table nothing when a transaction that only read ends: the reads of a
// BEGIN ... COMMIT that writes no Cell table are not validated.
//
// CLIENTS. Tables share one cell::Client per (cluster, key_file, search) in the process, reference-counted
// (sql/client_registry.h): opened by the first table that needs it, closed when the last table (and transaction)
// using it is gone.
//
// DROP TABLE detaches the table: its rows stay in Cell, under its prefix, for other connections and processes (a new
// CREATE VIRTUAL TABLE with the same prefix must give the same schema and indexes).
//
// The SQL function cell_sql_counters('t') returns what table t has done on this connection (gets=.. scans=..
// index_scans=.. rows=.. commits=.. busy=.. validations=..).
#pragma once

struct sqlite3;

namespace cell::sql {

// Registers the module "cell" and the function cell_sql_counters on `db`. SQLITE_OK, or SQLite's error code.
int Register(sqlite3* db);

}  // namespace cell::sql
