// Where a Cell table's rows and index entries live, and their bytes. Every key is a tuple (cell/tuple.h), packed, so
// memcmp order is the tuples' order; P = Pack((prefix)) is the table's tuple prefix:
//
//   key                                        value
//   P                                          the table record: "cellsql 1", the canonical schema, the indexes
//   P + Pack(pk)                               a row: Pack of its other columns, in declared order
//   P + Pack(null, column, class[, v]) + Pack(pk)   an index entry on `column` (its name): empty
//
// pk is the primary key's value (INTEGER: an integer; TEXT: a text, or a nested (bytes) for a BLOB stored there, so
// that texts sort before blobs as in SQLite) or the hidden rowid (an integer). Its order is the key column's SQL
// order, so a forward or reverse scan of P's rows is an ORDER BY on the key. An index value is (class, v) with the
// classes of SQLite's order: 0 NULL (no v), 1 a number (v: its double; -0.0 as 0.0), 2 text, 3 blob. Numbers that
// differ only beyond a double's precision share an entry value, so an index lookup may return a few more rows than
// match, which SQLite's own check of the constraint removes; the order within one value is the key's.
//
// The null after P keeps index entries (P + 0x00 ...) apart from rows (P + a type code >= 0x02): rows lie in
// [P + 0x01, P + 0xff).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cell/status.h"
#include "sql/schema.h"
#include "sql/sql_value.h"

namespace cell::sql {

class KeyLayout {
 public:
  explicit KeyLayout(std::string_view prefix);

  // P: the key of the table record.
  const std::string& table_key() const { return table_key_; }
  // [begin, end) of every row key.
  std::string RowsBegin() const { return table_key_ + '\x01'; }
  std::string RowsEnd() const { return table_key_ + '\xff'; }
  std::string RowKey(std::string_view pk_element) const { return table_key_ + std::string(pk_element); }
  // The key suffix after P of a row key (its pk element); empty if `key` is not a row key of this table.
  std::string_view PrimaryKeyOf(std::string_view row_key) const;

  // P + Pack(null, column name): what every entry of the index on that column starts with.
  std::string IndexPrefix(std::string_view column) const;
  // [begin, end) of the entries of non-NULL values (every class but 0).
  std::string IndexValuesBegin(std::string_view column) const;
  std::string IndexEnd(std::string_view column) const { return IndexPrefix(column) + '\xff'; }

 private:
  std::string table_key_;
};

// The pk element of a key value: an INTEGER, a TEXT or a BLOB (in a TEXT key).
std::string EncodePrimaryKey(const SqlValue& value);
// The value of a pk element (EncodePrimaryKey's inverse). Corruption for bytes that are not one.
Status DecodePrimaryKey(std::string_view element, SqlValue* out);
// The (class, v) element of an indexed value.
std::string EncodeIndexValue(const SqlValue& value);
// The pk element at the end of an index entry (`key` starts with `index_prefix`).
StatusOr<std::string> PrimaryKeyOfIndexEntry(std::string_view key, std::string_view index_prefix);

// A row's stored value: every column but `skip` (the primary key column, or -1), in order.
std::string EncodeRow(const std::vector<SqlValue>& values, int skip);
// Fills `values` (schema.columns.size() of them) from a stored row, leaving `skip` alone.
Status DecodeRow(std::string_view bytes, size_t columns, int skip, std::vector<SqlValue>* values);

// What the table record holds for this schema and these indexes.
std::string TableRecord(const Schema& schema, const std::vector<int>& indexes);

}  // namespace cell::sql
