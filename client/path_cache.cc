#include "client/path_cache.h"

namespace cell::client {

namespace {
// Whether `key` lies below `max` (empty: +infinity). Keys compare as bytes, as std::string does.
bool Below(std::string_view key, const std::string& max) { return max.empty() || key < std::string_view(max); }
}  // namespace

GlobalPtr PathCache::Lookup(std::string_view key) {
  std::lock_guard lock(mu_);
  auto it = ranges_.upper_bound(key);
  if (it == ranges_.begin()) return GlobalPtr();
  --it;
  if (!Below(key, it->second.max)) return GlobalPtr();
  if (it->second.lru != lru_.begin()) lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.meganode;
}

void PathCache::Erase(Map::iterator it) {
  lru_.erase(it->second.lru);
  ranges_.erase(it);
}

void PathCache::Insert(const btree::MeganodeRange& range) {
  if (range.meganode.is_null() || capacity_ == 0) return;
  std::lock_guard lock(mu_);
  // Entries overlapping [min, max): the one before min if it reaches past min, and those starting inside.
  auto it = ranges_.lower_bound(range.min);
  if (it != ranges_.begin()) {
    auto before = std::prev(it);
    if (Below(range.min, before->second.max)) Erase(before);
  }
  while (it != ranges_.end() && Below(it->first, range.max)) {
    auto next = std::next(it);
    Erase(it);
    it = next;
  }
  while (ranges_.size() >= capacity_) {
    auto oldest = ranges_.find(lru_.back());
    Erase(oldest);
  }
  lru_.push_front(range.min);
  ranges_.emplace(range.min, Entry{range.max, range.meganode, lru_.begin()});
}

size_t PathCache::size() const {
  std::lock_guard lock(mu_);
  return ranges_.size();
}

}  // namespace cell::client
