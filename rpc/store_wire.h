// The store's hottest messages (rpc/proto/store.proto) written and read by hand: a plain get, put or delete
// (KeyRequest) and the reply to a key request (StoreReply with the fields a get, put or delete answers with). On the
// request path protobuf's generic serializer and parser cost more than the whole encoding: these write the bytes
// protobuf writes for the same message, and read only what protobuf would read the same way, declining anything else
// (the caller then parses with protobuf, which stays the one definition of what is valid). Shared by the client and
// the server; test/rpc/store_wire_test.cc checks both directions against protobuf.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rpc/proto/store.pb.h"

namespace cell::rpc {

// Appends the wire bytes of a KeyRequest with only its target, key, value, meganode and want_range set (`value`
// null: none; a field at its default is left out, as proto3 does).
void AppendPlainKeyRequest(uint32_t region, uint64_t epoch, std::string_view key, const std::string* value,
                           uint64_t meganode, bool want_range, std::string* out);

// Reads `bytes` into *request (cleared first) if they hold nothing but KeyRequest's target (region, epoch), key,
// value, meganode, want_range and with_meta, each at most once, in any order. False otherwise (*request is then
// unspecified): parse with protobuf.
bool ParsePlainKeyRequest(std::string_view bytes, proto::KeyRequest* request);

// The fields of a StoreReply to a get, put or delete: found, value, elsewhere, leaf, leaf_min, leaf_max,
// not_acknowledged, version, checksum, locked.
// Appends the wire bytes of `reply`, which must have no other field set.
void AppendKeyReply(const proto::StoreReply& reply, std::string* out);
// Reads `bytes` into *reply (cleared first) if they hold nothing but those fields, each at most once, and not
// not_acknowledged (a string: protobuf checks its UTF-8). False otherwise (*reply is then unspecified): parse with
// protobuf.
bool ParseKeyReply(std::string_view bytes, proto::StoreReply* reply);

}  // namespace cell::rpc
