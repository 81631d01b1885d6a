// common/little_endian.h: the byte patterns every on-disk and wire format relies on, and a reader that refuses to run
// past the end of its input.
#include "common/little_endian.h"

#include <gtest/gtest.h>

#include <string>

namespace cell {
namespace {

TEST(LittleEndian, PutFixedAppendsLowByteFirst) {
  std::string out = "x";
  PutFixed16(&out, 0x0102);
  PutFixed32(&out, 0xCE11F4A3);
  PutFixed64(&out, 0x0807060504030201);
  EXPECT_EQ(out, std::string("x\x02\x01\xA3\xF4\x11\xCE\x01\x02\x03\x04\x05\x06\x07\x08", 15));
}

TEST(LittleEndian, EncodeFixedWritesInPlace) {
  char bytes[14] = {};
  EncodeFixed16(bytes, 0xBEEF);
  EncodeFixed32(bytes + 2, 0x11223344);
  EncodeFixed64(bytes + 6, 0xFFEEDDCCBBAA9988);
  EXPECT_EQ(std::string(bytes, sizeof(bytes)),
            std::string("\xEF\xBE\x44\x33\x22\x11\x88\x99\xAA\xBB\xCC\xDD\xEE\xFF", 14));
}

TEST(LittleEndian, DecodeFixedReadsWhatEncodeWrote) {
  const std::string bytes("\xEF\xBE\x44\x33\x22\x11\x88\x99\xAA\xBB\xCC\xDD\xEE\xFF", 14);
  EXPECT_EQ(DecodeFixed16(bytes.data()), 0xBEEF);
  EXPECT_EQ(DecodeFixed32(bytes.data() + 2), 0x11223344u);
  EXPECT_EQ(DecodeFixed64(bytes.data() + 6), 0xFFEEDDCCBBAA9988u);
  // Unaligned, and with the high bit set in every byte: no sign extension.
  const std::string high("\x00\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF", 9);
  EXPECT_EQ(DecodeFixed32(high.data() + 1), 0xFFFFFFFFu);
  EXPECT_EQ(DecodeFixed64(high.data() + 1), ~uint64_t{0});
}

TEST(LittleEndian, ReaderTakesFieldsInOrder) {
  std::string bytes;
  bytes.push_back('\x07');
  PutFixed16(&bytes, 0x1234);
  PutFixed32(&bytes, 0xDEADBEEF);
  PutFixed64(&bytes, 0x0123456789ABCDEF);
  bytes += "tail";
  LittleEndianReader reader(bytes);
  uint8_t u8 = 0;
  uint16_t u16 = 0;
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  std::string tail;
  ASSERT_TRUE(reader.ReadU8(&u8));
  ASSERT_TRUE(reader.ReadFixed16(&u16));
  ASSERT_TRUE(reader.ReadFixed32(&u32));
  ASSERT_TRUE(reader.ReadFixed64(&u64));
  ASSERT_TRUE(reader.ReadBytes(4, &tail));
  EXPECT_EQ(u8, 7);
  EXPECT_EQ(u16, 0x1234);
  EXPECT_EQ(u32, 0xDEADBEEFu);
  EXPECT_EQ(u64, 0x0123456789ABCDEFu);
  EXPECT_EQ(tail, "tail");
  EXPECT_TRUE(reader.rest().empty());
  EXPECT_FALSE(reader.ReadU8(&u8));
}

TEST(LittleEndian, ReaderRefusesShortInputAndTakesNothing) {
  const std::string bytes("\x01\x02\x03", 3);
  LittleEndianReader reader(bytes);
  uint32_t u32 = 99;
  uint64_t u64 = 99;
  std::string out = "unchanged";
  EXPECT_FALSE(reader.ReadFixed32(&u32));
  EXPECT_FALSE(reader.ReadFixed64(&u64));
  EXPECT_FALSE(reader.ReadBytes(4, &out));
  EXPECT_EQ(u32, 99u);
  EXPECT_EQ(u64, 99u);
  EXPECT_EQ(out, "unchanged");
  EXPECT_EQ(reader.rest().size(), 3u);
  uint16_t u16 = 0;
  ASSERT_TRUE(reader.ReadFixed16(&u16));
  EXPECT_EQ(u16, 0x0201);
  EXPECT_FALSE(reader.ReadFixed16(&u16));
  EXPECT_EQ(reader.rest(), std::string_view("\x03", 1));
}

TEST(LittleEndian, ReaderOfEmptyInputRefusesEverything) {
  LittleEndianReader reader(std::string_view{});
  uint8_t u8 = 0;
  std::string out;
  EXPECT_FALSE(reader.ReadU8(&u8));
  EXPECT_TRUE(reader.ReadBytes(0, &out));
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace cell
