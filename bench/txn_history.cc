// cell-bench's histories (see txn_history.h): tags and the values that carry them, the per-thread record, and its
// conversion into a list-append history for the checker.
#include "bench/txn_history.h"

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <memory>
#include <random>
#include <utility>

namespace cell::bench {

namespace sz = serializability;

namespace {

constexpr int kNonceShift = 45;
constexpr int kThreadShift = 36;
constexpr uint64_t kNonceMask = (uint64_t{1} << 18) - 1;
constexpr uint64_t kThreadMask = (uint64_t{1} << 9) - 1;
constexpr uint64_t kCountMask = (uint64_t{1} << kThreadShift) - 1;
constexpr int kMaxThreads = static_cast<int>(kThreadMask) + 1;

uint32_t NonceOf(uint64_t tag) { return static_cast<uint32_t>((tag >> kNonceShift) & kNonceMask); }
int ThreadOf(uint64_t tag) { return static_cast<int>((tag >> kThreadShift) & kThreadMask); }
uint64_t CountOf(uint64_t tag) { return tag & kCountMask; }

template <typename T>
bool ParseWhole(std::string_view text, T* value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

uint32_t NewRunNonce() {
  std::random_device device;
  const uint64_t r = (uint64_t{device()} << 32) ^ device();
  return static_cast<uint32_t>(1 + r % kNonceMask);
}

int64_t TagElement(uint64_t tag) {
  return static_cast<int64_t>(ThreadOf(tag) + 1) * 1'000'000'000'000 + static_cast<int64_t>(CountOf(tag));
}

std::string BankValue(int64_t balance, uint64_t tag) { return fmt::format("{} {}", balance, tag); }

bool ParseBankValue(std::string_view value, int64_t* balance, uint64_t* tag) {
  const size_t space = value.find(' ');
  *tag = 0;
  if (!ParseWhole(value.substr(0, space), balance)) return false;
  return space == std::string_view::npos || ParseWhole(value.substr(space + 1), tag);
}

std::string TaggedValue(uint64_t tag, std::string_view value) {
  std::string out = std::to_string(tag);
  out += ':';
  out += value;
  return out;
}

std::string_view SplitTag(std::string_view value, uint64_t* tag) {
  *tag = 0;
  size_t digits = 0;
  while (digits < value.size() && digits <= 20 && value[digits] >= '0' && value[digits] <= '9') ++digits;
  if (digits == 0 || digits >= value.size() || value[digits] != ':') return value;
  uint64_t parsed = 0;
  if (!ParseWhole(value.substr(0, digits), &parsed)) return value;
  *tag = parsed;
  return value.substr(digits + 1);
}

int64_t ThreadHistory::Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ThreadHistory::ThreadHistory(uint32_t nonce, int thread, uint64_t max_txns, std::atomic<int64_t>* budget)
    : nonce_(static_cast<uint32_t>(nonce & kNonceMask)),
      thread_(thread),
      base_((uint64_t{nonce_} << kNonceShift) | ((static_cast<uint64_t>(thread) & kThreadMask) << kThreadShift)),
      max_txns_(max_txns),
      budget_(budget) {
  if (max_txns_ == 0) unrecorded_from_ = 1;
}

void ThreadHistory::BeginTransaction() {
  open_ = false;
  recording_ = false;
  if (unrecorded_from_ != kNever) return;  // stopped for good
  if (txns_ < max_txns_ && (budget_ == nullptr || budget_->fetch_sub(1, std::memory_order_relaxed) > 0)) {
    ++txns_;
    recording_ = true;
  } else {
    unrecorded_from_ = writes_ + 1;
  }
}

void ThreadHistory::BeginAttempt(int64_t now_ns) {
  if (!recording_) return;
  if (open_) attempts_.back().end_ns = now_ns;  // the previous attempt conflicted (aborted already)
  attempts_.push_back({now_ns, now_ns, ops_.size(), AttemptOutcome::kAborted});
  open_ = true;
}

void ThreadHistory::Wrote(uint64_t key, uint64_t tag) {
  if (!recording_) return;
  const uint64_t first = open_ ? attempts_.back().first_op : ops_.size();
  for (uint64_t i = ops_.size(); i > first; --i) {
    Op& op = ops_[i - 1];
    if (op.key != key) continue;
    if (op.written == 0) {
      op.written = tag;
      return;
    }
    break;  // its last operation on the key wrote it already: this write read nothing
  }
  ops_.push_back({key, kNoRead, tag});
}

void ThreadHistory::EndTransaction(const Status& status, int64_t now_ns) {
  if (!recording_ || !open_) return;
  Attempt& last = attempts_.back();
  last.end_ns = now_ns;
  if (status.ok()) {
    last.outcome = AttemptOutcome::kCommitted;
  } else if (status.code() == Status::Code::kUnavailable || status.code() == Status::Code::kDeadlineExceeded) {
    last.outcome = AttemptOutcome::kUnknown;
  } else {
    last.outcome = AttemptOutcome::kAborted;
  }
  open_ = false;
}

namespace {

// The conversion (see the header), in phases over the attempts in the order of their starts: the versions, which
// attempts count, forks, where each version's chain leads, the drops of a cut, the shared lists, the history.
class Converter {
 public:
  Converter(const std::vector<const ThreadHistory*>& threads, const std::function<std::string(uint64_t)>& key_name,
            const sz::CheckOptions& options)
      : threads_(threads), key_name_(key_name), options_(options) {}

  ConvertedHistory Run();

 private:
  // Where a tag leads. kRoot: the key's value from before the run; kPlaced: a version whose chain reaches it.
  enum class State : uint8_t { kNew, kWalking, kPlaced, kRoot, kUnrecorded, kGarbage, kCycle };

  struct Version {
    uint64_t key;
    uint64_t pred;    // the tag its write read
    uint32_t writer;  // the attempt
    State state = State::kNew;
    bool live = false;   // a kept read needs its list
    uint32_t depth = 0;  // its list: (*lists_[list])[0, depth)
    int32_t list = -1;
    uint64_t bad = 0;  // kGarbage, kCycle: the tag its chain goes wrong at
  };

  const ThreadHistory::Attempt& AttemptOf(uint32_t gid) const {
    return order_[gid].thread->attempts()[order_[gid].index];
  }
  std::pair<const ThreadHistory::Op*, const ThreadHistory::Op*> OpsOf(uint32_t gid) const {
    const ThreadHistory& thread = *order_[gid].thread;
    const uint32_t index = order_[gid].index;
    const uint64_t first = thread.attempts()[index].first_op;
    const uint64_t end =
        index + 1 < thread.attempts().size() ? thread.attempts()[index + 1].first_op : thread.ops().size();
    return {thread.ops().data() + first, thread.ops().data() + end};
  }
  sz::Outcome OutcomeOf(uint32_t gid) const {
    switch (AttemptOf(gid).outcome) {
      case AttemptOutcome::kCommitted:
        return sz::Outcome::kCommitted;
      case AttemptOutcome::kUnknown:
        return sz::Outcome::kUnknown;
      case AttemptOutcome::kAborted:
        break;
    }
    return sz::Outcome::kAborted;
  }
  int64_t IdOf(uint32_t gid) const { return static_cast<int64_t>(gid) + 1; }
  std::string Name(uint64_t key) {
    auto [it, fresh] = names_.try_emplace(key);
    if (fresh) it->second = key_name_(key);
    return it->second;
  }
  std::string DescribeTag(uint64_t tag) const {
    if (tag == ThreadHistory::kNoRead) return "no tag";
    if (NonceOf(tag) == nonce_ && tag != 0) return fmt::format("{}", TagElement(tag));
    return fmt::format("the value from before the run (tag {})", tag);
  }

  void IndexVersions();
  void DecideEffective();
  void FindForks();
  State Foreign(uint64_t key, uint64_t tag);
  State StateOf(uint64_t tag);
  State ReadState(uint64_t key, uint64_t tag, uint64_t* bad);
  void ResolveReads();
  void DropAfterCut();
  void BuildLists();
  void BuildHistory();
  void Report(sz::AnomalyType type, std::string text, std::vector<int64_t> txns);

  static constexpr size_t kCopyBudget = size_t{20} << 20;  // elements copied for the branches of forks

  const std::vector<const ThreadHistory*>& threads_;
  const std::function<std::string(uint64_t)>& key_name_;
  const sz::CheckOptions options_;
  ConvertedHistory out_;
  struct Ref {
    const ThreadHistory* thread;
    uint32_t index;
  };
  std::vector<Ref> order_;  // every attempt, by its start
  uint32_t nonce_ = 0;
  std::vector<uint64_t> unrecorded_from_;  // per thread index; 0: no such thread
  absl::flat_hash_map<uint64_t, Version> versions_;
  absl::flat_hash_map<uint64_t, uint64_t> roots_;  // key -> its tag from before the run
  std::vector<uint8_t> effective_;                 // per attempt: its writes took effect (committed, or read from)
  std::vector<uint8_t> dropped_;                   // per attempt, after a cut
  std::vector<uint64_t> path_;
  std::vector<std::shared_ptr<std::vector<int64_t>>> lists_;
  absl::flat_hash_map<uint64_t, int32_t> root_lists_;  // key -> the list whose empty prefix is its root
  absl::flat_hash_map<uint64_t, std::string> names_;
};

void Converter::Report(sz::AnomalyType type, std::string text, std::vector<int64_t> txns) {
  if (++out_.anomaly_counts[type] > options_.max_reports_per_type) return;
  out_.anomalies.push_back({type, std::move(text), std::move(txns)});
}

// Every recorded write (whatever its attempt's outcome) is a version: its key, the tag it read, its writer.
void Converter::IndexVersions() {
  for (uint32_t gid = 0; gid < order_.size(); ++gid) {
    const auto [begin, end] = OpsOf(gid);
    for (const ThreadHistory::Op* op = begin; op != end; ++op) {
      if (op->written == 0) continue;
      const auto [it, fresh] = versions_.try_emplace(op->written, Version{op->key, op->read, gid});
      if (!fresh) {
        Report(sz::AnomalyType::kMalformed,
               fmt::format("malformed: tag {} written twice, by T{} and T{} (a bug of the harness's tags)", op->written,
                           IdOf(it->second.writer), IdOf(gid)),
               {IdOf(it->second.writer), IdOf(gid)});
      }
      if (op->read == ThreadHistory::kNoRead && AttemptOf(gid).outcome != AttemptOutcome::kAborted) {
        Report(sz::AnomalyType::kMalformed,
               fmt::format("malformed: T{} wrote {} without reading it first (a bug of the harness)", IdOf(gid),
                           Name(op->key)),
               {IdOf(gid)});
      }
    }
  }
}

// Committed attempts, and those of unknown outcome whose write an effective one read (to a fixed point).
void Converter::DecideEffective() {
  effective_.assign(order_.size(), 0);
  std::vector<uint32_t> work;
  for (uint32_t gid = 0; gid < order_.size(); ++gid) {
    if (AttemptOf(gid).outcome == AttemptOutcome::kCommitted) {
      effective_[gid] = 1;
      work.push_back(gid);
    }
  }
  while (!work.empty()) {
    const uint32_t gid = work.back();
    work.pop_back();
    const auto [begin, end] = OpsOf(gid);
    for (const ThreadHistory::Op* op = begin; op != end; ++op) {
      const auto it = versions_.find(op->read);
      if (it == versions_.end()) continue;
      const uint32_t writer = it->second.writer;
      if (effective_[writer] || AttemptOf(writer).outcome != AttemptOutcome::kUnknown) continue;
      effective_[writer] = 1;
      work.push_back(writer);
    }
  }
}

// Two effective writes of one key that read the same version: a lost update.
void Converter::FindForks() {
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, std::pair<uint64_t, uint32_t>> first;  // (key, read) -> write
  for (uint32_t gid = 0; gid < order_.size(); ++gid) {
    if (!effective_[gid]) continue;
    const auto [begin, end] = OpsOf(gid);
    for (const ThreadHistory::Op* op = begin; op != end; ++op) {
      if (op->written == 0 || op->read == ThreadHistory::kNoRead) continue;
      const auto [it, fresh] = first.try_emplace({op->key, op->read}, op->written, gid);
      if (fresh) continue;
      const auto [other_tag, other] = it->second;
      Report(sz::AnomalyType::kIncompatibleOrder,
             fmt::format("incompatible-order (lost update): {}: T{} and T{} both read {} and wrote over it (with {} "
                         "and {}), and both took effect: one of the two updates is lost",
                         Name(op->key), IdOf(other), IdOf(gid), DescribeTag(op->read), DescribeTag(other_tag),
                         DescribeTag(op->written)),
             {IdOf(other), IdOf(gid)});
    }
  }
}

// A tag that no recorded write made, read in `key`: the key's value from before the run (the first such tag seen in
// it), a write after a cut, or garbage.
Converter::State Converter::Foreign(uint64_t key, uint64_t tag) {
  if (tag != 0 && tag != ThreadHistory::kNoRead && NonceOf(tag) == nonce_) {
    const int thread = ThreadOf(tag);
    const uint64_t from = unrecorded_from_[thread];
    return from != 0 && CountOf(tag) >= from ? State::kUnrecorded : State::kGarbage;
  }
  if (tag == ThreadHistory::kNoRead) return State::kGarbage;
  const auto [it, fresh] = roots_.try_emplace(key, tag);
  return fresh || it->second == tag ? State::kRoot : State::kGarbage;
}

// Where a version's chain of writes leads (memoized): to the root (placed), or to a cut, garbage or a circle.
Converter::State Converter::StateOf(uint64_t tag) {
  path_.clear();
  State top = State::kNew;
  uint64_t bad = 0;
  for (uint64_t at = tag;;) {
    Version& v = versions_.at(at);
    if (v.state == State::kWalking) {
      top = State::kCycle;
      bad = at;
      break;
    }
    if (v.state != State::kNew) {
      top = v.state;
      bad = v.bad;
      break;
    }
    v.state = State::kWalking;
    path_.push_back(at);
    const auto pred = versions_.find(v.pred);
    if (pred == versions_.end()) {
      const State foreign = Foreign(v.key, v.pred);
      top = foreign == State::kRoot ? State::kPlaced : foreign;
      bad = v.pred;
      break;
    }
    if (pred->second.key != v.key) {
      top = State::kGarbage;
      bad = v.pred;
      break;
    }
    at = v.pred;
  }
  for (const uint64_t walked : path_) {
    Version& v = versions_.at(walked);
    v.state = top;
    v.bad = bad;
  }
  return versions_.at(tag).state;
}

Converter::State Converter::ReadState(uint64_t key, uint64_t tag, uint64_t* bad) {
  *bad = tag;
  const auto it = versions_.find(tag);
  if (it == versions_.end()) return Foreign(key, tag);
  if (it->second.key != key) return State::kGarbage;
  const State state = it->second.state != State::kNew ? it->second.state : StateOf(tag);
  if (state != State::kPlaced) *bad = it->second.bad;
  return state;
}

// Every read of a committed or unknown attempt, in the order of their starts (so that a key's first tag from before
// the run is its root): garbage and circles are reported, for committed readers.
void Converter::ResolveReads() {
  absl::flat_hash_map<uint64_t, bool> reported;  // by the tag the chain went wrong at
  for (uint32_t gid = 0; gid < order_.size(); ++gid) {
    if (AttemptOf(gid).outcome == AttemptOutcome::kAborted) continue;
    const auto [begin, end] = OpsOf(gid);
    for (const ThreadHistory::Op* op = begin; op != end; ++op) {
      if (op->read == ThreadHistory::kNoRead) continue;
      uint64_t bad = 0;
      const State state = ReadState(op->key, op->read, &bad);
      if (state != State::kCycle && state != State::kGarbage) continue;
      if (AttemptOf(gid).outcome != AttemptOutcome::kCommitted || !reported.try_emplace(bad, true).second) continue;
      const std::string name = Name(op->key);
      const std::string via = bad == op->read ? "" : fmt::format(", a version written over {}", DescribeTag(bad));
      if (state == State::kCycle) {
        Report(sz::AnomalyType::kIncompatibleOrder,
               fmt::format("incompatible-order: T{} read {} at {}{}, whose writes go round in a circle", IdOf(gid),
                           name, DescribeTag(op->read), via),
               {IdOf(gid)});
      } else if (state == State::kGarbage) {
        std::string why;
        const auto writer = versions_.find(bad);
        if (writer != versions_.end()) {
          why = fmt::format("T{} wrote it to {}", IdOf(writer->second.writer), Name(writer->second.key));
        } else if (NonceOf(bad) == nonce_ && bad != 0) {
          why = "no recorded write made it";
        } else {
          const auto root = roots_.find(op->key);
          why = fmt::format("the key held tag {} before the run", root != roots_.end() ? root->second : 0);
        }
        Report(
            sz::AnomalyType::kGarbageElement,
            fmt::format("garbage-element: T{} read {} at {}{}: {}", IdOf(gid), name, DescribeTag(op->read), via, why),
            {IdOf(gid)});
      }
    }
  }
}

// After a cut: the attempts that read a write not recorded, then those that read a version a dropped one wrote (or a
// version after it), to a fixed point. Their versions count as not recorded.
void Converter::DropAfterCut() {
  dropped_.assign(order_.size(), 0);
  if (!out_.cut) return;
  absl::flat_hash_map<uint64_t, std::vector<uint64_t>> children;  // version -> versions written over it
  absl::flat_hash_map<uint64_t, std::vector<uint32_t>> readers;   // version -> attempts that read it
  std::vector<uint32_t> work;
  for (const auto& [tag, version] : versions_) children[version.pred].push_back(tag);
  for (uint32_t gid = 0; gid < order_.size(); ++gid) {
    if (AttemptOf(gid).outcome == AttemptOutcome::kAborted) continue;
    const auto [begin, end] = OpsOf(gid);
    for (const ThreadHistory::Op* op = begin; op != end; ++op) {
      if (op->read == ThreadHistory::kNoRead) continue;
      uint64_t bad = 0;
      if (ReadState(op->key, op->read, &bad) == State::kUnrecorded) {
        if (!dropped_[gid]) work.push_back(gid);
        dropped_[gid] = 1;
      } else if (versions_.contains(op->read)) {
        readers[op->read].push_back(gid);
      }
    }
  }
  std::vector<uint64_t> lost;
  while (!work.empty()) {
    const uint32_t gid = work.back();
    work.pop_back();
    ++out_.dropped;
    const auto [begin, end] = OpsOf(gid);
    for (const ThreadHistory::Op* op = begin; op != end; ++op) {
      if (op->written != 0 && versions_.at(op->written).writer == gid) lost.push_back(op->written);
    }
    while (!lost.empty()) {
      const uint64_t tag = lost.back();
      lost.pop_back();
      Version& v = versions_.at(tag);
      if (v.state == State::kUnrecorded) continue;
      v.state = State::kUnrecorded;
      if (const auto it = children.find(tag); it != children.end())
        lost.insert(lost.end(), it->second.begin(), it->second.end());
      if (const auto it = readers.find(tag); it != readers.end()) {
        for (const uint32_t reader : it->second) {
          if (!dropped_[reader]) work.push_back(reader);
          dropped_[reader] = 1;
        }
      }
    }
  }
}

// The versions kept reads need, with their ancestors, laid out per key from its root: the first branch at each
// version goes on in its parent's list, every other starts a copy of the parent's prefix (within a budget: past it,
// the reads of a branch are left out; it is a fork, reported already).
void Converter::BuildLists() {
  for (uint32_t gid = 0; gid < order_.size(); ++gid) {
    if (dropped_[gid] || AttemptOf(gid).outcome == AttemptOutcome::kAborted) continue;
    const auto [begin, end] = OpsOf(gid);
    for (const ThreadHistory::Op* op = begin; op != end; ++op) {
      uint64_t bad = 0;
      if (op->read == ThreadHistory::kNoRead || ReadState(op->key, op->read, &bad) != State::kPlaced) continue;
      for (auto it = versions_.find(op->read); it != versions_.end() && !it->second.live;
           it = versions_.find(it->second.pred)) {
        it->second.live = true;
      }
    }
  }
  // (key, parent tag) -> its live children, by writer.
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, std::vector<std::pair<uint32_t, uint64_t>>> children;
  for (const auto& [tag, version] : versions_) {
    if (version.live) children[{version.key, version.pred}].emplace_back(version.writer, tag);
  }
  for (auto& [parent, list] : children) std::sort(list.begin(), list.end());
  size_t copied = 0;
  struct Pending {
    uint64_t tag;
    int32_t list;
    uint32_t depth;  // the parent's
  };
  std::vector<Pending> stack;
  const auto push_children = [&](uint64_t key, uint64_t parent, int32_t list, uint32_t depth) {
    const auto it = children.find({key, parent});
    if (it == children.end()) return;
    for (auto child = it->second.rbegin(); child != it->second.rend(); ++child)
      stack.push_back({child->second, list, depth});
  };
  for (const auto& [key, root] : roots_) {
    const int32_t root_list = static_cast<int32_t>(lists_.size());
    lists_.push_back(std::make_shared<std::vector<int64_t>>());
    root_lists_[key] = root_list;
    push_children(key, root, root_list, 0);
    while (!stack.empty()) {
      const Pending at = stack.back();
      stack.pop_back();
      Version& v = versions_.at(at.tag);
      int32_t list = at.list;
      if (lists_[list]->size() != at.depth) {  // another branch went on in the parent's list
        if (copied + at.depth > kCopyBudget) continue;
        copied += at.depth;
        lists_.push_back(
            std::make_shared<std::vector<int64_t>>(lists_[list]->begin(), lists_[list]->begin() + at.depth));
        list = static_cast<int32_t>(lists_.size()) - 1;
      }
      lists_[list]->push_back(TagElement(at.tag));
      v.list = list;
      v.depth = at.depth + 1;
      push_children(key, at.tag, list, v.depth);
    }
  }
}

// One transaction per attempt kept (aborted ones only if they wrote): its reads as prefixes of the shared lists, its
// writes as appends.
void Converter::BuildHistory() {
  std::vector<sz::Txn>& txns = out_.history.txns;
  for (uint32_t gid = 0; gid < order_.size(); ++gid) {
    if (dropped_[gid]) continue;
    const ThreadHistory::Attempt& attempt = AttemptOf(gid);
    const bool aborted = attempt.outcome == AttemptOutcome::kAborted;
    const auto [begin, end] = OpsOf(gid);
    sz::Txn txn{IdOf(gid), OutcomeOf(gid), attempt.begin_ns, attempt.end_ns, {}};
    for (const ThreadHistory::Op* op = begin; op != end; ++op) {
      if (!aborted && op->read != ThreadHistory::kNoRead) {
        uint64_t bad = 0;
        const State state = ReadState(op->key, op->read, &bad);
        if (state == State::kRoot) {
          txn.ops.push_back(sz::ReadPrefix{Name(op->key), lists_[root_lists_.at(op->key)], 0});
        } else if (state == State::kPlaced) {
          const Version& v = versions_.at(op->read);
          if (v.list >= 0) txn.ops.push_back(sz::ReadPrefix{Name(op->key), lists_[v.list], v.depth});
        }
      }
      if (op->written != 0 && versions_.at(op->written).writer == gid) {
        txn.ops.push_back(sz::Append{Name(op->key), TagElement(op->written)});
      }
    }
    if (aborted && txn.ops.empty()) continue;
    txns.push_back(std::move(txn));
  }
}

ConvertedHistory Converter::Run() {
  unrecorded_from_.assign(kMaxThreads, 0);
  for (const ThreadHistory* thread : threads_) {
    nonce_ = thread->nonce();
    unrecorded_from_[thread->thread() & kThreadMask] = thread->cut() ? thread->unrecorded_from() : ~uint64_t{0};
    out_.cut |= thread->cut() && thread->recorded_txns() > 0;
    for (uint32_t i = 0; i < thread->attempts().size(); ++i) order_.push_back({thread, i});
  }
  std::stable_sort(order_.begin(), order_.end(), [](const Ref& a, const Ref& b) {
    return a.thread->attempts()[a.index].begin_ns < b.thread->attempts()[b.index].begin_ns;
  });
  IndexVersions();
  DecideEffective();
  FindForks();
  ResolveReads();
  DropAfterCut();
  BuildLists();
  BuildHistory();
  return std::move(out_);
}

}  // namespace

ConvertedHistory ConvertHistory(const std::vector<const ThreadHistory*>& threads,
                                const std::function<std::string(uint64_t key)>& key_name,
                                const sz::CheckOptions& options) {
  return Converter(threads, key_name, options).Run();
}

HistoryCheck CheckHistory(const std::vector<const ThreadHistory*>& threads,
                          const std::function<std::string(uint64_t key)>& key_name, size_t max_descriptions) {
  const sz::CheckOptions options;  // real time on
  const ConvertedHistory converted = ConvertHistory(threads, key_name, options);
  const sz::CheckResult result = sz::Check(converted.history, options);
  HistoryCheck check;
  check.ok = result.ok && converted.anomaly_counts.empty();
  check.checked_txns = result.committed;
  check.dropped_txns = converted.dropped;
  check.cut = converted.cut;
  for (const auto* anomalies : {&converted.anomalies, &result.anomalies}) {
    for (const sz::Anomaly& anomaly : *anomalies) {
      if (check.anomalies.size() < max_descriptions) check.anomalies.push_back(anomaly.description);
    }
  }
  for (const auto* counts : {&converted.anomaly_counts, &result.anomaly_counts}) {
    for (const auto& [type, count] : *counts) check.anomaly_counts[std::string(sz::AnomalyTypeName(type))] += count;
  }
  check.summary =
      fmt::format("{}: {} committed transactions checked", check.ok ? "ok" : "NOT serializable", check.checked_txns);
  if (check.cut) check.summary += fmt::format(" (the record was cut; {} dropped)", check.dropped_txns);
  for (const auto& [type, count] : check.anomaly_counts) check.summary += fmt::format("; {} x{}", type, count);
  return check;
}

namespace {

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string HistoryCheckJson(const HistoryCheck& check, double seconds, size_t bytes) {
  std::string json = fmt::format(
      "\"checker\":\"{}\",\"checked_txns\":{},\"check_complete\":{},\"check_dropped\":{},\"check_s\":{:.2f},"
      "\"history_mb\":{:.1f}",
      check.ok ? "ok" : "failed", check.checked_txns, check.cut ? "false" : "true", check.dropped_txns, seconds,
      static_cast<double>(bytes) / (1 << 20));
  if (check.ok) return json;
  json += ",\"anomaly_counts\":{";
  bool first = true;
  for (const auto& [type, count] : check.anomaly_counts) {
    json += fmt::format("{}{}:{}", first ? "" : ",", JsonString(type), count);
    first = false;
  }
  json += "},\"anomalies\":[";
  for (size_t i = 0; i < check.anomalies.size(); ++i) {
    if (i > 0) json += ',';
    json += JsonString(check.anomalies[i]);
  }
  return json + "]";
}

}  // namespace cell::bench
