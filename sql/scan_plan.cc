// Choosing and encoding scan plans (sql/scan_plan.h).
#include "sql/scan_plan.h"

#include "sql/sqlite_api.h"

namespace cell::sql {

namespace {

// The usable constraints on one column that a plan can use: the first of each kind (SQLite checks the others).
struct ColumnConstraints {
  int eq = -1;
  int lower = -1;  // > or >=
  int upper = -1;  // < or <=
};

ColumnConstraints FindConstraints(const PlanInput& input, int column) {
  ColumnConstraints found;
  for (size_t i = 0; i < input.constraints.size(); ++i) {
    const PlanInput::Constraint& c = input.constraints[i];
    if (!c.usable || !c.binary || c.column != column) continue;
    const int n = static_cast<int>(i);
    if (c.op == SQLITE_INDEX_CONSTRAINT_EQ) {
      // An equality that is no IN list is preferred: its rows come out in key order.
      if (found.eq < 0 || (input.constraints[found.eq].in && !c.in)) found.eq = n;
    } else if ((c.op == SQLITE_INDEX_CONSTRAINT_GT || c.op == SQLITE_INDEX_CONSTRAINT_GE) && found.lower < 0) {
      found.lower = n;
    } else if ((c.op == SQLITE_INDEX_CONSTRAINT_LT || c.op == SQLITE_INDEX_CONSTRAINT_LE) && found.upper < 0) {
      found.upper = n;
    }
  }
  return found;
}

PlanChoice Equality(ScanPlan::Kind kind, int column, int constraint, const PlanInput& input) {
  PlanChoice c;
  c.plan.kind = kind;
  c.plan.index_column = kind == ScanPlan::Kind::kIndexEq ? column : -1;
  c.argv = {constraint};
  if (kind == ScanPlan::Kind::kKeyEq) {
    c.cost = 1;
    c.rows = 1;
    c.unique = !input.constraints[constraint].in;
  } else {
    c.cost = 20;
    c.rows = 10;
  }
  return c;
}

PlanChoice Range(ScanPlan::Kind kind, int column, const ColumnConstraints& found, const PlanInput& input) {
  PlanChoice c;
  c.plan.kind = kind;
  c.plan.index_column = kind == ScanPlan::Kind::kIndexRange ? column : -1;
  if (found.lower >= 0) {
    c.argv.push_back(found.lower);
    c.plan.lower = input.constraints[found.lower].op == SQLITE_INDEX_CONSTRAINT_GT ? CompareOp::kGt : CompareOp::kGe;
  }
  if (found.upper >= 0) {
    c.argv.push_back(found.upper);
    c.plan.upper = input.constraints[found.upper].op == SQLITE_INDEX_CONSTRAINT_LT ? CompareOp::kLt : CompareOp::kLe;
  }
  const double rows = c.argv.size() == 2 ? kAssumedRows / 64 : kAssumedRows / 4;
  c.rows = static_cast<int64_t>(rows);
  c.cost = kind == ScanPlan::Kind::kIndexRange ? 2 * rows : rows;
  return c;
}

// ORDER BY, LIMIT and OFFSET for the chosen plan.
void Finish(int key, const PlanInput& input, PlanChoice* c) {
  using Kind = ScanPlan::Kind;
  const Kind kind = c->plan.kind;
  const bool in = (kind == Kind::kKeyEq || kind == Kind::kIndexEq) && input.constraints[c->argv[0]].in;
  const bool key_ordered =
      kind == Kind::kFullScan || kind == Kind::kKeyEq || kind == Kind::kKeyRange || (kind == Kind::kIndexEq && !in);
  if (!input.order_by.empty() && key_ordered && !in && input.order_by[0].column == key) {
    c->order_consumed = true;
    c->plan.descending = input.order_by[0].desc;
  }
  if (!input.order_by.empty() && !c->order_consumed) return;
  for (const int op : {SQLITE_INDEX_CONSTRAINT_LIMIT, SQLITE_INDEX_CONSTRAINT_OFFSET}) {
    for (size_t i = 0; i < input.constraints.size(); ++i) {
      if (!input.constraints[i].usable || input.constraints[i].op != op) continue;
      c->argv.push_back(static_cast<int>(i));
      (op == SQLITE_INDEX_CONSTRAINT_LIMIT ? c->plan.limit : c->plan.offset) = true;
      break;
    }
  }
  if (c->plan.offset && !c->plan.limit) {  // an OFFSET alone is no read-ahead hint
    c->argv.pop_back();
    c->plan.offset = false;
  }
}

}  // namespace

PlanChoice ChoosePlan(const Schema& schema, const std::vector<int>& indexes, const PlanInput& input) {
  using Kind = ScanPlan::Kind;
  const int key = schema.primary_key;     // -1: the rowid
  std::vector<PlanChoice> candidates(1);  // a full scan
  const ColumnConstraints k = FindConstraints(input, key);
  if (k.eq >= 0) candidates.push_back(Equality(Kind::kKeyEq, key, k.eq, input));
  if (k.lower >= 0 || k.upper >= 0) candidates.push_back(Range(Kind::kKeyRange, key, k, input));
  for (const int column : indexes) {
    const ColumnConstraints c = FindConstraints(input, column);
    if (c.eq >= 0) candidates.push_back(Equality(Kind::kIndexEq, column, c.eq, input));
    if (c.lower >= 0 || c.upper >= 0) candidates.push_back(Range(Kind::kIndexRange, column, c, input));
  }
  PlanChoice best = candidates[0];
  for (const PlanChoice& c : candidates) {
    if (c.cost < best.cost) best = c;
  }
  Finish(key, input, &best);
  return best;
}

int ScanPlan::argc() const {
  int n = (kind == Kind::kKeyEq || kind == Kind::kIndexEq) ? 1 : 0;
  n += (lower ? 1 : 0) + (upper ? 1 : 0) + (limit ? 1 : 0) + (offset ? 1 : 0);
  return n;
}

int ScanPlan::Encode() const {
  int n = static_cast<int>(kind);
  if (lower) n |= (*lower == CompareOp::kGt ? 1 : 2) << 3;
  if (upper) n |= (*upper == CompareOp::kLt ? 1 : 2) << 5;
  if (descending) n |= 1 << 7;
  if (limit) n |= 1 << 8;
  if (offset) n |= 1 << 9;
  return n | ((index_column + 1) << 16);
}

ScanPlan ScanPlan::Decode(int idx_num) {
  ScanPlan p;
  const int kind = idx_num & 7;
  p.kind = kind <= static_cast<int>(Kind::kIndexRange) ? static_cast<Kind>(kind) : Kind::kFullScan;
  const int lower = (idx_num >> 3) & 3, upper = (idx_num >> 5) & 3;
  if (lower != 0) p.lower = lower == 1 ? CompareOp::kGt : CompareOp::kGe;
  if (upper != 0) p.upper = upper == 1 ? CompareOp::kLt : CompareOp::kLe;
  p.descending = (idx_num >> 7) & 1;
  p.limit = (idx_num >> 8) & 1;
  p.offset = (idx_num >> 9) & 1;
  p.index_column = ((idx_num >> 16) & 0x7fff) - 1;
  return p;
}

std::string ScanPlan::Describe(const Schema& schema) const {
  std::string out;
  if (kind == Kind::kFullScan) {
    out = "full scan";
  } else {
    const bool index = uses_index() && index_column >= 0 && index_column < static_cast<int>(schema.columns.size());
    out = index ? "index " + schema.columns[index_column].name : "key";
    if (kind == Kind::kKeyEq || kind == Kind::kIndexEq) out += " =";
    if (lower) out += *lower == CompareOp::kGt ? " >" : " >=";
    if (upper) out += *upper == CompareOp::kLt ? " <" : " <=";
  }
  if (descending) out += " desc";
  if (limit) out += " limit";
  return out;
}

}  // namespace cell::sql
