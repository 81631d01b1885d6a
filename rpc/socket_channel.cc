#include "rpc/socket_channel.h"

#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "rpc/auth.h"
#include "rpc/socket_util.h"

namespace cell::rpc {
namespace {

// The calling thread's holds (BeginHoldingSends), and the channels it queued requests on since it last flushed.
thread_local int hold_depth = 0;
thread_local std::vector<std::shared_ptr<SocketChannel::HeldRef>> held;

}  // namespace

void BeginHoldingSends() { ++hold_depth; }

void EndHoldingSends() {
  if (hold_depth > 0 && --hold_depth == 0) FlushHeldSends();
}

void FlushHeldSends() {
  if (held.empty()) return;
  std::vector<std::shared_ptr<SocketChannel::HeldRef>> refs;
  refs.swap(held);
  for (const auto& ref : refs) {
    std::lock_guard ref_lock(ref->mu);
    if (ref->channel == nullptr) continue;  // closed meanwhile: its requests failed with it
    std::lock_guard lock(ref->channel->mu_);
    if (!ref->channel->WriteQueuedLocked()) shutdown(ref->channel->fd_, SHUT_RDWR);
  }
}

Status ExchangeHello(int fd, const std::string& uri, proto::Role role, const ConnectOptions& options,
                     proto::HelloReply* reply) {
  const auto deadline = Clock::now() + options.connect_timeout;
  ClientAuth auth(options.key);
  proto::Hello hello;
  hello.set_role(role);
  hello.set_max_message_bytes(options.max_message_bytes);
  auth.FillHello(&hello);
  FrameDecoder decoder(options.max_message_bytes);
  // Sends one handshake frame and receives the answer, which must be of type `expect` (or an error).
  auto exchange = [&](FrameType type, const std::string& payload, FrameType expect, std::string* answer) -> Status {
    std::string frame;
    AppendFrame(frame, type, 0, 0, payload);
    CELL_RETURN_IF_ERROR(SendAllBy(fd, frame, deadline));
    FrameHeader header;
    std::string_view received;
    CELL_RETURN_IF_ERROR(ReceiveFrameBy(fd, decoder, deadline, &header, &received));
    if (header.type == FrameType::kError) return ErrorFromFrame(header.aux, received);
    if (header.type != expect) {
      return Status::Unavailable(
          fmt::format("unexpected frame type {} in the handshake", static_cast<int>(header.type)));
    }
    answer->assign(received);
    decoder.Consume();
    return Status::OK();
  };
  std::string answer;
  Status s = exchange(FrameType::kHello, hello.SerializeAsString(), FrameType::kHelloReply, &answer);
  if (s.ok() && !reply->ParseFromString(answer)) s = Status::Unavailable("unparsable reply to Hello");
  std::string proof;
  if (s.ok()) s = auth.OnHelloReply(*reply, uri, &proof);
  if (s.ok() && !proof.empty()) s = exchange(FrameType::kAuth, proof, FrameType::kAuthReply, &answer);
  if (s.IsPermissionDenied()) return s;  // final: the message says which key is missing
  if (!s.ok()) return Status::Unavailable(fmt::format("cannot set up a connection to {}: {}", uri, s.ToString()));
  return Status::OK();
}

StatusOr<std::unique_ptr<SocketChannel>> SocketChannel::Open(int fd, std::string uri, proto::Role role,
                                                             const ConnectOptions& options, proto::HelloReply* reply) {
  Status s = ExchangeHello(fd, uri, role, options, reply);
  if (!s.ok()) {
    close(fd);
    return s;
  }
  auto channel =
      std::unique_ptr<SocketChannel>(new SocketChannel(fd, std::move(uri), options, reply->max_message_bytes()));
  channel->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  channel->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (channel->epoll_fd_ < 0 || channel->wake_fd_ < 0) {
    return Status::Unavailable(fmt::format("epoll/eventfd: {}", std::strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = channel->fd_;
  epoll_ctl(channel->epoll_fd_, EPOLL_CTL_ADD, channel->fd_, &ev);
  ev.data.fd = channel->wake_fd_;
  epoll_ctl(channel->epoll_fd_, EPOLL_CTL_ADD, channel->wake_fd_, &ev);
  channel->io_ = std::thread([c = channel.get()] { c->IoLoop(); });
  return channel;
}

SocketChannel::SocketChannel(int fd, std::string uri, const ConnectOptions& options, uint32_t server_max)
    : fd_(fd),
      uri_(std::move(uri)),
      options_(options),
      send_limit_(server_max != 0 && server_max < options.max_message_bytes ? server_max : options.max_message_bytes) {
  held_ref_->channel = this;
}

SocketChannel::~SocketChannel() {
  {
    std::lock_guard lock(held_ref_->mu);
    held_ref_->channel = nullptr;
  }
  Close(Status::Unavailable(fmt::format("connection to {} closed by the client", uri_)));
  if (io_.joinable()) io_.join();
  close(fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void SocketChannel::Close(const Status& why) {
  std::lock_guard lock(mu_);
  if (health_.ok()) health_ = why;
  alive_.store(false, std::memory_order_release);
  shutdown(fd_, SHUT_RDWR);  // the I/O thread sees the end of the stream and fails what is waiting
}

Status SocketChannel::health() const {
  // Asked per operation (the client's connection cache): a live channel answers without the lock.
  if (alive_.load(std::memory_order_acquire)) return Status::OK();
  std::lock_guard lock(mu_);
  return health_;
}

void SocketChannel::Call(uint16_t method, std::string_view request, RpcCallback done, Clock::time_point deadline) {
  Pending p;
  p.rpc = std::move(done);
  p.deadline = deadline != Clock::time_point{} ? deadline : Clock::now() + options_.call_timeout;
  if (request.size() > send_limit_) {
    p.rpc(Status::InvalidArgument(
              fmt::format("request of {} bytes exceeds the message limit of {} bytes", request.size(), send_limit_)),
          {});
    return;
  }
  Status s = Issue(p, FrameType::kRequest, method, request);
  if (!s.ok()) p.rpc(s, {});
}

void SocketChannel::Read(GlobalPtr remote, uint32_t length, void* dest, ReadCallback done) {
  Pending p;
  p.read = std::move(done);
  p.dest = dest;
  p.length = length;
  p.deadline = Clock::now() + options_.call_timeout;
  if (length > send_limit_) {
    p.read(Status::InvalidArgument(
        fmt::format("one-sided read of {} bytes exceeds the message limit of {} bytes", length, send_limit_)));
    return;
  }
  proto::ReadRequest request;
  request.set_region(remote.region);
  request.set_offset(remote.offset);
  request.set_length(length);
  char buffer[32];
  const int size = static_cast<int>(request.ByteSizeLong());
  request.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(buffer));
  Status s = Issue(p, FrameType::kReadRequest, 0, std::string_view(buffer, size));
  if (!s.ok()) p.read(s);
}

Status SocketChannel::Issue(Pending& pending, FrameType type, uint16_t aux, std::string_view payload) {
  std::unique_lock lock(mu_);
  if (!health_.ok()) return health_;
  // Held only behind a request in flight, whose reply wakes the I/O thread to write it.
  const bool hold = hold_depth > 0 && !pending_.empty();
  const uint64_t id = next_id_++;
  const auto deadline = pending.deadline;
  if (deadline < earliest_deadline_) earliest_deadline_ = deadline;
  pending_.emplace(id, std::move(pending));
  AppendFrame(out_, type, aux, id, payload);
  if (hold) {
    if (std::find(held.begin(), held.end(), held_ref_) == held.end()) held.push_back(held_ref_);
  } else if (!WriteQueuedLocked()) {
    // The socket failed: the I/O thread sees it too and fails every request, this one included.
    shutdown(fd_, SHUT_RDWR);
  }
  if (deadline < io_wakes_at_) {
    io_wakes_at_ = deadline;
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  }
  return Status::OK();
}

bool SocketChannel::WriteQueuedLocked() {
  if (write_armed_ || out_.empty()) return true;
  if (!FlushLocked()) return false;
  if (!out_.empty()) ArmLocked(true);
  return true;
}

bool SocketChannel::FlushLocked() { return SendQueued(fd_, &out_, &sent_); }

void SocketChannel::ArmLocked(bool want_write) {
  if (write_armed_ == want_write) return;
  write_armed_ = want_write;
  epoll_event ev{};
  ev.events = EPOLLIN | (want_write ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  ev.data.fd = fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd_, &ev);
}

void SocketChannel::FailAll(const Status& why) {
  absl::flat_hash_map<uint64_t, Pending> failed;
  {
    std::lock_guard lock(mu_);
    failed.swap(pending_);
    earliest_deadline_ = Clock::time_point::max();
  }
  for (auto& [id, p] : failed) {
    if (p.rpc) {
      p.rpc(why, {});
    } else {
      p.read(why);
    }
  }
}

void SocketChannel::IoLoop() {
  MarkTransportThread();
  FrameDecoder decoder(options_.max_message_bytes);
  std::vector<Completion> ready;
  Status end;  // set when the connection ends

  while (end.ok()) {
    epoll_event events[2];
    const int n = epoll_wait(epoll_fd_, events, 2, NextWaitMs());
    if (n < 0 && errno != EINTR) {
      end = Status::Unavailable(fmt::format("connection to {} failed: epoll_wait: {}", uri_, std::strerror(errno)));
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_fd_) {
        DrainWakeups();
        continue;
      }
      if (events[i].events & EPOLLOUT) {
        if (Status s = FlushWhenWritable(); !s.ok()) end = s;
      }
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        if (Status s = ReceiveAvailable(decoder); !s.ok()) end = s;
      }
    }

    // Match every whole reply to its request, under one lock; run the callbacks after.
    {
      std::lock_guard lock(mu_);
      if (Status s = MatchRepliesLocked(decoder, &ready); !s.ok()) end = s;
      ExpireLocked(&ready);
      // Requests held behind the ones that just completed (BeginHoldingSends).
      if (end.ok() && !WriteQueuedLocked())
        end = Status::Unavailable(fmt::format("connection to {} lost: send failed", uri_));
    }
    RunCompletions(ready);
    ready.clear();
    decoder.Consume();
  }
  EndIo(end);
}

int SocketChannel::NextWaitMs() {
  std::lock_guard lock(mu_);
  if (pending_.empty()) earliest_deadline_ = Clock::time_point::max();
  io_wakes_at_ = earliest_deadline_;
  if (pending_.empty()) return -1;
  const auto left = io_wakes_at_ - Clock::now();
  return left.count() <= 0
             ? 0
             : static_cast<int>(std::min<int64_t>(std::chrono::ceil<std::chrono::milliseconds>(left).count(), 60000));
}

void SocketChannel::DrainWakeups() {
  uint64_t value;
  [[maybe_unused]] ssize_t r = read(wake_fd_, &value, sizeof(value));
}

Status SocketChannel::FlushWhenWritable() {
  std::lock_guard lock(mu_);
  if (!FlushLocked()) return Status::Unavailable(fmt::format("connection to {} lost: send failed", uri_));
  if (out_.empty()) ArmLocked(false);
  return Status::OK();
}

Status SocketChannel::ReceiveAvailable(FrameDecoder& decoder) {
  while (true) {
    const size_t want = std::max(kReceiveChunk, decoder.BytesWanted());
    char* room = decoder.PrepareAppend(want);
    const ssize_t got = recv(fd_, room, want, 0);
    if (got > 0) {
      decoder.Commit(static_cast<size_t>(got));
      if (static_cast<size_t>(got) < want) return Status::OK();
    } else if (got == 0) {
      return Status::Unavailable(fmt::format("connection to {} closed by the server", uri_));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return Status::OK();
    } else if (errno != EINTR) {
      return Status::Unavailable(fmt::format("connection to {} lost: {}", uri_, std::strerror(errno)));
    }
  }
}

Status SocketChannel::MatchRepliesLocked(FrameDecoder& decoder, std::vector<Completion>* ready) {
  FrameHeader header;
  std::string_view payload;
  while (true) {
    const auto r = decoder.Next(&header, &payload);
    if (r == FrameDecoder::Result::kNeedMore) return Status::OK();
    if (r == FrameDecoder::Result::kMalformed) {
      return Status::Unavailable(
          fmt::format("connection to {} closed: malformed reply: {}", uri_, decoder.error().message()));
    }
    auto it = pending_.find(header.request_id);
    if (it == pending_.end()) continue;  // its caller already timed out
    Completion c{std::move(it->second), Status::OK(), payload};
    pending_.erase(it);
    if (header.type == FrameType::kError) {
      c.status = ErrorFromFrame(header.aux, payload);
    } else if (c.pending.read && (header.type != FrameType::kReadResponse || payload.size() != c.pending.length)) {
      c.status =
          Status::Internal(fmt::format("read reply of {} bytes for a read of {}", payload.size(), c.pending.length));
    } else if (c.pending.rpc && header.type != FrameType::kResponse) {
      c.status =
          Status::Internal(fmt::format("unexpected frame type {} in reply to a call", static_cast<int>(header.type)));
    }
    ready->push_back(std::move(c));
  }
}

void SocketChannel::ExpireLocked(std::vector<Completion>* ready) {
  const auto now = Clock::now();
  if (now < earliest_deadline_) return;
  // A pass over the requests in flight, once the earliest deadline known has passed (its request may have been
  // answered since: the bound is only ever early). With one timeout for all and replies coming, that is about once
  // per timeout; while a stalled server holds N requests, about once per expiry, each pass O(N).
  std::vector<uint64_t> expired;
  Clock::time_point earliest = Clock::time_point::max();
  for (const auto& [id, p] : pending_) {
    if (p.deadline <= now) {
      expired.push_back(id);
    } else {
      earliest = std::min(earliest, p.deadline);
    }
  }
  earliest_deadline_ = earliest;
  std::sort(expired.begin(), expired.end());  // failed in the order they were issued
  for (const uint64_t id : expired) {
    auto it = pending_.find(id);
    ready->push_back(
        Completion{std::move(it->second), Status::DeadlineExceeded(fmt::format("no reply from {} in time", uri_)), {}});
    pending_.erase(it);
  }
}

void SocketChannel::RunCompletions(std::vector<Completion>& ready) {
  for (Completion& c : ready) {
    if (c.pending.rpc) {
      c.pending.rpc(c.status, c.payload);
    } else {
      // Checked above, and again here where it matters: never copy more than the caller's buffer holds.
      if (c.status.ok() && c.payload.size() == c.pending.length) {
        std::memcpy(c.pending.dest, c.payload.data(), c.payload.size());
      }
      c.pending.read(c.status);
    }
  }
}

void SocketChannel::EndIo(Status end) {
  {
    std::lock_guard lock(mu_);
    if (health_.ok()) health_ = end;
    alive_.store(false, std::memory_order_release);
    end = health_;
  }
  shutdown(fd_, SHUT_RDWR);
  FailAll(end);
}

}  // namespace cell::rpc
