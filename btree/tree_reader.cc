// Lock-free search and scan (see tree_reader.h).
#include "btree/tree_reader.h"

#include <type_traits>

namespace cell::btree {

Status LockedKey(std::string_view key) {
  return Status::Unavailable("key '" + std::string(key.substr(0, 64)) +
                             "' is locked by a transaction that is committing; retry");
}

namespace {

// Bounds that turn a livelock or a corrupt tree into an error instead of a hang.
constexpr int kMaxRestarts = 100000;
constexpr int kMaxRetries = 1000000;

Status GaveUp(const char* what) {
  return Status::Aborted(std::string("gave up after too many ") + what + " (the tree keeps changing or is corrupt)");
}

// Leaf entry i of `leaf`; in place, its record's lines are asked for at once, while the leaf is validated and the
// record's region looked up, so that the record header's miss and its value's overlap (a hint: nothing is read
// through it).
template <class Source>
LeafValue EntryWithRecordPrefetched(Source* src, const NodeView& leaf, uint32_t i) {
  const LeafValue entry = leaf.leaf_value(i);
  if constexpr (std::is_same_v<Source, LocalNodeSource>) {
    if (!entry.locked) src->Prefetch(entry.ptr, entry.length);
  }
  return entry;
}

// After a stale pointer led to `node` at `level`: a source that keeps copies drops what led there, the node, the node
// that linked to it (`came_from`, if the walk moved right), and the path to it (an old copy sent us).
template <class Source>
inline void ForgetRouteTo(Source* src, GlobalPtr node, int level, GlobalPtr came_from, const Path& path) {
  src->Forget(node);
  if (!came_from.is_null()) src->Forget(came_from);
  for (int l = level + 1; l < kMaxLevels; ++l) {
    if (path.Has(l)) src->Forget(path.At(l));
  }
}

// The nearest node above `level` that `path` passed (*ancestor_level its level); null if none, and *ancestor_level
// left alone.
inline GlobalPtr NearestAncestor(const Path& path, int level, int* ancestor_level) {
  for (int l = level + 1; l < kMaxLevels; ++l) {
    if (path.Has(l)) {
      *ancestor_level = l;
      return path.At(l);
    }
  }
  return GlobalPtr();
}

// Appends to `out` the keys of the leaf `v`'s entries from entry `from` up (forward), or from entry `from - 1` down,
// each made at its size, while `out` holds fewer than `wanted` pairs and `in_range(key)`; what each entry holds goes
// to `entries` (the scan reads the values once the leaf is validated). True if the limit or the bound was met.
template <class InRange>
bool AppendLeafKeys(const NodeView& v, uint32_t from, bool forward, size_t wanted, const InRange& in_range,
                    std::vector<KeyValue>* out, std::vector<LeafValue>* entries) {
  entries->clear();
  const int64_t n = v.size();
  for (int64_t i = forward ? from : int64_t{from} - 1; forward ? i < n : i >= 0; i += forward ? 1 : -1) {
    if (out->size() >= wanted) return true;
    std::string key = v.EntryKey(static_cast<uint32_t>(i));
    if (!in_range(key)) return true;
    out->emplace_back().key = std::move(key);
    entries->push_back(v.leaf_value(static_cast<uint32_t>(i)));
  }
  return false;
}

}  // namespace

// The public entry points pick the instantiation once per call.
Status TreeReader::ReadRoot(GlobalPtr* root, int* level) {
  return local_ ? ReadRootIn(local_, root, level) : ReadRootIn(source_, root, level);
}
Status TreeReader::Reach(const SearchKey& k, int target, GlobalPtr ptr, int level, Path* path, NodeHandle* h) {
  return local_ ? ReachIn(local_, k, target, ptr, level, path, h) : ReachIn(source_, k, target, ptr, level, path, h);
}
Status TreeReader::Find(std::string_view key, std::string* value, Step* step, RecordMeta* meta) {
  return local_ ? FindIn(local_, key, value, step, meta) : FindIn(source_, key, value, step, meta);
}
Status TreeReader::ReadHeader(const SearchKey* k, Header* out, bool with_range) {
  return local_ ? ReadHeaderIn(local_, k, out, with_range) : ReadHeaderIn(source_, k, out, with_range);
}
Status TreeReader::Get(std::string_view key, std::string* value) {
  Step step;
  CELL_RETURN_IF_ERROR(Find(key, value, &step));
  switch (step.kind) {
    case Step::Kind::kFound:
      return Status::OK();
    case Step::Kind::kNotFound:
      return Status::NotFound("key not found");
    default:
      return Status::FailedPrecondition("key lies outside this meganode");
  }
}
Status TreeReader::Scan(std::string_view start, std::string_view end, size_t limit, std::vector<KeyValue>* out,
                        ScanMode mode) {
  if (start.size() > kMaxKeySize || end.size() > kMaxKeySize) {
    return Status::InvalidArgument("scan bound longer than " + std::to_string(kMaxKeySize) + " bytes");
  }
  beyond_ = before_ = false;
  if (mode.reverse) {
    return local_ ? ScanReverseIn(local_, start, end, limit, out, mode)
                  : ScanReverseIn(source_, start, end, limit, out, mode);
  }
  return local_ ? ScanIn(local_, start, end, limit, out, mode) : ScanIn(source_, start, end, limit, out, mode);
}

template <class Source>
Status TreeReader::ReadRootIn(Source* src, GlobalPtr* root, int* level) {
  NodeHandle h;
  for (int retries = 0; retries < kMaxRetries; ++retries) {
    CELL_RETURN_IF_ERROR(src->FetchHeader(meganode_, &h));
    const NodeView& v = h.view;
    bool ok = v.kind() == NodeKind::kMeganodeHeader && v.valid() && v.meganode() == meganode_;
    uint32_t slot = v.root_slot();
    int lvl = v.root_level();
    if (!src->Validate(h)) {
      ++stats_.retries;
      continue;
    }
    if (!ok) return Status::FailedPrecondition("no valid meganode at the given pointer");
    if (slot == 0 || lvl >= kMaxLevels) return Status::Corruption("meganode header names an impossible root");
    *root = meganode_.Plus(uint64_t{slot} * kNodeSize);
    *level = lvl;
    return Status::OK();
  }
  return GaveUp("retries");
}

template <class Source>
Status TreeReader::ReadHeaderIn(Source* src, const SearchKey* k, Header* out, bool with_range) {
  NodeHandle h;
  for (int retries = 0; retries < kMaxRetries; ++retries) {
    CELL_RETURN_IF_ERROR(src->Fetch(meganode_, &h));
    const NodeView& v = h.view;
    bool ok = v.kind() == NodeKind::kMeganodeHeader && v.valid() && v.meganode() == meganode_;
    uint32_t slot = v.root_slot();
    out->root_level = v.root_level();
    out->level = v.level();
    out->right = v.right();
    out->cluster_root = v.cluster_root();
    out->position = k == nullptr ? 0 : v.CompareMin(*k) > 0 ? -1 : v.CompareMax(*k) <= 0 ? 1 : 0;
    if (with_range) {
      v.CopyMinKey(&out->min);
      v.CopyMaxKey(&out->max);
    }
    if (!src->Validate(h)) {
      ++stats_.retries;
      continue;
    }
    if (!ok) return Status::FailedPrecondition("no valid meganode at the given pointer");
    if (slot == 0 || out->root_level >= kMaxLevels)
      return Status::Corruption("meganode header names an impossible root");
    if (out->position > 0 && out->right.is_null()) {
      return Status::Corruption("meganode with a finite max has no right sibling");
    }
    out->root = meganode_.Plus(uint64_t{slot} * kNodeSize);
    return Status::OK();
  }
  return GaveUp("retries");
}

Status TreeReader::Descend(const SearchKey& k, int level, Path* path, NodeHandle* h) {
  path->Clear();
  return Reach(k, level, GlobalPtr(), 0, path, h);
}

template <class Source>
Status TreeReader::ReachIn(Source* src, const SearchKey& k, int target, GlobalPtr ptr, int level, Path* path,
                           NodeHandle* h) {
  int restarts = 0;
  // After a right move: the node moved from, and its max. Right siblings' ranges follow on, so the node reached
  // must not begin below that max; one that does was reached through a stale copy (of it or of the node before,
  // whose right link may name a slot used again since). Without this check, kept copies could lead round a cycle.
  GlobalPtr came_from;
  std::string came_from_max, min;
  for (int retries = 0; retries < kMaxRetries; ++retries) {
    if (ptr.is_null()) {
      CELL_RETURN_IF_ERROR(ReadRootIn(src, &ptr, &level));
      if (level < target) return Status::NotFound("the tree has no level " + std::to_string(target));
    }
    CELL_RETURN_IF_ERROR(src->Fetch(ptr, h));
    const NodeView& v = h->view;
    bool live = v.kind() == NodeKind::kTreeNode && v.valid() && v.level() == level && v.self() == ptr &&
                v.meganode() == meganode_;
    if (live && !came_from.is_null()) {
      v.CopyMinKey(&min);
      live = !min.empty() && CompareKeys(min, came_from_max) >= 0;
    }
    if (!live || v.CompareMin(k) > 0) {
      if (!src->Validate(*h)) {
        ++stats_.retries;
        continue;
      }
      // A consistent node that is not the one we were sent to: the pointer was stale. Restart from the nearest
      // ancestor the first time, then from the root.
      if (++restarts > kMaxRestarts) return GaveUp("restarts");
      ++stats_.restarts;
      ForgetRouteTo(src, ptr, level, came_from, *path);
      int from_level = 0;
      const GlobalPtr from = restarts == 1 ? NearestAncestor(*path, level, &from_level) : GlobalPtr();
      if (from.is_null()) src->Forget(meganode_);  // from the root: the header too
      ptr = from;
      level = from_level;
      came_from = GlobalPtr();
      continue;
    }
    if (v.CompareMax(k) <= 0) {
      GlobalPtr right = v.right();
      v.CopyMaxKey(&min);
      if (!src->Validate(*h)) {
        ++stats_.retries;
        continue;
      }
      if (right.is_null()) {
        // A node cut by a meganode split: the key now belongs to the meganode on the right (the header says which;
        // a kept copy of the header may predate the split).
        beyond_ = true;
        src->Forget(meganode_);
        return Status::FailedPrecondition("key lies beyond this meganode");
      }
      if (right.offset % kNodeSize != 0) return Status::Corruption("right link is not node aligned");
      // What sent us here (the node above, or the header above the root) predates a split of this node, or met it
      // in flight: a source that keeps copies reads it afresh next time instead of being sent right again.
      src->Forget(path->Has(level + 1) ? path->At(level + 1) : meganode_);
      came_from = ptr;
      came_from_max.swap(min);
      ptr = right;
      continue;
    }
    came_from = GlobalPtr();
    if (level == target) {
      path->Set(level, ptr);
      return Status::OK();
    }
    uint32_t child = v.child_slot(v.ChildIndex(k));
    if (!src->Validate(*h)) {
      ++stats_.retries;
      continue;
    }
    if (child == 0) return Status::Corruption("inner node points to the meganode header");
    path->Set(level, ptr);
    ptr = meganode_.Plus(uint64_t{child} * kNodeSize);
    --level;
  }
  return GaveUp("retries");
}

template <class Source>
Status TreeReader::ReadRecord(Source* src, const NodeHandle& leaf, const LeafValue& entry, std::string_view key,
                              std::string* value, uint64_t* version) {
  if (entry.length < kRecordHeaderBytesV1 || entry.length > kMaxRecordBytes) {
    return Status::Corruption("leaf entry has an impossible record length");
  }
  if constexpr (std::is_same_v<Source, LocalNodeSource>) {
    // In place: the record's fields are checked where they lie and its value copied straight out, proven as below by
    // the leaf's version. If it moved, the copy and its checksum below decide.
    // (The words holding the record's bytes: its last word is loaded whole.)
    if (const uint64_t* at = src->ExtentWords(entry.ptr, WordsFor(entry.length) * 8)) {
      RecordInPlace r;
      if (CheckRecordInPlace(at, entry, key, &r)) {
        if (value->capacity() < r.value_size) {
          *value = std::string(r.value_size, '\0');  // made at its size: a resize would grow it, copying
        } else {
          value->resize(r.value_size);
        }
        CopyBytesFromShared(value->data(), reinterpret_cast<const char*>(at) + r.value_at, r.value_size);
        if (src->Validate(leaf)) {
          *version = r.version;
          return Status::OK();
        }
        value->clear();  // what was copied is not proven: it may be another record's bytes
      }
    }
  }
  // The record copied whole (copying sources, and in place when the leaf moved): small records (the common case) into
  // the stack, large ones into a per-thread buffer.
  constexpr size_t kStackWords = 512;
  uint64_t stack[kStackWords];
  thread_local std::vector<uint64_t> heap;
  size_t words = WordsFor(entry.length);
  uint64_t* buffer = stack;
  if (words > kStackWords) {
    heap.resize(words);
    buffer = heap.data();
  }
  CELL_RETURN_IF_ERROR(src->ReadWords(entry.ptr, words, buffer));
  RecordFields v;
  // In place, a record can be proven without its checksum: if the leaf's version is unchanged after the record was
  // copied, the copy is the record the entry describes.
  //  - Not stale: the record was written before the leaf entry naming it was published, so the leaf version this
  //    reader acquired (WaitStableVersion) makes all of its bytes visible; no load can return an older value.
  //  - Not newer: the block is freed only after a writer has locked the node holding the entry (CAS to an odd
  //    version) and published it without the entry (version + 2; a version never returns to an earlier value once
  //    changed). While the entry is being moved by a node split, the node it is moved from is locked; when a
  //    meganode split moves it to another meganode, its old node is cut (a new version) before any writer of the
  //    new meganode can free the block (meganode/global_tree.h). Free happens before the Allocate that reuses the
  //    block (allocator mutex), and that block's writer issues a release fence after Allocate, before its stores
  //    (GlobalTree::WriteRecord; the rule in meganode/extent_allocator.h). So if any word loaded here came from such
  //    a later write, the acquire fence in Validate synchronizes with that release fence, the CAS happens before the
  //    re-check, and the re-check cannot read the version validated before.
  // If the version did change (perhaps for an unrelated entry), fall back to the checksum, which is proof on its
  // own. Copying sources always use it. (ThreadSanitizer does not model fences; this argument is not checked by it.)
  bool proven = false;
  if constexpr (std::is_same_v<Source, LocalNodeSource>) proven = src->Validate(leaf);
  if (!(proven ? CheckRecordFields(buffer, entry, key, &v) : CheckRecord(buffer, entry, key, &v))) {
    return Status::Aborted("record changed while read");
  }
  value->assign(v.value.data(), v.value.size());
  *version = v.version;
  return Status::OK();
}

template <class Source>
Status TreeReader::FindIn(Source* src, std::string_view key, std::string* value, Step* step, RecordMeta* meta) {
  CELL_RETURN_IF_ERROR(CheckKeySize(key));
  SearchKey k(key);
  Path path;
  NodeHandle h;
  GlobalPtr leaf;
  Header header;
  for (int retries = 0; retries < kMaxRetries; ++retries) {
    if (leaf.is_null()) {
      // The header first: the key may belong to a meganode further right (or the pointer here may be stale).
      CELL_RETURN_IF_ERROR(ReadHeaderIn(src, &k, &header));
      if (header.position != 0) {
        *step = header.position > 0 ? Step{Step::Kind::kRight, header.right, header.cluster_root}
                                    : Step{Step::Kind::kStale, GlobalPtr()};
        return Status::OK();
      }
      path.Clear();
    }
    beyond_ = false;
    Status reached = leaf.is_null() ? ReachIn(src, k, 0, header.root, header.root_level, &path, &h)
                                    : ReachIn(src, k, 0, leaf, 0, &path, &h);
    if (!reached.ok()) {
      if (!beyond_) return reached;
      ++stats_.retries;  // cut by a split since the header was read: read it again
      leaf = GlobalPtr();
      continue;
    }
    const NodeView& v = h.view;
    const bool internal = v.internal_meganode();
    if (internal) {
      // Level 0 of an internal meganode: separator -> child meganode. The child for k is the last separator <= k,
      // always in the leaf covering k (a leaf's first separator is its min fence; the leftmost one is "\0").
      uint32_t i = v.UpperBound(k);
      GlobalPtr child = i == 0 ? GlobalPtr() : v.leaf_value(i - 1).ptr;
      if (!src->Validate(h)) {
        ++stats_.retries;
        leaf = h.ptr;
        continue;
      }
      if (child.is_null()) return Status::Corruption("internal meganode has no child for a key it covers");
      *step = Step{Step::Kind::kChild, child};
      return Status::OK();
    }
    uint32_t i = v.LowerBound(k);
    bool found = i < v.size() && v.CompareEntry(i, k) == 0;
    LeafValue entry;
    if (found) entry = EntryWithRecordPrefetched(src, v, i);
    if (!src->Validate(h)) {
      ++stats_.retries;
      leaf = h.ptr;
      continue;
    }
    if (!found) {
      *step = Step{Step::Kind::kNotFound, GlobalPtr()};
      return Status::OK();
    }
    if (entry.locked) {
      // A transaction is committing the key: its value is not read (the lock record holds the values before and
      // after). Who asked for meta decides what to do; anyone else retries.
      if (meta == nullptr) return LockedKey(key);
      *meta = RecordMeta{0, entry.checksum, true};
      value->clear();
      *step = Step{Step::Kind::kFound, GlobalPtr()};
      return Status::OK();
    }
    uint64_t version = 0;
    Status s = ReadRecord(src, h, entry, key, value, &version);
    if (s.IsAborted()) {
      ++stats_.retries;
      leaf = h.ptr;
      continue;
    }
    CELL_RETURN_IF_ERROR(s);
    if (meta != nullptr) *meta = RecordMeta{version, entry.checksum, false};
    *step = Step{Step::Kind::kFound, GlobalPtr()};
    return Status::OK();
  }
  return GaveUp("retries");
}

template <class Source>
Status TreeReader::AppendBatch(Source* src, const NodeHandle& leaf, size_t first, const std::vector<LeafValue>& entries,
                               ScanMode mode, std::vector<KeyValue>* out, size_t* changed_at) {
  if constexpr (std::is_same_v<Source, LocalNodeSource>) {
    if (!mode.keys_only) {
      for (const LeafValue& entry : entries) {
        if (!entry.locked) src->Prefetch(entry.ptr, entry.length);
      }
    }
  }
  for (size_t j = 0; j < entries.size(); ++j) {
    KeyValue& pair = (*out)[first + j];
    const LeafValue& entry = entries[j];
    pair.checksum = entry.checksum;
    pair.locked = entry.locked;  // locked: no value
    Status s = entry.locked && !mode.report_locks ? LockedKey(pair.key) : Status::OK();
    if (s.ok() && !entry.locked && !mode.keys_only)
      s = ReadRecord(src, leaf, entry, pair.key, &pair.value, &pair.version);
    if (s.IsAborted()) {  // this entry changed since the leaf was read
      ++stats_.retries;
      *changed_at = j;
      return Status::OK();
    }
    if (!s.ok()) {
      out->resize(first + j);
      return s;
    }
  }
  *changed_at = entries.size();
  return Status::OK();
}

template <class Source>
Status TreeReader::ScanIn(Source* src, std::string_view start, std::string_view end, size_t limit,
                          std::vector<KeyValue>* out, ScanMode mode) {
  size_t wanted = out->size() + limit;
  std::string from(start);         // every key >= from (and > any key already returned) is still to be returned
  std::vector<LeafValue> entries;  // what the keys appended from the leaf being read point to
  std::string max_key;
  Path path;
  NodeHandle h;
  GlobalPtr leaf;
  for (int retries = 0; retries < kMaxRetries;) {
    if (out->size() >= wanted || (!end.empty() && CompareKeys(from, end) >= 0)) return Status::OK();
    SearchKey k(from);
    beyond_ = false;
    Status reached = leaf.is_null() ? (path.Clear(), ReachIn(src, k, 0, GlobalPtr(), 0, &path, &h))
                                    : ReachIn(src, k, 0, leaf, 0, &path, &h);
    if (!reached.ok()) {
      if (beyond_) resume_ = from;  // the rest lies in the meganodes to the right
      return beyond_ ? Status::OK() : reached;
    }
    const NodeView& v = h.view;
    const size_t first = out->size();  // the leaf's keys go straight into `out`, their values once it is validated
    const bool done = AppendLeafKeys(
        v, v.LowerBound(k), /*forward=*/true, wanted,
        [&](std::string_view key) { return end.empty() || CompareKeys(key, end) < 0; }, out, &entries);
    bool last_leaf = v.max_is_infinite();
    v.CopyMaxKey(&max_key);
    GlobalPtr right = v.right();
    if (!src->Validate(h)) {
      out->resize(first);
      ++retries;
      ++stats_.retries;
      leaf = h.ptr;
      continue;
    }
    if constexpr (std::is_same_v<Source, LocalNodeSource>) {
      if (!done && !last_leaf && !right.is_null()) src->Prefetch(right, kNodeSize);  // read next, after the records
    }
    size_t changed_at = 0;
    CELL_RETURN_IF_ERROR(AppendBatch(src, h, first, entries, mode, out, &changed_at));
    if (changed_at < entries.size()) {  // resume from the entry that changed
      from = std::move((*out)[first + changed_at].key);
      out->resize(first + changed_at);
      leaf = h.ptr;
      ++retries;
      continue;
    }
    if (done || last_leaf) return Status::OK();
    from = max_key;
    if (right.is_null()) {  // this meganode's edge: the scan goes on to the right, from its max
      beyond_ = true;
      src->Forget(meganode_);
      resume_ = from;
      return Status::OK();
    }
    leaf = right;
  }
  return GaveUp("retries");
}

template <class Source>
Status TreeReader::ScanReverseIn(Source* src, std::string_view start, std::string_view end, size_t limit,
                                 std::vector<KeyValue>* out, ScanMode mode) {
  size_t wanted = out->size() + limit;
  // Every key >= start and < upper (empty: no bound) is still to be returned, the greatest first; `target` is the
  // greatest key below upper, which the descent looks for.
  std::string upper(end), target, min_key;
  std::vector<LeafValue> entries;  // as in ScanIn
  Path path;
  NodeHandle h;
  Header header;
  for (int retries = 0; retries < kMaxRetries;) {
    if (out->size() >= wanted) return Status::OK();
    if (upper.empty()) {
      target = LastKey();
    } else if (!Predecessor(upper, &target)) {
      return Status::OK();  // nothing lies below upper
    }
    if (!start.empty() && CompareKeys(target, start) < 0) return Status::OK();
    SearchKey k(target);
    CELL_RETURN_IF_ERROR(ReadHeaderIn(src, &k, &header));
    if (header.position != 0) {
      // At or above the max: this meganode split since the walk chose it, what is left begins to the right. Below the
      // min: what is left lies in the meganodes to the left.
      (header.position > 0 ? beyond_ : before_) = true;
      resume_ = upper;
      return Status::OK();
    }
    path.Clear();
    beyond_ = false;
    Status reached = ReachIn(src, k, 0, header.root, header.root_level, &path, &h);
    if (!reached.ok()) {
      if (!beyond_) return reached;
      ++retries;  // cut by a split since the header was read: read it again
      ++stats_.retries;
      continue;
    }
    const NodeView& v = h.view;
    const size_t first = out->size();
    const bool done = AppendLeafKeys(  // the entries <= target, the greatest first
        v, v.UpperBound(k), /*forward=*/false, wanted,
        [&](std::string_view key) { return start.empty() || CompareKeys(key, start) >= 0; }, out, &entries);
    v.CopyMinKey(&min_key);  // empty: -infinity, the tree's first leaf
    if (!src->Validate(h)) {
      out->resize(first);
      ++retries;
      ++stats_.retries;
      continue;
    }
    size_t changed_at = 0;
    CELL_RETURN_IF_ERROR(AppendBatch(src, h, first, entries, mode, out, &changed_at));
    if (changed_at < entries.size()) {  // resume at the entry that changed (it is still to be returned)
      if (!Successor((*out)[first + changed_at].key, &upper)) upper.clear();
      out->resize(first + changed_at);
      ++retries;
      continue;
    }
    if (done) return Status::OK();
    if (min_key.empty()) {
      // This meganode's first leaf (a meganode's nodes begin at -infinity): what is left lies below the meganode's
      // min, in the meganodes to the left; nothing is left if it has none.
      CELL_RETURN_IF_ERROR(ReadHeaderIn(src, nullptr, &header, /*with_range=*/true));
      if (header.min.empty()) return Status::OK();
      before_ = true;
      resume_ = std::move(header.min);
      return Status::OK();
    }
    upper = std::move(min_key);
  }
  return GaveUp("retries");
}

}  // namespace cell::btree
