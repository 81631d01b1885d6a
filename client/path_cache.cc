#include "client/path_cache.h"

#include <optional>

namespace cell::client {

namespace {
// Whether `key` lies below `max` (empty: +infinity). Keys compare as bytes, as std::string does.
bool Below(std::string_view key, const std::string& max) { return max.empty() || key < std::string_view(max); }
}  // namespace

GlobalPtr PathCache::Lookup(std::string_view key) {
  if (const Answer* last = last_.Find(0);
      last != nullptr && std::string_view(last->min) <= key && Below(key, last->max)) {
    return last->meganode;
  }
  std::lock_guard lock(mu_);
  auto it = ranges_.upper_bound(key);
  if (it == ranges_.begin()) return GlobalPtr();
  --it;
  if (!Below(key, it->second.max)) return GlobalPtr();
  if (it->second.lru != lru_.begin()) lru_.splice(lru_.begin(), lru_, it->second.lru);
  last_.Remember(0, Answer{it->first, it->second.max, it->second.meganode});
  return it->second.meganode;
}

void PathCache::Erase(Map::iterator it) {
  lru_.erase(it->second.lru);
  ranges_.erase(it);
}

void PathCache::Insert(const btree::MeganodeRange& range) {
  if (range.meganode.is_null() || capacity_ == 0) return;
  std::lock_guard lock(mu_);
  last_.Changed();  // every thread's last answer lapses
  // Entries overlapping [min, max) keep their parts outside it: a meganode is a correct start for any key at or above
  // its min, so a split learnt of never leaves the keys beside it uncached (they would start at the root again).
  std::optional<Entry> above;  // the part at and above max of an entry reaching past it, to be re-keyed at max
  auto it = ranges_.lower_bound(range.min);
  if (it != ranges_.begin()) {
    auto before = std::prev(it);
    if (Below(range.min, before->second.max)) {
      if (!range.max.empty() && Below(range.max, before->second.max)) above = before->second;
      before->second.max = range.min;
    }
  }
  while (it != ranges_.end() && Below(it->first, range.max)) {
    if (!range.max.empty() && Below(range.max, it->second.max)) above = it->second;
    auto next = std::next(it);
    Erase(it);
    it = next;
  }
  const auto add = [&](const std::string& min, const std::string& max, GlobalPtr meganode) {
    lru_.push_front(min);
    ranges_.emplace(min, Entry{max, meganode, lru_.begin()});
  };
  if (above) add(range.max, above->max, above->meganode);
  add(range.min, range.max, range.meganode);  // the most recently used
  while (ranges_.size() > capacity_) {
    auto oldest = ranges_.find(lru_.back());
    Erase(oldest);
  }
}

size_t PathCache::size() const {
  std::lock_guard lock(mu_);
  return ranges_.size();
}

}  // namespace cell::client
