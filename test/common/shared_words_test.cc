// common/shared_words.h: the copy out of shared memory gives exactly the bytes memcpy would, for every start offset
// and length, and writes nothing past them.
#include "common/shared_words.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace cell {
namespace {

TEST(SharedWords, CopyBytesFromSharedMatchesMemcpyAtEveryOffsetAndLength) {
  constexpr size_t kWords = 8;
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

TEST(SharedWords, CopyFromSharedCopiesWholeWords) {
  const uint64_t src[3] = {1, 0xFFFFFFFFFFFFFFFF, 0x0102030405060708};
  uint64_t dst[4] = {9, 9, 9, 9};
  CopyFromShared(dst, src, 3);
  EXPECT_EQ(dst[0], 1u);
  EXPECT_EQ(dst[1], 0xFFFFFFFFFFFFFFFFu);
  EXPECT_EQ(dst[2], 0x0102030405060708u);
  EXPECT_EQ(dst[3], 9u);
}

}  // namespace
}  // namespace cell
