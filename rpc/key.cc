#include "rpc/key.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cell::rpc {
namespace {
constexpr size_t kMinKeyBytes = 16;
constexpr size_t kMaxKeyBytes = 4096;
}  // namespace

StatusOr<Key> ReadKeyFile(const std::string& path, std::string_view name) {
  auto refuse = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format("the {} key file {}: {}", name, path, why));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return refuse(std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return refuse("not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    return refuse(
        fmt::format("its mode {:o} lets group or others read or change it; chmod 600 {}", st.st_mode & 0777, path));
  }
  std::string secret;
  char buffer[1024];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return refuse(std::strerror(err));
    }
    if (n == 0) break;
    secret.append(buffer, static_cast<size_t>(n));
    if (secret.size() > kMaxKeyBytes + 64) break;
  }
  ::close(fd);
  while (!secret.empty() && std::strchr(" \t\r\n", secret.back()) != nullptr) secret.pop_back();
  if (secret.size() < kMinKeyBytes || secret.size() > kMaxKeyBytes) {
    return refuse(fmt::format("a key is {} to {} bytes, this one {} (make one with `cellctl keygen FILE`)",
                              kMinKeyBytes, kMaxKeyBytes, secret.size()));
  }
  return Key{std::string(name), std::move(secret)};
}

Status WriteNewKeyFile(const std::string& path) {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return Status::Internal("the system's random number generator failed (OpenSSL RAND_bytes)");
  }
  std::string text;
  for (unsigned char b : bytes) text += fmt::format("{:02x}", b);
  text.push_back('\n');
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::InvalidArgument(fmt::format("cannot create key file {}: {}", path, std::strerror(errno)));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!written) {
    ::unlink(path.c_str());
    return Status::Unavailable(fmt::format("cannot write key file {}: {}", path, std::strerror(err)));
  }
  return Status::OK();
}

std::string DeriveSecret(const Key& key, std::string_view purpose) {
  const std::string message = "cell-derive " + std::string(purpose);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.secret.data(), static_cast<int>(key.secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &length);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", out[i]);
  return hex;
}

}  // namespace cell::rpc
