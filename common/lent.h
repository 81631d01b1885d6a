// Lent: the calling thread's own object of a type, lent to one scope at a time, so that a path run per request reuses
// the memory the object holds instead of allocating it afresh (a protobuf message keeps its strings' capacity when it
// is cleared or parsed into again). A scope that asks while the thread's object is lent (a re-entrant call) gets a
// fresh object of its own. `Tag`, a type each user declares once at namespace scope, keeps the objects of different
// users apart (a `struct X` written inside a template argument in a block would declare a new type in each block).
//
// Whatever a user leaves in the object is still there for the next one: each user must set or clear every field it
// relies on (parsing a protobuf message clears it first). After a use that made the object large, Shrink() has it
// made afresh when it is given back, so that one big request does not stay allocated in every thread that served it.
// A use that would leave memory Shrink cannot see (a protobuf message's repeated fields keep their cleared elements)
// asks for a fresh object instead: Lent(false).
#pragma once

#include <cstddef>
#include <optional>
#include <utility>

namespace cell {

// Above this size (a request's or reply's bytes, say), a user should Shrink its object.
inline constexpr size_t kLentKeepBytes = size_t{64} << 10;

template <typename T, typename Tag>
class Lent {
 public:
  // `lend`: false gives a fresh object of this scope's own, as a re-entrant scope gets.
  explicit Lent(bool lend = true) {
    Home& home = ThisThread();
    if (lend && !home.lent) {
      home.lent = true;
      home_ = &home;
      object_ = &home.object;
    } else {
      object_ = &own_.emplace();
    }
  }
  ~Lent() {
    if (home_ == nullptr) return;
    if (shrink_) {
      T fresh;  // takes the object's memory with it (assigning T() would keep a string's buffer)
      std::swap(home_->object, fresh);
    }
    home_->lent = false;
  }
  Lent(const Lent&) = delete;
  Lent& operator=(const Lent&) = delete;

  T& operator*() { return *object_; }
  T* operator->() { return object_; }
  // The thread's object is made afresh when it is given back.
  void Shrink() { shrink_ = true; }

 private:
  struct Home {
    T object;
    bool lent = false;
  };
  // Out of line, as ThreadMemo's (common/thread_memo.h): the thread's address is taken once per loan.
  [[gnu::noinline]] static Home& ThisThread() {
    thread_local Home home;
    return home;
  }

  Home* home_ = nullptr;  // the thread's, when this scope has it
  T* object_ = nullptr;
  std::optional<T> own_;  // a re-entrant scope's
  bool shrink_ = false;
};

}  // namespace cell
