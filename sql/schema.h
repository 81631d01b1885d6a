// A Cell table's columns, from the schema='...' module argument: names, declared types (INTEGER, REAL, TEXT, BLOB),
// the PRIMARY KEY column (INTEGER or TEXT; none: a hidden rowid keys the rows) and NOT NULL columns.
//
//   schema='id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL, photo BLOB'
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cell/status.h"

namespace cell::sql {

// A declared type, and with it the column's SQLite affinity (INT is read as INTEGER).
enum class ColumnType { kInteger, kReal, kText, kBlob };

std::string_view TypeName(ColumnType type);

struct Column {
  std::string name;
  ColumnType type = ColumnType::kBlob;
  bool not_null = false;
};

struct Schema {
  std::vector<Column> columns;
  int primary_key = -1;  // the PRIMARY KEY column, or -1: rows are keyed by a hidden rowid

  bool has_rowid() const { return primary_key < 0; }
  // The column named `name` (case-insensitive, as SQLite compares names), or -1.
  int Find(std::string_view name) const;
  // The CREATE TABLE statement for sqlite3_declare_vtab: WITHOUT ROWID when a column is the PRIMARY KEY.
  std::string Declaration() const;
  // One canonical line ("id INTEGER PRIMARY KEY, name TEXT NOT NULL"): what the table record in Cell holds, so that
  // two definitions of one table compare as text.
  std::string Canonical() const;
};

// Parses a comma-separated list of column definitions: NAME TYPE [PRIMARY KEY] [NOT NULL]. Names may be quoted
// ("a b", [a b] or `a b`). InvalidArgument, saying what is wrong and where, for anything else.
StatusOr<Schema> ParseSchema(std::string_view text);

// `name` quoted as an SQL identifier ("na""me").
std::string QuoteIdentifier(std::string_view name);

}  // namespace cell::sql
