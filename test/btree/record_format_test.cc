// The extent record format: what a writer lays out and stamps is what EncodeRecord gives, and what readers accept.
#include "btree/record_format.h"

#include <gtest/gtest.h>

#include <cstring>
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
      // In place: the same fields, and the value where CheckRecordFields finds it.
      RecordInPlace in_place;
      ASSERT_TRUE(CheckRecordInPlace(laid_out.data(), entry, key, &in_place));
      EXPECT_EQ(in_place.version, version);
      EXPECT_EQ(
          std::string_view(reinterpret_cast<const char*>(laid_out.data()) + in_place.value_at, in_place.value_size),
          value);
    }
  }
}

// What the in-place check refuses: every field of the header, the key's every byte, and a length the entry does not
// give. (The checksum is not its to check: its reader proves the record by the leaf's version.)
TEST(RecordFormat, TheInPlaceCheckRefusesWhatCheckRecordFieldsRefuses) {
  const std::string key = "a key of 21 bytes....", value = "its value";
  std::vector<uint64_t> words;
  const uint64_t checksum = EncodeRecord(key, value, 77, &words);
  const LeafValue entry{GlobalPtr{2, 64}, static_cast<uint32_t>(RecordLength(key.size(), value.size())), checksum};
  RecordInPlace in_place;
  RecordFields fields;
  ASSERT_TRUE(CheckRecordInPlace(words.data(), entry, key, &in_place));
  const auto both_refuse = [&](const std::vector<uint64_t>& w, const LeafValue& e, std::string_view k) {
    return !CheckRecordInPlace(w.data(), e, k, &in_place) && !CheckRecordFields(w.data(), e, k, &fields);
  };
  for (int bit = 0; bit < 64; ++bit) {  // the header word: value length, key length, magic
    std::vector<uint64_t> bad = words;
    bad[0] ^= uint64_t{1} << bit;
    EXPECT_TRUE(both_refuse(bad, entry, key)) << "header bit " << bit;
  }
  for (size_t at = 0; at < key.size(); ++at) {
    std::string other = key;
    other[at] ^= 0x20;
    EXPECT_TRUE(both_refuse(words, entry, other)) << "key byte " << at;
  }
  EXPECT_TRUE(both_refuse(words, entry, key.substr(1)));
  EXPECT_TRUE(both_refuse(words, LeafValue{entry.ptr, entry.length - 1, checksum}, key));
  EXPECT_TRUE(both_refuse(words, LeafValue{entry.ptr, entry.length, checksum, /*locked=*/true}, key));
}

// A record written before versions existed (magic 0xCE11D0: no version word, the key at byte 8) is still read, in
// place as in a copy, as version 0.
TEST(RecordFormat, ARecordWithoutAVersionWordIsReadInPlaceAsVersionZero) {
  const std::string key = "an old key", value = "written before versions";
  const size_t length = kRecordHeaderBytesV1 + key.size() + value.size();
  std::vector<uint64_t> words(WordsFor(length), 0);
  words[0] = uint64_t{value.size()} | (uint64_t{key.size()} << 32) | (kRecordMagicV1 << 40);
  auto* bytes = reinterpret_cast<char*>(words.data());
  std::memcpy(bytes + kRecordHeaderBytesV1, key.data(), key.size());
  std::memcpy(bytes + kRecordHeaderBytesV1 + key.size(), value.data(), value.size());
  const LeafValue entry{GlobalPtr{2, 64}, static_cast<uint32_t>(length), 0};
  RecordFields fields;
  ASSERT_TRUE(CheckRecordFields(words.data(), entry, key, &fields));
  EXPECT_EQ(fields.value, value);
  EXPECT_EQ(fields.version, 0u);
  RecordInPlace in_place;
  ASSERT_TRUE(CheckRecordInPlace(words.data(), entry, key, &in_place));
  EXPECT_EQ(std::string_view(bytes + in_place.value_at, in_place.value_size), value);
  EXPECT_EQ(in_place.version, 0u);
  EXPECT_FALSE(CheckRecordInPlace(words.data(), entry, "an old kez", &in_place));
}

}  // namespace
}  // namespace cell::btree
