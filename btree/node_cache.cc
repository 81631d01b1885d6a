#include "btree/node_cache.h"

#include <cstring>

namespace cell::btree {

NodeCache::NodeCache(size_t capacity_bytes, int min_height)
    : per_shard_(capacity_bytes / kNodeSize / kShards), min_height_(min_height) {}

bool NodeCache::Qualifies(const uint64_t* words) const {
  const NodeView v(words);
  if (!v.valid()) return false;
  if (v.kind() == NodeKind::kMeganodeHeader) return v.level() > 0 || v.root_level() + 1 >= min_height_;
  if (v.kind() != NodeKind::kTreeNode) return false;
  return v.internal_meganode() || v.level() >= min_height_;
}

bool NodeCache::Lookup(GlobalPtr ptr, uint64_t* dst) {
  const uint64_t key = ptr.Pack();
  Shard& s = ShardOf(key);
  {
    std::lock_guard lock(s.mu);
    auto it = s.index.find(key);
    if (it != s.index.end()) {
      if (it->second != s.lru.begin()) s.lru.splice(s.lru.begin(), s.lru, it->second);
      std::memcpy(dst, it->second->words.data(), kNodeSize);
      stats_.hits.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  stats_.misses.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void NodeCache::Offer(GlobalPtr ptr, const uint64_t* words) {
  if (per_shard_ == 0 || !Qualifies(words)) return;
  const uint64_t key = ptr.Pack();
  Shard& s = ShardOf(key);
  std::lock_guard lock(s.mu);
  auto it = s.index.find(key);
  if (it != s.index.end()) {
    std::memcpy(it->second->words.data(), words, kNodeSize);  // a newer copy
    if (it->second != s.lru.begin()) s.lru.splice(s.lru.begin(), s.lru, it->second);
    return;
  }
  if (s.index.size() >= per_shard_) {
    s.index.erase(s.lru.back().key);
    s.lru.pop_back();
  }
  s.lru.emplace_front();
  s.lru.front().key = key;
  std::memcpy(s.lru.front().words.data(), words, kNodeSize);
  s.index.emplace(key, s.lru.begin());
}

void NodeCache::Forget(GlobalPtr ptr) {
  const uint64_t key = ptr.Pack();
  Shard& s = ShardOf(key);
  std::lock_guard lock(s.mu);
  auto it = s.index.find(key);
  if (it == s.index.end()) return;
  s.lru.erase(it->second);
  s.index.erase(it);
  stats_.forgotten.fetch_add(1, std::memory_order_relaxed);
}

size_t NodeCache::size() const {
  size_t n = 0;
  for (auto& s : shards_) {
    std::lock_guard lock(s.mu);
    n += s.index.size();
  }
  return n;
}

}  // namespace cell::btree
