// The keys and values of a Cell table's rows and index entries (sql/row_codec.h).
#include "sql/row_codec.h"

#include <fmt/format.h>

#include <algorithm>

#include "cell/tuple.h"

namespace cell::sql {

namespace {

Tuple& AddValue(Tuple& t, const SqlValue& v) {
  switch (v.type) {
    case SqlValue::Type::kNull:
      return t.AddNull();
    case SqlValue::Type::kInteger:
      return t.AddInt(v.integer);
    case SqlValue::Type::kReal:
      return t.AddDouble(v.real);
    case SqlValue::Type::kText:
      return t.AddText(v.bytes);
    case SqlValue::Type::kBlob:
      return t.AddBytes(v.bytes);
  }
  return t.AddNull();
}

Status ValueAt(const Tuple& t, size_t i, SqlValue* out) {
  switch (t.kind(i)) {
    case Tuple::Kind::kNull:
      *out = SqlValue::Null();
      return Status::OK();
    case Tuple::Kind::kInt: {
      CELL_ASSIGN_OR_RETURN(int64_t v, t.GetInt(i));
      *out = SqlValue::Integer(v);
      return Status::OK();
    }
    case Tuple::Kind::kDouble: {
      CELL_ASSIGN_OR_RETURN(double v, t.GetDouble(i));
      *out = SqlValue::Real(v);
      return Status::OK();
    }
    case Tuple::Kind::kText: {
      CELL_ASSIGN_OR_RETURN(std::string_view v, t.GetText(i));
      *out = SqlValue::Text(std::string(v));
      return Status::OK();
    }
    case Tuple::Kind::kBytes: {
      CELL_ASSIGN_OR_RETURN(std::string_view v, t.GetBytes(i));
      *out = SqlValue::Blob(std::string(v));
      return Status::OK();
    }
    default:
      return Status::Corruption(fmt::format("element {} of a stored row is no SQL value", i));
  }
}

}  // namespace

KeyLayout::KeyLayout(std::string_view prefix) : table_key_(Pack(Tuple().AddText(prefix))) {}

std::string_view KeyLayout::PrimaryKeyOf(std::string_view row_key) const {
  if (row_key.size() <= table_key_.size() || row_key.substr(0, table_key_.size()) != table_key_) return {};
  return row_key.substr(table_key_.size());
}

std::string KeyLayout::IndexPrefix(std::string_view column) const {
  return table_key_ + Pack(Tuple().AddNull().AddText(column));
}

std::string KeyLayout::IndexValuesBegin(std::string_view column) const {
  return IndexPrefix(column) + Pack(Tuple().AddInt(1));
}

std::string EncodePrimaryKey(const SqlValue& value) {
  Tuple t;
  if (value.type == SqlValue::Type::kBlob) {
    t.Add(Tuple().AddBytes(value.bytes));
  } else {
    AddValue(t, value);
  }
  return Pack(t);
}

Status DecodePrimaryKey(std::string_view element, SqlValue* out) {
  Tuple t;
  CELL_RETURN_IF_ERROR(Unpack(element, &t));
  if (t.size() != 1) return Status::Corruption("a row key holds more than its primary key");
  if (t.kind(0) == Tuple::Kind::kTuple) {
    CELL_ASSIGN_OR_RETURN(Tuple nested, t.GetTuple(0));
    CELL_ASSIGN_OR_RETURN(std::string_view blob, nested.GetBytes(0));
    *out = SqlValue::Blob(std::string(blob));
    return Status::OK();
  }
  if (t.kind(0) != Tuple::Kind::kInt && t.kind(0) != Tuple::Kind::kText) {
    return Status::Corruption("a row key's primary key is neither an integer nor a text");
  }
  return ValueAt(t, 0, out);
}

std::string EncodeIndexValue(const SqlValue& value) {
  Tuple t;
  switch (value.type) {
    case SqlValue::Type::kNull:
      t.AddInt(0);
      break;
    case SqlValue::Type::kInteger:
      t.AddInt(1).AddDouble(static_cast<double>(value.integer));
      break;
    case SqlValue::Type::kReal:
      t.AddInt(1).AddDouble(value.real == 0 ? 0.0 : value.real);  // SQLite: -0.0 = 0.0
      break;
    case SqlValue::Type::kText:
      t.AddInt(2).AddText(value.bytes);
      break;
    case SqlValue::Type::kBlob:
      t.AddInt(3).AddBytes(value.bytes);
      break;
  }
  return Pack(t);
}

StatusOr<std::string> PrimaryKeyOfIndexEntry(std::string_view key, std::string_view index_prefix) {
  if (key.size() <= index_prefix.size() || key.substr(0, index_prefix.size()) != index_prefix) {
    return Status::Corruption("an index entry outside its index");
  }
  Tuple t;
  CELL_RETURN_IF_ERROR(Unpack(key.substr(index_prefix.size()), &t));
  if (t.size() < 2) return Status::Corruption("an index entry without its primary key");
  const size_t last = t.size() - 1;
  Tuple pk;
  if (t.kind(last) == Tuple::Kind::kTuple) {
    CELL_ASSIGN_OR_RETURN(Tuple nested, t.GetTuple(last));
    pk.Add(std::move(nested));
  } else {
    SqlValue v;
    CELL_RETURN_IF_ERROR(ValueAt(t, last, &v));
    AddValue(pk, v);
  }
  return Pack(pk);
}

std::string EncodeRow(const std::vector<SqlValue>& values, int skip) {
  Tuple t;
  for (size_t i = 0; i < values.size(); ++i) {
    if (static_cast<int>(i) != skip) AddValue(t, values[i]);
  }
  return Pack(t);
}

Status DecodeRow(std::string_view bytes, size_t columns, int skip, std::vector<SqlValue>* values) {
  Tuple t;
  CELL_RETURN_IF_ERROR(Unpack(bytes, &t));
  const size_t stored = columns - (skip >= 0 ? 1 : 0);
  if (t.size() != stored) {
    return Status::Corruption(fmt::format("a stored row has {} values, the schema {}", t.size(), stored));
  }
  values->resize(columns);
  size_t e = 0;
  for (size_t i = 0; i < columns; ++i) {
    if (static_cast<int>(i) == skip) continue;
    CELL_RETURN_IF_ERROR(ValueAt(t, e++, &(*values)[i]));
  }
  return Status::OK();
}

std::string TableRecord(const Schema& schema, const std::vector<int>& indexes) {
  std::vector<int> sorted = indexes;  // the order the indexes were given in does not matter
  std::sort(sorted.begin(), sorted.end());
  std::string out = "cellsql 1\nschema: " + schema.Canonical() + "\nindexes:";
  for (size_t i = 0; i < sorted.size(); ++i) {
    out += (i == 0 ? " " : ", ") + QuoteIdentifier(schema.columns[sorted[i]].name);
  }
  return out + "\n";
}

}  // namespace cell::sql
