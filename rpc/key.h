// Keys: the shared secrets that say who may use a server (the handshake that proves one is rpc/auth.h).
//
// A key is a secret of 16..4096 bytes read from a file under a name that says its role: "client" (the store's
// methods) or "peer" (also the requests servers send each other). The file must not be readable by group or others,
// as ssh insists for its keys; `cellctl keygen FILE` writes a new one (64 hex digits, mode 0600).
#pragma once

#include <string>
#include <string_view>

#include "cell/status.h"

namespace cell::rpc {

inline constexpr std::string_view kClientKeyName = "client";
inline constexpr std::string_view kPeerKeyName = "peer";

struct Key {
  std::string name;    // which key it is (kClientKeyName, kPeerKeyName); sent in the Hello
  std::string secret;  // never sent
  bool empty() const { return secret.empty(); }
};

// Reads the key in `path` as the key called `name`: the file's bytes, less trailing white space. InvalidArgument,
// saying what to do, if the file is missing or unreadable, readable or writable by group or others, or holds fewer
// than 16 or more than 4096 bytes.
StatusOr<Key> ReadKeyFile(const std::string& path, std::string_view name);

// Writes a new key to `path` (which must not exist): 32 random bytes as 64 hex digits, mode 0600.
Status WriteNewKeyFile(const std::string& path);

// A secret for another use derived from `key` (64 hex digits of HMAC-SHA256(secret, "cell-derive " + purpose)):
// whoever holds the key can make it, nobody else can, and it reveals nothing of the key. The servers' ZooKeeper
// password is derived from the peer key so.
std::string DeriveSecret(const Key& key, std::string_view purpose);

}  // namespace cell::rpc
