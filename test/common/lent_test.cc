// Lent (common/lent.h): one object per thread and user, lent to one scope at a time, with its memory kept between
// scopes; a re-entrant scope gets its own; Shrink makes it afresh.
#include "common/lent.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

namespace cell {
namespace {

// Each test's users (declared once: see common/lent.h).
struct PerThread;
struct Fresh;
struct Reentered;
struct SameObject;
struct Shrunk;
struct TagA;
struct TagB;

TEST(Lent, ScopesOneAfterAnotherGetTheSameObjectWithItsMemory) {
  const std::string* first = nullptr;
  size_t capacity = 0;
  {
    Lent<std::string, SameObject> s;
    s->assign(1000, 'x');
    first = &*s;
    capacity = s->capacity();
  }
  Lent<std::string, SameObject> again;
  EXPECT_EQ(&*again, first);
  EXPECT_EQ(*again, std::string(1000, 'x')) << "what a user leaves is there for the next";
  again->clear();
  EXPECT_EQ(again->capacity(), capacity);
}

TEST(Lent, AScopeInsideAnotherGetsAnObjectOfItsOwn) {
  auto outer = std::make_unique<Lent<std::string, Reentered>>();
  (*outer)->assign("outer");
  const std::string* thread_object = &**outer;
  {
    Lent<std::string, Reentered> inner;
    EXPECT_NE(&*inner, thread_object);
    EXPECT_TRUE(inner->empty());
    inner->assign("inner");
  }
  EXPECT_EQ(**outer, "outer");
  outer.reset();  // given back: the next scope has the thread's object again
  outer = std::make_unique<Lent<std::string, Reentered>>();
  EXPECT_EQ(&**outer, thread_object);
}

TEST(Lent, ShrinkMakesTheObjectAfreshWhenItIsGivenBack) {
  {
    Lent<std::string, Shrunk> s;
    s->assign(1 << 20, 'x');
    s.Shrink();
  }
  Lent<std::string, Shrunk> again;
  EXPECT_TRUE(again->empty());
  EXPECT_LT(again->capacity(), size_t{1} << 20);
}

TEST(Lent, EachThreadHasItsOwn) {
  Lent<std::string, PerThread> mine;
  mine->assign("main");
  const std::string* theirs = nullptr;
  std::thread([&] {
    Lent<std::string, PerThread> s;
    theirs = &*s;
    EXPECT_TRUE(s->empty());
  }).join();
  EXPECT_NE(theirs, &*mine);
  EXPECT_EQ(*mine, "main");
}

TEST(Lent, AScopeThatAsksForAFreshObjectGetsItsOwnAndLeavesTheThreadsAlone) {
  const std::string* thread_object = nullptr;
  {
    Lent<std::string, Fresh> s;
    s->assign("kept");
    thread_object = &*s;
  }
  {
    Lent<std::string, Fresh> fresh(false);
    EXPECT_NE(&*fresh, thread_object);
    EXPECT_TRUE(fresh->empty());
    fresh->assign("dropped");
    Lent<std::string, Fresh> lent;  // the thread's is not lent meanwhile
    EXPECT_EQ(&*lent, thread_object);
    EXPECT_EQ(*lent, "kept");
  }
}

TEST(Lent, UsersWithDifferentTagsHaveDifferentObjects) {
  Lent<std::string, TagA> a;
  Lent<std::string, TagB> b;
  EXPECT_NE(&*a, &*b);
}

}  // namespace
}  // namespace cell
