// The list-append serializability checker (serializability.h): indexing, the version orders, the dependency graph,
// and the cycle search that names what it finds.
#include "bench/serializability.h"

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <functional>
#include <limits>
#include <numeric>
#include <utility>

namespace cell::bench::serializability {

std::string EncodeList(const std::vector<int64_t>& list) {
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(list[i]);
  }
  return out;
}

bool DecodeList(std::string_view text, std::vector<int64_t>* list) {
  list->clear();
  if (text.empty()) return true;
  size_t pos = 0;
  while (true) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const char* first = text.data() + pos;
    const char* last = text.data() + comma;
    int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(first, last, value);
    if (first == last || ec != std::errc() || ptr != last) return false;
    list->push_back(value);
    if (comma == text.size()) return true;
    pos = comma + 1;
  }
}

std::string_view AnomalyTypeName(AnomalyType type) {
  switch (type) {
    case AnomalyType::kMalformed:
      return "malformed";
    case AnomalyType::kDuplicateElement:
      return "duplicate-element";
    case AnomalyType::kGarbageElement:
      return "garbage-element";
    case AnomalyType::kAbortedRead:
      return "G1a";
    case AnomalyType::kIntermediateRead:
      return "G1b";
    case AnomalyType::kIncompatibleOrder:
      return "incompatible-order";
    case AnomalyType::kInternal:
      return "internal";
    case AnomalyType::kG0:
      return "G0";
    case AnomalyType::kG1c:
      return "G1c";
    case AnomalyType::kGSingle:
      return "G-single";
    case AnomalyType::kG2:
      return "G2";
    case AnomalyType::kRealtime:
      return "G-realtime";
  }
  return "?";
}

std::string CheckResult::Summary() const {
  std::string out = fmt::format(
      "{}: {} txns, {} committed ({} of unknown outcome), {} aborted, {} unknown dropped; edges ww={} wr={} rw={} "
      "rt={}",
      ok ? "ok" : "NOT serializable", txns, committed, unknown_committed, aborted, unknown_dropped, edges.ww, edges.wr,
      edges.rw, edges.realtime);
  for (const auto& [type, count] : anomaly_counts) out += fmt::format("; {} x{}", AnomalyTypeName(type), count);
  for (const Anomaly& anomaly : anomalies) out += "\n  " + anomaly.description;
  return out;
}

namespace {

// ww, wr, rw and real time, as in the paper; kFrontier leads from a key's frontier node (a virtual node standing for
// "after the last element anybody read") to each committed appender nobody read, so that n readers of the whole list
// and m such appenders need n + m edges rather than n * m. An edge into a frontier node is an rw edge.
enum EdgeKind : uint8_t { kWW, kWR, kRW, kRT, kFrontier };
constexpr uint32_t KindBit(EdgeKind kind) { return 1u << kind; }
constexpr uint32_t kWriteEdges = KindBit(kWW);
constexpr uint32_t kInfoEdges = kWriteEdges | KindBit(kWR);
constexpr uint32_t kDataEdges = kInfoEdges | KindBit(kRW) | KindBit(kFrontier);
constexpr uint32_t kAllEdges = kDataEdges | KindBit(kRT);
constexpr uint8_t kFromScan = 1;  // an rw edge inferred from a key a scan did not see (absent, not out of date)
constexpr uint8_t kAppends = 2;   // an observation by a transaction that appends to the key too

struct Edge {
  int32_t from;
  int32_t to;
  int32_t key;  // -1 for real time
  EdgeKind kind;
  uint8_t flags;
};

// Compressed adjacency: node n's edges are edges[start[n], start[n + 1]). Nodes below real_nodes are transactions.
struct Graph {
  int32_t real_nodes = 0;
  std::vector<int32_t> start;
  std::vector<Edge> edges;
  int32_t size() const { return static_cast<int32_t>(start.size()) - 1; }
};

Graph BuildGraph(int32_t real_nodes, int32_t nodes, std::vector<Edge> raw) {
  Graph graph;
  graph.real_nodes = real_nodes;
  graph.start.assign(nodes + 1, 0);
  for (const Edge& edge : raw) ++graph.start[edge.from + 1];
  std::partial_sum(graph.start.begin(), graph.start.end(), graph.start.begin());
  std::vector<int32_t> fill(graph.start.begin(), graph.start.end() - 1);
  graph.edges.resize(raw.size());
  for (const Edge& edge : raw) graph.edges[fill[edge.from]++] = edge;
  return graph;
}

using Cycle = std::vector<const Edge*>;

// The real-time bounds of the graph's transactions (empty when real time is not checked); an unknown outcome's end is
// the end of time.
struct Times {
  std::vector<int64_t> begin, end;
};

// The search for cycles: components, then the weakest cycle in each (see the header).
class CycleSearch {
 public:
  CycleSearch(const Graph& graph, const Times& times, size_t gsingle_budget, size_t max_cycles)
      : graph_(graph),
        times_(times),
        gsingle_budget_(gsingle_budget),
        max_cycles_(max_cycles),
        region_(graph.size(), 0),
        index_(graph.size(), -1),
        low_(graph.size(), 0),
        parent_(graph.size(), -1),
        info_component_(graph.size(), -1),
        on_stack_(graph.size(), 0) {}

  void Run(const std::function<void(const Cycle&)>& report) {
    std::vector<int32_t> all(graph_.size());
    std::iota(all.begin(), all.end(), 0);
    for (const std::vector<int32_t>& scc : Components(all, 0, kAllEdges)) Explain(scc, report);
  }

 private:
  std::vector<std::vector<int32_t>> Components(const std::vector<int32_t>& nodes, int32_t region, uint32_t mask);
  void Explain(const std::vector<int32_t>& scc, const std::function<void(const Cycle&)>& report);
  Cycle ShortestCycle(const std::vector<int32_t>& component, int32_t region, uint32_t mask);
  Cycle FindCycle(const std::vector<int32_t>& component, int32_t region, uint32_t mask, size_t* budget);
  Cycle FindGSingle(const std::vector<int32_t>& component, int32_t region, size_t* budget);
  // An rw step from a transaction to another: an rw edge, or one into a frontier node and one out of it.
  struct RwStep {
    int32_t from, to;
    int32_t rw, frontier;  // edge indices; frontier -1 if none
  };
  Cycle GSingleThroughPath(const std::vector<RwStep>& steps, int32_t region, size_t* budget);
  Cycle StepEdges(const RwStep& step) const;
  int32_t Bfs(int32_t from, int32_t to, uint32_t mask, int32_t region, size_t* budget,
              const std::vector<int32_t>* by_begin = nullptr);
  int32_t RealtimeStep(int32_t node, int32_t to, const std::vector<int32_t>& by_begin, size_t* taken);
  const Edge& EdgeAt(int32_t index) const {
    const int32_t stored = static_cast<int32_t>(graph_.edges.size());
    return index < stored ? graph_.edges[index] : implicit_[index - stored];
  }
  Cycle PathTo(int32_t from, int32_t node) const;
  void ClearSearch();
  bool Real(int32_t node) const { return node < graph_.real_nodes; }

  const Graph& graph_;
  const Times& times_;
  const size_t gsingle_budget_;            // per strongly connected component
  const size_t max_cycles_;                // per strongly connected component
  static constexpr int32_t kRemoved = -1;  // the region of transactions in a cycle reported
  int32_t next_region_ = 1;
  std::vector<int32_t> region_;  // searches only follow edges between nodes of one region
  std::vector<int32_t> index_, low_;
  std::vector<int32_t> parent_;  // Bfs: the edge that reached a node; -1 unreached, -2 the start
  std::vector<int32_t> reached_;
  std::deque<Edge> implicit_;            // Bfs's real-time steps (numbered after the graph's edges), until a report
  std::vector<int32_t> info_component_;  // FindGSingle: the node's ww+wr component
  std::vector<uint8_t> on_stack_;
};

// Tarjan's algorithm, iteratively (a history's chains are far deeper than a thread's stack): the components of two or
// more nodes of the subgraph of `nodes` (all in `region`) on the edges of `mask`.
std::vector<std::vector<int32_t>> CycleSearch::Components(const std::vector<int32_t>& nodes, int32_t region,
                                                          uint32_t mask) {
  std::vector<std::vector<int32_t>> out;
  std::vector<int32_t> stack;
  std::vector<std::pair<int32_t, int32_t>> calls;  // node, its next edge
  int32_t counter = 0;
  auto open = [&](int32_t node) {
    index_[node] = low_[node] = counter++;
    stack.push_back(node);
    on_stack_[node] = 1;
    calls.emplace_back(node, graph_.start[node]);
  };
  for (const int32_t root : nodes) {
    if (index_[root] >= 0) continue;
    open(root);
    while (!calls.empty()) {
      auto& [node, next] = calls.back();
      if (next < graph_.start[node + 1]) {
        const Edge& edge = graph_.edges[next++];
        if ((mask & KindBit(edge.kind)) == 0 || region_[edge.to] != region) continue;
        if (index_[edge.to] < 0) {
          open(edge.to);  // invalidates node and next
        } else if (on_stack_[edge.to]) {
          low_[node] = std::min(low_[node], index_[edge.to]);
        }
        continue;
      }
      const int32_t done = node;
      calls.pop_back();
      if (!calls.empty()) low_[calls.back().first] = std::min(low_[calls.back().first], low_[done]);
      if (low_[done] != index_[done]) continue;
      std::vector<int32_t> component;
      int32_t member;
      do {
        member = stack.back();
        stack.pop_back();
        on_stack_[member] = 0;
        component.push_back(member);
      } while (member != done);
      if (component.size() >= 2) out.push_back(std::move(component));
    }
  }
  for (const int32_t node : nodes) index_[node] = -1;
  return out;
}

// Names the weakest cycles of one strongly connected component, level by level: cycles of its ww subgraph, then of
// ww+wr, then of ww+wr+rw, then of everything. A cycle found is reported and its transactions leave the search, so
// that no weaker cycle is left when a level ends, and others in the same component can be found (up to a cap).
void CycleSearch::Explain(const std::vector<int32_t>& scc, const std::function<void(const Cycle&)>& report) {
  const int32_t region = next_region_++;
  for (const int32_t node : scc) region_[node] = region;
  std::vector<int32_t> nodes = scc;
  size_t budget = gsingle_budget_;
  size_t cycles = 0;
  for (const uint32_t mask : {kWriteEdges, kInfoEdges, kDataEdges, kAllEdges}) {
    bool found = true;
    while (found && cycles < max_cycles_) {
      found = false;
      std::erase_if(nodes, [&](int32_t node) { return region_[node] != region; });
      for (const std::vector<int32_t>& component : Components(nodes, region, mask)) {
        if (cycles == max_cycles_) break;
        const Cycle cycle = FindCycle(component, region, mask, &budget);
        if (cycle.empty()) continue;
        report(cycle);
        found = true;
        ++cycles;
        for (const Edge* edge : cycle) {
          if (Real(edge->from)) region_[edge->from] = kRemoved;
        }
        implicit_.clear();
      }
    }
  }
}

// A cycle in a component of the subgraph of `mask`: at the ww+wr+rw level, one with a single anti-dependency if
// there is one (within the budget).
Cycle CycleSearch::FindCycle(const std::vector<int32_t>& component, int32_t region, uint32_t mask, size_t* budget) {
  if (mask != kDataEdges) return ShortestCycle(component, region, mask);
  const int32_t sub = next_region_++;
  for (const int32_t node : component) region_[node] = sub;
  Cycle cycle = FindGSingle(component, sub, budget);
  if (cycle.empty()) cycle = ShortestCycle(component, sub, mask);
  for (const int32_t node : component) region_[node] = region;
  return cycle;
}

// The shortest cycle through one of (up to) four of the component's transactions. With real time, a step of it goes
// from a transaction to any that began after it ended, rather than along the sparse edges only: "T1 -rt-> T9" rather
// than the chain of transactions between them.
Cycle CycleSearch::ShortestCycle(const std::vector<int32_t>& component, int32_t region, uint32_t mask) {
  std::vector<int32_t> by_begin;
  if ((mask & KindBit(kRT)) != 0 && !times_.begin.empty()) {
    for (const int32_t node : component) {
      if (Real(node)) by_begin.push_back(node);
    }
    std::sort(by_begin.begin(), by_begin.end(),
              [&](int32_t a, int32_t b) { return times_.begin[a] < times_.begin[b]; });
  }
  Cycle best;
  int tries = 0;
  for (const int32_t start : component) {
    if (!Real(start)) continue;
    const int32_t closing = Bfs(start, start, mask, region, nullptr, by_begin.empty() ? nullptr : &by_begin);
    if (closing >= 0) {
      Cycle cycle = PathTo(start, EdgeAt(closing).from);
      cycle.push_back(&EdgeAt(closing));
      if (best.empty() || cycle.size() < best.size()) best = std::move(cycle);
    }
    ClearSearch();
    if (++tries == 4) break;
  }
  return best;
}

// A cycle of exactly one anti-dependency in a component of ww+wr+rw: an rw edge u -> v (through u's key's frontier
// node, perhaps) and a ww+wr path from v back to u. First the rw edges inside one ww+wr component (such a path is sure
// to exist), then, within the budget, every other one.
Cycle CycleSearch::FindGSingle(const std::vector<int32_t>& component, int32_t region, size_t* budget) {
  const std::vector<std::vector<int32_t>> info = Components(component, region, kInfoEdges);
  for (size_t i = 0; i < info.size(); ++i) {
    for (const int32_t node : info[i]) info_component_[node] = static_cast<int32_t>(i);
  }
  std::vector<RwStep> steps;
  for (const int32_t from : component) {
    if (!Real(from)) continue;
    for (int32_t i = graph_.start[from]; i < graph_.start[from + 1]; ++i) {
      const Edge& edge = graph_.edges[i];
      if (edge.kind != kRW || region_[edge.to] != region) continue;
      if (Real(edge.to)) {
        steps.push_back({from, edge.to, i, -1});
        continue;
      }
      for (int32_t j = graph_.start[edge.to]; j < graph_.start[edge.to + 1]; ++j) {
        const Edge& next = graph_.edges[j];
        if (region_[next.to] == region && next.to != from) steps.push_back({from, next.to, i, j});
      }
    }
  }
  Cycle cycle;
  for (const RwStep& step : steps) {
    if (info_component_[step.from] < 0 || info_component_[step.from] != info_component_[step.to]) continue;
    const int32_t closing = Bfs(step.to, step.from, kInfoEdges, region, nullptr);
    if (closing >= 0) {
      cycle = StepEdges(step);
      for (const Edge* edge : PathTo(step.to, EdgeAt(closing).from)) cycle.push_back(edge);
      cycle.push_back(&EdgeAt(closing));
    }
    ClearSearch();
    if (!cycle.empty()) break;
  }
  for (const int32_t node : component) info_component_[node] = -1;
  if (!cycle.empty() || *budget == 0) return cycle;
  std::sort(steps.begin(), steps.end(), [](const RwStep& a, const RwStep& b) { return a.to < b.to; });
  return GSingleThroughPath(steps, region, budget);
}

// One search from each rw target v reaches every u a ww+wr path leads to; an rw step from one of them closes a cycle.
Cycle CycleSearch::GSingleThroughPath(const std::vector<RwStep>& steps, int32_t region, size_t* budget) {
  for (size_t i = 0; i < steps.size() && *budget > 0;) {
    const int32_t to = steps[i].to;
    size_t end = i;
    while (end < steps.size() && steps[end].to == to) ++end;
    Bfs(to, -1, kInfoEdges, region, budget);
    for (size_t j = i; j < end; ++j) {
      if (parent_[steps[j].from] == -1) continue;
      Cycle cycle = StepEdges(steps[j]);
      for (const Edge* edge : PathTo(to, steps[j].from)) cycle.push_back(edge);
      ClearSearch();
      return cycle;
    }
    ClearSearch();
    i = end;
  }
  return {};
}

Cycle CycleSearch::StepEdges(const RwStep& step) const {
  Cycle edges{&graph_.edges[step.rw]};
  if (step.frontier >= 0) edges.push_back(&graph_.edges[step.frontier]);
  return edges;
}

// Breadth-first from `from` over the edges of `mask` inside `region`, until an edge into `to` (whose index it
// returns; -1 if none, or when the budget runs out). The nodes reached keep their parent edge until ClearSearch. With
// `by_begin` (the region's transactions by begin time), real-time steps are taken by RealtimeStep, not edges.
int32_t CycleSearch::Bfs(int32_t from, int32_t to, uint32_t mask, int32_t region, size_t* budget,
                         const std::vector<int32_t>* by_begin) {
  size_t taken = by_begin != nullptr ? by_begin->size() : 0;
  parent_[from] = -2;
  reached_.push_back(from);
  for (size_t head = 0; head < reached_.size(); ++head) {
    const int32_t node = reached_[head];
    for (int32_t i = graph_.start[node]; i < graph_.start[node + 1]; ++i) {
      if (budget != nullptr) {
        if (*budget == 0) return -1;
        --*budget;
      }
      const Edge& edge = graph_.edges[i];
      if ((mask & KindBit(edge.kind)) == 0 || region_[edge.to] != region) continue;
      if (by_begin != nullptr && edge.kind == kRT) continue;
      if (edge.to == to) return i;
      if (parent_[edge.to] != -1) continue;
      parent_[edge.to] = i;
      reached_.push_back(edge.to);
    }
    if (by_begin != nullptr && Real(node)) {
      const int32_t closing = RealtimeStep(node, to, *by_begin, &taken);
      if (closing >= 0) return closing;
    }
  }
  return -1;
}

// Reaches every transaction of `by_begin` that began after `node` ended, as implicit rt edges. Those that began later
// than one an earlier step reached were reached by it (`taken`: the rank where they start), so each search looks at
// each transaction once. Returns the edge into `to`, if one was made.
int32_t CycleSearch::RealtimeStep(int32_t node, int32_t to, const std::vector<int32_t>& by_begin, size_t* taken) {
  const int64_t end = times_.end[node];
  const size_t first =
      static_cast<size_t>(std::upper_bound(by_begin.begin(), by_begin.end(), end,
                                           [&](int64_t time, int32_t other) { return time < times_.begin[other]; }) -
                          by_begin.begin());
  const int32_t stored = static_cast<int32_t>(graph_.edges.size());
  for (size_t rank = first; rank < *taken; ++rank) {
    const int32_t next = by_begin[rank];
    if (next != to && parent_[next] != -1) continue;
    implicit_.push_back({node, next, -1, kRT, 0});
    const int32_t index = stored + static_cast<int32_t>(implicit_.size()) - 1;
    if (next == to) return index;
    parent_[next] = index;
    reached_.push_back(next);
  }
  *taken = std::min(*taken, first);
  return -1;
}

// The edges of the search's path from `from` to `node` (reached).
Cycle CycleSearch::PathTo(int32_t from, int32_t node) const {
  Cycle path;
  while (node != from) {
    const Edge& edge = EdgeAt(parent_[node]);
    path.push_back(&edge);
    node = edge.from;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

void CycleSearch::ClearSearch() {
  for (const int32_t node : reached_) parent_[node] = -1;
  reached_.clear();
}

const std::vector<int64_t> kEmptyList;

// A list as the checker looks at it: the first `size` elements of `*vec`, which is a Read's or a scan's own list, or
// one that ReadPrefix operations share; vec null: the key was absent.
struct ListRef {
  const std::vector<int64_t>* vec = nullptr;
  size_t size = 0;

  static ListRef Of(const std::vector<int64_t>& list) { return {&list, list.size()}; }
  bool present() const { return vec != nullptr; }
  const int64_t* begin() const { return vec != nullptr ? vec->data() : nullptr; }
  const int64_t* end() const { return begin() + size; }
  int64_t operator[](size_t i) const { return (*vec)[i]; }
  int64_t back() const { return (*vec)[size - 1]; }
};

// Whether `a` is a prefix of `b`; two prefixes of one shared list are, without a comparison (that is what keeps a hot
// key's reads from costing its length each).
bool IsPrefix(ListRef a, ListRef b) {
  return a.size <= b.size && (a.vec == b.vec || std::equal(a.begin(), a.end(), b.begin()));
}

std::string FormatList(ListRef list) {
  if (!list.present()) return "absent";
  const size_t n = list.size;
  if (n <= 8) return fmt::format("[{}]", EncodeList(std::vector<int64_t>(list.begin(), list.end())));
  return fmt::format("[{},{},{},...,{},{},{}] ({} elements)", list[0], list[1], list[2], list[n - 3], list[n - 2],
                     list.back(), n);
}
std::string FormatList(const std::vector<int64_t>& list) { return FormatList(ListRef::Of(list)); }

struct ElementInfo {
  int32_t txn;    // index in History::txns
  int32_t key;    // appended to
  int32_t nth;    // the transaction's nth append to that key, from 0
  int32_t count;  // of how many
  int32_t pos;    // in the key's version order, -1 if not in it
};

// A list a committed transaction read (or an absent key).
struct Observation {
  int32_t node;
  uint32_t external_len;  // the list less the transaction's own appends
  ListRef list;           // not present: absent
  bool external;          // the transaction's first read of the key: gives edges
  uint8_t flags;          // kFromScan, kAppends
};

// One key's version order: its longest list read, and who appended what.
struct KeyOrder {
  ListRef list;                       // not present: nobody read the key present
  int32_t reader = -1;                // node that read `list`
  std::vector<int32_t> nodes;         // appender node of each position; -1: none (garbage, aborted, duplicate)
  std::vector<uint8_t> intermediate;  // per position: its appender appended to the key again after it
  std::vector<int32_t> unobserved;    // committed appenders of elements nobody read (after `list`, order unknown)
  int32_t frontier = -1;              // frontier node, when unobserved has two or more
  bool created() const { return !nodes.empty() || !unobserved.empty(); }
};

// What a transaction has seen of a key and appended to it so far, during the walk of its operations.
struct KeyState {
  bool appends = false;  // anywhere in the transaction
  bool observed = false;
  ListRef base;                // its last read of the key (not present: absent) ...
  std::vector<int64_t> since;  // ... and its appends after it
  std::vector<int64_t> own;    // all its appends
};

class Checker {
 public:
  Checker(const History& history, const CheckOptions& options) : history_(history), options_(options) {}
  CheckResult Run();

 private:
  int32_t KeyIndex(std::string_view key);
  void IndexTxn(int32_t txn);
  void DecideCommitted();
  void AdmitObservers(int32_t txn, const absl::flat_hash_map<int64_t, int32_t>& unknown,
                      std::vector<int32_t>* admitted);
  void WalkTxn(int32_t node);
  void WalkScan(int32_t node, const Scan& scan);
  void Observe(int32_t node, int32_t key, ListRef list, bool edges, uint8_t flags);
  void OrderKey(int32_t key);
  void PlaceOrder(int32_t key);
  void CheckStrayList(int32_t key, const Observation& observation);
  bool ReportBadElement(int64_t element, int32_t key, int32_t reader, ListRef list);
  void CollectUnobserved(int32_t key);
  void AddOrderEdges(int32_t key);
  void AddReadEdges(int32_t node, int32_t key, uint32_t len, uint8_t flags);
  void CheckOwnAppends(int32_t node, int32_t key, uint32_t len, bool* unobserved);
  void AddScanAbsentEdges(int32_t node, const Scan& scan);
  void AddRealtimeEdges();
  void AddEdge(int32_t from, int32_t to, EdgeKind kind, int32_t key, uint8_t flags = 0);
  void ReportCycle(const Cycle& found);
  void Report(AnomalyType type, std::string text, std::vector<int64_t> txns);

  const Txn& TxnOf(int32_t node) const { return history_.txns[nodes_[node]]; }
  int64_t IdOf(int32_t node) const { return TxnOf(node).id; }
  std::string_view Name(int32_t key) const { return key_names_[key]; }

  const History& history_;
  const CheckOptions options_;
  CheckResult result_;
  absl::flat_hash_map<std::string_view, int32_t> keys_;
  std::vector<std::string_view> key_names_;
  absl::flat_hash_map<int64_t, ElementInfo> elements_;
  absl::flat_hash_map<int64_t, int32_t> txn_ids_;
  std::vector<int32_t> nodes_;                          // node -> index in History::txns, committed transactions only
  std::vector<int32_t> node_of_txn_;                    // and back, -1 for those not in the graph
  std::vector<std::vector<int64_t>> key_elements_;      // elements committed transactions appended, per key
  std::vector<std::vector<Observation>> observations_;  // per key
  std::vector<KeyOrder> orders_;                        // per key
  std::vector<std::pair<int32_t, const Scan*>> scans_;  // for the absent keys' edges
  absl::flat_hash_map<int32_t, KeyState> states_;       // WalkTxn's, per key
  absl::flat_hash_set<int64_t> reported_elements_;      // garbage and aborted elements reported once
  // AdmitObservers's, per shared list (ReadPrefix) and key: how much of it has been looked at.
  absl::flat_hash_map<std::pair<const std::vector<int64_t>*, std::string_view>, size_t> admitted_upto_;
  std::vector<int32_t> stamp_;  // CollectUnobserved's, per node
  std::vector<int32_t> created_;
  Times times_;  // with real time only
  std::string name_;
  std::vector<int32_t> op_keys_;  // the key of every append and read (scans: -1), transaction after transaction
  std::vector<size_t> first_op_;  // per transaction: its first operation's place in op_keys_                        //
                                  // keys with committed appends, by name
  std::vector<Edge> edges_;
  int32_t virtual_nodes_ = 0;
};

int32_t Checker::KeyIndex(std::string_view key) {
  const auto [it, fresh] = keys_.emplace(key, static_cast<int32_t>(key_names_.size()));
  if (fresh) key_names_.push_back(key);
  return it->second;
}

// Keys, transaction ids, and who appended each element (the nth of how many appends to its key).
void Checker::IndexTxn(int32_t t) {
  const Txn& txn = history_.txns[t];
  if (!txn_ids_.emplace(txn.id, t).second)
    Report(AnomalyType::kMalformed, fmt::format("malformed: two transactions are T{}", txn.id), {txn.id});
  if (txn.outcome == Outcome::kCommitted && options_.realtime && txn.end < txn.begin) {
    Report(AnomalyType::kMalformed,
           fmt::format("malformed: T{} ended ({}) before it began ({})", txn.id, txn.end, txn.begin), {txn.id});
  }
  first_op_[t] = op_keys_.size();
  std::vector<std::pair<int32_t, int32_t>> appends;  // key, how many so far (transactions are short: a vector)
  auto count = [&](int32_t key) -> int32_t& {
    for (auto& [k, n] : appends) {
      if (k == key) return n;
    }
    return appends.emplace_back(key, 0).second;
  };
  std::vector<int64_t> mine;
  for (const MicroOp& op : txn.ops) {
    if (const auto* append = std::get_if<Append>(&op)) {
      const int32_t key = KeyIndex(append->key);
      op_keys_.push_back(key);
      const auto [it, fresh] = elements_.emplace(append->element, ElementInfo{t, key, count(key), 0, -1});
      if (!fresh) {
        Report(AnomalyType::kMalformed,
               fmt::format("malformed: element {} appended twice, by T{} and T{}", append->element,
                           history_.txns[it->second.txn].id, txn.id),
               {history_.txns[it->second.txn].id, txn.id});
        continue;
      }
      ++count(key);
      mine.push_back(append->element);
    } else if (const auto* read = std::get_if<Read>(&op)) {
      op_keys_.push_back(KeyIndex(read->key));
    } else if (const auto* prefix = std::get_if<ReadPrefix>(&op)) {
      op_keys_.push_back(KeyIndex(prefix->key));
      if (prefix->list == nullptr || prefix->length > prefix->list->size()) {
        Report(
            AnomalyType::kMalformed,
            fmt::format("malformed: T{} read the first {} elements of {} list of {}", txn.id, prefix->length,
                        prefix->list == nullptr ? std::string("no") : fmt::format("a {}-element", prefix->list->size()),
                        prefix->key),
            {txn.id});
      }
    } else {
      op_keys_.push_back(-1);
      for (const auto& [key, list] : std::get<Scan>(op).seen) KeyIndex(key);
    }
  }
  for (const int64_t element : mine) {
    ElementInfo& info = elements_.at(element);
    info.count = count(info.key);
  }
}

// Committed transactions, and unknown ones another admitted transaction read an element of (to a fixed point).
void Checker::DecideCommitted() {
  const int32_t n = static_cast<int32_t>(history_.txns.size());
  absl::flat_hash_map<int64_t, int32_t> unknown;  // element -> key, of unknown transactions' appends: a small table
  for (const auto& [element, info] : elements_) {
    if (history_.txns[info.txn].outcome == Outcome::kUnknown) unknown.emplace(element, info.key);
  }
  node_of_txn_.assign(n, -1);
  std::vector<int32_t> admitted;
  for (int32_t t = 0; t < n; ++t) {
    if (history_.txns[t].outcome == Outcome::kCommitted) {
      node_of_txn_[t] = 0;
      admitted.push_back(t);
    }
  }
  for (size_t i = 0; i < admitted.size() && !unknown.empty(); ++i) AdmitObservers(admitted[i], unknown, &admitted);
  for (int32_t t = 0; t < n; ++t) {
    const Outcome outcome = history_.txns[t].outcome;
    if (outcome == Outcome::kAborted) ++result_.aborted;
    if (node_of_txn_[t] < 0) {
      if (outcome == Outcome::kUnknown) ++result_.unknown_dropped;
      continue;
    }
    if (outcome == Outcome::kUnknown) ++result_.unknown_committed;
    node_of_txn_[t] = static_cast<int32_t>(nodes_.size());
    nodes_.push_back(t);
  }
  result_.committed = nodes_.size();
}

// Admits the unknown transactions whose elements (appended to the key it read them in) transaction `txn` read.
void Checker::AdmitObservers(int32_t txn, const absl::flat_hash_map<int64_t, int32_t>& unknown,
                             std::vector<int32_t>* admitted) {
  // Elements [from, to) of the list; returns where the transaction's own elements start among them, if it met one.
  auto visit = [&](std::string_view key, const std::vector<int64_t>& list, size_t from, size_t to) {
    size_t own = to;
    for (size_t i = from; i < to; ++i) {
      const auto hit = unknown.find(list[i]);
      if (hit == unknown.end() || Name(hit->second) != key) continue;
      const int32_t writer = elements_.at(list[i]).txn;
      if (writer == txn) own = std::min(own, i);
      if (writer == txn || node_of_txn_[writer] >= 0) continue;
      node_of_txn_[writer] = 0;
      admitted->push_back(writer);
    }
    return own;
  };
  for (const MicroOp& op : history_.txns[txn].ops) {
    if (const auto* read = std::get_if<Read>(&op)) {
      if (read->list) visit(read->key, *read->list, 0, read->list->size());
    } else if (const auto* scan = std::get_if<Scan>(&op)) {
      for (const auto& [key, list] : scan->seen) visit(key, list, 0, list.size());
    } else if (const auto* prefix = std::get_if<ReadPrefix>(&op)) {
      // A shared list is looked at once, up to the longest prefix read, but for the elements of the reader's own
      // (at its end), which must admit their writer when another transaction reads them.
      if (prefix->list == nullptr) continue;
      const size_t length = std::min(prefix->length, prefix->list->size());
      size_t& upto = admitted_upto_[{prefix->list.get(), prefix->key}];
      if (length <= upto) continue;
      upto = visit(prefix->key, *prefix->list, upto, length);
    }
  }
}

// Checks the transaction's reads against its own earlier reads and appends, and records what it read.
void Checker::WalkTxn(int32_t node) {
  const Txn& txn = TxnOf(node);
  const int32_t* keys = op_keys_.data() + first_op_[nodes_[node]];  // of each operation, -1 for scans
  states_.clear();
  for (size_t o = 0; o < txn.ops.size(); ++o) {  // the keys it reads or appends to, for WalkScan
    if (keys[o] >= 0) states_[keys[o]].appends |= std::holds_alternative<Append>(txn.ops[o]);
  }
  for (size_t o = 0; o < txn.ops.size(); ++o) {
    const MicroOp& op = txn.ops[o];
    if (const auto* append = std::get_if<Append>(&op)) {
      const int32_t key = keys[o];
      KeyState& state = states_[key];
      state.own.push_back(append->element);
      if (state.observed) state.since.push_back(append->element);
      const auto it = elements_.find(append->element);
      if (it->second.txn == nodes_[node]) key_elements_[key].push_back(append->element);
    } else if (const auto* read = std::get_if<Read>(&op)) {
      Observe(node, keys[o], read->list ? ListRef::Of(*read->list) : ListRef{}, true, 0);
    } else if (const auto* prefix = std::get_if<ReadPrefix>(&op)) {
      const ListRef list = prefix->list == nullptr
                               ? ListRef{}
                               : ListRef{prefix->list.get(), std::min(prefix->length, prefix->list->size())};
      Observe(node, keys[o], list, true, 0);
    } else {
      WalkScan(node, std::get<Scan>(op));
    }
  }
}

void Checker::WalkScan(int32_t node, const Scan& scan) {
  auto in_range = [&](std::string_view key) { return key >= scan.start && (scan.end.empty() || key < scan.end); };
  for (const auto& [key, list] : scan.seen) {
    if (!in_range(key)) {
      Report(
          AnomalyType::kMalformed,
          fmt::format("malformed: T{} scanned [{}, {}) and saw {} outside it", IdOf(node), scan.start, scan.end, key),
          {IdOf(node)});
    }
    Observe(node, KeyIndex(key), ListRef::Of(list), true, 0);
  }
  // Keys the transaction read or appended elsewhere that the scan did not see: absent now, here (the others get their
  // edges in AddScanAbsentEdges).
  std::vector<int32_t> absent;
  for (const auto& [key, state] : states_) {
    if (!in_range(Name(key))) continue;
    name_.assign(Name(key));  // (std::map<std::string, ...> looks up std::string only)
    if (!scan.seen.contains(name_)) absent.push_back(key);
  }
  std::sort(absent.begin(), absent.end());
  for (const int32_t key : absent) Observe(node, key, ListRef{}, options_.scan_absent_edges, kFromScan);
  if (options_.scan_absent_edges) scans_.emplace_back(node, &scan);
}

// One read of `key` (list null: absent). The first one is the transaction's view of the key before it: what it read
// less its own appends so far, which must be at its end. A later one must be what the earlier read and the appends
// after it make.
void Checker::Observe(int32_t node, int32_t key, ListRef list, bool edges, uint8_t flags) {
  KeyState& state = states_[key];
  const ListRef seen = list.present() ? list : ListRef::Of(kEmptyList);
  if (state.observed) {
    const ListRef base = state.base.present() ? state.base : ListRef::Of(kEmptyList);
    const bool same = seen.size == base.size + state.since.size() && IsPrefix(base, seen) &&
                      std::equal(state.since.begin(), state.since.end(), seen.begin() + base.size);
    if (!same) {
      std::vector<int64_t> expected(base.begin(), base.end());
      expected.insert(expected.end(), state.since.begin(), state.since.end());
      Report(AnomalyType::kInternal,
             fmt::format("internal: T{} read {} = {}, but its earlier read and appends make it {}", IdOf(node),
                         Name(key), FormatList(list), FormatList(expected)),
             {IdOf(node)});
    }
    state.base = list;
    state.since.clear();
    if (list.present()) observations_[key].push_back({node, 0, list, false, flags});
    return;
  }
  state.observed = true;
  state.base = list;
  const std::vector<int64_t>& own = state.own;
  const bool has_own =
      seen.size >= own.size() && std::equal(own.begin(), own.end(), seen.end() - static_cast<ptrdiff_t>(own.size()));
  if (!has_own) {
    Report(AnomalyType::kInternal,
           fmt::format("internal: T{} read {} = {} after appending {} to it", IdOf(node), Name(key), FormatList(list),
                       FormatList(own)),
           {IdOf(node)});
  }
  const bool external = edges && has_own;
  if (state.appends) flags |= kAppends;
  if (list.present() || external) {
    const uint32_t len = static_cast<uint32_t>(has_own ? seen.size - own.size() : seen.size);
    observations_[key].push_back({node, len, list, external, flags});
  }
}

// The key's version order from its longest list; every other list must be a prefix of it. Then its edges.
void Checker::OrderKey(int32_t key) {
  KeyOrder& order = orders_[key];
  std::vector<Observation>& observations = observations_[key];
  for (const Observation& observation : observations) {
    if (observation.list.present() && (!order.list.present() || observation.list.size > order.list.size)) {
      order.list = observation.list;
      order.reader = observation.node;
    }
  }
  PlaceOrder(key);
  bool reported = false;
  // The stray lists' elements are checked once per list: per shared list, its longest prefix read.
  std::vector<const Observation*> strays;
  absl::flat_hash_map<const std::vector<int64_t>*, size_t> stray_of_list;
  for (Observation& observation : observations) {
    const ListRef list = observation.list;
    if (!list.present() || IsPrefix(list, order.list)) continue;
    observation.external = false;
    if (!reported) {
      reported = true;
      Report(
          AnomalyType::kIncompatibleOrder,
          fmt::format("incompatible-order: {}: T{} read {} but T{} read {}; neither is a prefix of the other",
                      Name(key), IdOf(order.reader), FormatList(order.list), IdOf(observation.node), FormatList(list)),
          {IdOf(order.reader), IdOf(observation.node)});
    }
    const auto [it, fresh] = stray_of_list.emplace(list.vec, strays.size());
    if (fresh) {
      strays.push_back(&observation);
    } else if (list.size > strays[it->second]->list.size) {
      strays[it->second] = &observation;
    }
  }
  for (const Observation* stray : strays) CheckStrayList(key, *stray);
  CollectUnobserved(key);
  AddOrderEdges(key);
  for (const Observation& observation : observations) {
    if (observation.external) AddReadEdges(observation.node, key, observation.external_len, observation.flags);
  }
}

// Who appended each element of the version order, and what is wrong with them.
void Checker::PlaceOrder(int32_t key) {
  KeyOrder& order = orders_[key];
  if (!order.list.present()) return;
  const ListRef list = order.list;
  order.nodes.assign(list.size, -1);
  order.intermediate.assign(list.size, 0);
  for (size_t i = 0; i < list.size; ++i) {
    const int64_t element = list[i];
    if (ReportBadElement(element, key, order.reader, list)) continue;
    ElementInfo& info = elements_.at(element);
    if (info.pos >= 0) {
      Report(AnomalyType::kDuplicateElement,
             fmt::format("duplicate-element: T{} read {} = {}, which holds {} twice", IdOf(order.reader), Name(key),
                         FormatList(list), element),
             {IdOf(order.reader)});
      continue;
    }
    info.pos = static_cast<int32_t>(i);
    order.nodes[i] = node_of_txn_[info.txn];
    order.intermediate[i] = info.nth + 1 < info.count;
  }
}

// Garbage (nobody appended it to this key) or aborted (G1a): true if the element is either.
bool Checker::ReportBadElement(int64_t element, int32_t key, int32_t reader, ListRef list) {
  const auto it = elements_.find(element);
  if (it == elements_.end() || it->second.key != key) {
    if (reported_elements_.insert(element).second) {
      const std::string what =
          it == elements_.end()
              ? std::string("nobody appended it")
              : fmt::format("T{} appended it to {}", history_.txns[it->second.txn].id, Name(it->second.key));
      Report(AnomalyType::kGarbageElement,
             fmt::format("garbage-element: T{} read {} = {}, which holds {}: {}", IdOf(reader), Name(key),
                         FormatList(list), element, what),
             {IdOf(reader)});
    }
    return true;
  }
  const Txn& writer = history_.txns[it->second.txn];
  if (writer.outcome != Outcome::kAborted) return false;
  if (reported_elements_.insert(element).second) {
    Report(AnomalyType::kAbortedRead,
           fmt::format("G1a: T{} read {} = {}, which holds {} appended by aborted T{} (aborted read)", IdOf(reader),
                       Name(key), FormatList(list), element, writer.id),
           {IdOf(reader), writer.id});
  }
  return true;
}

// A list at odds with the version order: its own garbage, aborted and duplicate elements.
void Checker::CheckStrayList(int32_t key, const Observation& observation) {
  absl::flat_hash_set<int64_t> seen;
  for (const int64_t element : observation.list) {
    if (!seen.insert(element).second) {
      Report(AnomalyType::kDuplicateElement,
             fmt::format("duplicate-element: T{} read {} = {}, which holds {} twice", IdOf(observation.node), Name(key),
                         FormatList(observation.list), element),
             {IdOf(observation.node)});
    }
    ReportBadElement(element, key, observation.node, observation.list);
  }
}

// The committed appenders of the key's elements that are not in its version order.
void Checker::CollectUnobserved(int32_t key) {
  KeyOrder& order = orders_[key];
  for (const int64_t element : key_elements_[key]) {
    const ElementInfo& info = elements_.at(element);
    const int32_t node = node_of_txn_[info.txn];
    if (info.pos >= 0 || stamp_[node] == key) continue;
    stamp_[node] = key;
    order.unobserved.push_back(node);
  }
}

// ww: from each element's appender to the next one's, and from the last one's to every unobserved appender.
void Checker::AddOrderEdges(int32_t key) {
  KeyOrder& order = orders_[key];
  for (size_t i = 1; i < order.nodes.size(); ++i) {
    const int32_t from = order.nodes[i - 1];
    const int32_t to = order.nodes[i];
    if (from >= 0 && to >= 0 && from != to) AddEdge(from, to, kWW, key);
  }
  const int32_t last = order.nodes.empty() ? -1 : order.nodes.back();
  for (const int32_t node : order.unobserved) {
    if (last >= 0 && last != node) AddEdge(last, node, kWW, key);
  }
  if (order.unobserved.size() >= 2) {
    order.frontier = static_cast<int32_t>(nodes_.size()) + virtual_nodes_++;
    for (const int32_t node : order.unobserved) AddEdge(order.frontier, node, kFrontier, key);
  }
}

// The edges of a read of `key` whose first `len` elements were others' appends: wr from the last one's appender, rw
// to the next one's (or to every unobserved appender, if it read the whole version order).
void Checker::AddReadEdges(int32_t node, int32_t key, uint32_t len, uint8_t flags) {
  const KeyOrder& order = orders_[key];
  const uint8_t edge_flags = flags & kFromScan;
  if (len > 0) {
    const int32_t writer = order.nodes[len - 1];
    if (writer >= 0 && writer != node) {
      AddEdge(writer, node, kWR, key, edge_flags);
      if (order.intermediate[len - 1]) {
        const int64_t element = order.list[len - 1];
        const ListRef read{order.list.vec, len};
        Report(AnomalyType::kIntermediateRead,
               fmt::format("G1b: T{} read {} = {}, ending in {}, which T{} followed with another append to {} "
                           "(intermediate read)",
                           IdOf(node), Name(key), FormatList(read), element, IdOf(writer), Name(key)),
               {IdOf(node), IdOf(writer)});
      }
    }
  }
  bool unobserved = false;
  if ((flags & kAppends) != 0) CheckOwnAppends(node, key, len, &unobserved);
  if (len < order.nodes.size()) {
    const int32_t next = order.nodes[len];
    if (next >= 0 && next != node) AddEdge(node, next, kRW, key, edge_flags);
  } else if (order.frontier >= 0 && !unobserved) {
    AddEdge(node, order.frontier, kRW, key, edge_flags);
  } else {
    for (const int32_t next : order.unobserved) {
      if (next != node) AddEdge(node, next, kRW, key, edge_flags);
    }
  }
}

// The transaction's own appends to `key` must come after the `len` elements it read of others: else it read its own
// future. Sets *unobserved if one of them is unobserved.
void Checker::CheckOwnAppends(int32_t node, int32_t key, uint32_t len, bool* unobserved) {
  for (const MicroOp& op : TxnOf(node).ops) {
    const auto* append = std::get_if<Append>(&op);
    if (append == nullptr || append->key != Name(key)) continue;
    const ElementInfo& info = elements_.at(append->element);
    if (info.txn != nodes_[node] || info.key != key) continue;
    if (info.pos < 0) *unobserved = true;
    if (info.pos >= 0 && static_cast<uint32_t>(info.pos) < len) {
      Report(AnomalyType::kInternal,
             fmt::format("internal: T{} read {} holding its own append {} before making it", IdOf(node), Name(key),
                         append->element),
             {IdOf(node)});
    }
  }
}

// A key of the scan's range that it did not see (and the transaction did not read or append elsewhere: WalkScan saw
// to those) and that somebody created: an empty read, whose rw edge goes to the key's creator.
void Checker::AddScanAbsentEdges(int32_t node, const Scan& scan) {
  const Txn& txn = TxnOf(node);
  auto touched = [&](std::string_view name) {
    return std::any_of(txn.ops.begin(), txn.ops.end(), [&](const MicroOp& op) {
      if (const auto* append = std::get_if<Append>(&op)) return append->key == name;
      if (const auto* read = std::get_if<Read>(&op)) return read->key == name;
      if (const auto* prefix = std::get_if<ReadPrefix>(&op)) return prefix->key == name;
      return false;
    });
  };
  auto it = std::lower_bound(created_.begin(), created_.end(), std::string_view(scan.start),
                             [&](int32_t key, std::string_view name) { return Name(key) < name; });
  auto seen = scan.seen.lower_bound(scan.start);
  for (; it != created_.end() && (scan.end.empty() || Name(*it) < scan.end); ++it) {
    const std::string_view name = Name(*it);
    while (seen != scan.seen.end() && std::string_view(seen->first) < name) ++seen;
    if ((seen != scan.seen.end() && seen->first == name) || touched(name)) continue;
    AddReadEdges(node, *it, 0, kFromScan);
  }
}

// T1 -> T2 when T1 ended before T2 began, sparsely: sweeping begins and ends in time order, a beginning transaction
// gets an edge from each one of the frontier: the ended ones that no transaction ended since has followed. One that
// is not in it any more has a path through the one that pushed it out. An unknown outcome never ends.
void Checker::AddRealtimeEdges() {
  const int32_t n = static_cast<int32_t>(nodes_.size());
  times_.begin.resize(n);
  times_.end.resize(n);
  std::vector<int64_t>& begin = times_.begin;
  std::vector<int64_t>& end = times_.end;
  std::vector<int32_t> by_begin(n), by_end;
  for (int32_t node = 0; node < n; ++node) {
    const Txn& txn = TxnOf(node);
    begin[node] = txn.begin;
    end[node] = txn.outcome == Outcome::kUnknown ? std::numeric_limits<int64_t>::max() : txn.end;
    by_begin[node] = node;
    if (txn.outcome != Outcome::kUnknown) by_end.push_back(node);
  }
  std::sort(by_begin.begin(), by_begin.end(), [&](int32_t a, int32_t b) { return begin[a] < begin[b]; });
  std::sort(by_end.begin(), by_end.end(), [&](int32_t a, int32_t b) { return end[a] < end[b]; });
  std::vector<int32_t> frontier;
  size_t next_end = 0;
  for (const int32_t node : by_begin) {
    for (; next_end < by_end.size() && end[by_end[next_end]] < begin[node]; ++next_end) {
      const int32_t done = by_end[next_end];
      std::erase_if(frontier, [&](int32_t before) { return end[before] < begin[done]; });
      frontier.push_back(done);
    }
    for (const int32_t before : frontier) AddEdge(before, node, kRT, -1);
  }
}

void Checker::AddEdge(int32_t from, int32_t to, EdgeKind kind, int32_t key, uint8_t flags) {
  if (from == to) return;
  edges_.push_back({from, to, key, kind, flags});
}

// Names a cycle by its edges, and spells it out from its lowest transaction id (a long one with its middle elided).
// Real-time order is transitive, so a run of rt edges is shown as one step (and the transactions inside it are left
// out): the sparse edges make runs long.
void Checker::ReportCycle(const Cycle& found) {
  const int32_t real = static_cast<int32_t>(nodes_.size());
  const size_t n = found.size();
  auto inside_rt_run = [&](size_t i) { return found[i]->kind == kRT && found[(i + n - 1) % n]->kind == kRT; };
  size_t first = n;
  for (size_t i = 0; i < n; ++i) {
    if (found[i]->from >= real || inside_rt_run(i)) continue;
    if (first == n || IdOf(found[i]->from) < IdOf(found[first]->from)) first = i;
  }
  Cycle cycle(found.begin() + static_cast<ptrdiff_t>(first), found.end());
  cycle.insert(cycle.end(), found.begin(), found.begin() + static_cast<ptrdiff_t>(first));
  size_t wr = 0, rw = 0, rt = 0;
  bool scan = false;
  std::vector<std::string> steps;
  std::vector<int64_t> txns;
  std::string label;
  for (size_t i = 0; i < n; ++i) {
    const Edge* edge = cycle[i];
    wr += edge->kind == kWR;
    rw += edge->kind == kRW;
    rt += edge->kind == kRT;
    scan |= (edge->flags & kFromScan) != 0;
    if (edge->from < real && !(edge->kind == kRT && i > 0 && cycle[i - 1]->kind == kRT)) {
      txns.push_back(IdOf(edge->from));
    }
    if (edge->kind == kRT && i + 1 < n && cycle[i + 1]->kind == kRT) continue;  // one step, at the run's end
    if (edge->kind != kFrontier) {
      static constexpr const char* kNames[] = {"ww", "wr", "rw", "rt"};
      label = edge->kind == kRT ? "-rt->"
                                : fmt::format("-{}({}{})->", kNames[edge->kind], Name(edge->key),
                                              (edge->flags & kFromScan) != 0 ? ", scan" : "");
    }
    if (edge->to < real) steps.push_back(fmt::format(" {} T{}", label, IdOf(edge->to)));
  }
  const AnomalyType base = rw == 0   ? (wr == 0 ? AnomalyType::kG0 : AnomalyType::kG1c)
                           : rw == 1 ? AnomalyType::kGSingle
                                     : AnomalyType::kG2;
  const AnomalyType type = rt > 0 ? AnomalyType::kRealtime : base;
  std::string text = fmt::format("{}: T{}", AnomalyTypeName(type), txns.front());
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps.size() > 40 && i == 20) {
      text += fmt::format(" ...({} more steps)...", steps.size() - 40);
      i = steps.size() - 20;
    }
    text += steps[i];
  }
  static constexpr const char* kWhy[] = {"a write cycle: appends ordered both ways", "circular information flow",
                                         "exactly one anti-dependency: read skew, or a lost update",
                                         "anti-dependencies only: write skew, or a phantom"};
  const int why = static_cast<int>(base) - static_cast<int>(AnomalyType::kG0);
  if (rt > 0) {
    text += fmt::format(" (not strictly serializable: a {} cycle once real-time order is added, e.g. a stale read)",
                        AnomalyTypeName(base));
  } else {
    text += fmt::format(" ({})", kWhy[why]);
  }
  if (scan) text += "; an rw(.., scan) edge: a scan did not see a key that its successor created";
  Report(type, std::move(text), std::move(txns));
}

void Checker::Report(AnomalyType type, std::string text, std::vector<int64_t> txns) {
  if (++result_.anomaly_counts[type] > options_.max_reports_per_type) return;
  result_.anomalies.push_back({type, std::move(text), std::move(txns)});
}

CheckResult Checker::Run() {
  result_.txns = history_.txns.size();
  first_op_.resize(history_.txns.size());
  for (int32_t t = 0; t < static_cast<int32_t>(history_.txns.size()); ++t) IndexTxn(t);
  DecideCommitted();
  const size_t keys = key_names_.size();
  key_elements_.resize(keys);
  observations_.resize(keys);
  orders_.resize(keys);
  stamp_.assign(nodes_.size(), -1);
  for (int32_t node = 0; node < static_cast<int32_t>(nodes_.size()); ++node) WalkTxn(node);
  for (int32_t key = 0; key < static_cast<int32_t>(keys); ++key) OrderKey(key);
  for (int32_t key = 0; key < static_cast<int32_t>(keys); ++key) {
    if (orders_[key].created()) created_.push_back(key);
  }
  std::sort(created_.begin(), created_.end(), [&](int32_t a, int32_t b) { return Name(a) < Name(b); });
  for (const auto& [node, scan] : scans_) AddScanAbsentEdges(node, *scan);
  if (options_.realtime) AddRealtimeEdges();
  for (const Edge& edge : edges_) {
    result_.edges.ww += edge.kind == kWW;
    result_.edges.wr += edge.kind == kWR;
    result_.edges.rw += edge.kind == kRW;
    result_.edges.realtime += edge.kind == kRT;
  }
  const int32_t real = static_cast<int32_t>(nodes_.size());
  const Graph graph = BuildGraph(real, real + virtual_nodes_, std::move(edges_));
  CycleSearch(graph, times_, options_.gsingle_search_budget, options_.max_cycles_per_component)
      .Run([this](const Cycle& cycle) { ReportCycle(cycle); });
  result_.ok = result_.anomaly_counts.empty();
  return std::move(result_);
}

}  // namespace

CheckResult Check(const History& history, const CheckOptions& options) { return Checker(history, options).Run(); }

}  // namespace cell::bench::serializability
