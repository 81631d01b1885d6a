// From a WHERE constraint ("key op value") to the keys that may satisfy it (sql/row_codec.h says what they are).
//
// SQLite checks every constraint again on the rows a scan returns (the module never sets `omit`), so a range here may
// hold more keys than match, never fewer. It is exact where that is easy (an INTEGER or TEXT key against a value of its
// own kind), and wider where SQLite's comparison rules leave room: numbers in an index are compared as doubles; and a
// number against a TEXT column, or anything but a blob against a BLOB column, is compared by rules that depend on
// the other operand's affinity, which a virtual table cannot see, so such a constraint narrows nothing (kAll).
#pragma once

#include <optional>
#include <string>

#include "sql/schema.h"
#include "sql/sqlite_api.h"

namespace cell::sql {

enum class CompareOp { kEq, kGt, kGe, kLt, kLe };

// What one constraint allows, over the pk elements of a table's rows or the (class, value) elements of an index.
struct Narrowing {
  enum class Kind {
    kBound,  // keys with element `op` `element` (as prefixes: an index entry's element is followed by its pk)
    kNone,   // no key (a comparison with NULL, or an INTEGER key against text)
    kAll,    // any key
  };
  Kind kind = Kind::kAll;
  CompareOp op = CompareOp::kEq;
  std::string element;
};

// "key op rhs" for the key column (the PRIMARY KEY, of `type` INTEGER or TEXT, or the rowid: INTEGER).
Narrowing NarrowKey(ColumnType type, CompareOp op, sqlite3_value* rhs);
// "column op rhs" for an indexed column of `type`.
Narrowing NarrowIndex(ColumnType type, CompareOp op, sqlite3_value* rhs);

// Key suffixes (after a table's or an index's prefix) in [lower, upper); nullopt: unbounded on that side.
struct SuffixRange {
  std::optional<std::string> lower, upper;
  bool empty = false;

  // Narrows the range by one constraint.
  void Apply(const Narrowing& n);
};

}  // namespace cell::sql
