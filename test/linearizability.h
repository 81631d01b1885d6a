// A linearizability checker for histories of operations on a map of registers (Wing & Gong's search, with Lowe's
// memoization of (linearized set, state) pairs). Keys are independent registers, and linearizability is local, so
// each key's history is checked on its own.
//
// An operation is its call and return times (any clock shared by the recording threads) and what it did:
//   put(v)       always succeeds; the register holds v after it
//   get -> v|-   must see the register's value (or that it is empty)
//   delete -> f  f says whether the register held a value; it is empty after it
// A history is linearizable if some order of the operations, consistent with real time (an operation that returned
// before another was called comes first), explains every result.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cell::testing {

struct RegisterOp {
  enum class Kind { kPut, kGet, kDelete };
  Kind kind = Kind::kGet;
  std::string key;
  std::string value;   // put: the value written; get: the value read (if found)
  bool found = false;  // get: a value was read; delete: a value was removed
  uint64_t call = 0, ret = 0;
};

namespace internal {

// Wing-Gong search over one key's operations. `done` has one bit per operation.
class RegisterChecker {
 public:
  explicit RegisterChecker(std::vector<RegisterOp> ops) : ops_(std::move(ops)) {}

  bool Check() {
    if (ops_.size() > 4096) return false;  // the bitset below; histories are far smaller in practice
    std::vector<bool> done(ops_.size(), false);
    return Search(done, 0, std::nullopt);
  }

 private:
  // Can the operations not yet in `done` be linearized after the ones in it, starting from `state`?
  bool Search(std::vector<bool>& done, size_t count, const std::optional<std::string>& state) {
    if (count == ops_.size()) return true;
    const std::pair<std::vector<bool>, std::optional<std::string>> memo_key(done, state);
    if (failed_.count(memo_key) != 0) return false;
    // Only an operation called before every pending operation has returned can come next.
    uint64_t min_ret = UINT64_MAX;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (!done[i]) min_ret = std::min(min_ret, ops_[i].ret);
    }
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (done[i] || ops_[i].call > min_ret) continue;
      std::optional<std::string> next;
      if (!Apply(ops_[i], state, &next)) continue;
      done[i] = true;
      if (Search(done, count + 1, next)) return true;
      done[i] = false;
    }
    failed_.insert(memo_key);
    return false;
  }

  // Whether `op` is explained by `state`, and the state after it.
  static bool Apply(const RegisterOp& op, const std::optional<std::string>& state, std::optional<std::string>* next) {
    switch (op.kind) {
      case RegisterOp::Kind::kPut:
        *next = op.value;
        return true;
      case RegisterOp::Kind::kGet:
        *next = state;
        return op.found ? state.has_value() && *state == op.value : !state.has_value();
      case RegisterOp::Kind::kDelete:
        *next = std::nullopt;
        return op.found == state.has_value();
    }
    return false;
  }

  std::vector<RegisterOp> ops_;
  std::set<std::pair<std::vector<bool>, std::optional<std::string>>> failed_;
};

}  // namespace internal

// True if the history is linearizable; otherwise *why names the first key whose history is not. Every register
// starts empty.
inline bool IsLinearizable(const std::vector<RegisterOp>& history, std::string* why) {
  std::map<std::string, std::vector<RegisterOp>> by_key;
  for (const RegisterOp& op : history) by_key[op.key].push_back(op);
  for (auto& [key, ops] : by_key) {
    if (!internal::RegisterChecker(ops).Check()) {
      if (why != nullptr) *why = "the history of key '" + key + "' (" + std::to_string(ops.size()) + " operations)";
      return false;
    }
  }
  return true;
}

}  // namespace cell::testing
