// common/shared_words.h: the copy out of shared memory gives exactly the bytes memcpy would, for every start offset
// and length, and writes nothing past them; the whole-word copies, at every count; the comparison in place, at every
// length and differing byte.
#include "common/shared_words.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace cell {
namespace {

TEST(SharedWords, CopyBytesFromSharedMatchesMemcpyAtEveryOffsetAndLength) {
  constexpr size_t kWords = 16;  // lengths that take the four-word loop more than once
  // The source is exactly these words, on the heap: a load past them is caught by the AddressSanitizer build.
  std::vector<uint64_t> words(kWords);
  auto* bytes = reinterpret_cast<unsigned char*>(words.data());
  for (size_t i = 0; i < kWords * 8; ++i) bytes[i] = static_cast<unsigned char>(i * 37 + 11);
  for (size_t from = 0; from < kWords * 8; ++from) {
    for (size_t n = 0; from + n <= kWords * 8; ++n) {
      unsigned char got[kWords * 8 + 1];
      std::memset(got, 0xAB, sizeof(got));
      CopyBytesFromShared(got, bytes + from, n);
      ASSERT_EQ(std::memcmp(got, bytes + from, n), 0) << "from " << from << " n " << n;
      ASSERT_EQ(got[n], 0xAB) << "wrote past the end, from " << from << " n " << n;
    }
  }
}

TEST(SharedWords, TheWholeWordCopiesCopyEveryCountAndNoMore) {
  for (const bool to_shared : {false, true}) {
    for (size_t n = 0; n <= 9; ++n) {
      uint64_t src[9], dst[10];
      for (size_t i = 0; i < 9; ++i) src[i] = 0x0101010101010101u * (i + 3);
      for (uint64_t& w : dst) w = 9;
      (to_shared ? CopyToShared : CopyFromShared)(dst, src, n);
      const char* which = to_shared ? "CopyToShared" : "CopyFromShared";
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(dst[i], src[i]) << which << " n " << n << " word " << i;
      for (size_t i = n; i < 10; ++i) ASSERT_EQ(dst[i], 9u) << which << " wrote word " << i << " of " << n;
    }
  }
}

TEST(SharedWords, SharedBytesEqualComparesExactlyTheBytesAskedFor) {
  constexpr size_t kWords = 6;
  std::vector<uint64_t> words(kWords);
  auto* bytes = reinterpret_cast<char*>(words.data());
  for (size_t i = 0; i < kWords * 8; ++i) bytes[i] = static_cast<char>(i * 29 + 5);
  for (size_t n = 0; n <= kWords * 8; ++n) {
    std::string same(bytes, n);
    ASSERT_TRUE(SharedBytesEqual(words.data(), same)) << "n " << n;
    for (size_t at = 0; at < n; ++at) {  // one byte differs: at every position, in the low and the high bit
      for (const char bit : {'\x01', '\x80'}) {
        std::string other = same;
        other[at] = static_cast<char>(other[at] ^ bit);
        ASSERT_FALSE(SharedBytesEqual(words.data(), other)) << "n " << n << " differing at " << at;
      }
    }
  }
}

}  // namespace
}  // namespace cell
