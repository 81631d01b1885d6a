// The walk across meganodes (see global_reader.h).
#include "btree/global_reader.h"

#include <utility>

namespace cell::btree {

namespace {
constexpr int kMaxSteps = 100000;  // turns a corrupt tree (a cycle of pointers) into an error instead of a hang

Status TooManySteps() {
  return Status::Aborted("gave up after too many meganode steps (the tree keeps changing or is corrupt)");
}

}  // namespace

Status GlobalReader::RangeOf(GlobalPtr meganode, MeganodeRange* range) {
  TreeReader::Header header;
  CELL_RETURN_IF_ERROR(TreeReader(source_, meganode).ReadHeader(nullptr, &header, /*with_range=*/true));
  range->meganode = meganode;
  range->min = std::move(header.min);
  range->max = std::move(header.max);
  return Status::OK();
}

StatusOr<GlobalPtr> GlobalReader::Root() {
  TreeReader first(source_, first_);
  TreeReader::Header header;
  CELL_RETURN_IF_ERROR(first.ReadHeader(nullptr, &header));
  if (header.cluster_root.is_null()) return Status::Corruption("the cluster's first meganode names no root");
  return header.cluster_root;
}

Status GlobalReader::Restart(GlobalPtr* m) {
  if (!Reaches(first_)) {
    exit_ = first_;
    return Status::OK();
  }
  CELL_ASSIGN_OR_RETURN(*m, Root());
  return Status::OK();
}

Status GlobalReader::Get(std::string_view key, std::string* value, GlobalPtr start, RecordMeta* meta) {
  exit_ = GlobalPtr();
  GlobalPtr m = start;
  // A walk from the root begins at the first meganode, whose header names the root: while the tree has one meganode
  // at the top (the first, as when the store fits in it) that is the root, and its header is read once, by the
  // search of it. Otherwise the first meganode (the leftmost of its level) still leads to keys in its range, and a
  // key above it goes to the root its header names.
  bool from_first = false;
  if (m.is_null()) {
    if (Reaches(first_)) {
      m = first_;
      from_first = true;
    } else {
      CELL_RETURN_IF_ERROR(Restart(&m));
    }
  }
  for (int step = 0; step < kMaxSteps; ++step) {
    if (StopsAt(m)) return Status::OK();
    ++stats_.meganodes;
    TreeReader reader(source_, m);
    TreeReader::Step s;
    CELL_RETURN_IF_ERROR(reader.Find(key, value, &s, meta));
    if (std::exchange(from_first, false) && s.kind == TreeReader::Step::Kind::kRight) {
      if (s.cluster_root.is_null()) return Status::Corruption("the cluster's first meganode names no root");
      if (!(s.cluster_root == m)) {
        m = s.cluster_root;
        continue;
      }
    }
    switch (s.kind) {
      case TreeReader::Step::Kind::kFound:
        answered_ = m;
        return Status::OK();
      case TreeReader::Step::Kind::kNotFound:
        answered_ = m;
        return Status::NotFound("key not found");
      case TreeReader::Step::Kind::kChild:
        m = s.next;
        break;
      case TreeReader::Step::Kind::kRight:
        ++stats_.rights;
        m = s.next;
        break;
      case TreeReader::Step::Kind::kStale: {
        ++stats_.restarts;
        CELL_RETURN_IF_ERROR(Restart(&m));
        break;
      }
    }
  }
  return TooManySteps();
}

Status GlobalReader::Locate(std::string_view key, int level, GlobalPtr* meganode, std::vector<GlobalPtr>* path,
                            GlobalPtr start) {
  exit_ = GlobalPtr();
  CELL_RETURN_IF_ERROR(CheckKeySize(key));
  SearchKey k(key);
  GlobalPtr m = start;
  // As in Get: without a path to fill, a walk from the root begins at the first meganode, whose header names the
  // root, so that a tree of one meganode has its header read once. The first meganode (the leftmost of its level)
  // is a correct start for a key it covers at a level it has; otherwise the walk goes to the root its header names.
  bool from_first = false;
  if (m.is_null()) {
    if (path == nullptr && Reaches(first_)) {
      m = first_;
      from_first = true;
    } else {
      CELL_RETURN_IF_ERROR(Restart(&m));
    }
  }
  std::string unused;
  for (int step = 0; step < kMaxSteps; ++step) {
    if (StopsAt(m)) return Status::OK();
    ++stats_.meganodes;
    TreeReader reader(source_, m);
    TreeReader::Header header;
    CELL_RETURN_IF_ERROR(reader.ReadHeader(&k, &header));
    if (std::exchange(from_first, false) && (header.position != 0 || header.level < level)) {
      if (header.cluster_root.is_null()) return Status::Corruption("the cluster's first meganode names no root");
      if (!(header.cluster_root == m)) {
        m = header.cluster_root;
        continue;
      }
    }
    if (header.position > 0) {
      ++stats_.rights;
      m = header.right;
      continue;
    }
    if (header.position < 0 || header.level < level) {
      ++stats_.restarts;  // a stale pointer (or a level that is not on the way down): from the root again
      CELL_RETURN_IF_ERROR(Restart(&m));
      continue;
    }
    if (path != nullptr && static_cast<size_t>(header.level) < path->size()) (*path)[header.level] = m;
    if (header.level == level) {
      *meganode = m;
      answered_ = m;
      return Status::OK();
    }
    TreeReader::Step s;
    CELL_RETURN_IF_ERROR(reader.Find(key, &unused, &s));
    switch (s.kind) {
      case TreeReader::Step::Kind::kChild:
      case TreeReader::Step::Kind::kRight:
        m = s.next;
        break;
      case TreeReader::Step::Kind::kStale: {
        ++stats_.restarts;
        CELL_RETURN_IF_ERROR(Restart(&m));
        break;
      }
      default:
        return Status::Corruption("an internal meganode answered like a leaf meganode");
    }
  }
  return TooManySteps();
}

Status GlobalReader::Scan(std::string_view start, std::string_view end, size_t limit, std::vector<KeyValue>* out,
                          GlobalPtr from_meganode, ScanMode mode) {
  if (mode.reverse) return ScanReverse(start, end, limit, out, from_meganode, mode);
  const size_t wanted = out->size() + limit;
  // Empty start means the smallest key: the smallest valid key is "\0".
  std::string from = start.empty() ? std::string(1, '\0') : std::string(start);
  GlobalPtr hint = from_meganode;  // where the next Locate begins: the meganode the scan left (its max leads right)
  for (int step = 0; step < kMaxSteps; ++step) {
    if (out->size() >= wanted || (!end.empty() && CompareKeys(from, end) >= 0)) {
      exit_ = GlobalPtr();
      return Status::OK();
    }
    GlobalPtr m;
    CELL_RETURN_IF_ERROR(Locate(from, 0, &m, nullptr, hint));
    if (exited()) {
      resume_ = std::move(from);
      return Status::OK();
    }
    hint = m;
    TreeReader reader(source_, m);
    const size_t before = out->size();
    CELL_RETURN_IF_ERROR(reader.Scan(from, end, wanted - out->size(), out, mode));
    std::string next;
    if (reader.beyond_meganode()) {
      next = reader.resume_key();
    } else {
      if (out->size() >= wanted) return Status::OK();
      // The meganode's nodes ran out (a meganode not yet split keeps nodes that reach +infinity): the scan goes on
      // from its max, if it has one.
      TreeReader::Header header;
      CELL_RETURN_IF_ERROR(reader.ReadHeader(nullptr, &header, /*with_range=*/true));
      if (header.max.empty()) return Status::OK();
      next = std::move(header.max);
    }
    // A scan that raced a split of this meganode may have read, in its old nodes, keys at or above the new max that
    // now live in the meganode to the right: go on after the last key returned, never before it.
    if (out->size() > before) {
      std::string after_last;
      if (!Successor(out->back().key, &after_last)) return Status::OK();  // the last possible key was returned
      if (CompareKeys(after_last, next) > 0) next = std::move(after_last);
    }
    // `next` may not lie above `from`: the meganode split after Locate, and the scan met the cut at once, or found
    // nothing from `from` on and then read the new max, which may lie below `from`. Either way the rest begins at
    // `from`, in a meganode to the right: Locate it again (the header that sends it right was published before the
    // cut). Every pass moves `from` up or meets a split, so kMaxSteps bounds the loop.
    if (CompareKeys(next, from) > 0) from = std::move(next);
  }
  return TooManySteps();
}

Status GlobalReader::ApproximateSize(std::string_view start, std::string_view end, SizeEstimate* out,
                                     GlobalPtr from_meganode) {
  exit_ = GlobalPtr();
  std::string from = start.empty() ? std::string(1, '\0') : std::string(start);
  GlobalPtr hint = from_meganode;
  for (int step = 0; step < kMaxSteps; ++step) {
    if (!end.empty() && CompareKeys(from, end) >= 0) return Status::OK();
    GlobalPtr m;
    CELL_RETURN_IF_ERROR(Locate(from, 0, &m, nullptr, hint));
    if (exited()) {
      resume_ = std::move(from);
      return Status::OK();
    }
    hint = m;
    TreeReader reader(source_, m);
    TreeReader::Header header;
    CELL_RETURN_IF_ERROR(reader.ReadHeader(nullptr, &header, /*with_range=*/true));
    const bool last = header.max.empty() || (!end.empty() && CompareKeys(header.max, end) >= 0);
    if (!last && CompareKeys(header.max, from) <= 0) continue;  // split since Locate: `from` lies further right
    Status s = reader.Estimate(from, last ? end : std::string_view(header.max), out);
    if (!s.ok() && reader.beyond_meganode()) continue;  // the meganode split after its header was read: locate again
    CELL_RETURN_IF_ERROR(s);
    if (last) return Status::OK();
    from = std::move(header.max);
  }
  return TooManySteps();
}

Status GlobalReader::ScanReverse(std::string_view start, std::string_view end, size_t limit, std::vector<KeyValue>* out,
                                 GlobalPtr from_meganode, ScanMode mode) {
  const size_t wanted = out->size() + limit;
  std::string upper(end);  // what is left: start <= key < upper (empty: no bound)
  std::string target;
  GlobalPtr hint = from_meganode;
  for (int step = 0; step < kMaxSteps; ++step) {
    exit_ = GlobalPtr();
    if (out->size() >= wanted) return Status::OK();
    if (upper.empty()) {
      target = LastKey();
    } else if (!Predecessor(upper, &target)) {
      return Status::OK();
    }
    if (!start.empty() && CompareKeys(target, start) < 0) return Status::OK();
    // The leaf meganode holding the greatest key left: all that is left of it lies there.
    GlobalPtr m;
    CELL_RETURN_IF_ERROR(Locate(target, 0, &m, nullptr, hint));
    if (exited()) {
      resume_ = std::move(upper);
      return Status::OK();
    }
    TreeReader reader(source_, m);
    const size_t before = out->size();
    CELL_RETURN_IF_ERROR(reader.Scan(start, upper, wanted - out->size(), out, mode));
    if (!reader.beyond_meganode() && !reader.before_meganode()) return Status::OK();  // done, or the limit reached
    // Beyond: the meganode split, what is left begins to its right (Locate moves right from it). Before: what is
    // left lies in meganodes to the left, which only a walk from the root finds.
    hint = reader.beyond_meganode() ? m : GlobalPtr();
    upper = reader.resume_key();
    // Never above the last key returned (a walk that raced a split may resume higher).
    if (out->size() > before && (upper.empty() || CompareKeys(out->back().key, upper) < 0)) upper = out->back().key;
  }
  return TooManySteps();
}

}  // namespace cell::btree
