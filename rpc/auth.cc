#include "rpc/auth.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace cell::rpc {
namespace {

constexpr size_t kProofBytes = 32;  // SHA-256
constexpr std::string_view kServerLabel = "cell-auth-v1 server";
constexpr std::string_view kClientLabel = "cell-auth-v1 client";

StatusOr<std::string> Nonce() {
  std::string nonce(kAuthNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1) {
    return Status::Internal("the system's random number generator failed (OpenSSL RAND_bytes)");
  }
  return nonce;
}

// HMAC-SHA256(secret, label | T), T as in auth.h.
std::string Proof(const Key& key, std::string_view label, proto::Role role, std::string_view client_nonce,
                  std::string_view server_nonce) {
  std::string message(label);
  message.push_back(static_cast<char>(role));
  message.push_back(static_cast<char>(key.name.size()));
  message += key.name;
  message += client_nonce;
  message += server_nonce;
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.secret.data(), static_cast<int>(key.secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &length) == nullptr) {
    return {};  // matches no proof
  }
  return std::string(reinterpret_cast<const char*>(out), length);
}

bool SameProof(std::string_view expected, std::string_view got) {
  return expected.size() == kProofBytes && got.size() == kProofBytes &&
         CRYPTO_memcmp(expected.data(), got.data(), kProofBytes) == 0;
}

std::string KeyNames(const std::vector<Key>& keys) {
  std::string names;
  for (const Key& k : keys) names += fmt::format("{}'{}'", names.empty() ? "" : " or ", k.name);
  return names;
}

}  // namespace

Status ServerAuth::OnHello(const proto::Hello& hello, std::string_view server, proto::HelloReply* reply) {
  role_ = hello.role();
  if (keys_ == nullptr || keys_->empty()) {
    authenticated_ = true;  // anyone may connect (the server said so loudly at start)
    return Status::OK();
  }
  if (hello.key_name().empty()) {
    return Status::PermissionDenied(
        fmt::format("{} requires a key and this connection offered none: give the {} key (ConnectOptions::key_file, "
                    "cellctl --key-file or the CELL_KEY_FILE environment variable)",
                    server, KeyNames(*keys_)));
  }
  for (const Key& k : *keys_) {
    if (k.name == hello.key_name()) key_ = &k;
  }
  if (key_ == nullptr) {
    return Status::PermissionDenied(
        fmt::format("{} accepts the {} key, not '{}'", server, KeyNames(*keys_), hello.key_name()));
  }
  if (hello.nonce().size() != kAuthNonceBytes) {
    key_ = nullptr;
    return Status::InvalidArgument(
        fmt::format("a Hello's nonce is {} bytes, not {}", kAuthNonceBytes, hello.nonce().size()));
  }
  client_nonce_ = hello.nonce();
  CELL_ASSIGN_OR_RETURN(server_nonce_, Nonce());
  reply->set_nonce(server_nonce_);
  reply->set_proof(Proof(*key_, kServerLabel, role_, client_nonce_, server_nonce_));
  return Status::OK();
}

Status ServerAuth::OnProof(std::string_view payload, std::string_view server) {
  if (!awaiting_proof()) return Status::InvalidArgument("an unexpected kAuth frame");
  proto::AuthProof proof;
  if (!proof.ParseFromArray(payload.data(), static_cast<int>(payload.size())) ||
      !SameProof(Proof(*key_, kClientLabel, role_, client_nonce_, server_nonce_), proof.proof())) {
    return Status::PermissionDenied(fmt::format(
        "{}: wrong {} key: the connection's proof does not match the server's key (is the key file the cluster's?)",
        server, key_->name));
  }
  authenticated_ = true;
  return Status::OK();
}

const std::string& ServerAuth::key_name() const {
  static const std::string kNone;
  return key_ != nullptr ? key_->name : kNone;
}

void ClientAuth::FillHello(proto::Hello* hello) {
  role_ = hello->role();
  if (key_.empty()) return;
  auto nonce = Nonce();
  client_nonce_ = nonce.ok() ? *nonce : std::string();  // an empty nonce is refused by the server
  hello->set_key_name(key_.name);
  hello->set_nonce(client_nonce_);
}

Status ClientAuth::OnHelloReply(const proto::HelloReply& reply, std::string_view server, std::string* auth_payload) {
  auth_payload->clear();
  if (key_.empty()) {
    if (!reply.proof().empty()) {
      return Status::PermissionDenied(fmt::format("{} requires a key and this client holds none", server));
    }
    return Status::OK();
  }
  if (reply.proof().empty()) {
    return Status::PermissionDenied(fmt::format(
        "{} runs without keys, so it cannot prove it is the cluster's server; this client holds the {} key and "
        "refuses it (start the server with its keys)",
        server, key_.name));
  }
  if (reply.nonce().size() != kAuthNonceBytes ||
      !SameProof(Proof(key_, kServerLabel, role_, client_nonce_, reply.nonce()), reply.proof())) {
    return Status::PermissionDenied(fmt::format(
        "{} could not prove it holds the {} key this client holds: the key files differ (wrong key file, or not "
        "the cluster's server)",
        server, key_.name));
  }
  proto::AuthProof proof;
  proof.set_proof(Proof(key_, kClientLabel, role_, client_nonce_, reply.nonce()));
  *auth_payload = proof.SerializeAsString();
  return Status::OK();
}

}  // namespace cell::rpc
