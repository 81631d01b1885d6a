// The extent record format: what a writer lays out and stamps is what EncodeRecord gives, and what readers accept.
#include "btree/record_format.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "test/test_util.h"

namespace cell::btree {
namespace {

TEST(RecordFormat, LayingOutThenStampingTheVersionGivesTheEncodedRecord) {
  std::mt19937_64 rng(5);
  for (size_t key_size : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{63}, kMaxKeySize}) {
    for (size_t value_size : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{300}}) {
      const std::string key = cell::testing::RandomKey(rng, key_size, key_size, cell::testing::kPrintable);
      const std::string value = cell::testing::RandomKey(rng, value_size, value_size, cell::testing::kPrintable);
      const uint64_t version = rng();
      std::vector<uint64_t> encoded, laid_out;
      const uint64_t checksum = EncodeRecord(key, value, version, &encoded);
      LayOutRecord(key, value, &laid_out);
      const size_t length = RecordLength(key.size(), value.size());
      EXPECT_EQ(SetRecordVersion(&laid_out, length, version), checksum);
      EXPECT_EQ(laid_out, encoded);
      RecordFields fields;
      const LeafValue entry{GlobalPtr{2, 64}, static_cast<uint32_t>(length), checksum};
      ASSERT_TRUE(CheckRecord(laid_out.data(), entry, key, &fields));
      EXPECT_EQ(fields.value, value);
      EXPECT_EQ(fields.version, version);
      // The checker refuses the record for another key and for a stale checksum.
      EXPECT_FALSE(CheckRecord(laid_out.data(), entry, key + "x", &fields));
      const LeafValue stale{entry.ptr, entry.length, checksum ^ 1};
      EXPECT_FALSE(CheckRecord(laid_out.data(), stale, key, &fields));
    }
  }
}

}  // namespace
}  // namespace cell::btree
