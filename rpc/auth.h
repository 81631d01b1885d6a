// The handshake that authenticates a connection by a shared key (rpc/key.h): who may use a server. Which methods a
// key's holder may call is the server's policy (ServerOptions::authorize in rpc/transport.h); this layer proves only
// who holds which key. Used by the transports' connection set-up; nothing above rpc/ includes it.
//
// The handshake, on every connection (tcp and shm: on each of its sockets), in the frames of rpc/frame.h:
//
//   client -> server  kHello       {role, key_name, nonce_c}    nonce_c, nonce_s: 32 fresh random bytes each
//   server -> client  kHelloReply  {nonce_s, proof_s}           proof_s = HMAC-SHA256(secret, "cell-auth-v1 server" |
//   T) client -> server  kAuth        {proof_c}                    proof_c = HMAC-SHA256(secret, "cell-auth-v1 client"
//   | T) server -> client  kAuthReply   (empty)
//
// where T = role (1 byte) | length of key_name (1 byte) | key_name | nonce_c | nonce_s. The server proves first, so a
// client knows the server too; the two labels keep either proof from being reflected as the other, and a nonce from
// each side keeps a recorded exchange from being replayed. Proofs are compared in constant time (CRYPTO_memcmp).
// Nothing but the handshake frames is accepted before kAuthReply.
//
// Refusals are PermissionDenied, with a message naming the key that is missing: a server that has keys answers a
// Hello that names none, or a key it does not know, or a wrong proof, with a kError frame and closes the connection; a
// client holding a key refuses a server that cannot prove it holds the same key, or that runs without keys (it could
// be anyone). A server without keys answers the Hello without a proof: the connection is anonymous.
//
// Not protected: the bytes after the handshake (no encryption, no per-frame MAC); docs/DESIGN.md, "Security".
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cell/status.h"
#include "rpc/key.h"
#include "rpc/proto/transport.pb.h"

namespace cell::rpc {

inline constexpr size_t kAuthNonceBytes = 32;

// The server's side of one connection's handshake.
class ServerAuth {
 public:
  // `keys`: the keys the server accepts (empty: none required); must outlive this.
  explicit ServerAuth(const std::vector<Key>* keys) : keys_(keys) {}

  // The client's Hello: fills `reply`'s nonce and proof when keys are required. PermissionDenied (or InvalidArgument
  // for a malformed nonce): send it as a kError frame and close the connection.
  Status OnHello(const proto::Hello& hello, std::string_view server, proto::HelloReply* reply);
  // True after OnHello if the client must prove its key (kAuth) before anything else.
  bool awaiting_proof() const { return key_ != nullptr && !authenticated_; }
  // The kAuth frame's payload. An error: send it as a kError frame and close the connection.
  Status OnProof(std::string_view payload, std::string_view server);
  // The Hello was answered and, if keys are required, the proof held.
  bool authenticated() const { return authenticated_; }
  // The name of the key the connection proved; empty on a server without keys.
  const std::string& key_name() const;

 private:
  const std::vector<Key>* keys_;
  const Key* key_ = nullptr;
  proto::Role role_ = proto::ROLE_UNSPECIFIED;
  std::string client_nonce_;
  std::string server_nonce_;
  bool authenticated_ = false;
};

// The client's side.
class ClientAuth {
 public:
  // `key`: the key this client holds (empty: none).
  explicit ClientAuth(Key key) : key_(std::move(key)) {}
  // Names the key and adds a fresh nonce to `hello`, whose role must be set.
  void FillHello(proto::Hello* hello);
  // Checks the server's HelloReply. OK with *auth_payload the kAuth frame's payload to send, or empty when the server
  // requires no key (and this client holds none); PermissionDenied if the server cannot prove it holds our key.
  Status OnHelloReply(const proto::HelloReply& reply, std::string_view server, std::string* auth_payload);

 private:
  const Key key_;
  proto::Role role_ = proto::ROLE_UNSPECIFIED;
  std::string client_nonce_;
};

}  // namespace cell::rpc
