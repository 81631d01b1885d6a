// A scan of a Cell table (xFilter, xNext, xColumn, ...): carries out the ScanPlan xBestIndex chose.
//
// What it reads through:
// - inside a SQL transaction (SQLite has called xBegin, or the connection is in BEGIN ... COMMIT): the transaction's
//   Cell transaction (sql/session.h), so that COMMIT validates what it read;
// - outside one, a lone key lookup: Client::Get (one key is linearizable by itself);
// - outside one, anything else: a read-only Cell transaction of its own, validated when the scan reaches its end
//   (SQLITE_BUSY if a concurrent commit changed what it read), so that a scan such as SELECT SUM(balance) sees one
//   consistent state. A scan longer than kScanChunkReads keys is validated and continued in a new transaction every
//   kScanChunkReads keys (a transaction reads at most kMaxTransactionReads): each chunk is consistent, the whole is
//   not a snapshot. A scan that SQLite stops early (LIMIT) is not validated.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cell/iterator.h"
#include "sql/scan_plan.h"
#include "sql/session.h"
#include "sql/sql_value.h"
#include "sql/table.h"

namespace cell::sql {

inline constexpr size_t kScanChunkReads = 8000;
// The largest page such a scan asks for: the keys it has read when it validates stay under kScanChunkReads plus one
// page, within a transaction's kMaxTransactionReads (10,000).
inline constexpr size_t kScanChunkPairs = 1024;

class Cursor : public sqlite3_vtab_cursor {
 public:
  explicit Cursor(Table* table) : sqlite3_vtab_cursor{}, table_(table) {}

  // xFilter: starts the scan `idx_num` (ScanPlan::Encode) with xBestIndex's values in argv.
  int Filter(int idx_num, int argc, sqlite3_value** argv);
  // xNext.
  int Next();
  bool eof() const { return eof_; }
  // xColumn: the current row's column `column`.
  int Column(sqlite3_context* ctx, int column) const;
  // xRowid (tables keyed by a hidden rowid).
  int64_t rowid() const { return row_key_.integer; }

 private:
  // Computes what to read from the plan and argv: a point key, or [lower_, upper_) of rows or index entries.
  void Bound(int argc, sqlite3_value** argv);
  Status ChooseReader();
  Status Get(const std::string& key, std::string* value);
  // Opens the iterator over [lower_, upper_) in the plan's direction and loads the first row.
  Status Open();
  // From the iterator's position on: the next row that exists (index entries whose row is gone are skipped), or eof.
  Status Load();
  // One step in the plan's direction.
  void Advance();
  // A row's columns from its pk element and stored value.
  Status Decode(std::string_view pk_element, std::string_view value);
  // At the end of a scan through its own transaction: validates it.
  Status Finish();
  // Validates the chunk read so far and continues after the current key in a new transaction.
  Status NextChunk();

  Table* const table_;
  ScanPlan plan_;
  std::shared_ptr<TxnHandle> txn_;  // declared before it_: the iterator goes first
  bool own_txn_ = false;
  std::unique_ptr<Iterator> it_;
  bool point_ = false;  // a single key: point_key_
  std::string point_key_;
  std::string lower_, upper_;  // [lower_, upper_): row keys, or index entries when plan_.uses_index()
  std::string index_prefix_;
  size_t initial_pairs_ = 0;  // from a LIMIT (0: none)
  size_t reads_ = 0;          // keys read through an own transaction since it began
  bool eof_ = true;
  std::string current_key_;  // the iterator's key at the current row
  SqlValue row_key_;
  std::vector<SqlValue> row_;
};

}  // namespace cell::sql
