#include "rpc/socket_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/diagnostics.h"
#include "common/shared_words.h"
#include "rpc/auth.h"
#include "rpc/frame.h"
#include "rpc/socket_util.h"

namespace cell::rpc {
namespace {

constexpr int kMaxReceivesPerTurn = 8;  // then the connection goes to the back of the queue (fairness)
// A connection whose unsent replies exceed this is not served further (its buffered requests wait, nothing more is
// read) until they drain: a few bytes of pipelined read requests must not make the server allocate gigabytes.
constexpr size_t kOutputBudget = 4 << 20;
// A turn that serves many requests sends their replies every this many, so that the client works on the first ones
// while the server serves the rest.
constexpr int kRepliesPerSend = 8;

std::string PeerName(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 && addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    return fmt::format("{}:{}", text, ntohs(in->sin_port));
  }
  return fmt::format("local socket {}", fd);
}

}  // namespace

class SocketServer::Conn final : public Responder::Sink, public std::enable_shared_from_this<Conn> {
 public:
  Conn(int fd, std::string peer, uint32_t max_message, const std::vector<Key>* keys)
      : fd(fd),
        peer(std::move(peer)),
        decoder(max_message),
        max_message(max_message),
        reply_limit(max_message),
        auth(keys) {}
  ~Conn() override { close(fd); }

  void Send(uint64_t request_id, const Status& status, std::string_view payload) override {
    std::unique_lock lock(mu);
    if (closed) return;  // the client is gone; nobody waits for this reply
    AppendReplyLocked(request_id, status, payload);
    if (owned) return;  // the worker serving the connection flushes it at the end of its turn
    // Answered later, from another thread, while no worker owns the connection: send what the socket takes now, and
    // leave the rest to the worker pool (EPOLLOUT hands the connection to a worker when the socket has room). Never
    // wait here: the thread answering (e.g. a log's committer, answering every write its fdatasync covered) must not
    // be held up by a client that reads slowly.
    if (!FlushLocked()) {
      shutdown(fd, SHUT_RDWR);  // the worker that next sees the connection closes it
      return;
    }
    if (out.empty() || epoll_fd < 0) return;
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLONESHOT;
    ev.data.ptr = this;
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, fd, &ev);
  }

  void AppendReplyLocked(uint64_t request_id, const Status& status, std::string_view payload) {
    if (status.ok() && payload.size() <= reply_limit) {
      AppendFrame(out, FrameType::kResponse, 0, request_id, payload);
      return;
    }
    const Status error = ReplyError(status, payload.size(), reply_limit);
    AppendFrame(out, FrameType::kError, static_cast<uint16_t>(error.code()), request_id, error.message());
  }

  // Sends what it can without blocking; false if the socket failed.
  bool FlushLocked() { return SendQueued(fd, &out, &sent); }

  const int fd;
  const std::string peer;
  FrameDecoder decoder;        // touched only by the thread that owns the connection (EPOLLONESHOT)
  const uint32_t max_message;  // what this server accepts
  // Touched only by the thread that owns the connection, like the decoder.
  proto::Role role = proto::ROLE_UNSPECIFIED;        // set once the handshake is done
  proto::Role hello_role = proto::ROLE_UNSPECIFIED;  // what the Hello asked for, while its key is being proved
  uint32_t reply_limit;                              // what the client accepts (its Hello says), at most max_message
  ServerAuth auth;

  std::mutex mu;  // guards what follows
  std::string out;
  size_t sent = 0;
  bool owned = false;  // a pool thread is serving the connection and will flush `out`
  bool closed = false;
  int epoll_fd = -1;  // the epoll set (pool) the connection is in
};

SocketServer::SocketServer(std::string uri, int listen_fd, const ServerOptions& options, Personality personality,
                           RpcHandler* handler)
    : uri_(std::move(uri)), listen_fd_(listen_fd), options_(options), personality_(personality), handler_(handler) {}

SocketServer::~SocketServer() { Stop(); }

Status SocketServer::Start() {
  workers_.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  nics_.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (workers_.epoll_fd < 0 || nics_.epoll_fd < 0 || wake_fd_ < 0) {
    return Status::Unavailable(fmt::format("epoll/eventfd: {}", std::strerror(errno)));
  }
  for (Pool* pool : {&workers_, &nics_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;  // level-triggered and never read: once written, it wakes every thread of both pools
    ev.data.ptr = nullptr;
    epoll_ctl(pool->epoll_fd, EPOLL_CTL_ADD, wake_fd_, &ev);
  }
  for (int i = 0; i < options_.workers; ++i) {
    workers_.threads.emplace_back([this, i] { PoolLoop(&workers_, i, options_.worker_cpus, "worker"); });
  }
  if (personality_.serve_reads) {
    for (int i = 0; i < options_.nic_threads; ++i) {
      nics_.threads.emplace_back([this, i] { PoolLoop(&nics_, i, options_.nic_cpus, "NIC"); });
    }
  }
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return Status::OK();
}

void SocketServer::Stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopping_.exchange(true)) return;
  shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  if (acceptor_.joinable()) acceptor_.join();
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  }
  for (Pool* pool : {&workers_, &nics_}) {
    for (auto& t : pool->threads) t.join();
    pool->threads.clear();
  }
  std::unordered_map<Conn*, std::shared_ptr<Conn>> conns;
  {
    std::lock_guard lock(conns_mu_);
    conns.swap(conns_);
  }
  for (auto& [raw, conn] : conns) {
    std::lock_guard lock(conn->mu);
    conn->closed = true;
    shutdown(conn->fd, SHUT_RDWR);
  }
  close(listen_fd_);
  for (int fd : {workers_.epoll_fd, nics_.epoll_fd, wake_fd_}) {
    if (fd >= 0) close(fd);
  }
}

Status SocketServer::RegisterRegion(const RegionRegistration& region) {
  if (!personality_.serve_reads && !personality_.share_regions) {
    return Status::FailedPrecondition("this transport does not serve one-sided reads");
  }
  if (personality_.share_regions && region.fd < 0) {
    return Status::InvalidArgument(
        fmt::format("region {} has no file descriptor: shm clients can only map memfd-backed regions", region.id));
  }
  return regions_.Add(region);
}

double SocketServer::PoolCpuSeconds(const Pool& pool) {
  double total = pool.exited_cpu_seconds.load();
  std::lock_guard lock(pool.clocks_mu);
  for (clockid_t clock : pool.clocks) {
    timespec ts{};
    if (clock_gettime(clock, &ts) == 0) total += static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
  }
  return total;
}

ServerStats SocketServer::stats() const {
  ServerStats s;
  s.requests = requests_.load(std::memory_order_relaxed);
  s.reads = reads_.load(std::memory_order_relaxed);
  s.read_bytes = read_bytes_.load(std::memory_order_relaxed);
  s.connections_closed_for_protocol_errors = protocol_errors_.load(std::memory_order_relaxed);
  s.worker_cpu_seconds = PoolCpuSeconds(workers_);
  s.nic_cpu_seconds = PoolCpuSeconds(nics_);
  return s;
}

void SocketServer::AcceptLoop() {
  while (!stopping_.load()) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (stopping_.load() || err == EBADF || err == EINVAL || err == ENOTSOCK) break;
      if (err == EINTR || err == ECONNABORTED || err == EAGAIN) continue;
      // Out of descriptors or memory, or a network error accept(2) says to retry: back off and try again.
      diag::Error("{}: cannot accept a connection: {}; retrying", uri_, std::strerror(err));
      pollfd p{listen_fd_, 0, 0};
      poll(&p, 1, 100);
      continue;
    }
    SetNoDelay(fd);
    auto conn = std::make_shared<Conn>(fd, PeerName(fd), options_.max_message_bytes, &options_.keys);
    {
      std::lock_guard lock(conns_mu_);
      conns_[conn.get()] = conn;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLONESHOT;
    ev.data.ptr = conn.get();
    {
      std::lock_guard lock(conn->mu);
      conn->epoll_fd = workers_.epoll_fd;
    }
    if (epoll_ctl(workers_.epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      diag::Error("{}: cannot serve connection from {}: epoll_ctl: {}", uri_, conn->peer, std::strerror(errno));
      std::lock_guard lock(conns_mu_);
      conns_.erase(conn.get());  // closes it: the client sees the connection refused
    }
  }
}

void SocketServer::PoolLoop(Pool* pool, int index, const std::vector<int>& cpus, const char* what) {
  if (!cpus.empty()) PinThisThread(cpus[static_cast<size_t>(index) % cpus.size()], what);
  clockid_t clock{};
  pthread_getcpuclockid(pthread_self(), &clock);
  {
    std::lock_guard lock(pool->clocks_mu);
    pool->clocks.push_back(clock);
  }
  while (true) {
    epoll_event ev{};
    const int n = WaitForEvent(pool->epoll_fd, &ev, options_.poll);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      diag::Error("{}: epoll_wait failed: {}", uri_, std::strerror(errno));
      break;
    }
    if (n == 0) continue;
    if (ev.data.ptr == nullptr) break;  // Stop()
    Serve(static_cast<Conn*>(ev.data.ptr), pool);
  }
  {
    std::lock_guard lock(pool->clocks_mu);
    std::erase(pool->clocks, clock);
    double expected = pool->exited_cpu_seconds.load();
    while (!pool->exited_cpu_seconds.compare_exchange_weak(expected, expected + ThreadCpuSeconds())) {
    }
  }
}

void SocketServer::Serve(Conn* conn, Pool* pool) {
  bool over_budget;
  {
    std::lock_guard lock(conn->mu);
    if (conn->owned || conn->closed) return;  // defensive: EPOLLONESHOT hands a connection to one thread at a time
    conn->owned = true;
    over_budget = conn->out.size() - conn->sent >= kOutputBudget;
  }
  std::string close_reason;
  bool peer_gone = false;
  for (int i = 0; i < kMaxReceivesPerTurn && !over_budget; ++i) {
    const size_t want = std::max(kReceiveChunk, conn->decoder.BytesWanted());
    char* room = conn->decoder.PrepareAppend(want);
    const ssize_t n = recv(conn->fd, room, want, 0);
    if (n > 0) {
      conn->decoder.Commit(static_cast<size_t>(n));
      if (static_cast<size_t>(n) < want) break;
    } else if (n == 0) {
      peer_gone = true;
      break;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else if (errno != EINTR) {
      peer_gone = true;
      break;
    }
  }

  Pool* move_to = nullptr;
  bool ok = true;
  int served = 0;
  FrameHeader header;
  std::string_view payload;
  while (ok && !over_budget) {
    const auto r = conn->decoder.Next(&header, &payload);
    if (r == FrameDecoder::Result::kNeedMore) break;
    if (r == FrameDecoder::Result::kMalformed) {
      close_reason = conn->decoder.error().message();
      ok = false;
      break;
    }
    ok = Dispatch(conn, header, payload, &move_to);  // on false, Dispatch has logged why
    std::lock_guard lock(conn->mu);
    over_budget = conn->out.size() - conn->sent >= kOutputBudget;
    if (++served % kRepliesPerSend == 0 && !conn->FlushLocked()) {
      peer_gone = true;  // the socket failed: close the connection, leaving no request unserved in an open one
      break;
    }
  }
  conn->decoder.Consume();

  std::unique_lock lock(conn->mu);
  const bool flushed = conn->FlushLocked();
  if (!ok || peer_gone || !flushed) {
    lock.unlock();
    if (!ok) protocol_errors_.fetch_add(1, std::memory_order_relaxed);
    CloseConn(conn, ok ? "" : close_reason);
    return;
  }
  conn->owned = false;
  epoll_event ev{};
  // A client that does not read its replies is not read from either, until the replies drain (back-pressure). Over
  // budget, requests still buffered wait for the next turn, which EPOLLOUT brings as soon as the socket has room.
  ev.events = (conn->out.empty() && !over_budget ? EPOLLIN : EPOLLOUT) | EPOLLONESHOT;
  ev.data.ptr = conn;
  if (move_to != nullptr && move_to != pool) {
    epoll_ctl(pool->epoll_fd, EPOLL_CTL_DEL, conn->fd, nullptr);
    conn->epoll_fd = move_to->epoll_fd;
    epoll_ctl(move_to->epoll_fd, EPOLL_CTL_ADD, conn->fd, &ev);
  } else {
    epoll_ctl(pool->epoll_fd, EPOLL_CTL_MOD, conn->fd, &ev);
  }
}

bool SocketServer::Dispatch(Conn* conn, const FrameHeader& header, std::string_view payload, Pool** move_to) {
  switch (conn->role) {
    case proto::ROLE_RPC:
      if (header.type != FrameType::kRequest) break;
      if (options_.authorize) {
        if (Status allowed = options_.authorize(header.aux, conn->auth.key_name()); !allowed.ok()) {
          diag::Warning("{}: closing connection from {}: {}", uri_, conn->peer, allowed.message());
          std::lock_guard lock(conn->mu);
          conn->AppendReplyLocked(header.request_id, allowed, {});
          return false;
        }
      }
      requests_.fetch_add(1, std::memory_order_relaxed);
      handler_->Handle(header.aux, payload, Responder(conn->shared_from_this(), header.request_id));
      return true;

    case proto::ROLE_READ: {
      if (header.type != FrameType::kReadRequest) break;
      proto::ReadRequest request;
      if (!request.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) break;
      StatusOr<const char*> src = regions_.Resolve(request.region(), request.offset(), request.length());
      if (src.ok() && request.length() > conn->reply_limit) {
        src = Status::InvalidArgument(fmt::format("one-sided read of {} bytes exceeds the message limit of {} bytes",
                                                  request.length(), conn->reply_limit));
      }
      std::lock_guard lock(conn->mu);
      if (!src.ok()) {
        conn->AppendReplyLocked(header.request_id, src.status(), {});
        return true;
      }
      const size_t at = conn->out.size();
      conn->out.resize(at + kFrameHeaderBytes + request.length());
      EncodeFrameHeader(FrameHeader{FrameType::kReadResponse, 0, request.length(), header.request_id},
                        conn->out.data() + at);
      // Region memory may be changing under us, as under a NIC: copy it with word loads (common/shared_words.h).
      CopyBytesFromShared(conn->out.data() + at + kFrameHeaderBytes, *src, request.length());
      reads_.fetch_add(1, std::memory_order_relaxed);
      read_bytes_.fetch_add(request.length(), std::memory_order_relaxed);
      return true;
    }

    case proto::ROLE_MAP:
      if (header.type != FrameType::kMapRequest) break;
      return AnswerMapRequest(conn->fd, header.request_id, payload);

    default:
      return Handshake(conn, header, payload, move_to);
  }
  diag::Warning("{}: closing connection from {}: unexpected or unparsable frame (type {}) for a {} connection", uri_,
                conn->peer, static_cast<int>(header.type), proto::Role_Name(conn->role));
  return false;
}

bool SocketServer::Handshake(Conn* conn, const FrameHeader& header, std::string_view payload, Pool** move_to) {
  // Refuses the connection with `why`: the client reads it as the answer to its Hello or proof.
  auto refuse = [&](const Status& why) {
    diag::Warning("{}: closing connection from {}: {}", uri_, conn->peer, why.message());
    std::lock_guard lock(conn->mu);
    conn->AppendReplyLocked(header.request_id, why, {});
    return false;
  };
  // The connection's role starts once the client is known; its reads move to the NIC threads.
  auto begin = [&] {
    conn->role = conn->hello_role;
    if (conn->role == proto::ROLE_READ) *move_to = &nics_;
  };
  if (conn->auth.awaiting_proof()) {
    if (header.type != FrameType::kAuth) {
      return refuse(Status::PermissionDenied("the connection sent a request before proving its key"));
    }
    if (Status s = conn->auth.OnProof(payload, uri_); !s.ok()) return refuse(s);
    std::lock_guard lock(conn->mu);
    AppendFrame(conn->out, FrameType::kAuthReply, 0, header.request_id, {});
    begin();
    return true;
  }
  if (header.type != FrameType::kHello) {
    diag::Warning("{}: closing connection from {}: its first frame was not a Hello", uri_, conn->peer);
    return false;
  }
  if (Status admitted = AdmitPeer(conn->fd); !admitted.ok()) return refuse(admitted);
  proto::Hello hello;
  if (!hello.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    diag::Warning("{}: closing connection from {}: unparsable Hello", uri_, conn->peer);
    return false;
  }
  const proto::Role role = hello.role();
  const bool allowed = role == proto::ROLE_RPC || (role == proto::ROLE_READ && personality_.serve_reads) ||
                       (role == proto::ROLE_MAP && personality_.share_regions);
  if (!allowed) {
    return refuse(
        Status::InvalidArgument(fmt::format("this server does not accept {} connections", proto::Role_Name(role))));
  }
  proto::HelloReply reply;
  if (Status s = conn->auth.OnHello(hello, uri_, &reply); !s.ok()) return refuse(s);
  conn->hello_role = role;
  if (hello.max_message_bytes() != 0) conn->reply_limit = std::min(conn->max_message, hello.max_message_bytes());
  reply.set_max_message_bytes(options_.max_message_bytes);
  FillHelloReply(&reply);
  std::lock_guard lock(conn->mu);
  AppendFrame(conn->out, FrameType::kHelloReply, 0, header.request_id, reply.SerializeAsString());
  if (conn->auth.authenticated()) begin();  // no key required
  return true;
}

void SocketServer::CloseConn(Conn* conn, const std::string& reason) {
  {
    std::lock_guard lock(conn->mu);
    if (conn->closed) return;
    conn->closed = true;
  }
  epoll_ctl(workers_.epoll_fd, EPOLL_CTL_DEL, conn->fd, nullptr);
  epoll_ctl(nics_.epoll_fd, EPOLL_CTL_DEL, conn->fd, nullptr);
  shutdown(conn->fd, SHUT_RDWR);
  // One line per closed connection, at most ten a second (a flood of bad clients must not flood the diagnostics).
  static diag::RateLimit closes;
  if (uint64_t dropped = 0; !reason.empty() && closes.Allow(&dropped)) {
    diag::Warning("{}: closed connection from {}: {}{}", uri_, conn->peer, reason,
                  dropped == 0 ? "" : fmt::format(" ({} more closed since, not shown)", dropped));
  }
  std::lock_guard lock(conns_mu_);
  conns_.erase(conn);  // the descriptor closes when the last Responder lets go of the connection
}

}  // namespace cell::rpc
