// How one scan reads a Cell table: what xBestIndex chooses from the WHERE and ORDER BY SQLite offers, and xFilter
// carries out. Pure logic over plain structs, so it is tested without SQLite.
//
// The plans, cheapest first (SQLite compares estimatedCost across the calls it makes, a cost of N meaning "like
// reading N rows"; a table's size is unknown, so it is taken as kAssumedRows):
//   kKeyEq      key = v: one Get                                       cost 1, 1 row, SQLITE_INDEX_SCAN_UNIQUE
//   kIndexEq    column = v on an indexed column: its entries, a Get each   cost 20, 10 rows
//   kKeyRange   key > / >= / < / <= v (one side or both): an iterator     rows N/4 one side, N/64 both; cost = rows
//   kIndexRange the same on an indexed column                             cost twice its rows (a Get per entry)
//   kFullScan   every row, by an iterator                                 cost N
// Rows of kKeyEq, kKeyRange, kFullScan and kIndexEq come out in key order, either way, so an ORDER BY whose first term
// is the key (ASC or DESC) is consumed; not when the equality comes from an IN (SQLite then runs one scan per value).
// LIMIT and OFFSET (SQLite >= 3.38) are taken as a read-ahead hint when the order is consumed or there is none:
// SQLite still applies them, and still checks every constraint (none is omitted).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sql/key_range.h"
#include "sql/schema.h"

namespace cell::sql {

inline constexpr double kAssumedRows = 1e6;

struct ScanPlan {
  enum class Kind { kFullScan = 0, kKeyEq = 1, kKeyRange = 2, kIndexEq = 3, kIndexRange = 4 };
  Kind kind = Kind::kFullScan;
  int index_column = -1;           // kIndexEq, kIndexRange: the indexed column
  std::optional<CompareOp> lower;  // ranges: kGt or kGe
  std::optional<CompareOp> upper;  // ranges: kLt or kLe
  bool descending = false;
  bool limit = false;   // a LIMIT value follows in xFilter's argv
  bool offset = false;  // an OFFSET value follows

  bool uses_index() const { return kind == Kind::kIndexEq || kind == Kind::kIndexRange; }
  // xFilter's argv holds, in this order, those present: the equality's value or the lower bound, the upper bound,
  // the LIMIT, the OFFSET.
  int argc() const;
  // idxNum: bits 0-2 kind, 3-4 lower (1 >, 2 >=), 5-6 upper (1 <, 2 <=), 7 descending, 8 limit, 9 offset, 16-30
  // index column.
  int Encode() const;
  static ScanPlan Decode(int idx_num);
  // idxStr, for EXPLAIN QUERY PLAN: "key =", "key > <=", "index score >=", "full scan", + " desc", " limit".
  std::string Describe(const Schema& schema) const;
};

// What xBestIndex is given, in plain form. A column of -1 is the rowid.
struct PlanInput {
  struct Constraint {
    int column = 0;
    int op = 0;           // SQLITE_INDEX_CONSTRAINT_*
    bool usable = false;  // sqlite3_index_info's usable
    bool binary = true;   // its collation is BINARY (sqlite3_vtab_collation)
    bool in = false;      // an IN list (sqlite3_vtab_in(..., -1))
  };
  struct OrderTerm {
    int column = 0;
    bool desc = false;
  };
  std::vector<Constraint> constraints;
  std::vector<OrderTerm> order_by;
};

struct PlanChoice {
  ScanPlan plan;
  std::vector<int> argv;  // the constraints (indexes into PlanInput::constraints) passed to xFilter, in order
  bool order_consumed = false;
  bool unique = false;  // at most one row (SQLITE_INDEX_SCAN_UNIQUE)
  double cost = kAssumedRows;
  int64_t rows = static_cast<int64_t>(kAssumedRows);
};

// The cheapest plan for a table of `schema` with indexes on the columns `indexes`.
PlanChoice ChoosePlan(const Schema& schema, const std::vector<int>& indexes, const PlanInput& input);

}  // namespace cell::sql
