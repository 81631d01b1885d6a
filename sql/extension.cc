// The entry point of the loadable extension libcellsql.so: `.load build/sql/libcellsql` in the sqlite3 shell, or
// sqlite3_load_extension(db, ".../libcellsql.so", nullptr, ...). SQLite derives the name sqlite3_cellsql_init from
// the file's name. Built with CELL_SQL_LOADABLE, so that every call goes through the routines SQLite passes here
// (sql/sqlite_api.h).
#include "sql/cell_vtab.h"
#include "sql/sqlite_api.h"

SQLITE_EXTENSION_INIT1

extern "C" __attribute__((visibility("default"))) int sqlite3_cellsql_init(sqlite3* db, char** err,
                                                                           const sqlite3_api_routines* api) {
  SQLITE_EXTENSION_INIT2(api);
  const int rc = cell::sql::Register(db);
  if (rc != SQLITE_OK) {
    *err = sqlite3_mprintf("cannot register the cell module: %s", sqlite3_errstr(rc));
    return rc;
  }
  // Stay loaded when the connection closes: the process's Cell clients and their threads live in this library.
  return SQLITE_OK_LOAD_PERMANENTLY;
}
