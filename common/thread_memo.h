// ThreadMemo: a cache's answers, remembered by each thread while the cache is unchanged. The lock-free fast path of a
// cache that every operation asks (the client's region cache and the connection cache): the cache calls Changed under
// its own lock with every change of what it answers, and a remembered answer holds only while no change has come
// since it was remembered, so it is the answer the locked lookup would give. A serial per cache keeps one cache's
// answers from another's (a new cache may sit where a destroyed one was).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace cell {

template <typename Key, typename Value, size_t kSlots = 4>
class ThreadMemo {
 public:
  // The calling thread's answer for `key`, if it was remembered since the last change; else null.
  const Value* Find(const Key& key) const {
    const uint64_t generation = generation_.load(std::memory_order_acquire);
    for (const Entry& e : ThisThread().entries) {
      if (e.cache == serial_ && e.key == key && e.generation == generation) return &e.value;
    }
    return nullptr;
  }
  // Remembers `value` as the answer for `key` on the calling thread (under the cache's lock, as it was looked up).
  const Value& Remember(const Key& key, Value value) {
    Slots& slots = ThisThread();
    Entry* slot = nullptr;
    for (Entry& e : slots.entries) {
      if (e.cache == serial_ && e.key == key) slot = &e;
    }
    if (slot == nullptr) slot = &slots.entries[slots.next++ % kSlots];
    *slot = Entry{serial_, generation_.load(std::memory_order_relaxed), key, std::move(value)};
    return slot->value;
  }
  // Under the cache's lock, with every change of what it answers: every thread's remembered answers lapse.
  void Changed() { generation_.fetch_add(1, std::memory_order_release); }
  // Moves on with every Changed: an answer taken from the cache when this read g is still its answer while this still
  // reads g (what a caller remembers of the cache on its own lapses by the same rule).
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  struct Entry {
    uint64_t cache = 0;  // the serial of the memo that remembered it; 0: empty
    uint64_t generation = 0;
    Key key{};
    Value value{};
  };
  struct Slots {
    std::array<Entry, kSlots> entries;
    size_t next = 0;
  };
  // Out of line so that a caller takes the thread's address once: inlined, GCC derives a thread_local's address
  // again at each use, and in a shared library (libcell.so) each derivation is a call of __tls_get_addr.
  [[gnu::noinline]] static Slots& ThisThread() {
    thread_local Slots slots;
    return slots;
  }
  static uint64_t NextSerial() {
    static std::atomic<uint64_t> next{0};
    return next.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  std::atomic<uint64_t> generation_{1};
  const uint64_t serial_ = NextSerial();
};

}  // namespace cell
