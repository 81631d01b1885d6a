// TreeReader::Estimate: how many keys a range of one meganode holds, from its shape (see tree_reader.h).
//
// Two descents, one to each bound, over the same walk searches use (Reach, level by level). A descent records at
// each level how many entries its node has and how many lie before the one it takes; at the leaf, how many keys lie
// below the bound. Read as a position, that is a rank: the entries before the path at level l count as whole
// subtrees of W(l) keys, W(0) = 1 and W(l+1) = W(l) times the entries of an average node at level l. The keys in the
// range are the difference of the two ranks. The average node of a level is the mean of the two the descents passed,
// except that the last node of a level (no right sibling) is left out when the other is not: it is where appends
// collect and may hold one entry.
#include <algorithm>
#include <cmath>

#include "btree/record_format.h"
#include "btree/tree_reader.h"

namespace cell::btree {

struct TreeReader::Dive {
  int top = 0;                 // the level of the root the descent began at
  uint32_t index[kMaxLevels];  // inner levels: entries before the one taken; the leaf: keys below the bound
  uint32_t size[kMaxLevels];   // entries of the node passed
  bool last[kMaxLevels];       // the node passed has no right sibling
  uint64_t leaf_bytes = 0;     // keys and values of the leaf's entries
};

namespace {
constexpr int kMaxAttempts = 1000;  // descents that keep meeting a concurrent root split give up (Aborted)
}  // namespace

Status TreeReader::DiveTo(std::string_view key, bool inclusive, Dive* dive) {
  const SearchKey k(key);
  GlobalPtr ptr;
  int level = 0;
  CELL_RETURN_IF_ERROR(ReadRoot(&ptr, &level));
  dive->top = level;
  Path path;
  NodeHandle h;
  int retries = 0;
  while (level >= 0) {
    CELL_RETURN_IF_ERROR(Reach(k, level, ptr, level, &path, &h));
    const NodeView& v = h.view;
    const uint32_t n = v.size();
    uint32_t i = 0, child = 0;
    uint64_t bytes = 0;
    if (level > 0) {
      i = v.ChildIndex(k);
      child = v.child_slot(i);
    } else {
      i = inclusive ? v.UpperBound(k) : v.LowerBound(k);
      for (uint32_t j = 0; j < n; ++j) bytes += v.leaf_value(j).length;
    }
    const bool last = v.right().is_null();
    if (!source_->Validate(h)) {  // changed while read: read it again
      if (++retries > kMaxAttempts) return Status::Aborted("a node kept changing while its size was estimated");
      ++stats_.retries;
      ptr = h.ptr;
      continue;
    }
    dive->index[level] = i;
    dive->size[level] = n;
    dive->last[level] = last;
    if (level == 0) {
      // Record headers are not the caller's bytes (a lock record's payload is counted as it stands).
      dive->leaf_bytes = bytes > uint64_t{n} * kRecordHeaderBytes ? bytes - uint64_t{n} * kRecordHeaderBytes : 0;
      return Status::OK();
    }
    if (child == 0) return Status::Corruption("inner node points to the meganode header");
    ptr = meganode_.Plus(uint64_t{child} * kNodeSize);
    --level;
  }
  return Status::OK();
}

Status TreeReader::Estimate(std::string_view lo, std::string_view hi, SizeEstimate* out) {
  if (lo.size() > kMaxKeySize || hi.size() > kMaxKeySize) {
    return Status::InvalidArgument("range bound longer than " + std::to_string(kMaxKeySize) + " bytes");
  }
  beyond_ = false;
  // Keys below `first` and keys up to `last` inclusive: their difference is [lo, hi).
  std::string last;
  if (hi.empty()) {
    last = LastKey();
  } else if (!Predecessor(hi, &last)) {
    return Status::OK();  // nothing lies below hi
  }
  const std::string first = lo.empty() ? std::string(1, '\0') : std::string(lo);
  if (CompareKeys(first, last) > 0) return Status::OK();
  Dive a, b;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    CELL_RETURN_IF_ERROR(DiveTo(first, /*inclusive=*/false, &a));
    CELL_RETURN_IF_ERROR(DiveTo(last, /*inclusive=*/true, &b));
    if (a.top == b.top) break;  // else the root grew between the two descents: again
    if (attempt + 1 == kMaxAttempts) return Status::Aborted("the meganode's root kept growing while estimated");
  }
  double weight = 1, rank_a = 0, rank_b = 0;
  for (int l = 0; l <= a.top; ++l) {
    rank_a += a.index[l] * weight;
    rank_b += b.index[l] * weight;
    const double entries = a.last[l] == b.last[l] ? (a.size[l] + b.size[l]) / 2.0 : a.last[l] ? b.size[l] : a.size[l];
    weight *= std::max(entries, 1.0);
  }
  const uint64_t keys = rank_b > rank_a ? static_cast<uint64_t>(std::llround(rank_b - rank_a)) : 0;
  const uint64_t leaf_entries = uint64_t{a.size[0]} + b.size[0];
  const double bytes_per_key = leaf_entries == 0 ? 0.0 : double(a.leaf_bytes + b.leaf_bytes) / double(leaf_entries);
  out->keys += keys;
  out->bytes += static_cast<uint64_t>(std::llround(double(keys) * bytes_per_key));
  return Status::OK();
}

}  // namespace cell::btree
