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
      s.used[it->second] = 1;
      std::memcpy(dst, s.nodes[it->second].data(), kNodeSize);
      stats_.hits.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  stats_.misses.fetch_add(1, std::memory_order_relaxed);
  return false;
}

uint32_t NodeCache::TakeSlot(Shard& s) {
  if (!s.free.empty()) {
    const uint32_t slot = s.free.back();
    s.free.pop_back();
    return slot;
  }
  if (s.nodes.size() < per_shard_) {
    s.nodes.emplace_back();
    s.keys.push_back(0);
    s.used.push_back(0);
    return static_cast<uint32_t>(s.nodes.size() - 1);
  }
  // Every slot is taken: sweep, clearing use bits, to the first copy not used since the hand last passed it.
  while (s.used[s.hand]) {
    s.used[s.hand] = 0;
    s.hand = (s.hand + 1) % s.nodes.size();
  }
  const uint32_t slot = s.hand;
  s.hand = (s.hand + 1) % s.nodes.size();
  s.index.erase(s.keys[slot]);
  return slot;
}

void NodeCache::Offer(GlobalPtr ptr, const uint64_t* words) {
  if (per_shard_ == 0 || !Qualifies(words)) return;
  const uint64_t key = ptr.Pack();
  Shard& s = ShardOf(key);
  std::lock_guard lock(s.mu);
  auto [it, added] = s.index.try_emplace(key, 0);
  if (added) {
    const uint32_t slot = TakeSlot(s);  // (may erase another key: `it` is not used after this)
    s.index[key] = slot;
    s.keys[slot] = key;
    s.used[slot] = 0;  // kept past the hand's next pass only if it is used by then
    std::memcpy(s.nodes[slot].data(), words, kNodeSize);
    return;
  }
  std::memcpy(s.nodes[it->second].data(), words, kNodeSize);  // a newer copy
  s.used[it->second] = 1;
}

void NodeCache::Forget(GlobalPtr ptr) {
  const uint64_t key = ptr.Pack();
  Shard& s = ShardOf(key);
  std::lock_guard lock(s.mu);
  auto it = s.index.find(key);
  if (it == s.index.end()) return;
  s.keys[it->second] = 0;
  s.used[it->second] = 0;
  s.free.push_back(it->second);
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
