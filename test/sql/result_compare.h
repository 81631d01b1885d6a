// What a SQL statement returned (its success or error, and its rows with their types), and the comparer of the SQL
// differential tests: two outcomes agree when both succeeded with the same rows (in order when the statement's
// ORDER BY is total, as multisets otherwise) or both failed.
#pragma once

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace cell::sql::testing {

struct Value {
  int type = SQLITE_NULL;  // SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB, SQLITE_NULL
  int64_t integer = 0;
  double real = 0;
  std::string bytes;

  static Value Int(int64_t v) { return {SQLITE_INTEGER, v, 0, {}}; }
  static Value Real(double v) { return {SQLITE_FLOAT, 0, v, {}}; }
  static Value Text(std::string v) { return {SQLITE_TEXT, 0, 0, std::move(v)}; }
  static Value Blob(std::string v) { return {SQLITE_BLOB, 0, 0, std::move(v)}; }
  static Value Null() { return {}; }

  // Same type and value (a REAL 1.0 differs from an INTEGER 1; doubles compare with ==, so -0.0 equals 0.0).
  friend bool operator==(const Value& a, const Value& b) {
    if (a.type != b.type) return false;
    switch (a.type) {
      case SQLITE_INTEGER:
        return a.integer == b.integer;
      case SQLITE_FLOAT:
        return a.real == b.real;
      case SQLITE_TEXT:
      case SQLITE_BLOB:
        return a.bytes == b.bytes;
      default:
        return true;
    }
  }
  // A total order for sorting rows into multisets: by type, then value.
  friend bool operator<(const Value& a, const Value& b) {
    return std::tie(a.type, a.integer, a.real, a.bytes) < std::tie(b.type, b.integer, b.real, b.bytes);
  }
  std::string ToString() const {
    switch (type) {
      case SQLITE_INTEGER:
        return std::to_string(integer);
      case SQLITE_FLOAT:
        return fmt::format("{}r", real);
      case SQLITE_TEXT:
        return "'" + bytes + "'";
      case SQLITE_BLOB: {
        std::string hex;
        for (unsigned char c : bytes) hex += fmt::format("{:02x}", c);
        return "x'" + hex + "'";
      }
      default:
        return "NULL";
    }
  }
};

using Row = std::vector<Value>;

struct Outcome {
  int code = SQLITE_OK;  // of the statement (SQLITE_OK when it ran to its end)
  std::string error;
  std::vector<Row> rows;
  bool ok() const { return code == SQLITE_OK; }
};

inline std::string RowString(const Row& row) {
  std::string s = "(";
  for (size_t i = 0; i < row.size(); ++i) s += (i ? ", " : "") + row[i].ToString();
  return s + ")";
}

// Runs one statement to its end; the outcome, rows included.
inline Outcome Run(sqlite3* db, const std::string& sql) {
  Outcome out;
  sqlite3_stmt* stmt = nullptr;
  out.code = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
  if (out.code != SQLITE_OK) {
    out.error = sqlite3_errmsg(db);
    return out;
  }
  while (true) {
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      out.code = rc;
      out.error = sqlite3_errmsg(db);
      break;
    }
    Row row;
    for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
      const int type = sqlite3_column_type(stmt, i);
      if (type == SQLITE_INTEGER) {
        row.push_back(Value::Int(sqlite3_column_int64(stmt, i)));
      } else if (type == SQLITE_FLOAT) {
        row.push_back(Value::Real(sqlite3_column_double(stmt, i)));
      } else if (type == SQLITE_TEXT || type == SQLITE_BLOB) {
        const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt, i));
        std::string bytes(p == nullptr ? "" : p, static_cast<size_t>(sqlite3_column_bytes(stmt, i)));
        row.push_back(type == SQLITE_TEXT ? Value::Text(std::move(bytes)) : Value::Blob(std::move(bytes)));
      } else {
        row.push_back(Value::Null());
      }
    }
    out.rows.push_back(std::move(row));
  }
  sqlite3_finalize(stmt);
  if (out.code != SQLITE_OK) out.rows.clear();  // a failed statement's rows are not compared
  return out;
}

// Empty when `expected` and `actual` agree (above); otherwise what differs, for the failure message.
inline std::string Compare(const Outcome& expected, const Outcome& actual, bool ordered) {
  if (expected.ok() != actual.ok()) {
    return fmt::format("one failed and the other did not: expected {} ({}), got {} ({})", expected.code, expected.error,
                       actual.code, actual.error);
  }
  if (!expected.ok()) return "";
  std::vector<Row> a = expected.rows, b = actual.rows;
  if (!ordered) {
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
  }
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i >= a.size() || i >= b.size() || !(a[i] == b[i])) {
      return fmt::format("{} rows expected, {} returned; first difference at row {}{}: expected {}, got {}", a.size(),
                         b.size(), i, ordered ? "" : " (sorted)", i < a.size() ? RowString(a[i]) : "none",
                         i < b.size() ? RowString(b[i]) : "none");
    }
  }
  return "";
}

}  // namespace cell::sql::testing
