// SQL values and SQLite's column affinity (sql/sql_value.h).
#include "sql/sql_value.h"

#include <fmt/format.h>

namespace cell::sql {

namespace {

SqlValue Read(sqlite3_value* v) {
  switch (sqlite3_value_type(v)) {
    case SQLITE_INTEGER:
      return SqlValue::Integer(sqlite3_value_int64(v));
    case SQLITE_FLOAT:
      return SqlValue::Real(sqlite3_value_double(v));
    case SQLITE_TEXT: {
      const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(v));
      return SqlValue::Text(std::string(text == nullptr ? "" : text, static_cast<size_t>(sqlite3_value_bytes(v))));
    }
    case SQLITE_BLOB: {
      const auto* blob = static_cast<const char*>(sqlite3_value_blob(v));
      return SqlValue::Blob(std::string(blob == nullptr ? "" : blob, static_cast<size_t>(sqlite3_value_bytes(v))));
    }
    default:
      return SqlValue::Null();
  }
}

// Numeric affinity on a copy (sqlite3_value_numeric_type converts the value it is given).
SqlValue Numeric(sqlite3_value* v) {
  sqlite3_value* copy = sqlite3_value_dup(v);
  if (copy == nullptr) return Read(v);
  sqlite3_value_numeric_type(copy);
  SqlValue out = Read(copy);
  sqlite3_value_free(copy);
  return out;
}

// An INTEGER or REAL as SQLite writes it as text (the copy's own conversion).
SqlValue AsText(sqlite3_value* v) {
  sqlite3_value* copy = sqlite3_value_dup(v);
  if (copy == nullptr) return Read(v);
  const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(copy));
  SqlValue out =
      SqlValue::Text(std::string(text == nullptr ? "" : text, static_cast<size_t>(sqlite3_value_bytes(copy))));
  sqlite3_value_free(copy);
  return out;
}

}  // namespace

bool ExactInteger(double real, int64_t* out) {
  // SQLite's sqlite3VdbeIntegerAffinity: only values strictly between INT64_MIN and INT64_MAX convert.
  constexpr double kTwo63 = 9223372036854775808.0;
  if (!(real > -kTwo63 && real < kTwo63)) return false;
  const auto i = static_cast<int64_t>(real);
  if (static_cast<double>(i) != real || i == INT64_MIN || i == INT64_MAX) return false;
  *out = i;
  return true;
}

SqlValue FromSqlite(sqlite3_value* value) { return Read(value); }

SqlValue WithAffinity(sqlite3_value* value, ColumnType type) {
  const int t = sqlite3_value_type(value);
  switch (type) {
    case ColumnType::kBlob:
      return Read(value);
    case ColumnType::kText:
      return (t == SQLITE_INTEGER || t == SQLITE_FLOAT) ? AsText(value) : Read(value);
    case ColumnType::kInteger:
    case ColumnType::kReal:
      break;
  }
  SqlValue v = t == SQLITE_TEXT ? Numeric(value) : Read(value);
  if (type == ColumnType::kInteger && v.type == SqlValue::Type::kReal) {
    int64_t i = 0;
    if (ExactInteger(v.real, &i)) v = SqlValue::Integer(i);
  } else if (type == ColumnType::kReal && v.type == SqlValue::Type::kInteger) {
    v = SqlValue::Real(static_cast<double>(v.integer));
  } else if (type == ColumnType::kReal && v.type == SqlValue::Type::kReal && v.real == 0) {
    v.real = 0.0;  // SQLite stores an integral REAL as an integer: -0.0 reads back as 0.0
  }
  return v;
}

void SqlValue::ToResult(sqlite3_context* ctx) const {
  switch (type) {
    case Type::kNull:
      sqlite3_result_null(ctx);
      return;
    case Type::kInteger:
      sqlite3_result_int64(ctx, integer);
      return;
    case Type::kReal:
      sqlite3_result_double(ctx, real);
      return;
    case Type::kText:
      sqlite3_result_text64(ctx, bytes.data(), bytes.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
      return;
    case Type::kBlob:
      sqlite3_result_blob64(ctx, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
      return;
  }
}

std::string SqlValue::ToString() const {
  constexpr size_t kShown = 40;
  switch (type) {
    case Type::kNull:
      return "NULL";
    case Type::kInteger:
      return std::to_string(integer);
    case Type::kReal:
      return fmt::format("{}", real);
    case Type::kText:
      return fmt::format("'{}'{}", bytes.substr(0, kShown), bytes.size() > kShown ? "..." : "");
    case Type::kBlob: {
      std::string hex;
      for (size_t i = 0; i < bytes.size() && i < kShown / 2; ++i) {
        hex += fmt::format("{:02x}", static_cast<unsigned char>(bytes[i]));
      }
      return fmt::format("x'{}'{}", hex, bytes.size() > kShown / 2 ? "..." : "");
    }
  }
  return "NULL";
}

}  // namespace cell::sql
