// Key ranges from WHERE constraints (sql/key_range.h).
#include "sql/key_range.h"

#include <cmath>

#include "sql/row_codec.h"
#include "sql/sql_value.h"

namespace cell::sql {

namespace {

constexpr double kTwo63 = 9223372036854775808.0;

Narrowing Bound(CompareOp op, std::string element) { return {Narrowing::Kind::kBound, op, std::move(element)}; }
Narrowing None() { return {Narrowing::Kind::kNone, CompareOp::kEq, {}}; }
Narrowing All() { return {Narrowing::Kind::kAll, CompareOp::kEq, {}}; }

// An INTEGER key against a REAL that is no integer (or none in int64's range): the nearest integers that may match.
Narrowing IntegerKeyAgainstReal(CompareOp op, double r) {
  switch (op) {
    case CompareOp::kEq:
      return None();
    case CompareOp::kGt:
    case CompareOp::kGe: {
      const double c = std::ceil(r);
      if (c >= kTwo63) return None();
      if (c < -kTwo63) return All();
      return Bound(CompareOp::kGe, EncodePrimaryKey(SqlValue::Integer(static_cast<int64_t>(c))));
    }
    case CompareOp::kLt:
    case CompareOp::kLe: {
      const double f = std::floor(r);
      if (f < -kTwo63) return None();
      if (f >= kTwo63) return All();
      return Bound(CompareOp::kLe, EncodePrimaryKey(SqlValue::Integer(static_cast<int64_t>(f))));
    }
  }
  return All();
}

// A constraint that every number satisfies (text and blobs sort after numbers) or none does.
Narrowing BeyondNumbers(CompareOp op) { return (op == CompareOp::kLt || op == CompareOp::kLe) ? All() : None(); }

// Numbers in an index are doubles: a strict comparison may hold for an entry whose double equals the bound's.
CompareOp Relaxed(CompareOp op) {
  if (op == CompareOp::kGt) return CompareOp::kGe;
  if (op == CompareOp::kLt) return CompareOp::kLe;
  return op;
}

bool IsNumber(sqlite3_value* v) {
  const int t = sqlite3_value_type(v);
  return t == SQLITE_INTEGER || t == SQLITE_FLOAT;
}

}  // namespace

Narrowing NarrowKey(ColumnType type, CompareOp op, sqlite3_value* rhs) {
  if (sqlite3_value_type(rhs) == SQLITE_NULL) return None();
  if (type == ColumnType::kText) {
    if (IsNumber(rhs)) return All();  // compared as text or as numbers, depending on rhs's affinity
    return Bound(op, EncodePrimaryKey(FromSqlite(rhs)));
  }
  const SqlValue v = WithAffinity(rhs, ColumnType::kInteger);
  switch (v.type) {
    case SqlValue::Type::kInteger:
      return Bound(op, EncodePrimaryKey(v));
    case SqlValue::Type::kReal:
      return IntegerKeyAgainstReal(op, v.real);
    case SqlValue::Type::kNull:
      return None();
    default:
      return BeyondNumbers(op);
  }
}

Narrowing NarrowIndex(ColumnType type, CompareOp op, sqlite3_value* rhs) {
  if (sqlite3_value_type(rhs) == SQLITE_NULL) return None();
  switch (type) {
    case ColumnType::kText:
      if (IsNumber(rhs)) return All();
      return Bound(op, EncodeIndexValue(FromSqlite(rhs)));
    case ColumnType::kBlob:
      if (sqlite3_value_type(rhs) != SQLITE_BLOB) return All();
      return Bound(op, EncodeIndexValue(FromSqlite(rhs)));
    case ColumnType::kInteger:
    case ColumnType::kReal:
      break;
  }
  const SqlValue v = WithAffinity(rhs, ColumnType::kInteger);
  return Bound(v.is_number() ? Relaxed(op) : op, EncodeIndexValue(v));
}

void SuffixRange::Apply(const Narrowing& n) {
  if (n.kind == Narrowing::Kind::kAll) return;
  if (n.kind == Narrowing::Kind::kNone) {
    empty = true;
    return;
  }
  // The element is a prefix of every key it stands for; element + 0xff sorts after all of them and before any key
  // of a greater element (a terminator 0x00 is never followed by 0xff except in an escape, which sorts greater).
  const std::string after = n.element + '\xff';
  const auto raise = [this](const std::string& b) {
    if (!lower || *lower < b) lower = b;
  };
  const auto cut = [this](const std::string& b) {
    if (!upper || b < *upper) upper = b;
  };
  switch (n.op) {
    case CompareOp::kEq:
      raise(n.element);
      cut(after);
      break;
    case CompareOp::kGe:
      raise(n.element);
      break;
    case CompareOp::kGt:
      raise(after);
      break;
    case CompareOp::kLe:
      cut(after);
      break;
    case CompareOp::kLt:
      cut(n.element);
      break;
  }
  if (lower && upper && *lower >= *upper) empty = true;
}

}  // namespace cell::sql
