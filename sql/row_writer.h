// xUpdate of a Cell table: INSERT, UPDATE and DELETE of one row, with its index entries, through the SQL
// transaction's Cell transaction (sql/session.h).
//
// Everything that can refuse a row is checked before anything is written (SQLITE_VTAB_CONSTRAINT_SUPPORT: a
// SQLITE_CONSTRAINT leaves the table as it was, so SQLite can apply OR IGNORE, OR FAIL, OR ROLLBACK itself):
//   NOT NULL columns and a TEXT key                          SQLITE_CONSTRAINT_NOTNULL
//   an INTEGER key that is no integer                        SQLITE_MISMATCH
//   a key, or an index entry, over 255 bytes once encoded    SQLITE_TOOBIG, naming the column
//   a row over cell::kMaxValueSize once encoded              SQLITE_TOOBIG
//   INSERT (or UPDATE of the key) onto an existing key       SQLITE_CONSTRAINT_PRIMARYKEY, unless OR REPLACE, which
//                                                            replaces that row (sqlite3_vtab_on_conflict)
// An INTEGER key (or the hidden rowid) given as NULL is the table's largest key + 1, as SQLite picks a rowid. An
// UPDATE of the key is a delete and an insert.
#pragma once

#include "sql/table.h"

namespace cell::sql {

// xUpdate (argc, argv as SQLite passes them; *rowid is set for an INSERT into a rowid table).
int UpdateRow(Table* table, int argc, sqlite3_value** argv, sqlite3_int64* rowid);

}  // namespace cell::sql
