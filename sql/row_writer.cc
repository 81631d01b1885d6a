// INSERT, UPDATE and DELETE of a Cell table's rows (sql/row_writer.h).
#include "sql/row_writer.h"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "cell/limits.h"

namespace cell::sql {

namespace {

// A row ready to write: its key, its stored value, and one entry per index (in TableOptions::indexes' order).
struct EncodedRow {
  std::string key;
  std::string value;
  std::vector<std::string> index_keys;
};

// A row as stored before a change: its key, value and index entries.
struct StoredRow {
  std::string key;
  std::string value;
  std::vector<std::string> index_keys;
};

class RowWriter {
 public:
  RowWriter(Table* table, Session* session) : t_(*table), session_(*session), schema_(table->schema()) {}

  int Insert(sqlite3_value** argv, sqlite3_int64* rowid);
  int Update(sqlite3_value** argv);
  int Delete(sqlite3_value* key);

 private:
  int Fail(int code, const std::string& message) { return sql::Fail(&t_, code, message); }
  int Fail(const Status& status) { return sql::Fail(&t_, status); }
  std::string ColumnName(int column) const { return t_.name + "." + schema_.columns[column].name; }

  // The columns of argv (argv[2...]) with their affinity; NOT NULL checked (except an INTEGER key's, which may be
  // NULL: a new key is picked).
  int ReadColumns(sqlite3_value** columns, std::vector<SqlValue>* values);
  // The key of the new row: the key column (or argv[1], the rowid). `allocate`: NULL may pick a new key.
  int NewKey(sqlite3_value* rowid_arg, bool allocate, std::vector<SqlValue>* values, SqlValue* key);
  StatusOr<int64_t> NextRowid();
  int Encode(const SqlValue& key, const std::vector<SqlValue>& values, EncodedRow* out);
  // The stored row at `key` (nullopt if there is none), with its index entries.
  StatusOr<std::optional<StoredRow>> Read(const std::string& key);
  // Removes a stored row and its index entries; writes a new one over `old` (nullopt: none), only the index
  // entries that change.
  Status Remove(const StoredRow& row);
  Status Write(const EncodedRow& row, const std::optional<StoredRow>& old);
  bool Replacing() const { return sqlite3_vtab_on_conflict(t_.connection->db()) == SQLITE_REPLACE; }
  int KeyTaken(const SqlValue& key) {
    const int column = schema_.has_rowid() ? -1 : schema_.primary_key;
    return Fail(SQLITE_CONSTRAINT_PRIMARYKEY,
                fmt::format("UNIQUE constraint failed: {} (a row with key {} exists)",
                            column < 0 ? t_.name + ".rowid" : ColumnName(column), key.ToString()));
  }

  Table& t_;
  Session& session_;
  const Schema& schema_;
};

int RowWriter::ReadColumns(sqlite3_value** columns, std::vector<SqlValue>* values) {
  values->clear();
  for (size_t i = 0; i < schema_.columns.size(); ++i) {
    const Column& c = schema_.columns[i];
    values->push_back(WithAffinity(columns[i], c.type));
    const bool key = static_cast<int>(i) == schema_.primary_key;
    const bool may_be_null = key ? c.type == ColumnType::kInteger : !c.not_null;
    if (values->back().is_null() && !may_be_null) {
      return Fail(SQLITE_CONSTRAINT_NOTNULL, fmt::format("NOT NULL constraint failed: {}", ColumnName(i)));
    }
  }
  return SQLITE_OK;
}

StatusOr<int64_t> RowWriter::NextRowid() {
  IteratorOptions options;
  options.lower = t_.layout.RowsBegin();
  options.upper = t_.layout.RowsEnd();
  options.initial_pairs = 1;
  options.keys_only = true;
  std::unique_ptr<Iterator> it = session_.txn().NewIterator(options);
  it->SeekToLast();
  if (!it->Valid()) {
    CELL_RETURN_IF_ERROR(it->status());
    return 1;
  }
  SqlValue last;
  CELL_RETURN_IF_ERROR(DecodePrimaryKey(t_.layout.PrimaryKeyOf(it->key()), &last));
  if (last.type != SqlValue::Type::kInteger) return Status::Corruption("an INTEGER key that is not an integer");
  if (last.integer == INT64_MAX) {
    return Status::ResourceExhausted("the largest key is 9223372036854775807: give the new row's key");
  }
  return std::max<int64_t>(last.integer + 1, 1);
}

int RowWriter::NewKey(sqlite3_value* rowid_arg, bool allocate, std::vector<SqlValue>* values, SqlValue* key) {
  const bool rowid = schema_.has_rowid();
  *key = rowid ? FromSqlite(rowid_arg) : (*values)[schema_.primary_key];
  const bool integer = rowid || schema_.columns[schema_.primary_key].type == ColumnType::kInteger;
  if (key->is_null() && integer && allocate) {
    StatusOr<int64_t> next = NextRowid();
    if (!next.ok()) return Fail(next.status());
    *key = SqlValue::Integer(*next);
  }
  const std::string name = rowid ? t_.name + ".rowid" : ColumnName(schema_.primary_key);
  if (integer && key->type != SqlValue::Type::kInteger) {
    return Fail(SQLITE_MISMATCH, fmt::format("datatype mismatch: {} is an INTEGER key, not {}", name, key->ToString()));
  }
  if (key->is_null()) return Fail(SQLITE_CONSTRAINT_NOTNULL, fmt::format("NOT NULL constraint failed: {}", name));
  if (!rowid) (*values)[schema_.primary_key] = *key;
  return SQLITE_OK;
}

int RowWriter::Encode(const SqlValue& key, const std::vector<SqlValue>& values, EncodedRow* out) {
  const std::string pk = EncodePrimaryKey(key);
  out->key = t_.layout.RowKey(pk);
  if (out->key.size() > kMaxKeySize) {
    const std::string column = schema_.has_rowid() ? "rowid" : schema_.columns[schema_.primary_key].name;
    return Fail(SQLITE_TOOBIG, fmt::format("key column {}: the key of {} is {} bytes encoded (with the table's prefix "
                                           "'{}'), over Cell's limit of {} bytes; use a shorter key",
                                           column, key.ToString(), out->key.size(), t_.options.prefix, kMaxKeySize));
  }
  out->value = EncodeRow(values, schema_.primary_key);
  if (out->value.size() > kMaxValueSize) {
    return Fail(SQLITE_TOOBIG, fmt::format("the row with key {} is {} bytes encoded, over Cell's limit of {} bytes "
                                           "per row",
                                           key.ToString(), out->value.size(), kMaxValueSize));
  }
  out->index_keys.clear();
  for (const int column : t_.options.indexes) {
    const std::string& name = schema_.columns[column].name;
    out->index_keys.push_back(t_.layout.IndexPrefix(name) + EncodeIndexValue(values[column]) + pk);
    if (out->index_keys.back().size() > kMaxKeySize) {
      return Fail(SQLITE_TOOBIG,
                  fmt::format("indexed column {}: its entry for {} is {} bytes encoded, over Cell's "
                              "key limit of {} bytes; store shorter values in an indexed column",
                              name, values[column].ToString(), out->index_keys.back().size(), kMaxKeySize));
    }
  }
  return SQLITE_OK;
}

StatusOr<std::optional<StoredRow>> RowWriter::Read(const std::string& key) {
  StoredRow row;
  row.key = key;
  ++t_.counters.gets;
  Status s = session_.txn().Get(key, &row.value);
  if (s.IsNotFound()) return std::optional<StoredRow>();
  CELL_RETURN_IF_ERROR(s);
  if (!t_.options.indexes.empty()) {
    std::vector<SqlValue> values;
    CELL_RETURN_IF_ERROR(DecodeRow(row.value, schema_.columns.size(), schema_.primary_key, &values));
    const std::string pk(t_.layout.PrimaryKeyOf(key));
    for (const int column : t_.options.indexes) {
      row.index_keys.push_back(t_.layout.IndexPrefix(schema_.columns[column].name) + EncodeIndexValue(values[column]) +
                               pk);
    }
  }
  return std::optional<StoredRow>(std::move(row));
}

Status RowWriter::Remove(const StoredRow& row) {
  for (const std::string& k : row.index_keys) CELL_RETURN_IF_ERROR(session_.Delete(k, std::string()));
  return session_.Delete(row.key, row.value);
}

Status RowWriter::Write(const EncodedRow& row, const std::optional<StoredRow>& old) {
  for (size_t i = 0; i < row.index_keys.size(); ++i) {
    const bool same = old && old->index_keys[i] == row.index_keys[i];
    if (old && !same) CELL_RETURN_IF_ERROR(session_.Delete(old->index_keys[i], std::string()));
    if (!same) CELL_RETURN_IF_ERROR(session_.Put(row.index_keys[i], "", std::nullopt));
  }
  return session_.Put(row.key, row.value, old ? std::optional<std::string>(old->value) : std::nullopt);
}

int RowWriter::Insert(sqlite3_value** argv, sqlite3_int64* rowid) {
  std::vector<SqlValue> values;
  SqlValue key;
  EncodedRow row;
  if (int rc = ReadColumns(argv + 2, &values); rc != SQLITE_OK) return rc;
  if (int rc = NewKey(argv[1], /*allocate=*/true, &values, &key); rc != SQLITE_OK) return rc;
  if (int rc = Encode(key, values, &row); rc != SQLITE_OK) return rc;
  StatusOr<std::optional<StoredRow>> old = Read(row.key);
  if (!old.ok()) return Fail(old.status());
  if (old->has_value() && !Replacing()) return KeyTaken(key);
  if (Status s = Write(row, *old); !s.ok()) return Fail(s);
  if (schema_.has_rowid()) *rowid = key.integer;
  return SQLITE_OK;
}

int RowWriter::Update(sqlite3_value** argv) {
  std::vector<SqlValue> values;
  SqlValue key;
  EncodedRow row;
  if (int rc = ReadColumns(argv + 2, &values); rc != SQLITE_OK) return rc;
  if (int rc = NewKey(argv[1], /*allocate=*/false, &values, &key); rc != SQLITE_OK) return rc;
  if (int rc = Encode(key, values, &row); rc != SQLITE_OK) return rc;
  StatusOr<std::optional<StoredRow>> old = Read(t_.layout.RowKey(EncodePrimaryKey(FromSqlite(argv[0]))));
  if (!old.ok()) return Fail(old.status());
  if (!old->has_value()) return SQLITE_OK;  // gone already (this statement replaced it)
  Status s;
  if ((*old)->key == row.key) {
    s = Write(row, *old);
  } else {
    // A new key: the row moves (delete and insert), over a row already there only with OR REPLACE.
    StatusOr<std::optional<StoredRow>> there = Read(row.key);
    if (!there.ok()) return Fail(there.status());
    if (there->has_value() && !Replacing()) return KeyTaken(key);
    if (there->has_value()) s = Remove(**there);
    if (s.ok()) s = Remove(**old);
    if (s.ok()) s = Write(row, std::nullopt);
  }
  return s.ok() ? SQLITE_OK : Fail(s);
}

int RowWriter::Delete(sqlite3_value* key) {
  StatusOr<std::optional<StoredRow>> old = Read(t_.layout.RowKey(EncodePrimaryKey(FromSqlite(key))));
  if (!old.ok()) return Fail(old.status());
  if (!old->has_value()) return SQLITE_OK;
  Status s = Remove(**old);
  return s.ok() ? SQLITE_OK : Fail(s);
}

}  // namespace

int UpdateRow(Table* table, int argc, sqlite3_value** argv, sqlite3_int64* rowid) {
  StatusOr<Session*> session = table->connection->Open(table->client);
  if (!session.ok()) return Fail(table, session.status());
  (*session)->Join();
  RowWriter writer(table, *session);
  if (argc == 1) return writer.Delete(argv[0]);
  if (argc != static_cast<int>(table->schema().columns.size()) + 2) {
    return Fail(table, SQLITE_ERROR,
                fmt::format("xUpdate with {} values for {} columns", argc - 2, table->schema().columns.size()));
  }
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return writer.Insert(argv, rowid);
  return writer.Update(argv);
}

}  // namespace cell::sql
