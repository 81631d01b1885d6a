// The tuple encoding (include/cell/tuple.h): the memcmp order of encodings is Compare's order, Compare agrees with an
// independent model of the documented order, encodings round-trip and are canonical, Range holds exactly the tuples
// with its prefix, and Unpack refuses every malformed input with InvalidArgument.
#include "cell/tuple.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace cell {

void PrintTo(const Tuple& t, std::ostream* os) { *os << t.ToString(); }

namespace {

using Kind = Tuple::Kind;
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr uint64_t kUint64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kTwoTo63 = uint64_t{1} << 63;

int Sign(int x) { return (x > 0) - (x < 0); }

// The memcmp order of two keys (a proper prefix first), as the store orders them.
int KeyOrder(const std::string& a, const std::string& b) {
  int c = std::memcmp(a.data(), b.data(), std::min(a.size(), b.size()));
  if (c != 0) return Sign(c);
  return (a.size() > b.size()) - (a.size() < b.size());
}

std::string HexOf(std::string_view s) {
  std::string out;
  for (unsigned char c : s) out += "0123456789abcdef"[c >> 4], out += "0123456789abcdef"[c & 15], out += ' ';
  return out;
}

double FromBits(uint64_t bits) { return std::bit_cast<double>(bits); }
uint64_t Bits(double d) { return std::bit_cast<uint64_t>(d); }

// ---- The model: the documented order written out independently of the implementation ----

struct Value {
  enum Type { kNull, kBytes, kText, kNested, kInteger, kDouble, kBool };  // in the documented order of kinds
  Type type = kNull;
  __int128 integer = 0;
  uint64_t double_bits = 0;
  bool flag = false;
  std::string str;
  std::vector<Value> nested;
};
using Model = std::vector<Value>;

int ModelCompare(const Model& a, const Model& b);

// IEEE total order by classes: negative NaNs (larger payload first), numbers by value with -0 < +0, positive NaNs.
int ModelCompareDoubles(uint64_t a_bits, uint64_t b_bits) {
  double a = FromBits(a_bits), b = FromBits(b_bits);
  auto cls = [](double x) { return std::isnan(x) ? (std::signbit(x) ? 0 : 2) : 1; };
  if (cls(a) != cls(b)) return cls(a) < cls(b) ? -1 : 1;
  if (cls(a) == 1) {
    if (a < b) return -1;
    if (b < a) return 1;
    return int{std::signbit(b)} - int{std::signbit(a)};
  }
  uint64_t pa = a_bits & ((uint64_t{1} << 52) - 1), pb = b_bits & ((uint64_t{1} << 52) - 1);
  int c = (pa > pb) - (pa < pb);
  return cls(a) == 2 ? c : -c;
}

int ModelCompareStrings(const std::string& a, const std::string& b) {
  auto less = [](char x, char y) { return static_cast<unsigned char>(x) < static_cast<unsigned char>(y); };
  if (std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), less)) return -1;
  if (std::lexicographical_compare(b.begin(), b.end(), a.begin(), a.end(), less)) return 1;
  return 0;
}

int ModelCompareValues(const Value& a, const Value& b) {
  if (a.type != b.type) return a.type < b.type ? -1 : 1;
  switch (a.type) {
    case Value::kNull:
      return 0;
    case Value::kBytes:
    case Value::kText:
      return ModelCompareStrings(a.str, b.str);
    case Value::kNested:
      return ModelCompare(a.nested, b.nested);
    case Value::kInteger:
      return (a.integer > b.integer) - (a.integer < b.integer);
    case Value::kDouble:
      return ModelCompareDoubles(a.double_bits, b.double_bits);
    case Value::kBool:
      return int{a.flag} - int{b.flag};
  }
  return 0;
}

int ModelCompare(const Model& a, const Model& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (int c = ModelCompareValues(a[i], b[i]); c != 0) return c;
  }
  return (a.size() > b.size()) - (a.size() < b.size());
}

bool StartsWithLonger(const Model& m, const Model& prefix) {
  if (m.size() <= prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (ModelCompareValues(m[i], prefix[i]) != 0) return false;
  }
  return true;
}

// ---- Random tuples: edge values, and (narrow) tiny pools that make equal elements and shared prefixes common ----

class Generator {
 public:
  Generator(uint64_t seed, bool narrow) : rng_(seed), narrow_(narrow) {}

  uint64_t Below(uint64_t n) { return rng_() % n; }

  Model RandomModel(int depth) {
    Model m(Below(depth == 0 ? 6 : 4));
    for (Value& v : m) v = RandomValue(depth);
    if (depth == 0 && Below(50) == 0) m.push_back(DeepChain(1 + Below(40)));
    return m;
  }

  Value RandomValue(int depth) {
    Value v;
    v.type = static_cast<Value::Type>(Below(7));
    if (v.type == Value::kNested && depth >= 3) v.type = Value::kNull;
    switch (v.type) {
      case Value::kNull:
        break;
      case Value::kBytes:
      case Value::kText:
        v.str =
            RandomString(v.type == Value::kBytes ? std::string("\0\1ab\xfe\xff", 6) : std::string("\0a\xc3\xa9", 4));
        break;
      case Value::kNested:
        v.nested = RandomModel(depth + 1);
        break;
      case Value::kInteger:
        v.integer = RandomInteger();
        break;
      case Value::kDouble:
        v.double_bits = RandomDoubleBits();
        break;
      case Value::kBool:
        v.flag = Below(2) == 1;
        break;
    }
    return v;
  }

  // A Tuple of the model, through a randomly chosen builder method for each element.
  Tuple Build(const Model& m) {
    Tuple t;
    for (const Value& v : m) AddTo(v, &t);
    return t;
  }

 private:
  static Value DeepChain(size_t depth) {
    Value v;
    v.type = Value::kNested;
    Value* inner = &v;
    for (size_t i = 1; i < depth; ++i) {
      inner->nested.resize(1);
      inner = &inner->nested[0];
      inner->type = Value::kNested;
    }
    return v;
  }

  std::string RandomString(const std::string& alphabet) {
    std::string s(Below(narrow_ ? 3 : 6), ' ');
    for (char& c : s) c = alphabet[Below(narrow_ ? 2 : alphabet.size())];
    return s;
  }

  __int128 RandomInteger() {
    static const __int128 kEdges[] = {
        kInt64Min, kInt64Min + 1,    -(int64_t{1} << 32), -256,     -255,           -1,        0, 1, 255,
        256,       int64_t{1} << 32, kInt64Max,           kTwoTo63, kUint64Max - 1, kUint64Max};
    if (narrow_) return kEdges[4 + Below(6)];
    if (Below(2) == 0) return kEdges[Below(std::size(kEdges))];
    int bytes = 1 + Below(8);
    uint64_t magnitude = rng_() >> (64 - 8 * bytes);
    if (Below(2) == 0) return magnitude;
    return -static_cast<__int128>(magnitude >> (bytes == 8 ? 1 : 0));
  }

  uint64_t RandomDoubleBits() {
    static const uint64_t kEdges[] = {Bits(0.0),
                                      Bits(-0.0),
                                      Bits(1.0),
                                      Bits(-1.0),
                                      Bits(INFINITY),
                                      Bits(-INFINITY),
                                      Bits(NAN),
                                      Bits(-NAN),
                                      0x7ff0000000000001,
                                      0xfff0000000000001,
                                      0x7fffffffffffffff,
                                      0xffffffffffffffff,
                                      0x0000000000000001 /* smallest denormal */,
                                      0x8000000000000001,
                                      0x000fffffffffffff,
                                      Bits(std::numeric_limits<double>::max()),
                                      Bits(std::numeric_limits<double>::lowest())};
    if (narrow_) return kEdges[Below(4)];
    if (Below(2) == 0) return kEdges[Below(std::size(kEdges))];
    if (Below(2) == 0) return Bits(static_cast<double>(static_cast<int>(Below(9)) - 4) / 2);
    return rng_();
  }

  void AddTo(const Value& v, Tuple* t) {
    bool alt = Below(2) == 0;
    switch (v.type) {
      case Value::kNull:
        t->AddNull();
        return;
      case Value::kBytes:
        t->AddBytes(v.str);
        return;
      case Value::kText:
        t->AddText(v.str);
        return;
      case Value::kNested:
        alt ? t->Add(Build(v.nested)) : t->Add(static_cast<const Tuple&>(Build(v.nested)));
        return;
      case Value::kInteger:
        if (v.integer > kInt64Max || (v.integer >= 0 && alt)) {
          Below(2) == 0 ? t->AddUnsigned(static_cast<uint64_t>(v.integer)) : t->Add(static_cast<uint64_t>(v.integer));
        } else {
          alt ? t->AddInt(static_cast<int64_t>(v.integer)) : t->Add(static_cast<int64_t>(v.integer));
        }
        return;
      case Value::kDouble:
        alt ? t->AddDouble(FromBits(v.double_bits)) : t->Add(FromBits(v.double_bits));
        return;
      case Value::kBool:
        alt ? t->AddBool(v.flag) : t->Add(v.flag);
        return;
    }
  }

  std::mt19937_64 rng_;
  bool narrow_;
};

// A copy of m with one change: cut short, one element replaced (maybe deep inside), or one appended.
Model Mutate(Generator& gen, Model m, int depth = 0) {
  switch (gen.Below(m.empty() ? 1 : 3)) {
    case 0:
      m.push_back(gen.RandomValue(depth));
      break;
    case 1:
      m.resize(gen.Below(m.size()));
      break;
    default: {
      Value& v = m[gen.Below(m.size())];
      if (v.type == Value::kNested && gen.Below(2) == 0) {
        v.nested = Mutate(gen, v.nested, depth + 1);
      } else {
        v = gen.RandomValue(depth);
      }
    }
  }
  return m;
}

// The tuple holds exactly the model's values, with the documented kinds, through every getter.
void ExpectHolds(const Tuple& t, const Model& m) {
  ASSERT_EQ(t.size(), m.size()) << t.ToString();
  for (size_t i = 0; i < m.size(); ++i) {
    const Value& v = m[i];
    EXPECT_EQ(t.IsNull(i), v.type == Value::kNull);
    switch (v.type) {
      case Value::kNull:
        EXPECT_EQ(t.kind(i), Kind::kNull);
        EXPECT_FALSE(t.GetInt(i).ok());
        break;
      case Value::kBytes:
        ASSERT_EQ(t.kind(i), Kind::kBytes);
        EXPECT_EQ(*t.GetBytes(i), v.str);
        EXPECT_TRUE(t.GetText(i).status().IsInvalidArgument());
        break;
      case Value::kText:
        ASSERT_EQ(t.kind(i), Kind::kText);
        EXPECT_EQ(*t.GetText(i), v.str);
        EXPECT_TRUE(t.GetBytes(i).status().IsInvalidArgument());
        break;
      case Value::kNested: {
        ASSERT_EQ(t.kind(i), Kind::kTuple);
        auto nested = t.GetTuple(i);
        ASSERT_TRUE(nested.ok());
        ExpectHolds(*nested, v.nested);
        break;
      }
      case Value::kInteger:
        EXPECT_EQ(t.kind(i), v.integer > kInt64Max ? Kind::kUnsigned : Kind::kInt);
        EXPECT_EQ(t.GetInt(i).ok(), v.integer <= kInt64Max);
        if (v.integer <= kInt64Max) {
          EXPECT_EQ(*t.GetInt(i), static_cast<int64_t>(v.integer));
        }
        EXPECT_EQ(t.GetUnsigned(i).ok(), v.integer >= 0);
        if (v.integer >= 0) {
          EXPECT_EQ(*t.GetUnsigned(i), static_cast<uint64_t>(v.integer));
        }
        EXPECT_FALSE(t.GetDouble(i).ok());
        break;
      case Value::kDouble:
        ASSERT_EQ(t.kind(i), Kind::kDouble);
        EXPECT_EQ(Bits(*t.GetDouble(i)), v.double_bits);
        EXPECT_FALSE(t.GetInt(i).ok());
        break;
      case Value::kBool:
        ASSERT_EQ(t.kind(i), Kind::kBool);
        EXPECT_EQ(*t.GetBool(i), v.flag);
        EXPECT_FALSE(t.GetUnsigned(i).ok());
        break;
    }
  }
}

// Encoding order, Compare, operator<=> and the model all give one sign.
void ExpectSameOrder(Generator& gen, const Model& ma, const Model& mb) {
  Tuple a = gen.Build(ma), b = gen.Build(mb);
  std::string pa = Pack(a), pb = Pack(b);
  int model = ModelCompare(ma, mb);
  ASSERT_EQ(Sign(Compare(a, b)), model) << a.ToString() << " vs " << b.ToString();
  ASSERT_EQ(Sign(Compare(b, a)), -model) << a.ToString() << " vs " << b.ToString();
  ASSERT_EQ(KeyOrder(pa, pb), model) << a.ToString() << " vs " << b.ToString() << "\n"
                                     << HexOf(pa) << "\n"
                                     << HexOf(pb);
  ASSERT_EQ(a == b, model == 0);
  ASSERT_EQ(a < b, model < 0);
}

constexpr uint64_t kSeeds[] = {1, 2, 3, 4, 5};

TEST(TupleOrder, EncodingOrderIsCompareOrderIsTheModelsOrderForRandomPairs) {
  for (uint64_t seed : kSeeds) {
    for (bool narrow : {false, true}) {
      Generator gen(seed * 2 + narrow, narrow);
      int equal = 0, less = 0;
      for (int i = 0; i < 10000; ++i) {
        Model a = gen.RandomModel(0);
        Model b = gen.Below(3) == 0 ? gen.RandomModel(0) : (gen.Below(2) == 0 ? a : Mutate(gen, a));
        ASSERT_NO_FATAL_FAILURE(ExpectSameOrder(gen, a, b)) << "seed " << seed;
        int c = ModelCompare(a, b);
        equal += c == 0;
        less += c < 0;
      }
      EXPECT_GT(equal, 1000);  // equal pairs built by different methods were compared too
      EXPECT_GT(less, 1000);
    }
  }
}

TEST(TupleOrder, SortingByCompareByTheModelAndByEncodingGiveOneSequence) {
  for (uint64_t seed : kSeeds) {
    Generator gen(100 + seed, seed % 2 == 0);
    std::vector<Model> models(4000);
    for (Model& m : models) m = gen.RandomModel(0);
    std::vector<Tuple> tuples;
    std::vector<std::string> keys;
    for (const Model& m : models) tuples.push_back(gen.Build(m)), keys.push_back(Pack(tuples.back()));
    std::sort(tuples.begin(), tuples.end(), [](const Tuple& a, const Tuple& b) { return Compare(a, b) < 0; });
    std::sort(models.begin(), models.end(), [](const Model& a, const Model& b) { return ModelCompare(a, b) < 0; });
    std::sort(keys.begin(), keys.end(), [](const std::string& a, const std::string& b) { return KeyOrder(a, b) < 0; });
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_EQ(Pack(tuples[i]), keys[i]) << "seed " << seed << " at " << i << ": " << tuples[i].ToString();
      ASSERT_EQ(Pack(gen.Build(models[i])), keys[i]) << "seed " << seed << " at " << i;
    }
  }
}

TEST(TupleEncoding, RoundTripsKindsIncludedAndConcatenates) {
  for (uint64_t seed : kSeeds) {
    Generator gen(200 + seed, false);
    for (int i = 0; i < 10000; ++i) {
      Model ma = gen.RandomModel(0), mb = gen.RandomModel(0);
      Tuple a = gen.Build(ma);
      ASSERT_NO_FATAL_FAILURE(ExpectHolds(a, ma));
      std::string packed = Pack(a);
      Tuple back = Tuple().AddText("stale");
      Status s = Unpack(packed, &back);
      ASSERT_TRUE(s.ok()) << s.ToString() << " for " << a.ToString() << ": " << HexOf(packed);
      ASSERT_EQ(back, a) << HexOf(packed);
      ASSERT_NO_FATAL_FAILURE(ExpectHolds(back, ma));
      Model both = ma;
      both.insert(both.end(), mb.begin(), mb.end());
      ASSERT_EQ(Pack(gen.Build(both)), packed + Pack(gen.Build(mb)));
    }
  }
}

// Ascending lists of tuples a database layer counts on; every adjacent pair checked three ways.
TEST(TupleOrder, HandWrittenOrderingsHold) {
  auto i = [](int64_t v) { return Tuple().Add(v); };
  auto d = [](double v) { return Tuple().Add(v); };
  auto text = [](std::string_view s) { return Tuple().AddText(s); };
  auto bytes = [](std::string_view s) { return Tuple().AddBytes(s); };
  auto nested = [](const Tuple& t) { return Tuple().Add(t); };
  const std::vector<std::vector<Tuple>> ascending = {
      {Tuple().Add(1).AddText("a"), Tuple().Add(1).AddText("b"), Tuple().Add(2).AddText("")},
      {i(-5), i(-1), i(0), i(1), i(256)},
      {text("a"), Tuple().AddText("a").AddText("b"), text("ab")},
      {Tuple(), Tuple().AddNull(), bytes(""), text(""), nested(Tuple()), i(kInt64Min), Tuple().Add(kUint64Max),
       d(-INFINITY), Tuple().Add(false), Tuple().Add(true)},
      {i(kInt64Min), i(kInt64Min + 1), i(-(int64_t{1} << 32)), i(-256), i(-255), i(-1), i(0), i(1), i(255), i(256),
       i(int64_t{1} << 32), i(kInt64Max), Tuple().AddUnsigned(kTwoTo63), Tuple().AddUnsigned(kUint64Max)},
      {d(-NAN), d(-INFINITY), d(-1e300), d(-1), d(-FromBits(1)), d(-0.0), d(0.0), d(FromBits(1)), d(1), d(1e300),
       d(INFINITY), d(NAN)},
      {bytes(""), bytes(std::string("\0", 1)), bytes(std::string("\0\0", 2)), bytes(std::string("\0\x01", 2)),
       bytes("\x01"), bytes("\xff"), bytes("\xff\xff")},
      {Tuple().AddBytes("a"), Tuple().AddBytes("a").AddNull(), Tuple().AddBytes(std::string("a\0", 2))},
      {nested(Tuple()), Tuple().Add(Tuple()).Add(5), nested(Tuple().AddNull()), nested(Tuple().AddNull().AddNull()),
       nested(Tuple().AddBytes("")), nested(Tuple().Add(Tuple())), nested(Tuple().Add(1)),
       Tuple().Add(Tuple().Add(1)).AddNull(), nested(Tuple().Add(1).AddNull())},
  };
  for (const auto& list : ascending) {
    for (size_t k = 0; k + 1 < list.size(); ++k) {
      const Tuple &a = list[k], &b = list[k + 1];
      EXPECT_LT(Compare(a, b), 0) << a.ToString() << " < " << b.ToString();
      EXPECT_GT(Compare(b, a), 0) << b.ToString() << " > " << a.ToString();
      EXPECT_LT(KeyOrder(Pack(a), Pack(b)), 0) << a.ToString() << " < " << b.ToString();
    }
  }
  EXPECT_LT(Compare(Tuple().Add(-1), Tuple().AddUnsigned(kTwoTo63)), 0);
  EXPECT_EQ(Tuple().AddUnsigned(5), Tuple().Add(5));
  EXPECT_NE(d(0.0), d(-0.0));
  EXPECT_EQ(d(NAN), d(NAN));
}

TEST(TupleEncoding, BytesAreTheDocumentedOnes) {
  auto packed = [](const Tuple& t) { return HexOf(Pack(t)); };
  EXPECT_EQ(packed(Tuple()), "");
  EXPECT_EQ(packed(Tuple().AddNull()), "00 ");
  const std::string foo_bar("foo\0bar", 7);  // FoundationDB's own examples
  EXPECT_EQ(packed(Tuple().AddBytes(foo_bar)), "01 66 6f 6f 00 ff 62 61 72 00 ");
  EXPECT_EQ(packed(Tuple().AddText("F\xc3\x94O" + std::string(1, '\0') + "bar")), "02 46 c3 94 4f 00 ff 62 61 72 00 ");
  EXPECT_EQ(packed(Tuple().Add(Tuple().AddBytes(foo_bar).AddNull().Add(Tuple()))),
            "05 01 66 6f 6f 00 ff 62 61 72 00 00 ff 05 00 00 ");
  EXPECT_EQ(packed(Tuple().Add(0)), "14 ");
  EXPECT_EQ(packed(Tuple().Add(1)), "15 01 ");
  EXPECT_EQ(packed(Tuple().Add(255)), "15 ff ");
  EXPECT_EQ(packed(Tuple().Add(256)), "16 01 00 ");
  EXPECT_EQ(packed(Tuple().Add(-1)), "13 fe ");
  EXPECT_EQ(packed(Tuple().Add(-255)), "13 00 ");
  EXPECT_EQ(packed(Tuple().Add(-256)), "12 fe ff ");
  EXPECT_EQ(packed(Tuple().Add(kInt64Min)), "0c 7f ff ff ff ff ff ff ff ");
  EXPECT_EQ(packed(Tuple().Add(kInt64Max)), "1c 7f ff ff ff ff ff ff ff ");
  EXPECT_EQ(packed(Tuple().Add(kUint64Max)), "1c ff ff ff ff ff ff ff ff ");
  EXPECT_EQ(packed(Tuple().Add(1.0)), "21 bf f0 00 00 00 00 00 00 ");
  EXPECT_EQ(packed(Tuple().Add(-1.0)), "21 40 0f ff ff ff ff ff ff ");
  EXPECT_EQ(packed(Tuple().Add(-0.0)), "21 7f ff ff ff ff ff ff ff ");
  EXPECT_EQ(packed(Tuple().Add(false).Add(true)), "26 27 ");
}

TEST(Tuple, IntegerKindFollowsTheValueWhicheverMethodAddedIt) {
  Tuple t = Tuple().AddUnsigned(5).Add(kTwoTo63).Add(uint8_t{200}).Add(int8_t{-3}).Add(-7).Add(7u);
  EXPECT_EQ(t.kind(0), Kind::kInt);
  EXPECT_EQ(t.kind(1), Kind::kUnsigned);
  EXPECT_EQ(*t.GetInt(2), 200);
  EXPECT_EQ(*t.GetInt(3), -3);
  EXPECT_EQ(*t.GetInt(4), -7);
  EXPECT_EQ(*t.GetUnsigned(5), 7u);
  EXPECT_EQ(*t.GetUnsigned(1), kTwoTo63);
  Status s = t.GetInt(1).status();
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("above INT64_MAX"), std::string::npos) << s.ToString();
  EXPECT_TRUE(t.GetUnsigned(4).status().IsInvalidArgument());
  EXPECT_EQ(Tuple().Add(true).kind(0), Kind::kBool);
  EXPECT_EQ(Tuple().Add(1.5f).kind(0), Kind::kDouble);
  EXPECT_EQ(*Tuple().Add(1.5f).GetDouble(0), 1.5);
}

template <typename T>
concept Addable = requires(Tuple t, T v) {
  t.Add(v);
};
static_assert(Addable<int> && Addable<uint64_t> && Addable<bool> && Addable<double> && Addable<Tuple>);
static_assert(!Addable<const char*> && !Addable<std::string> && !Addable<std::string_view>);  // AddText or AddBytes
static_assert(!Addable<char> && !Addable<char8_t> && !Addable<std::nullptr_t> && !Addable<long double>);

TEST(Tuple, GettersRefuseOtherKindsAndMissingElementsSayingWhy) {
  Tuple t = Tuple().AddText("x").AddNull();
  Status s = t.GetBytes(0).status();
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_EQ(s.message(), "tuple element 0 is text, not bytes");
  s = t.GetInt(2).status();
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_EQ(s.message(), "tuple has no element 2 (it has 2)");
  EXPECT_TRUE(t.GetTuple(1).status().IsInvalidArgument());
  EXPECT_TRUE(t.GetBool(0).status().IsInvalidArgument());
  EXPECT_TRUE(t.GetDouble(1).status().IsInvalidArgument());
  EXPECT_TRUE(t.IsNull(1));
  EXPECT_FALSE(t.IsNull(0));
  EXPECT_FALSE(t.IsNull(2));
  EXPECT_EQ(Tuple().Add(Tuple().Add(1)).AddBytes(std::string("\0\"", 2)).Add(-0.5).ToString(),
            "((1), b\"\\x00\\\"\", -0.5)");
}

TEST(TupleRange, HoldsExactlyTheLongerTuplesWithThePrefix) {
  int inside = 0, outside = 0, near_misses = 0;
  for (uint64_t seed : kSeeds) {
    Generator gen(300 + seed, true);
    for (int p = 0; p < 100; ++p) {
      Model prefix = gen.RandomModel(1);
      auto [begin, end] = Range(gen.Build(prefix));
      ASSERT_LT(KeyOrder(Pack(gen.Build(prefix)), begin), 0);  // the prefix itself is outside
      for (int i = 0; i < 300; ++i) {
        Model m;
        if (gen.Below(2) == 0) {
          m = prefix;
          Model suffix = gen.RandomModel(1);
          if (suffix.empty()) suffix.push_back(gen.RandomValue(1));
          m.insert(m.end(), suffix.begin(), suffix.end());
        } else {
          m = gen.Below(2) == 0 ? gen.RandomModel(0) : Mutate(gen, prefix);
        }
        std::string key = Pack(gen.Build(m));
        bool in_range = KeyOrder(begin, key) <= 0 && KeyOrder(key, end) < 0;
        ASSERT_EQ(in_range, StartsWithLonger(m, prefix))
            << "prefix " << gen.Build(prefix).ToString() << " tuple " << gen.Build(m).ToString();
        inside += in_range;
        outside += !in_range;
        near_misses += !in_range && !prefix.empty() && !m.empty() && ModelCompareValues(m[0], prefix[0]) == 0;
      }
    }
  }
  EXPECT_GT(inside, 50000);
  EXPECT_GT(outside, 30000);
  EXPECT_GT(near_misses, 5000);  // outside, yet sharing the prefix's first element
  auto [begin, end] = Range(Tuple());
  EXPECT_EQ(begin, std::string(1, '\0'));
  EXPECT_EQ(end, "\xff");
  EXPECT_EQ(Pack(Tuple().AddNull()), begin);  // the least tuple of one element is begin itself
}

// Unpack fails with InvalidArgument naming the problem and its offset, and leaves *out alone.
void ExpectRefused(const std::string& bytes, const std::string& problem) {
  Tuple out = Tuple().AddText("untouched");
  Status s = Unpack(bytes, &out);
  EXPECT_TRUE(s.IsInvalidArgument()) << HexOf(bytes) << ": " << s.ToString();
  EXPECT_NE(s.message().find(problem), std::string::npos) << HexOf(bytes) << ": " << s.ToString();
  EXPECT_EQ(out, Tuple().AddText("untouched"));
}

TEST(TupleUnpack, RefusesMalformedInputNamingTheProblemAndItsOffset) {
  using std::string;
  ExpectRefused("\x15", "truncated integer (1 bytes needed, 0 left) at byte 0 of 1");
  ExpectRefused(string("\x14\x1c\x01\x02", 4), "truncated integer (8 bytes needed, 2 left) at byte 1");
  ExpectRefused(string("\x21\x00", 2), "truncated double (8 bytes needed) at byte 0");
  ExpectRefused(
      "\x01"
      "abc",
      "unterminated bytes at byte 0");
  ExpectRefused(
      "\x27\x02"
      "abc",
      "unterminated text at byte 1");
  ExpectRefused(string("\x01"
                       "a\0\xff",
                       4),
                "unterminated bytes at byte 0");  // ends in an escape
  ExpectRefused("\x05", "nested tuple is not terminated at byte 0");
  ExpectRefused(string("\x05\0\xff", 3), "nested tuple is not terminated at byte 0");
  ExpectRefused(string("\x05\x05\0", 3), "nested tuple is not terminated at byte 0");
  ExpectRefused("\x07", "unknown type code 0x07 at byte 0");
  for (char code : {'\x03', '\x04', '\x0b', '\x1d', '\x20', '\x28', '\x30', '\x33', '\xff'}) {
    ExpectRefused(string(1, code), "unknown type code");
  }
  ExpectRefused(string("\x14\x26\xff", 3), "unknown type code 0xff at byte 2");  // trailing garbage
  ExpectRefused(string("\0\xff", 2), "unknown type code 0xff at byte 1");        // a nested null at the top level
  ExpectRefused(string("\x15\x00", 2), "integer with a redundant leading byte at byte 0");
  ExpectRefused(string("\x12\xff\x00", 3), "integer with a redundant leading byte at byte 0");
  ExpectRefused(string("\x0c\x7f\xff\xff\xff\xff\xff\xff\xfe", 9), "negative integer below INT64_MIN at byte 0");
  ExpectRefused(string("\x0c\x00\x00\x00\x00\x00\x00\x00\x00", 9), "negative integer below INT64_MIN");
  Tuple min;
  ASSERT_TRUE(Unpack(string("\x0c\x7f\xff\xff\xff\xff\xff\xff\xff", 9), &min).ok());
  EXPECT_EQ(min, Tuple().Add(kInt64Min));

  std::string deepest = string(kMaxTupleNesting, '\x05') + string(kMaxTupleNesting, '\0');
  Tuple t;
  ASSERT_TRUE(Unpack(deepest, &t).ok());
  EXPECT_EQ(Pack(t), deepest);
  ExpectRefused("\x05" + deepest + string(1, '\0'), "nested tuple deeper than 128 levels at byte 128");
}

// Every proper prefix of an encoding fails with InvalidArgument, or is the canonical encoding of a smaller tuple (a
// cut after a complete element, or after a 0x00 that reads as a terminator).
TEST(TupleUnpack, EveryTruncationFailsOrIsAnotherSmallerTuplesEncoding) {
  int failed = 0, decoded = 0;
  for (uint64_t seed : kSeeds) {
    Generator gen(400 + seed, false);
    for (int i = 0; i < 2000; ++i) {
      Model m = gen.RandomModel(0);
      Tuple t = gen.Build(m);
      std::string packed = Pack(t);
      std::vector<size_t> boundaries;  // where each top-level element ends
      for (size_t k = 0; k <= m.size(); ++k)
        boundaries.push_back(Pack(gen.Build(Model(m.begin(), m.begin() + k))).size());
      for (size_t n = 0; n < packed.size(); ++n) {
        Tuple u;
        Status s = Unpack(std::string_view(packed).substr(0, n), &u);
        bool at_boundary = std::find(boundaries.begin(), boundaries.end(), n) != boundaries.end();
        if (s.ok()) {
          ++decoded;
          ASSERT_EQ(Pack(u), packed.substr(0, n));
          ASSERT_LT(Compare(u, t), 0);
          if (!at_boundary) {
            ASSERT_EQ(static_cast<unsigned char>(packed[n - 1]), 0) << HexOf(packed) << " cut " << n;
          }
        } else {
          ++failed;
          ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
          ASSERT_FALSE(at_boundary) << HexOf(packed) << " cut at element boundary " << n << ": " << s.ToString();
        }
      }
    }
  }
  EXPECT_GT(failed, 10000);
  EXPECT_GT(decoded, 10000);
  // Integers and doubles cut anywhere inside fail.
  std::string packed = Pack(Tuple().Add(kInt64Min).Add(kUint64Max).Add(-1.5).Add(-256));
  for (size_t n : {1, 5, 8, 10, 17, 19, 26, 28, 29}) {
    Tuple u;
    EXPECT_TRUE(Unpack(packed.substr(0, n), &u).IsInvalidArgument()) << n;
  }
}

// Unpack of arbitrary bytes returns OK or InvalidArgument, never crashes, and whatever it accepts is canonical.
TEST(TupleUnpack, RandomAndMutatedBytesAreRefusedOrCanonical) {
  std::mt19937_64 rng(42);
  Generator gen(43, false);
  const std::string codes("\x00\x01\x02\x05\x0c\x13\x14\x15\x1c\x21\x26\x27\xff\x61", 14);
  int accepted = 0;
  for (int i = 0; i < 100000; ++i) {
    std::string bytes;
    if (i % 2 == 0) {
      bytes.resize(rng() % 24);
      for (char& c : bytes) c = rng() % 2 == 0 ? codes[rng() % codes.size()] : static_cast<char>(rng());
    } else {
      bytes = Pack(gen.Build(gen.RandomModel(0)));
      for (int edits = 1 + rng() % 2; edits > 0 && !bytes.empty(); --edits) {
        size_t at = rng() % bytes.size();
        switch (rng() % 3) {
          case 0:
            bytes[at] = static_cast<char>(rng());
            break;
          case 1:
            bytes.erase(at, 1);
            break;
          default:
            bytes.insert(at, 1, codes[rng() % codes.size()]);
        }
      }
    }
    Tuple t;
    Status s = Unpack(bytes, &t);
    ASSERT_TRUE(s.ok() || s.IsInvalidArgument()) << s.ToString();
    if (s.ok()) {
      ++accepted;
      ASSERT_EQ(Pack(t), bytes) << HexOf(bytes);
    }
  }
  EXPECT_GT(accepted, 5000);
  EXPECT_LT(accepted, 95000);
}

TEST(TupleKey, PackKeyRefusesWhatTheStoreRefuses) {
  EXPECT_TRUE(PackKey(Tuple()).status().IsInvalidArgument());
  EXPECT_EQ(*PackKey(Tuple().Add(1)), Pack(Tuple().Add(1)));
  EXPECT_EQ(PackKey(Tuple().AddBytes(std::string(253, 'a'))).value().size(), 255u);
  Status s = PackKey(Tuple().AddBytes(std::string(254, 'a'))).status();
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("packs to 256 bytes; keys must be 1..255 bytes"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace cell
