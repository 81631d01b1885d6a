// TreeReader: lock-free search and range scan of one meganode's B-link tree, over any NodeSource.
//
// This is the one traversal code path: the server runs it over a LocalNodeSource, a client over a copying source
// fed by one-sided reads. It follows child pointers and, when a key is at or above a node's max key, right links
// (Lehman-Yao/Sagiv). Every node is checked before it is believed: kind, valid flag, identity, level, and min key.
// A node that fails these checks but is a consistent state was reached through a stale pointer (freed or reused):
// the traversal restarts from the nearest ancestor it visited, then from the root.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "btree/node_source.h"
#include "btree/record_format.h"
#include "cell/status.h"

namespace cell::btree {

inline constexpr int kMaxLevels = 64;

// The node visited at each level on the way down; where a restart or a separator insert begins.
class Path {
 public:
  bool Has(int level) const { return level >= 0 && level < kMaxLevels && ((mask_ >> level) & 1); }
  GlobalPtr At(int level) const { return GlobalPtr::Unpack(at_[level]); }
  void Set(int level, GlobalPtr p) {
    at_[level] = p.Pack();
    mask_ |= uint64_t{1} << level;
  }
  void Clear() { mask_ = 0; }

 private:
  uint64_t mask_ = 0;
  uint64_t at_[kMaxLevels];  // packed pointers; only levels named in mask_ are meaningful (left uninitialised)
};

// A pair a scan returns. A locked entry (a transaction is committing the key) comes without its value, and only to a
// scan that asked to see locks; otherwise the scan stops there with Unavailable.
struct KeyValue {
  std::string key;
  std::string value;
  uint64_t version = 0;   // the record's version (record_format.h)
  uint64_t checksum = 0;  // the record's checksum, as the leaf entry holds it: changes with every write of the key
  bool locked = false;
};

// What a search read of a key's entry besides its value (transactions record it, and validate by it).
struct RecordMeta {
  uint64_t version = 0;
  uint64_t checksum = 0;
  bool locked = false;  // a transaction is committing the key: no value was read
};

// How many keys a range holds, and their bytes (keys and values, without record headers), as estimated from the
// tree's shape (TreeReader::Estimate): never a count of the keys themselves.
struct SizeEstimate {
  uint64_t keys = 0;
  uint64_t bytes = 0;
};

// A scan or get that met a key a transaction is committing, and did not ask to see locks: retry shortly.
Status LockedKey(std::string_view key);

// How a scan reads.
struct ScanMode {
  // Locked entries come back as such (KeyValue::locked, no value); otherwise the scan stops at one with Unavailable
  // (LockedKey), keeping the pairs before it.
  bool report_locks = false;
  // Values are not read (left empty; version 0): only the leaves are.
  bool keys_only = false;
  // Descending order: from the greatest key below `end` (empty: the last key) down to `start`.
  bool reverse = false;
};

class TreeReader {
 public:
  struct Stats {
    uint64_t restarts = 0;  // stale pointer, started again from an ancestor or the root
    uint64_t retries = 0;   // node or record changed while read, read again
  };

  // Where a search for one key ended in this meganode.
  struct Step {
    enum class Kind { kFound, kNotFound, kChild, kRight, kStale };
    Kind kind = Kind::kNotFound;
    GlobalPtr next;          // kChild: the child meganode covering the key; kRight: the right sibling meganode
    GlobalPtr cluster_root;  // kRight: what the header names as the cluster's root (the first meganode's)
  };

  TreeReader(NodeSource* source, GlobalPtr meganode)
      : source_(source), local_(source->AsLocal()), meganode_(meganode) {}

  // Searches this meganode for `key`. A leaf meganode gives kFound (the value in *value) or kNotFound; an internal
  // meganode gives kChild, the child meganode whose range holds the key. kRight: the key is at or above this
  // meganode's max (it split, or the pointer that led here is old): continue in `next`. kStale: the key is below
  // this meganode's min, so the pointer that led here is stale: start again from higher up.
  // With `meta`, a locked entry gives kFound with meta->locked set and no value; without it, Unavailable (LockedKey).
  Status Find(std::string_view key, std::string* value, Step* step, RecordMeta* meta = nullptr);
  // Find, for a tree of one meganode: OK or NotFound; FailedPrecondition if the key lies outside the meganode.
  Status Get(std::string_view key, std::string* value);
  // Up to `limit` pairs with start <= key < end (an empty `end` means no bound), in key order, from this meganode's
  // nodes. A scan that meets a node cut by a meganode split stops there: beyond_meganode() is then true and
  // resume_key() is where the scan goes on (in the meganodes to the right). A meganode not yet split keeps nodes
  // that reach +infinity: the caller continues from the header's max (GlobalReader::Scan).
  // Reverse (mode.reverse), the pairs come greatest first, and each leaf is reached by a descent from this meganode's
  // root to the leaf covering the key just below what is left (btree::Predecessor), so no left links are needed. It
  // stops with beyond_meganode() when what is left begins at or above this meganode's max (it split), and with
  // before_meganode() when what is left lies below its min; resume_key() is then the exclusive end of what is left.
  Status Scan(std::string_view start, std::string_view end, size_t limit, std::vector<KeyValue>* out,
              ScanMode mode = {});
  // Adds to *out an estimate of the keys in [lo, hi) (empty lo: from the first key; empty hi: to the last) and their
  // bytes, from two descents, one to each bound (InnoDB's records_in_range does the same): at each level the entries
  // between the two paths count as subtrees of the average size the paths saw below, and the leaf bytes per key is
  // what the two leaves hold. Exact when both bounds fall in one leaf; otherwise good to a small factor (nodes are
  // between half and wholly full), and it costs two descents whatever the range. The caller keeps hi at or below the
  // meganode's max (a bound beyond it gives FailedPrecondition with beyond_meganode(): the meganode split meanwhile).
  Status Estimate(std::string_view lo, std::string_view hi, SizeEstimate* out);

  bool beyond_meganode() const { return beyond_; }
  bool before_meganode() const { return before_; }
  const std::string& resume_key() const { return resume_; }

  // Walks from the root to the node at `level` whose key range holds k; h holds that node (the caller validates
  // what it reads from it). `path` records the node passed at each level. FailedPrecondition, with
  // beyond_meganode() true, if k lies at or beyond the meganode's edge (its max).
  Status Descend(const SearchKey& k, int level, Path* path, NodeHandle* h);
  // Continues the walk from `ptr`, a node at `ptr_level` (moving right, restarting through `path` when stale).
  Status Reach(const SearchKey& k, int level, GlobalPtr ptr, int ptr_level, Path* path, NodeHandle* h);
  // The root slot and level, from the meganode header.
  Status ReadRoot(GlobalPtr* root, int* level);
  // What the header says of the meganode as a whole, and where `k` stands against its range.
  struct Header {
    GlobalPtr root;
    int root_level = 0;
    int level = 0;    // among meganodes
    GlobalPtr right;  // the right sibling meganode
    GlobalPtr cluster_root;
    int position = 0;  // -1: k below the min; 0: inside; +1: at or above the max
    std::string min;   // the meganode's range [min, max) (empty: -infinity, +infinity); filled only when asked for
    std::string max;
  };
  Status ReadHeader(const SearchKey* k, Header* out, bool with_range = false);

  const Stats& stats() const { return stats_; }
  NodeSource* source() const { return source_; }
  GlobalPtr meganode() const { return meganode_; }

 private:
  // The implementations, written once as templates over the source type: instantiated for LocalNodeSource (direct,
  // inlined calls) and for NodeSource (virtual calls, any other source).
  template <class Source>
  Status FindIn(Source* src, std::string_view key, std::string* value, Step* step, RecordMeta* meta);
  template <class Source>
  Status ReadHeaderIn(Source* src, const SearchKey* k, Header* out, bool with_range = false);
  template <class Source>
  Status ScanIn(Source* src, std::string_view start, std::string_view end, size_t limit, std::vector<KeyValue>* out,
                ScanMode mode);
  template <class Source>
  Status ScanReverseIn(Source* src, std::string_view start, std::string_view end, size_t limit,
                       std::vector<KeyValue>* out, ScanMode mode);
  // Completes the pairs out[first, first + entries.size()), whose keys were read from the leaf in `leaf` and
  // entries[j] what each one's entry held: reads their records unless keys_only. If a record changed since the leaf
  // was read, *changed_at is its index j: the pairs before it are complete, the caller drops it and those after it.
  // On an error, the pairs from the failed one on are dropped.
  template <class Source>
  Status AppendBatch(Source* src, const NodeHandle& leaf, size_t first, const std::vector<LeafValue>& entries,
                     ScanMode mode, std::vector<KeyValue>* out, size_t* changed_at);
  template <class Source>
  Status ReachIn(Source* src, const SearchKey& k, int level, GlobalPtr ptr, int ptr_level, Path* path, NodeHandle* h);
  template <class Source>
  Status ReadRootIn(Source* src, GlobalPtr* root, int* level);
  // Reads the record `entry` (read from the leaf in `leaf`) points to. Aborted if it no longer matches (the caller
  // re-reads the leaf).
  template <class Source>
  Status ReadRecord(Source* src, const NodeHandle& leaf, const LeafValue& entry, std::string_view key,
                    std::string* value, uint64_t* version);

  // What a descent to one bound of an estimate saw (btree/size_estimate.cc).
  struct Dive;
  Status DiveTo(std::string_view key, bool inclusive, Dive* dive);

  NodeSource* source_;
  LocalNodeSource* local_;  // source_ itself if it is an in-place source, else nullptr
  GlobalPtr meganode_;
  Stats stats_;
  bool beyond_ = false;  // the last walk met this meganode's edge (a cut node: finite max, no right link)
  bool before_ = false;  // a reverse scan reached this meganode's min
  std::string resume_;
};

}  // namespace cell::btree
