#include "rpc/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/diagnostics.h"

namespace cell::rpc {
namespace {

std::string Errno(int err) { return std::strerror(err); }

int MillisUntil(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(left > 1000000 ? 1000000 : left);
}

// Waits for `events` on `fd` until the deadline; DeadlineExceeded if it passes first.
Status WaitFor(int fd, short events, Clock::time_point deadline, const char* what) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, MillisUntil(deadline));
    if (n > 0) return Status::OK();
    if (n == 0) return Status::DeadlineExceeded(fmt::format("timed out {}", what));
    if (errno != EINTR) return Status::Unavailable(fmt::format("poll failed {}: {}", what, Errno(errno)));
  }
}

StatusOr<addrinfo*> Resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_INET;  // IPv4 keeps addresses in URIs simple; "localhost" resolves to 127.0.0.1
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    return Status::InvalidArgument(fmt::format("cannot resolve host '{}': {}", host, gai_strerror(rc)));
  }
  return result;
}

StatusOr<int> FinishConnect(int fd, const sockaddr* addr, socklen_t len, Clock::time_point deadline,
                            const std::string& what) {
  if (addr->sa_family == AF_UNIX) {
    // A Unix socket connects at once, or fails at once; EAGAIN means the listen backlog is full and nothing was
    // started: try again until the deadline.
    while (connect(fd, addr, len) != 0) {
      const int err = errno;
      if (err != EAGAIN && err != EINTR) {
        close(fd);
        return Status::Unavailable(fmt::format("cannot connect to {}: {}", what, Errno(err)));
      }
      if (Clock::now() >= deadline) {
        close(fd);
        return Status::Unavailable(fmt::format("cannot connect to {}: its listen backlog stayed full", what));
      }
      pollfd none{-1, 0, 0};
      poll(&none, 0, 1);  // back off 1 ms
    }
    return fd;
  }
  if (connect(fd, addr, len) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN) {
      const int err = errno;
      close(fd);
      return Status::Unavailable(fmt::format("cannot connect to {}: {}", what, Errno(err)));
    }
    Status s = WaitFor(fd, POLLOUT, deadline, fmt::format("connecting to {}", what).c_str());
    if (!s.ok()) {
      close(fd);
      return Status::Unavailable(s.message());
    }
    int err = 0;
    socklen_t err_len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
    if (err != 0) {
      close(fd);
      return Status::Unavailable(fmt::format("cannot connect to {}: {}", what, Errno(err)));
    }
  }
  return fd;
}

}  // namespace

StatusOr<int> ListenTcp(const std::string& host, uint16_t port, uint16_t* bound_port) {
  auto addrs = Resolve(host, port, true);
  if (!addrs.ok()) return addrs.status();
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(*addrs);
    return Status::Unavailable(fmt::format("socket: {}", Errno(errno)));
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int rc = bind(fd, (*addrs)->ai_addr, (*addrs)->ai_addrlen);
  const int err = errno;
  freeaddrinfo(*addrs);
  if (rc != 0 || listen(fd, 1024) != 0) {
    close(fd);
    return Status::Unavailable(
        fmt::format("cannot listen on tcp://{}:{}: {}", host, port, Errno(rc != 0 ? err : errno)));
  }
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  *bound_port = ntohs(bound.sin_port);
  return fd;
}

StatusOr<int> ListenUnix(const std::string& path, mode_t mode, gid_t group) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument(
        fmt::format("Unix socket path '{}' must be 1..{} bytes long", path, sizeof(addr.sun_path) - 1));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable(fmt::format("socket: {}", Errno(errno)));
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    // A socket file is left behind when a server dies; if nobody answers on it, it is stale and may go.
    const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool live = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(probe);
    if (live) {
      close(fd);
      return Status::Unavailable(fmt::format("another server is already listening at shm://{}", path));
    }
    unlink(path.c_str());
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    close(fd);
    return Status::Unavailable(fmt::format("cannot listen on shm://{}: {}", path, Errno(err)));
  }
  // Before listen(): until then every connect is refused, so the bound file's umask-given mode is never usable.
  if (chmod(path.c_str(), mode) != 0 || (group != static_cast<gid_t>(-1) && chown(path.c_str(), -1, group) != 0) ||
      listen(fd, 1024) != 0) {
    const int err = errno;
    close(fd);
    unlink(path.c_str());
    return Status::Unavailable(fmt::format("cannot listen on shm://{}: {}", path, Errno(err)));
  }
  return fd;
}

StatusOr<int> ConnectTcp(const std::string& host, uint16_t port, Clock::time_point deadline) {
  const std::string what = fmt::format("tcp://{}:{}", host, port);
  auto addrs = Resolve(host, port, false);
  if (!addrs.ok()) return addrs.status();
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(*addrs);
    return Status::Unavailable(fmt::format("socket: {}", Errno(errno)));
  }
  auto result = FinishConnect(fd, (*addrs)->ai_addr, (*addrs)->ai_addrlen, deadline, what);
  freeaddrinfo(*addrs);
  if (result.ok()) SetNoDelay(*result);
  return result;
}

StatusOr<int> ConnectUnix(const std::string& path, Clock::time_point deadline) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument(fmt::format("Unix socket path '{}' is too long or empty", path));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable(fmt::format("socket: {}", Errno(errno)));
  return FinishConnect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr), deadline, "shm://" + path);
}

Status SendAllBy(int fd, std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      CELL_RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, "sending"));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return Status::Unavailable(fmt::format("send failed: {}", Errno(errno)));
    }
  }
  return Status::OK();
}

Status ReceiveFrameBy(int fd, FrameDecoder& decoder, Clock::time_point deadline, FrameHeader* header,
                      std::string_view* payload) {
  while (true) {
    switch (decoder.Next(header, payload)) {
      case FrameDecoder::Result::kFrame:
        return Status::OK();
      case FrameDecoder::Result::kMalformed:
        return decoder.error();
      case FrameDecoder::Result::kNeedMore:
        break;
    }
    const size_t want = decoder.BytesWanted();
    char* room = decoder.PrepareAppend(want);
    const ssize_t n = recv(fd, room, want, 0);
    if (n > 0) {
      decoder.Commit(static_cast<size_t>(n));
    } else if (n == 0) {
      return Status::Unavailable("connection closed by the peer");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      CELL_RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, "waiting for a reply"));
    } else if (errno != EINTR) {
      return Status::Unavailable(fmt::format("recv failed: {}", Errno(errno)));
    }
  }
}

Status SendWithDescriptor(int fd, std::string_view bytes, int fd_to_pass, Clock::time_point deadline) {
  CELL_RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, "sending a descriptor"));
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd_to_pass, sizeof(int));
  const ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
  if (n < 0) return Status::Unavailable(fmt::format("sendmsg failed: {}", Errno(errno)));
  // The descriptor went with the first byte; the rest, if the buffer was short, follows as plain bytes.
  return SendAllBy(fd, bytes.substr(static_cast<size_t>(n)), deadline);
}

Status ReceiveWithDescriptor(int fd, char* out, size_t length, int* received_fd, Clock::time_point deadline) {
  *received_fd = -1;
  size_t got = 0;
  while (got < length) {
    iovec iov{out + got, length - got};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n > 0) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {  // keep the first descriptor; close any extra a peer sent
          int passed = -1;
          std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          if (*received_fd < 0) {
            *received_fd = passed;
          } else {
            close(passed);
          }
        }
      }
      if (msg.msg_flags & MSG_CTRUNC) {
        if (*received_fd >= 0) close(*received_fd);
        *received_fd = -1;
        return Status::Unavailable("a descriptor message was truncated");
      }
      got += static_cast<size_t>(n);
    } else if (n == 0) {
      return Status::Unavailable("connection closed by the peer");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      CELL_RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, "waiting for a descriptor"));
    } else if (errno != EINTR) {
      return Status::Unavailable(fmt::format("recvmsg failed: {}", Errno(errno)));
    }
  }
  return Status::OK();
}

bool SendQueued(int fd, std::string* out, size_t* sent) {
  while (*sent < out->size()) {
    const ssize_t n = send(fd, out->data() + *sent, out->size() - *sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      *sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    } else {
      return false;
    }
  }
  out->clear();
  *sent = 0;
  return true;
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void PinThisThread(int cpu, const char* what) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) {
    diag::Warning("cannot pin {} thread to CPU {}: no such CPU; it runs unpinned", what, cpu);
    return;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
    diag::Warning("cannot pin {} thread to CPU {}; it runs unpinned", what, cpu);
  }
}

int WaitForEvent(int epoll_fd, epoll_event* ev, std::chrono::microseconds poll) {
  int n = 0;
  if (poll.count() > 0) {
    const auto until = std::chrono::steady_clock::now() + poll;
    do {
      n = epoll_wait(epoll_fd, ev, 1, 0);
      if (n < 0 && errno == EINTR) n = 0;
    } while (n == 0 && std::chrono::steady_clock::now() < until);
  }
  if (n == 0) n = epoll_wait(epoll_fd, ev, 1, -1);
  return n;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace cell::rpc
