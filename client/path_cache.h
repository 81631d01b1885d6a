// The client's path cache (as in Cell): leaf meganodes and their key ranges, learnt from servers' replies and from
// client-side searches, so that an operation can begin at the key's leaf meganode (one request, to the server that
// holds it) instead of at the root. Bounded (4,096 ranges by default), least recently used out first.
//
// An entry may be stale: its meganode may have split since (its max is smaller now). That costs a step right, or a
// redirect to another server, never a wrong answer: any meganode is a correct start for a key at or above its min,
// and a meganode's min never changes (meganodes are not freed or merged).
//
// Every operation asks (a get, server-side or client-side), so a thread remembers the range of its last answer while
// the cache is unchanged (common/thread_memo.h; every Insert is a change) and answers a key inside it without the
// lock. Such a hit does not refresh the range's place in the LRU order: a range
// only one thread keeps hitting may be the one evicted, and is then learnt again.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "btree/global_reader.h"
#include "common/thread_memo.h"

namespace cell::client {

class PathCache {
 public:
  explicit PathCache(size_t capacity = 4096) : capacity_(capacity) {}

  // The cached leaf meganode whose range holds `key`, or null.
  GlobalPtr Lookup(std::string_view key);
  // Caches `range`. Entries it overlaps keep their parts outside it (their meganodes are still correct starts there).
  void Insert(const btree::MeganodeRange& range);
  size_t size() const;

 private:
  struct Entry {
    std::string max;  // empty: +infinity
    GlobalPtr meganode;
    std::list<std::string>::iterator lru;  // its min in lru_
  };
  using Map = std::map<std::string, Entry, std::less<>>;  // by min ("" is -infinity)
  void Erase(Map::iterator it);
  // A thread's last answer: its range and meganode.
  struct Answer {
    std::string min, max;
    GlobalPtr meganode;
  };

  const size_t capacity_;
  // Each thread's last answer, under one key (0); Changed under mu_ by every Insert.
  ThreadMemo<int, Answer, 1> last_;
  mutable std::mutex mu_;  // guards what follows
  Map ranges_;
  std::list<std::string> lru_;  // mins, most recently used first
};

}  // namespace cell::client
