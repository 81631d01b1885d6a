// The store's hottest messages by hand (rpc/store_wire.h), against protobuf: what is written is what protobuf writes,
// and what is read is what protobuf reads from the same bytes, or declined.
#include "rpc/store_wire.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "common/global_ptr.h"
#include "rpc/proto/store.pb.h"

namespace cell::rpc {
namespace {

// The plain key request written by hand is byte for byte what protobuf writes for the same message, and reads back
// as it: fields at their defaults (left out), one-byte and longer varints and lengths, empty and large values.
TEST(StoreWire, APlainKeyRequestIsWhatProtobufWritesForTheSameMessage) {
  const std::string big(300000, 'v');
  const std::string empty, small = "value";
  int cases = 0;
  for (uint32_t region : {0u, 1u, 200u, 0xffffffffu}) {
    for (uint64_t epoch : {uint64_t{0}, uint64_t{7}, uint64_t{1} << 40, ~uint64_t{0}}) {
      for (const std::string& key : {std::string(), std::string("k"), std::string(200, 'x')}) {
        for (const std::string* value : {static_cast<const std::string*>(nullptr), &empty, &small, &big}) {
          for (uint64_t meganode : {uint64_t{0}, uint64_t{5}, GlobalPtr{3, 1 << 26}.Pack()}) {
            for (bool want_range : {false, true}) {
              std::string wire = "left alone:";
              AppendPlainKeyRequest(region, epoch, key, value, meganode, want_range, &wire);
              proto::KeyRequest expected;
              expected.mutable_target()->set_region(region);
              expected.mutable_target()->set_epoch(epoch);
              expected.set_key(key);
              if (value != nullptr) expected.set_value(*value);
              expected.set_meganode(meganode);
              expected.set_want_range(want_range);
              ASSERT_EQ(wire, "left alone:" + expected.SerializeAsString())
                  << region << " " << epoch << " " << key.size() << " " << meganode << " " << want_range;
              proto::KeyRequest parsed;
              ASSERT_TRUE(parsed.ParseFromArray(wire.data() + 11, static_cast<int>(wire.size() - 11)));
              EXPECT_TRUE(parsed.has_target());
              EXPECT_EQ(parsed.target().region(), region);
              EXPECT_EQ(parsed.target().epoch(), epoch);
              EXPECT_EQ(parsed.key(), key);
              EXPECT_EQ(parsed.value(), value != nullptr ? *value : std::string());
              EXPECT_EQ(parsed.meganode(), meganode);
              EXPECT_EQ(parsed.want_range(), want_range);
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 4 * 4 * 3 * 4 * 3 * 2);
}

// What both parsers read, as text, so that two messages compare (and a failure prints them).
std::string Text(const google::protobuf::Message& m) { return m.ShortDebugString(); }

TEST(StoreWire, APlainKeyRequestReadsAsProtobufReadsIt) {
  int read = 0;
  for (uint32_t region : {0u, 1u, 0xffffffffu}) {
    for (uint64_t epoch : {uint64_t{0}, uint64_t{1} << 40}) {
      for (const std::string& key : {std::string(), std::string("k"), std::string(200, 'x')}) {
        for (const std::string& value : {std::string(), std::string(300, 'v')}) {
          for (uint64_t meganode : {uint64_t{0}, GlobalPtr{3, 1 << 26}.Pack()}) {
            for (int flags = 0; flags < 4; ++flags) {
              proto::KeyRequest m;
              m.mutable_target()->set_region(region);
              m.mutable_target()->set_epoch(epoch);
              m.set_key(key);
              m.set_value(value);
              m.set_meganode(meganode);
              m.set_want_range((flags & 1) != 0);
              m.set_with_meta((flags & 2) != 0);
              proto::KeyRequest parsed;
              parsed.set_key("stale");  // a reused message: what it held must go
              ASSERT_TRUE(ParsePlainKeyRequest(m.SerializeAsString(), &parsed)) << Text(m);
              EXPECT_EQ(Text(parsed), Text(m));
              EXPECT_TRUE(parsed.has_target());
              ++read;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(read, 3 * 2 * 3 * 2 * 2 * 4);
  // The fields in another order, as another writer may send them, read the same.
  std::string reordered;
  reordered += static_cast<char>(4 << 3);  // meganode = 9
  reordered += '\x09';
  reordered += static_cast<char>(2 << 3 | 2);  // key = "ab"
  reordered += std::string{'\x02', 'a', 'b'};
  reordered += static_cast<char>(1 << 3 | 2);  // target { region = 5 }
  reordered += "\x02\x08\x05";
  proto::KeyRequest by_hand, by_protobuf;
  ASSERT_TRUE(ParsePlainKeyRequest(reordered, &by_hand));
  ASSERT_TRUE(by_protobuf.ParseFromString(reordered));
  EXPECT_EQ(Text(by_hand), Text(by_protobuf));
  EXPECT_EQ(by_hand.meganode(), 9u);
}

TEST(StoreWire, AKeyRequestWithMoreOrMalformedIsDeclined) {
  proto::KeyRequest m;
  m.mutable_target()->set_region(1);
  m.set_key("k");
  proto::KeyRequest parsed;
  // Fields a plain request does not have: protobuf reads them.
  proto::KeyRequest txn = m;
  txn.mutable_txn()->set_txid(3);
  EXPECT_FALSE(ParsePlainKeyRequest(txn.SerializeAsString(), &parsed));
  proto::KeyRequest cas = m;
  cas.set_expected("e");
  EXPECT_FALSE(ParsePlainKeyRequest(cas.SerializeAsString(), &parsed));
  // A field twice (protobuf's merge rules), an unknown field, a truncated length, a truncated varint, an overlong
  // varint, a wrong wire type, a target with an unknown field: declined.
  const std::string plain = m.SerializeAsString();
  EXPECT_TRUE(ParsePlainKeyRequest(plain, &parsed));
  EXPECT_FALSE(ParsePlainKeyRequest(plain + std::string("\x12\x01x", 3), &parsed));    // key twice
  EXPECT_FALSE(ParsePlainKeyRequest(plain + std::string("\x78\x01", 2), &parsed));     // field 15
  EXPECT_FALSE(ParsePlainKeyRequest(std::string{'\x12', '\x05', 'a', 'b'}, &parsed));  // key of 5 bytes, 2 given
  EXPECT_FALSE(ParsePlainKeyRequest(std::string("\x20\x80", 2), &parsed));             // meganode cut short
  EXPECT_FALSE(ParsePlainKeyRequest(std::string("\x20") + std::string(10, '\x80') + '\x01', &parsed));
  // A length protobuf would not read (6 bytes for 2; protobuf reads at most 5, the 5th below 8): declined.
  const std::string overlong{'\x12', '\x82', '\x80', '\x80', '\x80', '\x80', '\x00', 'a', 'b'};
  EXPECT_FALSE(proto::KeyRequest().ParseFromString(overlong)) << "protobuf refuses it";
  EXPECT_FALSE(ParsePlainKeyRequest(overlong, &parsed));
  const std::string long_enough{'\x12', '\x82', '\x80', '\x80', '\x80', '\x00', 'a', 'b'};  // 5 bytes for 2
  ASSERT_TRUE(proto::KeyRequest().ParseFromString(long_enough)) << "protobuf reads it";
  ASSERT_TRUE(ParsePlainKeyRequest(long_enough, &parsed));
  EXPECT_EQ(parsed.key(), "ab");
  EXPECT_FALSE(ParsePlainKeyRequest(std::string("\x22\x00", 2), &parsed));          // meganode as bytes
  EXPECT_FALSE(ParsePlainKeyRequest(std::string("\x0a\x02\x18\x01", 4), &parsed));  // target field 3
}

// Random bytes, and protobuf's bytes with one byte changed: whenever the hand-written parser reads them, protobuf
// reads the same message from them.
TEST(StoreWire, WhatIsReadByHandIsWhatProtobufReads) {
  std::mt19937_64 rng(11);
  proto::KeyRequest request;
  request.mutable_target()->set_region(7);
  request.mutable_target()->set_epoch(300);
  request.set_key("some key");
  request.set_value(std::string(40, 'v'));
  request.set_meganode(GlobalPtr{7, 1 << 20}.Pack());
  request.set_want_range(true);
  proto::StoreReply reply;
  reply.set_found(true);
  reply.set_value("a value");
  reply.set_leaf(99);
  reply.set_leaf_min("a");
  reply.set_leaf_max("z");
  reply.set_version(5);
  reply.set_checksum(0xfedcba9876543210u);
  const std::string request_bytes = request.SerializeAsString(), reply_bytes = reply.SerializeAsString();
  int request_reads = 0, reply_reads = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string a = request_bytes, b = reply_bytes;
    if (i % 4 == 0) {
      a.assign(rng() % 24, '\0');
      for (char& c : a) c = static_cast<char>(rng());
      b = a;
    } else {
      a[rng() % a.size()] = static_cast<char>(rng());
      b[rng() % b.size()] = static_cast<char>(rng());
    }
    proto::KeyRequest hand_request, protobuf_request;
    if (ParsePlainKeyRequest(a, &hand_request)) {
      ASSERT_TRUE(protobuf_request.ParseFromString(a)) << i;
      ASSERT_EQ(Text(hand_request), Text(protobuf_request)) << i;
      ++request_reads;
    }
    proto::StoreReply hand_reply, protobuf_reply;
    if (ParseKeyReply(b, &hand_reply)) {
      ASSERT_TRUE(protobuf_reply.ParseFromString(b)) << i;
      ASSERT_EQ(Text(hand_reply), Text(protobuf_reply)) << i;
      ++reply_reads;
    }
  }
  // Most single-byte changes leave a message either parser reads (a changed byte of a key or value, say).
  EXPECT_GT(request_reads, 50000);
  EXPECT_GT(reply_reads, 50000);
}

TEST(StoreWire, AKeyReplyIsWhatProtobufWritesAndReadsBack) {
  int cases = 0;
  const std::string big(200000, 'v');
  for (int mask = 0; mask < (1 << 10); ++mask) {
    proto::StoreReply m;
    if (mask & 1) m.set_found(true);
    if (mask & 2) m.set_value(mask & 512 ? big : std::string("val"));
    if (mask & 4) m.set_elsewhere(GlobalPtr{2, 1 << 26}.Pack());
    if (mask & 8) m.set_leaf(0x1234567);
    if (mask & 16) m.set_leaf_min("min");
    if (mask & 32) m.set_leaf_max(std::string(130, 'z'));
    if (mask & 64) m.set_not_acknowledged("lease lapsed");
    if (mask & 128) m.set_version(~uint64_t{0});
    if (mask & 256) m.set_checksum(1);
    if (mask & 512) m.set_locked(true);
    std::string wire = "kept:";
    AppendKeyReply(m, &wire);
    ASSERT_EQ(wire, "kept:" + m.SerializeAsString()) << Text(m);
    proto::StoreReply parsed;
    parsed.add_pairs()->set_key("stale");  // a reused message: what it held must go
    if (mask & 64) {
      EXPECT_FALSE(ParseKeyReply(wire.substr(5), &parsed)) << "a string field is protobuf's to check (UTF-8)";
    } else {
      ASSERT_TRUE(ParseKeyReply(wire.substr(5), &parsed)) << Text(m);
      EXPECT_EQ(Text(parsed), Text(m));
    }
    ++cases;
  }
  EXPECT_EQ(cases, 1024);
  // A scan's page is protobuf's to read.
  proto::StoreReply scan;
  scan.add_pairs()->set_key("k");
  scan.set_more(true);
  proto::StoreReply parsed;
  EXPECT_FALSE(ParseKeyReply(scan.SerializeAsString(), &parsed));
}

}  // namespace
}  // namespace cell::rpc
