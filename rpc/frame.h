// Wire frames: how a message is cut out of a byte stream (tcp, shm's Unix socket, and verbs, whose SENDs carry the
// same frames end to end: rpc/verbs/verbs_transport.h).
//
// Every message is one frame: a fixed 24-byte header, then `length` bytes of payload. All integers little-endian.
//
//   offset  size  field
//   0       4     magic       0xCE11F4A3; anything else means the peer is not speaking this protocol
//   4       1     version     kFrameVersion (1); a frame of another version closes the connection
//   5       1     type        FrameType below
//   6       2     aux         kRequest: the method id; kError: the Status code (1..Status::Code::kLastCode); else 0
//   8       4     length      payload bytes; above the connection's limit (default 16 MiB) closes the connection
//   12      4     reserved    0
//   16      8     request id  chosen by the client; its response carries the same id
//
// Payloads: kHello/kHelloReply/kAuth/kReadRequest carry the protobuf messages of rpc/proto/transport.proto (kAuthReply
// is empty); kRequest and kResponse carry the caller's bytes (a serialized protobuf of the layer above);
// kReadResponse carries the raw bytes read; kError carries the error message (UTF-8 text).
//
// A malformed frame (bad magic, version, type, reserved bits, or an oversized length) is a protocol violation: the
// receiver logs why and closes that connection; it never tries to resynchronise.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "cell/status.h"

namespace cell::rpc {

inline constexpr uint32_t kFrameMagic = 0xCE11F4A3;
inline constexpr uint8_t kFrameVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 24;
inline constexpr uint32_t kDefaultMaxMessageBytes = 16u << 20;

enum class FrameType : uint8_t {
  kHello = 1,         // client -> server, first frame of a connection: which role the connection plays
  kHelloReply = 2,    // server -> client
  kRequest = 3,       // an RPC request (aux = method)
  kResponse = 4,      // its successful response
  kError = 5,         // a failed request, RPC or read (aux = Status code, payload = message)
  kReadRequest = 6,   // one-sided read served by the server's NIC threads (tcp)
  kReadResponse = 7,  // the bytes read
  kMapRequest = 8,    // shm: ask for a region's read-only descriptor; verbs: ask for the region list
  kMapReply = 9,      // shm: the reply, the descriptor riding along as SCM_RIGHTS; verbs: a VerbsRegionList
  kAuth = 10,         // client -> server, after kHelloReply when the server asks for a key: the client's proof
  kAuthReply = 11,    // server -> client: the proof holds; the connection may be used (rpc/auth.h)
};
inline constexpr uint8_t kMaxFrameType = 11;

struct FrameHeader {
  FrameType type = FrameType::kRequest;
  uint16_t aux = 0;
  uint32_t length = 0;
  uint64_t request_id = 0;
};

// Writes the 24 header bytes for `header` at `out`.
void EncodeFrameHeader(const FrameHeader& header, char* out);

// Appends one whole frame (header and payload) to `out`.
void AppendFrame(std::string& out, FrameType type, uint16_t aux, uint64_t request_id, std::string_view payload);

// What a server sends instead of a response: `status` if it is an error, or ResourceExhausted if an OK response of
// `response_bytes` is over the connection's `limit`; its message cut to 4 KiB.
Status ReplyError(const Status& status, size_t response_bytes, uint32_t limit);

// The error a kError frame carries. A code that is not an error (0, or unknown to this build) yields Internal: an
// error frame never reads as success.
Status ErrorFromFrame(uint16_t aux, std::string_view message);

// Parses the header at the start of `bytes` (at least kFrameHeaderBytes long). InvalidArgument, with the reason, if
// the header is malformed or announces more than `max_payload_bytes` of payload.
Status DecodeFrameHeader(std::string_view bytes, uint32_t max_payload_bytes, FrameHeader* header);

// Cuts whole frames out of a byte stream that arrives in arbitrary pieces.
//
//   decoder.Append(bytes);
//   while (true) { auto r = decoder.Next(&header, &payload); if (r == kNeedMore) break; if (r == kMalformed) ... }
//   decoder.Consume();  // after the payload views are no longer needed
class FrameDecoder {
 public:
  enum class Result { kFrame, kNeedMore, kMalformed };
  explicit FrameDecoder(uint32_t max_payload_bytes) : max_payload_(max_payload_bytes) {}

  // Adds received bytes to the buffer.
  void Append(std::string_view bytes) {
    if (bytes.empty()) return;
    std::memcpy(PrepareAppend(bytes.size()), bytes.data(), bytes.size());
    Commit(bytes.size());
  }
  // Room to receive up to `bytes` bytes directly into the buffer; then call Commit with the count received.
  char* PrepareAppend(size_t bytes);
  void Commit(size_t bytes) { size_ += bytes; }

  // The next whole frame; `payload` points into the buffer and stays valid until Consume() or Append().
  // After kMalformed, error() says why and the decoder returns kMalformed from then on.
  Result Next(FrameHeader* header, std::string_view* payload);
  // Drops the bytes of the frames already returned by Next().
  void Consume();
  const Status& error() const { return error_; }
  // Bytes needed to complete the frame being received (at least 1 if nothing is known yet).
  size_t BytesWanted() const;
  size_t buffered() const { return size_ - consumed_; }

 private:
  uint32_t max_payload_;
  std::unique_ptr<char[]> buffer_;  // not std::string: growing it must not zero-fill what recv() will overwrite
  size_t capacity_ = 0;
  size_t size_ = 0;
  size_t consumed_ = 0;  // bytes of buffer_ already returned as frames
  Status error_;
};

}  // namespace cell::rpc
