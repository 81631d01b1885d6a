// One SQL value as a Cell table stores it (NULL, INTEGER, REAL, TEXT or BLOB), read from SQLite with a column's
// affinity applied as SQLite applies it to a column of an ordinary table (https://sqlite.org/datatype3.html):
//   INTEGER  text that looks like a number becomes one; a REAL with an exact integer value becomes an INTEGER
//   REAL     the same, then an INTEGER becomes a REAL
//   TEXT     an INTEGER or REAL becomes its text
//   BLOB     nothing changes
#pragma once

#include <cstdint>
#include <string>

#include "sql/schema.h"
#include "sql/sqlite_api.h"

namespace cell::sql {

struct SqlValue {
  enum class Type { kNull, kInteger, kReal, kText, kBlob };
  Type type = Type::kNull;
  int64_t integer = 0;
  double real = 0;
  std::string bytes;  // kText (UTF-8) and kBlob

  static SqlValue Null() { return {}; }
  static SqlValue Integer(int64_t v) { return {Type::kInteger, v, 0, {}}; }
  static SqlValue Real(double v) { return {Type::kReal, 0, v, {}}; }
  static SqlValue Text(std::string v) { return {Type::kText, 0, 0, std::move(v)}; }
  static SqlValue Blob(std::string v) { return {Type::kBlob, 0, 0, std::move(v)}; }

  bool is_null() const { return type == Type::kNull; }
  bool is_number() const { return type == Type::kInteger || type == Type::kReal; }
  // Hands the value to SQLite as a result (xColumn).
  void ToResult(sqlite3_context* ctx) const;
  // For messages: 42, 1.5, 'text', x'00ff', NULL (long values cut short).
  std::string ToString() const;
};

// `value` with the affinity of a column of `type` applied (above). `value` itself is not changed.
SqlValue WithAffinity(sqlite3_value* value, ColumnType type);

// `value` as it is, without conversions.
SqlValue FromSqlite(sqlite3_value* value);

// The integer a REAL stands for, if it is exactly one that SQLite would convert (INTEGER affinity).
bool ExactInteger(double real, int64_t* out);

}  // namespace cell::sql
