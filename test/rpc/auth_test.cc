// Keys and the handshake that proves one (rpc/key.h, rpc/auth.h), without a transport: each check is shown to
// reject what it must (a wrong key, a reflected or replayed proof, a key file others can read).
#include "rpc/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "rpc/key.h"
#include "test/temp_dir.h"

namespace cell::rpc {
namespace {

const Key kClient{"client", "client-secret-0123456789abcdef"};
const Key kPeer{"peer", "peer-secret-0123456789abcdef00"};

std::string TempPath(const std::string& name) { return cell::testing::ProcessDir() + "/" + name; }

void WriteFile(const std::string& path, const std::string& bytes, mode_t mode) {
  std::remove(path.c_str());
  std::ofstream(path) << bytes;
  ASSERT_EQ(chmod(path.c_str(), mode), 0);
}

// One handshake between a client holding `held` and a server with `keys`; the status the first refusal gives.
Status Handshake(const Key& held, const std::vector<Key>& keys, std::string* key_name = nullptr) {
  ServerAuth server(&keys);
  ClientAuth client(held);
  proto::Hello hello;
  hello.set_role(proto::ROLE_RPC);
  client.FillHello(&hello);
  proto::HelloReply reply;
  CELL_RETURN_IF_ERROR(server.OnHello(hello, "server", &reply));
  std::string proof;
  CELL_RETURN_IF_ERROR(client.OnHelloReply(reply, "server", &proof));
  if (!proof.empty()) CELL_RETURN_IF_ERROR(server.OnProof(proof, "server"));
  if (!server.authenticated()) return Status::Internal("the server does not consider the connection authenticated");
  if (key_name != nullptr) *key_name = server.key_name();
  return Status::OK();
}

TEST(KeyFile, ReadsTheSecretWithoutTheTrailingNewline) {
  const std::string path = TempPath("good");
  WriteFile(path, "0123456789abcdef0123\n", 0600);
  auto key = ReadKeyFile(path, "client");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->name, "client");
  EXPECT_EQ(key->secret, "0123456789abcdef0123");
}

TEST(KeyFile, RefusesFilesOthersCanReadShortKeysAndMissingFiles) {
  const std::string path = TempPath("bad");
  WriteFile(path, "0123456789abcdef0123\n", 0644);
  auto readable = ReadKeyFile(path, "peer");
  ASSERT_FALSE(readable.ok());
  EXPECT_TRUE(readable.status().IsInvalidArgument());
  EXPECT_NE(readable.status().message().find("chmod 600"), std::string::npos) << readable.status().ToString();

  WriteFile(path, "short\n", 0600);
  auto short_key = ReadKeyFile(path, "peer");
  ASSERT_FALSE(short_key.ok());
  EXPECT_NE(short_key.status().message().find("16 to 4096 bytes"), std::string::npos) << short_key.status().ToString();

  auto missing = ReadKeyFile(TempPath("no-such-file"), "client");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("client key file"), std::string::npos) << missing.status().ToString();
}

TEST(KeyFile, NewKeysAreRandomPrivateAndReadable) {
  const std::string a = TempPath("new-a"), b = TempPath("new-b");
  std::remove(a.c_str());
  std::remove(b.c_str());
  ASSERT_TRUE(WriteNewKeyFile(a).ok());
  ASSERT_TRUE(WriteNewKeyFile(b).ok());
  EXPECT_FALSE(WriteNewKeyFile(a).ok()) << "an existing key file must not be overwritten";
  struct stat st {};
  ASSERT_EQ(stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto ka = ReadKeyFile(a, "client");
  auto kb = ReadKeyFile(b, "client");
  ASSERT_TRUE(ka.ok() && kb.ok());
  EXPECT_EQ(ka->secret.size(), 64u);
  EXPECT_NE(ka->secret, kb->secret);
}

TEST(Handshake, TheRightKeyIsProvenBothWaysAndNamed) {
  std::string name;
  ASSERT_TRUE(Handshake(kClient, {kClient, kPeer}, &name).ok());
  EXPECT_EQ(name, "client");
  ASSERT_TRUE(Handshake(kPeer, {kClient, kPeer}, &name).ok());
  EXPECT_EQ(name, "peer");
  // No keys on either side: anonymous.
  ASSERT_TRUE(Handshake(Key{}, {}, &name).ok());
  EXPECT_EQ(name, "");
}

TEST(Handshake, WrongMissingOrUnknownKeysAreRefusedNamingTheKey) {
  const Status none = Handshake(Key{}, {kClient, kPeer});
  EXPECT_TRUE(none.IsPermissionDenied()) << none.ToString();
  EXPECT_NE(none.message().find("offered none"), std::string::npos) << none.ToString();

  // The client checks the server's proof first: a different secret under the same name fails there.
  const Status wrong = Handshake(Key{"client", "not-the-client-secret-000000"}, {kClient, kPeer});
  EXPECT_TRUE(wrong.IsPermissionDenied()) << wrong.ToString();
  EXPECT_NE(wrong.message().find("client key"), std::string::npos) << wrong.ToString();

  const Status unknown = Handshake(Key{"admin", "admin-secret-0123456789abcdef"}, {kClient, kPeer});
  EXPECT_TRUE(unknown.IsPermissionDenied()) << unknown.ToString();
  EXPECT_NE(unknown.message().find("not 'admin'"), std::string::npos) << unknown.ToString();

  // A client with a key refuses a server that proves nothing: it could be anyone.
  const Status keyless_server = Handshake(kClient, {});
  EXPECT_TRUE(keyless_server.IsPermissionDenied()) << keyless_server.ToString();
  EXPECT_NE(keyless_server.message().find("without keys"), std::string::npos) << keyless_server.ToString();
}

// A client that does not know the secret cannot pass: not with the server's own proof sent back (reflection), not
// with a proof recorded from an earlier connection (replay), not with garbage.
TEST(Handshake, ReflectedReplayedAndForgedProofsAreRefused) {
  const std::vector<Key> keys{kClient, kPeer};
  proto::Hello hello;
  hello.set_role(proto::ROLE_RPC);
  hello.set_key_name("client");
  hello.set_nonce(std::string(kAuthNonceBytes, 'n'));

  ServerAuth reflected(&keys);
  proto::HelloReply reply;
  ASSERT_TRUE(reflected.OnHello(hello, "server", &reply).ok());
  proto::AuthProof mirror;
  mirror.set_proof(reply.proof());
  EXPECT_TRUE(reflected.OnProof(mirror.SerializeAsString(), "server").IsPermissionDenied());
  EXPECT_FALSE(reflected.authenticated());

  // A genuine client's proof for one connection, replayed on another with the same client nonce.
  ServerAuth first(&keys);
  ClientAuth genuine(kClient);
  proto::Hello real_hello;
  real_hello.set_role(proto::ROLE_RPC);
  genuine.FillHello(&real_hello);
  proto::HelloReply first_reply;
  ASSERT_TRUE(first.OnHello(real_hello, "server", &first_reply).ok());
  std::string recorded;
  ASSERT_TRUE(genuine.OnHelloReply(first_reply, "server", &recorded).ok());
  ServerAuth second(&keys);
  proto::HelloReply second_reply;
  ASSERT_TRUE(second.OnHello(real_hello, "server", &second_reply).ok());
  EXPECT_NE(first_reply.nonce(), second_reply.nonce());
  EXPECT_TRUE(second.OnProof(recorded, "server").IsPermissionDenied());
  EXPECT_TRUE(first.OnProof(recorded, "server").ok()) << "the proof is good for the connection it was made for";

  // A proof made for another role does not open a connection of this one.
  proto::Hello read_hello = real_hello;
  read_hello.set_role(proto::ROLE_READ);
  ServerAuth read_server(&keys);
  proto::HelloReply read_reply;
  ASSERT_TRUE(read_server.OnHello(read_hello, "server", &read_reply).ok());
  std::string rpc_proof;
  EXPECT_TRUE(genuine.OnHelloReply(read_reply, "server", &rpc_proof).IsPermissionDenied())
      << "the client's role is RPC: a server proof for a READ connection must not verify";

  ServerAuth forged(&keys);
  proto::HelloReply forged_reply;
  ASSERT_TRUE(forged.OnHello(hello, "server", &forged_reply).ok());
  EXPECT_TRUE(forged.OnProof("garbage that is not a proof", "server").IsPermissionDenied());
  proto::AuthProof zeros;
  zeros.set_proof(std::string(32, '\0'));
  EXPECT_TRUE(forged.OnProof(zeros.SerializeAsString(), "server").IsPermissionDenied());

  // A malformed nonce is refused before any proof is made.
  proto::Hello short_nonce = hello;
  short_nonce.set_nonce("tiny");
  ServerAuth strict(&keys);
  proto::HelloReply nothing;
  EXPECT_TRUE(strict.OnHello(short_nonce, "server", &nothing).IsInvalidArgument());
  EXPECT_TRUE(nothing.proof().empty());
}

}  // namespace
}  // namespace cell::rpc
