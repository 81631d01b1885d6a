// An Iterator over pages of a range (see paged_iterator.h).
#include "client/paged_iterator.h"

#include <fmt/format.h>

#include <algorithm>

#include "btree/key.h"
#include "cell/limits.h"

namespace cell::client {

Status CheckIteratorOptions(const IteratorOptions& o) {
  if (o.lower.size() > kMaxKeySize || o.upper.size() > kMaxKeySize) {
    return Status::InvalidArgument(fmt::format("iterator bounds are at most {} bytes", kMaxKeySize));
  }
  if (!o.lower.empty() && !o.upper.empty() && btree::CompareKeys(o.lower, o.upper) > 0) {
    return Status::InvalidArgument("the iterator's lower bound is above its upper bound");
  }
  if (o.initial_pairs < 1 || o.max_pairs < o.initial_pairs || o.max_bytes < 1) {
    return Status::InvalidArgument("iterator read-ahead: 1 <= initial_pairs <= max_pairs, and max_bytes >= 1");
  }
  return Status::OK();
}

namespace {

class PagedIterator final : public Iterator {
 public:
  PagedIterator(const IteratorOptions& options, PageReader read, Status invalid)
      : o_(options), read_(std::move(read)), invalid_(std::move(invalid)), status_(invalid_) {}

  bool Valid() const override { return pos_ < page_.size(); }
  void Seek(std::string_view key) override {
    const std::string_view from = !o_.lower.empty() && btree::CompareKeys(key, o_.lower) < 0 ? o_.lower : key;
    Load(from, o_.upper, /*reverse=*/false, /*fresh=*/true);
  }
  void SeekForPrev(std::string_view key) override {
    // The pairs <= key: below the key's successor (or below the upper bound, whichever is lower).
    std::string end;
    if (key.size() > kMaxKeySize) return Fail(Status::InvalidArgument("a seek key is at most 255 bytes"));
    if (!btree::Successor(std::string(key), &end)) end.clear();  // the last possible key: no bound
    if (!o_.upper.empty() && (end.empty() || btree::CompareKeys(o_.upper, end) < 0)) end = o_.upper;
    Load(o_.lower, end, /*reverse=*/true, /*fresh=*/true);
  }
  void SeekToFirst() override { Load(o_.lower, o_.upper, /*reverse=*/false, /*fresh=*/true); }
  void SeekToLast() override { Load(o_.lower, o_.upper, /*reverse=*/true, /*fresh=*/true); }
  void Next() override {
    if (!Valid()) return;
    if (pos_ + 1 < page_.size()) {
      ++pos_;
      return;
    }
    if (!more_above_) return Finish();
    std::string from;
    if (!btree::Successor(page_[pos_].first, &from)) return Finish();
    Load(from, o_.upper, /*reverse=*/false, /*fresh=*/false);
  }
  void Prev() override {
    if (!Valid()) return;
    if (pos_ > 0) {
      --pos_;
      return;
    }
    if (!more_below_) return Finish();
    const std::string end = page_[pos_].first;
    Load(o_.lower, end, /*reverse=*/true, /*fresh=*/false);
  }
  std::string_view key() const override { return page_[pos_].first; }
  std::string_view value() const override { return page_[pos_].second; }
  Status status() const override { return status_; }

 private:
  void Finish() {
    page_.clear();
    pos_ = 0;
  }
  void Fail(Status s) {
    Finish();
    status_ = std::move(s);
  }
  // How many pairs the next read in `reverse`'s direction asks for: the first after a seek or a turn asks for
  // initial_pairs, each next one twice the last, within max_pairs and (by the pairs' mean size so far) max_bytes.
  size_t PageSize(bool reverse, bool fresh) {
    if (fresh || reverse != last_reverse_) {
      next_pairs_ = o_.initial_pairs;
    } else {
      next_pairs_ = std::min(next_pairs_ * 2, o_.max_pairs);
    }
    last_reverse_ = reverse;
    if (pairs_seen_ > 0) {
      const size_t mean = std::max<size_t>(1, bytes_seen_ / pairs_seen_);
      next_pairs_ = std::max<size_t>(1, std::min(next_pairs_, o_.max_bytes / mean));
    }
    return next_pairs_;
  }
  // Replaces the page with one read from [start, end) in the given direction, and stands at its first key (forward)
  // or its last (reverse).
  void Load(std::string_view start, std::string_view end, bool reverse, bool fresh) {
    if (!invalid_.ok()) return Fail(invalid_);
    if (fresh) status_ = Status::OK();
    Finish();
    if (!end.empty() && !start.empty() && btree::CompareKeys(start, end) >= 0) {
      more_above_ = more_below_ = false;
      return;
    }
    const size_t limit = PageSize(reverse, fresh);
    Pairs pairs;
    Status s = read_(start, end, limit, reverse, &pairs);
    if (!s.ok()) return Fail(std::move(s));
    for (const auto& [k, v] : pairs) bytes_seen_ += k.size() + v.size();
    pairs_seen_ += pairs.size();
    if (o_.keys_only) {
      for (auto& kv : pairs) kv.second.clear();
    }
    const bool cut = pairs.size() >= limit;  // the range may hold more in this direction
    if (reverse) {
      std::reverse(pairs.begin(), pairs.end());
      more_below_ = cut;
      more_above_ = true;  // the caller came from above, or sought below the upper bound
    } else {
      more_above_ = cut;
      more_below_ = true;
    }
    page_ = std::move(pairs);
    pos_ = reverse && !page_.empty() ? page_.size() - 1 : 0;
  }

  const IteratorOptions o_;
  const PageReader read_;
  const Status invalid_;
  Status status_;
  Pairs page_;  // in key order
  size_t pos_ = 0;
  bool more_above_ = false;  // keys may lie above the page (within the bounds)
  bool more_below_ = false;
  size_t next_pairs_ = 0;
  bool last_reverse_ = false;
  uint64_t bytes_seen_ = 0, pairs_seen_ = 0;
};

}  // namespace

std::unique_ptr<Iterator> NewPagedIterator(const IteratorOptions& options, PageReader read, Status invalid) {
  if (invalid.ok()) invalid = CheckIteratorOptions(options);
  return std::make_unique<PagedIterator>(options, std::move(read), std::move(invalid));
}

}  // namespace cell::client
