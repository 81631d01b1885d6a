// Scans of a Cell table (sql/cursor.h).
#include "sql/cursor.h"

#include <algorithm>

#include "cell/limits.h"
#include "sql/key_range.h"

namespace cell::sql {

namespace {

// The smallest key after `key` (nullopt if none: 255 bytes of 0xff).
std::optional<std::string> KeyAfter(const std::string& key) {
  if (key.size() < kMaxKeySize) return key + '\0';
  std::string k = key;
  while (!k.empty() && static_cast<unsigned char>(k.back()) == 0xff) k.pop_back();
  if (k.empty()) return std::nullopt;
  k.back() = static_cast<char>(static_cast<unsigned char>(k.back()) + 1);
  return k;
}

// base + a bound; a lower bound longer than a key may be is cut (it then admits more), an upper one is dropped.
std::string LowerKey(const std::string& base, const std::optional<std::string>& suffix, std::string otherwise) {
  if (!suffix) return otherwise;
  std::string k = base + *suffix;
  if (k.size() > kMaxKeySize) k.resize(kMaxKeySize);
  return std::max(k, otherwise);
}

std::string UpperKey(const std::string& base, const std::optional<std::string>& suffix, std::string otherwise) {
  if (!suffix || base.size() + suffix->size() > kMaxKeySize) return otherwise;
  return std::min(base + *suffix, otherwise);
}

}  // namespace

void Cursor::Bound(int argc, sqlite3_value** argv) {
  const Schema& schema = table_->schema();
  const ColumnType key_type = schema.has_rowid() ? ColumnType::kInteger : schema.columns[schema.primary_key].type;
  const bool index = plan_.uses_index();
  const ColumnType type = index ? schema.columns[plan_.index_column].type : key_type;
  const auto narrow = [&](CompareOp op, sqlite3_value* v) {
    return index ? NarrowIndex(type, op, v) : NarrowKey(type, op, v);
  };
  std::vector<Narrowing> narrowings;
  int arg = 0;
  const bool eq = plan_.kind == ScanPlan::Kind::kKeyEq || plan_.kind == ScanPlan::Kind::kIndexEq;
  if (eq && arg < argc) narrowings.push_back(narrow(CompareOp::kEq, argv[arg++]));
  if (plan_.lower && arg < argc) narrowings.push_back(narrow(*plan_.lower, argv[arg++]));
  if (plan_.upper && arg < argc) narrowings.push_back(narrow(*plan_.upper, argv[arg++]));
  int64_t hint = 0;
  if (plan_.limit && arg < argc) hint = sqlite3_value_int64(argv[arg++]);
  if (plan_.offset && arg < argc && hint > 0) hint += std::max<int64_t>(0, sqlite3_value_int64(argv[arg++]));
  // One more than the rows asked for, as SQLite may drop a row the range admits but its own checks do not.
  initial_pairs_ = hint > 0 ? static_cast<size_t>(std::min<int64_t>(hint + 1, 4096)) : 0;  // 0: no hint
  SuffixRange range;
  bool everything = plan_.kind == ScanPlan::Kind::kFullScan;
  for (const Narrowing& n : narrowings) {
    everything |= index && n.kind == Narrowing::Kind::kAll;  // an index that cannot narrow: read the rows instead
    range.Apply(n);
  }
  eof_ = range.empty;
  if (everything || (!index && !range.lower && !range.upper)) {
    plan_.kind = ScanPlan::Kind::kFullScan;
    lower_ = table_->layout.RowsBegin();
    upper_ = table_->layout.RowsEnd();
    return;
  }
  if (plan_.kind == ScanPlan::Kind::kKeyEq && narrowings[0].kind == Narrowing::Kind::kBound) {
    point_key_ = table_->layout.RowKey(narrowings[0].element);
    point_ = true;
    eof_ |= point_key_.size() > kMaxKeySize;  // no row can have it
    return;
  }
  const std::string base =
      index ? table_->layout.IndexPrefix(schema.columns[plan_.index_column].name) : table_->layout.table_key();
  index_prefix_ = index ? base : std::string();
  lower_ = LowerKey(
      base, range.lower,
      index ? table_->layout.IndexValuesBegin(schema.columns[plan_.index_column].name) : table_->layout.RowsBegin());
  upper_ = UpperKey(base, range.upper, index ? base + '\xff' : table_->layout.RowsEnd());
  eof_ |= lower_ >= upper_;
}

Status Cursor::ChooseReader() {
  Connection& connection = *table_->connection;
  Session* session = connection.Active(table_->client.get());
  if (session == nullptr && connection.autocommit()) {
    if (point_) return Status::OK();  // Client::Get
    CELL_ASSIGN_OR_RETURN(txn_, BeginTxn(table_->client, /*read_only=*/true));
    own_txn_ = true;
    return Status::OK();
  }
  if (session == nullptr) {
    CELL_ASSIGN_OR_RETURN(session, connection.Open(table_->client));
  }
  txn_ = session->handle();
  return Status::OK();
}

Status Cursor::Get(const std::string& key, std::string* value) {
  ++table_->counters.gets;
  ++reads_;
  if (txn_ == nullptr) return table_->client->Get(key, value, ReadOptions{});
  return txn_->txn->Get(key, value);
}

int Cursor::Filter(int idx_num, int argc, sqlite3_value** argv) {
  it_.reset();
  txn_.reset();  // an own transaction not validated yet: that scan was stopped early
  own_txn_ = false;
  point_ = false;
  reads_ = 0;
  plan_ = ScanPlan::Decode(idx_num);
  Bound(argc, argv);
  if (eof_) return SQLITE_OK;
  Status s = ChooseReader();
  if (s.ok() && point_) {
    std::string value;
    s = Get(point_key_, &value);
    eof_ = !s.ok();
    if (s.ok()) {
      s = Decode(table_->layout.PrimaryKeyOf(point_key_), value);
    } else if (s.IsNotFound()) {
      s = Status::OK();
    }
    if (s.ok() && !eof_) ++table_->counters.rows;
  } else if (s.ok()) {
    s = Open();
  }
  if (!s.ok()) {
    eof_ = true;
    return Fail(pVtab, s);
  }
  return SQLITE_OK;
}

Status Cursor::Open() {
  IteratorOptions options;
  options.lower = lower_;
  options.upper = upper_;
  // Without a LIMIT, a scan outside a transaction starts with larger pages (fewer round trips); one inside starts
  // small, as every key it reads joins what its transaction validates (and may conflict on).
  options.initial_pairs = initial_pairs_ > 0 ? initial_pairs_ : own_txn_ ? 64 : 16;
  if (own_txn_) {
    // Pages small enough that a chunk never reads past kMaxTransactionReads before it is validated.
    options.max_pairs = kScanChunkPairs;
    options.initial_pairs = std::min(options.initial_pairs, kScanChunkPairs);
  }
  options.keys_only = plan_.uses_index();
  it_ = txn_->txn->NewIterator(options);
  ++(plan_.uses_index() ? table_->counters.index_scans : table_->counters.scans);
  if (plan_.descending) {
    it_->SeekToLast();
  } else {
    it_->SeekToFirst();
  }
  return Load();
}

Status Cursor::Load() {
  while (it_->Valid()) {
    ++reads_;
    current_key_ = std::string(it_->key());
    if (!plan_.uses_index()) {
      CELL_RETURN_IF_ERROR(Decode(table_->layout.PrimaryKeyOf(current_key_), it_->value()));
      ++table_->counters.rows;
      eof_ = false;
      return Status::OK();
    }
    CELL_ASSIGN_OR_RETURN(std::string pk, PrimaryKeyOfIndexEntry(current_key_, index_prefix_));
    std::string value;
    Status s = Get(table_->layout.RowKey(pk), &value);
    if (s.ok()) {
      CELL_RETURN_IF_ERROR(Decode(pk, value));
      ++table_->counters.rows;
      eof_ = false;
      return Status::OK();
    }
    // An entry whose row is gone: a concurrent change, which the transaction's validation catches.
    if (!s.IsNotFound()) return s;
    Advance();
  }
  eof_ = true;
  CELL_RETURN_IF_ERROR(it_->status());
  return Finish();
}

void Cursor::Advance() {
  if (plan_.descending) {
    it_->Prev();
  } else {
    it_->Next();
  }
}

int Cursor::Next() {
  if (eof_) return SQLITE_OK;
  Status s;
  if (point_ || it_ == nullptr) {
    eof_ = true;
    s = Finish();
  } else if (own_txn_ && reads_ >= kScanChunkReads) {
    s = NextChunk();
  } else {
    Advance();
    s = Load();
  }
  if (!s.ok()) {
    eof_ = true;
    return Fail(pVtab, s);
  }
  return SQLITE_OK;
}

Status Cursor::Finish() {
  it_.reset();
  if (!own_txn_ || txn_ == nullptr) return Status::OK();
  std::shared_ptr<TxnHandle> txn = std::move(txn_);
  ++table_->counters.validations;
  return txn->txn->Commit();
}

Status Cursor::NextChunk() {
  CELL_RETURN_IF_ERROR(Finish());
  if (plan_.descending) {
    upper_ = current_key_;
  } else {
    std::optional<std::string> after = KeyAfter(current_key_);
    if (!after || *after >= upper_) {
      eof_ = true;
      return Status::OK();
    }
    lower_ = *after;
  }
  CELL_ASSIGN_OR_RETURN(txn_, BeginTxn(table_->client, /*read_only=*/true));
  reads_ = 0;
  return Open();
}

Status Cursor::Decode(std::string_view pk_element, std::string_view value) {
  const Schema& schema = table_->schema();
  CELL_RETURN_IF_ERROR(DecodePrimaryKey(pk_element, &row_key_));
  CELL_RETURN_IF_ERROR(DecodeRow(value, schema.columns.size(), schema.primary_key, &row_));
  if (!schema.has_rowid()) row_[schema.primary_key] = row_key_;
  return Status::OK();
}

int Cursor::Column(sqlite3_context* ctx, int column) const {
  if (column >= 0 && static_cast<size_t>(column) < row_.size()) {
    row_[column].ToResult(ctx);
  } else {
    sqlite3_result_null(ctx);
  }
  return SQLITE_OK;
}

}  // namespace cell::sql
