// The one place that names every transport: URI parsing and the Listen/Connect factories.
#include "rpc/transport.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <charconv>
#include <future>

#include "rpc/shm/shm_transport.h"
#include "rpc/tcp/tcp_transport.h"
#include "rpc/verbs/verbs_transport.h"

namespace cell::rpc {

Responder& Responder::operator=(Responder&& other) noexcept {
  if (this != &other) {
    if (sink_) Fail(Status::Internal("the server replaced a request's responder without answering"));
    sink_ = std::move(other.sink_);
    id_ = other.id_;
  }
  return *this;
}

Responder::~Responder() {
  if (sink_) Fail(Status::Internal("the server dropped the request without answering it"));
}

void Responder::Reply(std::string_view payload) {
  if (!sink_) return;
  sink_->Send(id_, Status::OK(), payload);
  sink_.reset();
}

void Responder::Fail(const Status& status) {
  if (!sink_) return;
  sink_->Send(id_, status.ok() ? Status::Internal("Fail() called with OK") : status, {});
  sink_.reset();
}

StatusOr<Endpoint> Endpoint::Parse(std::string_view uri) {
  Endpoint e;
  const size_t sep = uri.find("://");
  if (sep == std::string_view::npos) {
    return Status::InvalidArgument(
        fmt::format("'{}' is not a transport URI (tcp://host:port, shm:///path or verbs://host:port)", uri));
  }
  const std::string_view scheme = uri.substr(0, sep);
  const std::string_view rest = uri.substr(sep + 3);
  if (scheme == "shm") {
    if (rest.empty() || rest[0] != '/') {
      return Status::InvalidArgument(fmt::format("'{}': shm URIs name an absolute socket path, shm:///path", uri));
    }
    e.scheme = Scheme::kShm;
    e.path = std::string(rest);
    return e;
  }
  if (scheme == "tcp") {
    e.scheme = Scheme::kTcp;
  } else if (scheme == "verbs") {
    e.scheme = Scheme::kVerbs;
  } else {
    return Status::InvalidArgument(fmt::format("'{}': unknown transport '{}' (tcp, shm or verbs)", uri, scheme));
  }
  const size_t colon = rest.rfind(':');
  unsigned port = 0;
  if (colon == std::string_view::npos || colon == 0 ||
      std::from_chars(rest.data() + colon + 1, rest.data() + rest.size(), port).ptr != rest.data() + rest.size() ||
      colon + 1 == rest.size() || port > 65535) {
    return Status::InvalidArgument(fmt::format("'{}': expected {}://host:port with a port of 0..65535", uri, scheme));
  }
  e.host = std::string(rest.substr(0, colon));
  e.port = static_cast<uint16_t>(port);
  return e;
}

StatusOr<std::unique_ptr<Server>> Listen(std::string_view uri, const ServerOptions& options, RpcHandler* handler) {
  if (options.workers < 1 || options.workers > 1024) {
    return Status::InvalidArgument(fmt::format("--workers must be 1..1024, not {}", options.workers));
  }
  if (options.nic_threads < 1 || options.nic_threads > 1024) {
    return Status::InvalidArgument(fmt::format("--nic-threads must be 1..1024, not {}", options.nic_threads));
  }
  if (options.max_message_bytes < 4096) {
    return Status::InvalidArgument(
        fmt::format("the message limit must be at least 4096 bytes, not {}", options.max_message_bytes));
  }
  if (handler == nullptr) return Status::InvalidArgument("Listen needs a request handler");
  auto endpoint = Endpoint::Parse(uri);
  if (!endpoint.ok()) return endpoint.status();
  switch (endpoint->scheme) {
    case Endpoint::Scheme::kTcp:
      return tcp::Listen(*endpoint, options, handler);
    case Endpoint::Scheme::kShm:
      return shm::Listen(*endpoint, options, handler);
    case Endpoint::Scheme::kVerbs:
      return verbs::Listen(*endpoint, options, handler);
  }
  return Status::Internal("unreachable");
}

StatusOr<std::unique_ptr<Connection>> Connect(std::string_view uri, const ConnectOptions& options) {
  if (options.max_message_bytes < 4096) {
    return Status::InvalidArgument(
        fmt::format("the message limit must be at least 4096 bytes, not {}", options.max_message_bytes));
  }
  auto endpoint = Endpoint::Parse(uri);
  if (!endpoint.ok()) return endpoint.status();
  switch (endpoint->scheme) {
    case Endpoint::Scheme::kTcp:
      return tcp::Connect(*endpoint, options);
    case Endpoint::Scheme::kShm:
      return shm::Connect(*endpoint, options);
    case Endpoint::Scheme::kVerbs:
      return verbs::Connect(*endpoint, options);
  }
  return Status::Internal("unreachable");
}

StatusOr<std::unique_ptr<Connection>> ConnectFirst(const std::map<std::string, std::string>& addresses,
                                                   const std::vector<std::string>& transports, ConnectOptions options,
                                                   const std::function<std::chrono::milliseconds()>& time_left) {
  std::string errors;
  bool denied = false;
  for (const std::string& transport : transports) {
    const auto address = addresses.find(transport);
    if (address == addresses.end()) continue;
    if (time_left) options.connect_timeout = time_left();
    auto connection = Connect(address->second, options);
    if (connection.ok()) return connection;
    denied |= connection.status().IsPermissionDenied();
    errors += fmt::format("{}{}: {}", errors.empty() ? "" : "; ", address->second, connection.status().message());
  }
  if (errors.empty()) {
    return Status::Unavailable(fmt::format("it offers none of the transports tried ({})", fmt::join(transports, ", ")));
  }
  // A refused key is final (retrying cannot help); anything else may pass.
  return denied ? Status::PermissionDenied(errors) : Status::Unavailable(errors);
}

StatusOr<std::string> CallSync(Connection& connection, uint16_t method, std::string_view request,
                               std::chrono::microseconds timeout) {
  std::promise<StatusOr<std::string>> promise;
  auto future = promise.get_future();
  connection.Call(
      method, request,
      [&promise](const Status& s, std::string_view response) {
        if (s.ok()) {
          promise.set_value(std::string(response));
        } else {
          promise.set_value(s);
        }
      },
      timeout.count() > 0 ? Clock::now() + timeout : Clock::time_point{});
  FlushHeldSends();
  return future.get();
}

namespace {
thread_local bool transport_thread = false;
}  // namespace

bool OnTransportThread() { return transport_thread; }
void MarkTransportThread() { transport_thread = true; }

Status ReadSync(Connection& connection, GlobalPtr remote, uint32_t length, void* dest) {
  return connection.ReadNow(remote, length, dest);
}

uint64_t Connection::NextSerial() {
  static std::atomic<uint64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) + 1;
}

StatusOr<std::span<const char>> Connection::RegionInPlace(uint32_t) {
  return Status::FailedPrecondition(
      fmt::format("connection to {} copies what it reads: it cannot read in place", uri()));
}

Status Connection::ReadNow(GlobalPtr remote, uint32_t length, void* dest) {
  // Client-side searches issue one read per node, and shm reads complete inline: no promise, no allocation per read.
  // Each thread has one completion slot (it waits for one read at a time); the callback holds a reference, so a
  // notify that comes after the waiter has moved on (or exited) still finds the slot.
  struct Slot {
    std::atomic<uint64_t> done{0};  // the sequence number of the last completed read
    Status status;
  };
  thread_local const std::shared_ptr<Slot> slot = std::make_shared<Slot>();
  thread_local uint64_t issued = 0;
  const uint64_t mine = ++issued;
  const std::shared_ptr<Slot>& s = slot;
  Read(remote, length, dest, [s, mine](const Status& status) {
    s->status = status;
    s->done.store(mine, std::memory_order_release);
    s->done.notify_one();
  });
  FlushHeldSends();
  for (uint64_t seen = s->done.load(std::memory_order_acquire); seen != mine;
       seen = s->done.load(std::memory_order_acquire)) {
    s->done.wait(seen, std::memory_order_acquire);
  }
  return s->status;
}

}  // namespace cell::rpc
