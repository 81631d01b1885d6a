// The SQLite C API as this folder calls it: directly (cell_sql, linked with libsqlite3) or, in the loadable extension
// (libcellsql.so, compiled with CELL_SQL_LOADABLE), through the table of routines the loading SQLite hands over
// (sql/extension.cc), so that the extension always calls the very SQLite that loaded it.
#pragma once

#ifdef CELL_SQL_LOADABLE
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3
#else
#include <sqlite3.h>
#endif
