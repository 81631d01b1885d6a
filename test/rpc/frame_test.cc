// The frame codec: every frame comes back whole however the stream is cut, and every malformed header is named.
#include "rpc/frame.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace cell::rpc {
namespace {

TEST(FrameDecoder, FramesSurviveAnyCutOfTheStream) {
  std::mt19937_64 rng(3);
  std::string stream;
  std::vector<std::pair<uint64_t, std::string>> sent;
  for (int i = 0; i < 200; ++i) {
    std::string payload(rng() % 3000, '\0');
    for (char& c : payload) c = static_cast<char>(rng());
    AppendFrame(stream, FrameType::kRequest, static_cast<uint16_t>(i), 1000 + i, payload);
    sent.emplace_back(1000 + i, payload);
  }
  for (int trial = 0; trial < 20; ++trial) {
    FrameDecoder decoder(1 << 20);
    size_t at = 0, next = 0;
    while (at < stream.size()) {
      const size_t piece = std::min<size_t>(stream.size() - at, 1 + rng() % (trial < 10 ? 7 : 5000));
      decoder.Append(std::string_view(stream).substr(at, piece));
      at += piece;
      FrameHeader h;
      std::string_view payload;
      FrameDecoder::Result r;
      while ((r = decoder.Next(&h, &payload)) == FrameDecoder::Result::kFrame) {
        ASSERT_LT(next, sent.size());
        EXPECT_EQ(h.request_id, sent[next].first);
        EXPECT_EQ(h.aux, static_cast<uint16_t>(next));
        EXPECT_EQ(payload, sent[next].second);
        ++next;
      }
      ASSERT_EQ(r, FrameDecoder::Result::kNeedMore);
      decoder.Consume();
    }
    EXPECT_EQ(next, sent.size());
    EXPECT_EQ(decoder.buffered(), 0u);
  }
}

TEST(FrameDecoder, MalformedHeadersAreRefusedWithTheReason) {
  std::string good;
  AppendFrame(good, FrameType::kResponse, 0, 9, "abc");
  struct Case {
    size_t byte;
    char value;
    const char* reason;
  };
  const Case cases[] = {
      {0, 'X', "bad magic"},
      {4, 2, "protocol version 2"},
      {5, 0, "unknown frame type 0"},
      {5, 42, "unknown frame type 42"},
      {12, 1, "reserved"},
      {11, 1, "exceeds the message limit"},
  };
  for (const Case& k : cases) {
    std::string bad = good;
    bad[k.byte] = k.value;
    FrameDecoder decoder(1 << 20);
    decoder.Append(bad);
    FrameHeader h;
    std::string_view payload;
    ASSERT_EQ(decoder.Next(&h, &payload), FrameDecoder::Result::kMalformed) << k.reason;
    EXPECT_NE(decoder.error().message().find(k.reason), std::string::npos) << decoder.error().ToString();
    // Once malformed, always malformed: the decoder never resynchronises.
    decoder.Append(good);
    EXPECT_EQ(decoder.Next(&h, &payload), FrameDecoder::Result::kMalformed);
  }
}

TEST(FrameDecoder, LengthAtTheLimitPassesAndOneMoreFails) {
  for (uint32_t length : {1024u, 1025u}) {
    std::string frame;
    AppendFrame(frame, FrameType::kRequest, 1, 1, std::string(length, 'z'));
    FrameDecoder decoder(1024);
    decoder.Append(frame);
    FrameHeader h;
    std::string_view payload;
    EXPECT_EQ(decoder.Next(&h, &payload),
              length <= 1024 ? FrameDecoder::Result::kFrame : FrameDecoder::Result::kMalformed);
  }
}

}  // namespace
}  // namespace cell::rpc
