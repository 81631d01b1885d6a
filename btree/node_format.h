// The 1 KB B-link tree node: its bytes, its write protocol, and why a torn copy is never accepted.
//
// LAYOUT. A node is 1024 bytes, 1024-byte aligned, at a fixed slot of a meganode: 128 little-endian 64-bit words.
//
//   word 0   version      even: stable; odd: a writer holds the node. Never reset, also not when a slot is reused.
//   word 1   checksum     XXH3-64 of bytes 16..1023, seeded with the version (binds the contents to the version).
//   word 2   meganode     GlobalPtr (packed) of the meganode's first byte: the meganode's identity.
//   word 3   bits 0-31 slot | 32-39 level (0 = leaf) | 40-47 kind | 48-55 flags | 56-63 entry count
//   word 4   right link   GlobalPtr (packed) of the right sibling in the same meganode, 0 at the meganode's edge
//                         (meganodes are linked through their headers instead).
//   word 5   bits 0-7 min key length | 8-15 min key word | 16-23 max key length | 24-31 max key word |
//            32-39 heap start word.   A fence length of 0 means -infinity (min) or +infinity (max): real keys and
//                         separators are never empty.
//   word 6   meganode header only: bits 0-31 root slot | 32-39 root level.  Tree nodes: 0.
//   word 7   meganode header only: the cluster's root meganode (GlobalPtr), kept in the header of the cluster's
//            first meganode (offset 0 of the lowest region); 0 elsewhere.  Tree nodes: 0.
// A MEGANODE HEADER (slot 0, kind kMeganodeHeader) uses the same words for the meganode as a whole: level (word 3)
// is the meganode's level in the tree of meganodes (0: a leaf meganode), the flags say internal or not, the fences
// (word 5) are the meganode's key range [min, max), and the right link (word 4) is the right sibling meganode's
// header (meganodes of one level are linked, B-link style, so a search that finds its key at or above a meganode's
// max moves right). A split of a meganode publishes its header (new max, right link to the new meganode) before
// it cuts its nodes, so a reader that meets a cut node (finite max, no right link) re-reads the header and moves.
//   words 8..          the slot array, two words per entry, sorted by key:
//            [prefix]  the key's first 8 bytes, zero padded (raw byte order; compared as a big-endian integer)
//            [aux]     bits 0-7 key length | 8-15 blob word | 16 locked (level 0 of a leaf meganode: the entry
//                      points to a transaction's lock record, not to a value; record_format.h) | 32-63 child slot
//                      (inner) or record length (level 0)
//   ...free...
//   heap (up to word 127, growing down): fence keys and entry blobs. A blob is, at level 0, two payload words
//            [GlobalPtr of the target][its 64-bit checksum], then the key's words 1.. (bytes 8..), zero padded.
//            Inner blobs hold only key words 1.. (empty for keys of 8 bytes or less).
//
// Entry meaning. Inner node (level > 0): entry i's child slot covers [key_i, key_i+1) in the same meganode; entry 0
// has no stored key (length 0): its range starts at the node's min key. Level 0 of a *leaf meganode*: key -> extent
// (GlobalPtr, record length, checksum of the record). Level 0 of an *internal meganode* (flag kInternalMeganode):
// separator key -> child meganode (GlobalPtr; length and checksum 0).
// Fence keys: the node is responsible for keys in [min, max). Keys are inline, so the first 8 bytes of every key sit
// in the slot array and one node search is a binary search over integers that touches few cache lines.
//
// WRITE PROTOCOL (a seqlock per node). A writer
//   1. locks the node: CAS version v (even) -> v+1, then a release fence;
//   2. builds the new contents in a private image, sets the image's version to v+2 and its checksum;
//   3. stores words 1..127 with relaxed atomic stores, then stores version v+2 with release order.
// Unlocking without a change stores v again. New nodes are written the same way at their (free) slot, so a slot's
// version only grows.
//
// READS. (a) In place (server): load the version (acquire; wait while odd), read what is needed with relaxed word
// loads, acquire fence, re-load the version: unchanged means everything read belongs to one state. Every index read
// from the node is masked into the node, so even a torn in-place read cannot fault; it is only discarded.
// (b) Copies (one-sided reads): a NIC, memcpy or TCP server may copy the node's cache lines in any order and at any
// time, so front/rear version stamps prove nothing. A copy is accepted only if its version is even and its checksum
// matches XXH3(bytes 16..1023, seed = version). The checksum is computed by the writer over the exact image it
// publishes, so an accepted copy is byte-for-byte a published state of the node, whatever order its lines were read
// in; a copy mixing two states matches with probability about 2^-64. The checksum also covers the identity words, so
// a copy of the wrong slot is refused too. Cost: one XXH3 over 1008 bytes per node write and per copied node (tens
// of ns; see docs/BENCHMARKS.md); in-place server reads pay nothing. A slot never written has version 0 and all-zero
// bytes: accepted as a free node (kind kFree), which no traversal uses.
//
// REUSE. Freed nodes are published with the valid flag cleared and may later be reused; a reader holding a stale
// pointer checks kind, valid flag, identity, level and fence keys, and restarts from a safe ancestor on a mismatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "btree/key.h"
#include "common/global_ptr.h"
#include "common/shared_words.h"

namespace cell::btree {

inline constexpr size_t kNodeSize = 1024;
inline constexpr size_t kNodeWords = kNodeSize / 8;
inline constexpr size_t kCacheLine = 64;
inline constexpr uint32_t kHeaderWords = 8;
inline constexpr uint32_t kMaxEntries = (kNodeWords - kHeaderWords) / 2;  // 60
inline constexpr uint32_t kLeafPayloadWords = 2;
inline constexpr uint64_t kAuxLocked = uint64_t{1} << 16;

enum class NodeKind : uint8_t { kFree = 0, kTreeNode = 1, kMeganodeHeader = 2 };
inline constexpr uint8_t kFlagValid = 1;
inline constexpr uint8_t kFlagInternalMeganode = 2;
// Meganode headers only: the meganode's state, kept in its bytes so that a restarted server knows it (recovery,
// meganode/tree_recovery.cc). Readers ignore both.
inline constexpr uint8_t kFlagPending = 4;  // made for a split (or a new root) not yet published: an orphan if unnamed
inline constexpr uint8_t kFlagSealed = 8;   // made for another server's split, not yet unsealed: takes no writes

// What a level-0 entry points to: an extent (leaf meganode) or a child meganode (internal meganode).
struct LeafValue {
  GlobalPtr ptr;
  uint32_t length = 0;    // record length in bytes (extents); 0 for child meganodes
  uint64_t checksum = 0;  // XXH3-64 of the record (extents); 0 for child meganodes
  bool locked = false;    // the record is a lock record: a transaction is committing this key
  friend bool operator==(const LeafValue& a, const LeafValue& b) {
    return a.ptr == b.ptr && a.length == b.length && a.checksum == b.checksum && a.locked == b.locked;
  }
};

// The checksum a node with these bytes and version must carry.
uint64_t NodeChecksum(const uint64_t* words, uint64_t version);

// A read-only view of node bytes: shared memory read in place, or a private copy. All loads are relaxed atomic word
// loads and every index that comes from the node is masked into it, so any bytes at all are safe to look at.
class NodeView {
 public:
  NodeView() = default;
  // Snapshots the header words (2, 3, 5) once; a later Validate covers them like every other read.
  explicit NodeView(const uint64_t* words)
      : w_(words),
        meganode_(LoadSharedWord(words + 2)),
        info_(LoadSharedWord(words + 3)),
        fences_(LoadSharedWord(words + 5)) {}

  uint64_t W(uint32_t i) const { return LoadSharedWord(w_ + (i & (kNodeWords - 1))); }
  const uint64_t* words() const { return w_; }

  uint64_t version() const { return W(0); }
  uint64_t checksum() const { return W(1); }
  GlobalPtr meganode() const { return GlobalPtr::Unpack(meganode_); }
  uint32_t slot() const { return static_cast<uint32_t>(info_); }
  int level() const { return static_cast<int>((info_ >> 32) & 0xff); }
  NodeKind kind() const { return static_cast<NodeKind>((info_ >> 40) & 0xff); }
  uint8_t flags() const { return static_cast<uint8_t>(info_ >> 48); }
  bool valid() const { return (flags() & kFlagValid) != 0; }
  bool internal_meganode() const { return (flags() & kFlagInternalMeganode) != 0; }
  bool pending() const { return (flags() & kFlagPending) != 0; }
  bool sealed() const { return (flags() & kFlagSealed) != 0; }
  uint32_t size() const {
    uint32_t n = static_cast<uint32_t>(info_ >> 56);
    return n > kMaxEntries ? kMaxEntries : n;
  }
  GlobalPtr right() const { return GlobalPtr::Unpack(W(4)); }
  // Where this node is: meganode base + slot * 1024.
  GlobalPtr self() const { return meganode().Plus(uint64_t{slot()} * kNodeSize); }

  uint32_t min_len() const { return fences_ & 0xff; }
  uint32_t min_word() const { return (fences_ >> 8) & 0xff; }
  uint32_t max_len() const { return (fences_ >> 16) & 0xff; }
  uint32_t max_word() const { return (fences_ >> 24) & 0xff; }
  uint32_t heap_word() const { return (fences_ >> 32) & 0xff; }
  bool max_is_infinite() const { return max_len() == 0; }

  // Meganode header fields.
  uint32_t root_slot() const { return static_cast<uint32_t>(W(6)); }
  int root_level() const { return static_cast<int>((W(6) >> 32) & 0xff); }
  GlobalPtr cluster_root() const { return GlobalPtr::Unpack(W(7)); }

  // Entry accessors (i < size()).
  uint32_t key_len(uint32_t i) const { return W(kHeaderWords + 2 * i + 1) & 0xff; }
  uint32_t blob_word(uint32_t i) const { return (W(kHeaderWords + 2 * i + 1) >> 8) & 0xff; }
  uint32_t aux32(uint32_t i) const { return static_cast<uint32_t>(W(kHeaderWords + 2 * i + 1) >> 32); }
  uint32_t child_slot(uint32_t i) const { return aux32(i); }
  LeafValue leaf_value(uint32_t i) const {
    uint32_t b = blob_word(i);
    return LeafValue{GlobalPtr::Unpack(W(b)), aux32(i), W(b + 1), ((W(kHeaderWords + 2 * i + 1) >> 16) & 1) != 0};
  }

  // Sign of (entry i's key - k). Not for entry 0 of an inner node (its key is the min fence, not stored).
  int CompareEntry(uint32_t i, const SearchKey& k) const {
    uint64_t p = OrderWord(W(kHeaderWords + 2 * i));
    if (p != k.word(0)) return p < k.word(0) ? -1 : 1;
    uint64_t aux = W(kHeaderWords + 2 * i + 1);
    uint32_t len = aux & 0xff;
    uint32_t suffix = static_cast<uint32_t>((aux >> 8) & 0xff) + (level() == 0 ? kLeafPayloadWords : 0);
    return CompareTail(suffix, len, k);
  }
  // Sign of (min fence - k); -infinity compares below everything.
  int CompareMin(const SearchKey& k) const {
    uint32_t len = min_len();
    if (len == 0) return -1;
    return CompareStored(min_word(), len, k);
  }
  // Sign of (max fence - k); +infinity compares above everything.
  int CompareMax(const SearchKey& k) const {
    uint32_t len = max_len();
    if (len == 0) return 1;
    return CompareStored(max_word(), len, k);
  }
  bool Covers(const SearchKey& k) const { return CompareMin(k) <= 0 && CompareMax(k) > 0; }

  // First entry index >= from whose key is >= k (LowerBound) or > k (UpperBound).
  uint32_t LowerBound(const SearchKey& k, uint32_t from = 0) const {
    uint32_t lo = from, hi = size();
    while (lo < hi) {
      uint32_t mid = (lo + hi) / 2;
      if (CompareEntry(mid, k) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  }
  uint32_t UpperBound(const SearchKey& k, uint32_t from = 0) const {
    uint32_t lo = from, hi = size();
    while (lo < hi) {
      uint32_t mid = (lo + hi) / 2;
      if (CompareEntry(mid, k) <= 0)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  }
  // Inner nodes: the entry whose child covers k (k must be >= min).
  uint32_t ChildIndex(const SearchKey& k) const {
    uint32_t i = UpperBound(k, 1);
    return i == 0 ? 0 : i - 1;
  }

  // Copies of stored keys (entry 0 of an inner node yields the empty string).
  void CopyEntryKey(uint32_t i, std::string* out) const {
    uint64_t words[(0xff + 7) / 8];
    out->assign(reinterpret_cast<const char*>(words), GatherEntryKey(i, words));
  }
  // The same as a new string, made at its size (cheaper than assigning into an empty one, which grows it).
  std::string EntryKey(uint32_t i) const {
    uint64_t words[(0xff + 7) / 8];
    const uint32_t len = GatherEntryKey(i, words);
    return std::string(reinterpret_cast<const char*>(words), len);
  }
  void CopyMinKey(std::string* out) const { CopyFence(min_word(), min_len(), out); }
  void CopyMaxKey(std::string* out) const { CopyFence(max_word(), max_len(), out); }

 private:
  int CompareTail(uint32_t suffix_word, uint32_t len, const SearchKey& k) const {
    uint32_t nw = (len + 7) / 8;
    uint32_t n = nw < k.words() ? nw : k.words();
    for (uint32_t j = 1; j < n; ++j) {
      uint64_t x = OrderWord(W(suffix_word + j - 1));
      if (x != k.word(j)) return x < k.word(j) ? -1 : 1;
    }
    return len < k.size() ? -1 : (len > k.size() ? 1 : 0);
  }
  int CompareStored(uint32_t word, uint32_t len, const SearchKey& k) const {
    uint64_t p = OrderWord(W(word));
    if (p != k.word(0)) return p < k.word(0) ? -1 : 1;
    return CompareTail(word + 1, len, k);
  }
  // Entry i's key's words into `words` (room for 32); returns its length.
  uint32_t GatherEntryKey(uint32_t i, uint64_t* words) const {
    uint64_t aux = W(kHeaderWords + 2 * i + 1);
    uint32_t suffix = static_cast<uint32_t>((aux >> 8) & 0xff) + (level() == 0 ? kLeafPayloadWords : 0);
    return GatherKeyWords(W(kHeaderWords + 2 * i), suffix, aux & 0xff, words);
  }
  // A stored key's words into `words` (room for 32); returns its length.
  uint32_t GatherKeyWords(uint64_t first, uint32_t suffix_word, uint32_t len, uint64_t* words) const {
    words[0] = first;
    for (uint32_t j = 1; j < (len + 7) / 8; ++j) words[j] = W(suffix_word + j - 1);
    return len;
  }
  void CopyKeyWords(uint64_t first, uint32_t suffix_word, uint32_t len, std::string* out) const;
  void CopyFence(uint32_t word, uint32_t len, std::string* out) const {
    if (len == 0) {
      out->clear();
      return;
    }
    CopyKeyWords(W(word), word + 1, len, out);
  }

  const uint64_t* w_ = nullptr;
  uint64_t meganode_ = 0, info_ = 0, fences_ = 0;
};

// One entry taken out of a node, for rebuilding and splitting.
struct NodeEntry {
  std::string key;     // empty for entry 0 of an inner node
  LeafValue value;     // level 0
  uint32_t child = 0;  // inner levels
};

// What a meganode's header says of the meganode as a whole.
struct MeganodeInfo {
  std::string min, max;    // key range [min, max); empty: -infinity / +infinity
  GlobalPtr right;         // the right sibling meganode (null at the right edge of its level)
  int level = 0;           // 0: a leaf meganode (entries point to records); above: entries point to child meganodes
  GlobalPtr cluster_root;  // the cluster's first meganode only: the root meganode
  uint8_t state = 0;       // kFlagPending and/or kFlagSealed
};

// Header fields of a tree node, for building images.
struct NodeHeader {
  GlobalPtr meganode;
  uint32_t slot = 0;
  int level = 0;
  uint8_t flags = kFlagValid;
  GlobalPtr right;
};

// A private, writable node image. Writers build one, then publish it under the node's lock (btree/node_lock.h).
class NodeImage {
 public:
  alignas(kCacheLine) uint64_t w[kNodeWords];

  NodeView view() const { return NodeView(w); }

  // Sizes, in words, of what an entry or fence costs in a node.
  static uint32_t EntryWords(size_t key_len, int level) {
    uint32_t suffix = key_len > 8 ? static_cast<uint32_t>(WordsFor(key_len) - 1) : 0;
    return 2 + suffix + (level == 0 ? kLeafPayloadWords : 0);
  }
  static uint32_t FenceWords(size_t len) { return static_cast<uint32_t>(WordsFor(len)); }

  // Builds a tree node from scratch. Returns false (image unspecified) if it does not fit in 1 KB.
  // An empty `min` means -infinity, an empty `max` +infinity. For inner nodes entries[0].key is ignored.
  bool Build(const NodeHeader& h, std::string_view min, std::string_view max, const NodeEntry* entries, size_t n);
  // A meganode header (slot 0 of every meganode): the root of its local tree, its key range [min, max) (empty:
  // infinite), its right sibling meganode, its level among meganodes and whether it is internal.
  void BuildMeganodeHeader(GlobalPtr meganode, uint32_t root_slot, int root_level, const struct MeganodeInfo& info);
  // A freed node: identity kept, valid flag cleared, no entries.
  void MarkFree();

  // In-place edits (the image must hold a tree node). InsertEntry returns false if the node is full even after
  // compaction; the image is then unchanged in content.
  bool InsertEntry(uint32_t i, std::string_view key, const LeafValue& value, uint32_t child);
  void RemoveEntry(uint32_t i);
  void SetLeafValue(uint32_t i, const LeafValue& value);
  void SetRight(GlobalPtr right) { w[4] = right.Pack(); }
  void SetRoot(uint32_t root_slot, int root_level) { w[6] = uint64_t{root_slot} | (uint64_t(root_level & 0xff) << 32); }
  void SetClusterRoot(GlobalPtr root) { w[7] = root.Pack(); }
  // A meganode header's state flags (kFlagPending, kFlagSealed) set to `state`.
  void SetMeganodeState(uint8_t state) {
    const uint64_t keep = ~(uint64_t{kFlagPending | kFlagSealed} << 48);
    w[3] = (w[3] & keep) | (uint64_t(state & (kFlagPending | kFlagSealed)) << 48);
  }

  // All entries, decoded.
  std::vector<NodeEntry> Entries() const;
  NodeHeader Header() const;
  // Seals the image for publication at `version` (sets words 0 and 1).
  void Seal(uint64_t version);

 private:
  void SetCount(uint32_t n) { w[3] = (w[3] & ~(uint64_t{0xff} << 56)) | (uint64_t{n} << 56); }
  void SetHeapWord(uint32_t h) { w[5] = (w[5] & ~(uint64_t{0xff} << 32)) | (uint64_t{h} << 32); }
  uint32_t PlaceKeyWords(uint32_t at, std::string_view key, size_t from_word);
  bool Compact();
};

// Is a copy fit to use? Checked on every copied node before anything in it is believed.
enum class CopyCheck { kOk, kFree, kBeingWritten, kTorn, kWrongIdentity };
CopyCheck CheckCopy(const uint64_t* words, GlobalPtr expected);

}  // namespace cell::btree
