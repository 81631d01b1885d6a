// A serializability checker for transaction histories over a key-value store, in the manner of Elle (Kingsbury &
// Alvaro, "Elle: Inferring Isolation Anomalies from Experimental Observations", VLDB 2020) for list-append.
//
// Why list-append: every key holds a list of unique integers and a transaction only ever appends to it, so a read
// reveals not one value but the whole order of the writes before it. From the reads the checker recovers each key's
// version order, infers the dependencies between transactions (who wrote before whom, who read whose write, who read a
// version another transaction then overwrote) and looks for cycles in them: a history is serializable only if its
// dependency graph is acyclic, and strictly serializable only if it stays acyclic with real-time order added. It is
// independent of Cell: tests record what their clients did and saw, and hand the history here.
//
// The model. A transaction is a sequence of micro-operations:
//   Append{key, element}   read the key's list and wrote it back with `element` at its end; elements are unique across
//                          the whole history (the store keeps the list as a string: EncodeList / DecodeList);
//   Read{key, list}        the list the transaction saw (nullopt: the key was absent);
//   Scan{start, end, seen} every key in [start, end) (end empty: unbounded) the scan saw, with its list; a key of the
//                          range that is not in `seen` was absent as far as the scan saw;
//   ReadPrefix{key, list, length}
//                          a Read of the first `length` elements of a list shared with other reads. For a recorder that
//                          knows each key's version chain (cell-bench's, bench/txn_history.h): a read of a key written
//                          n times would otherwise copy up to n elements, n times over. Reads of one shared list are
//                          prefixes of one another by construction, and the checker compares them as such (no
//                          element by element comparison), so a hot key costs its length once, not per read.
// A transaction sees its own earlier appends (read-your-writes). It has an id, an outcome (committed, aborted, or
// unknown: the client never learned, e.g. the reply was lost) and real-time bounds: `begin` taken before its first
// operation was sent, `end` after its commit returned (nanoseconds of one monotonic clock).
//
// What Check reports (each anomaly with a text naming transactions, keys and edges):
//   malformed            the history itself is wrong: an element appended twice, duplicate transaction ids, a scan
//                        that saw a key outside its range, a committed transaction that ended before it began, a
//                        ReadPrefix without a list or longer than it;
//   duplicate-element    a list holds an element twice;
//   garbage-element      a list holds an element nobody appended (to that key);
//   G1a                  a committed transaction read an element appended by an aborted one (aborted read);
//   G1b                  a transaction read a list ending in an element after which its appender appended again to
//                        the same key (intermediate read);
//   incompatible-order   two lists read from one key are not prefixes of one another: no version order explains both;
//   internal             a transaction's read disagrees with its own earlier reads and appends of that key;
//   G0, G1c, G-single, G2
//                        dependency cycles, named as Adya and Elle do: only write-write edges (G0); write-write and
//                        write-read (G1c); exactly one read-write anti-dependency (G-single, e.g. read skew or lost
//                        update); two or more (G2, e.g. write skew or a phantom);
//   G-realtime           a cycle that needs real-time edges: serializable, but not strictly (e.g. a stale read).
//
// How the graph is inferred (only edges that are certain):
//   * Committed transactions are the nodes. An unknown one counts as committed if another committed transaction read
//     one of its elements, and is dropped otherwise; aborted ones are dropped (their elements must never be read).
//   * A key's version order is its longest list read; every other list read must be a prefix of it. Appends of
//     committed transactions that nobody read come after it, in an order nobody knows: they get no edges among
//     themselves, only from the appender of the list's last element (ww) and from readers of the whole list (rw).
//   * ww: T1 appended an element and T2 the next one. wr: T2 read a list ending in T1's element. rw: T1 read a list
//     (or the key absent) and T2 appended the element after its end. A transaction's reads count once per key: the
//     first, less its own appends; later ones are only checked against what it read and appended before.
//   * A scan gives the edges of a read for every key it saw; a key of its range that it did not see is an empty read,
//     so the scan has an rw edge to whoever created the key later (this is what catches phantoms).
//   * Real time (CheckOptions::realtime): T1 -> T2 when T1.end < T2.begin, as a sparse set of edges with the same
//     transitive closure (not n^2). An unknown transaction's commit may land any time after it began: it gets edges
//     into it only.
// Cycles: Tarjan's strongly connected components; within each, the weakest cycles Elle would name, level by level:
// cycles of the ww subgraph (G0), then of ww+wr (G1c), then of ww+wr+rw (G-single where one anti-dependency closes a
// ww/wr path, else G2), then with real time (G-realtime). Each is a shortest cycle found by breadth-first search (a
// real-time step goes straight to any transaction that began after the current one ended), and its transactions then
// leave the search, so that one component can yield several anomalies (CheckOptions::max_cycles_per_component).
// The cycles reported are examples, not an inventory: tangled anomalies may show as fewer cycles than they are.
//
// Scale: linear in the history's size plus its edges (200,000 transactions of four operations take about a second in
// a Release build: see serializability_test.cc); each cycle reported adds a pass over its component.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace cell::bench::serializability {

// A list as the store keeps it: "3,17,42" (the empty list is ""). DecodeList refuses anything else (spaces, signs
// other than '-', empty fields, numbers out of range).
std::string EncodeList(const std::vector<int64_t>& list);
bool DecodeList(std::string_view text, std::vector<int64_t>* list);

struct Append {
  std::string key;
  int64_t element = 0;
};

struct Read {
  std::string key;
  std::optional<std::vector<int64_t>> list;  // nullopt: the key was absent
};

struct Scan {
  std::string start;
  std::string end;                                   // empty: unbounded
  std::map<std::string, std::vector<int64_t>> seen;  // every key of [start, end) the scan found, with its list
};

struct ReadPrefix {
  std::string key;
  std::shared_ptr<const std::vector<int64_t>> list;  // not null
  size_t length = 0;                                 // at most list->size(); the key was present (0: empty)
};

using MicroOp = std::variant<Append, Read, Scan, ReadPrefix>;

enum class Outcome { kCommitted, kAborted, kUnknown };

struct Txn {
  int64_t id = 0;
  Outcome outcome = Outcome::kCommitted;
  int64_t begin = 0;  // before its first operation was sent
  int64_t end = 0;    // after its commit returned (ignored for unknown outcomes)
  std::vector<MicroOp> ops;
};

struct History {
  std::vector<Txn> txns;
};

enum class AnomalyType {
  kMalformed,
  kDuplicateElement,
  kGarbageElement,
  kAbortedRead,       // G1a
  kIntermediateRead,  // G1b
  kIncompatibleOrder,
  kInternal,
  kG0,
  kG1c,
  kGSingle,
  kG2,
  kRealtime,  // G-realtime: a cycle that needs real-time edges
};

// "G1a", "G-single", "incompatible-order", ...
std::string_view AnomalyTypeName(AnomalyType type);

struct Anomaly {
  AnomalyType type = AnomalyType::kMalformed;
  std::string description;    // e.g. "G2: T7 -rw(x)-> T9 -rw(y)-> T7 (...)"
  std::vector<int64_t> txns;  // the ids it names, in order (a cycle's transactions once each)
};

struct CheckOptions {
  // Add real-time edges: check strict serializability rather than serializability.
  bool realtime = true;
  // Give a scan rw edges to the creators of the keys of its range it did not see. Only tests turn it off (to show
  // that it is what catches a phantom).
  bool scan_absent_edges = true;
  // Anomalies of one type past this many are counted (CheckResult::anomaly_counts) but not described.
  size_t max_reports_per_type = 100;
  // Cycles reported per strongly connected component of the graph (a broken store can make one of most of it).
  size_t max_cycles_per_component = 32;
  // Work (edge visits) allowed per component for the search of cycles with exactly one anti-dependency; past it a
  // cycle is still reported, named by the edges it has (possibly G2 where a G-single also existed).
  size_t gsingle_search_budget = 20'000'000;
};

struct EdgeCounts {
  size_t ww = 0;
  size_t wr = 0;
  size_t rw = 0;
  size_t realtime = 0;
};

struct CheckResult {
  bool ok = true;  // no anomaly of any type
  std::vector<Anomaly> anomalies;
  std::map<AnomalyType, size_t> anomaly_counts;  // all found, including those not described
  size_t txns = 0;                               // in the history
  size_t committed = 0;                          // graph nodes: committed, and unknown ones whose elements were read
  size_t unknown_committed = 0;                  // of those, unknown ones
  size_t unknown_dropped = 0;                    // unknown ones nobody read from
  size_t aborted = 0;
  EdgeCounts edges;

  bool Has(AnomalyType type) const { return anomaly_counts.count(type) != 0; }
  // One line of counts, then one line per described anomaly: for test failure messages and logs.
  std::string Summary() const;
};

CheckResult Check(const History& history, const CheckOptions& options = {});

}  // namespace cell::bench::serializability
