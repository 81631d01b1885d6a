// The verbs client connection: rdma_cm connect, RPC over the link, and one thread per connection that waits on the
// completion channel (the reads' bounce slots are filled in verbs_connection_reads.cc). The protocol is described in
// verbs_transport.h.
#include "rpc/verbs/verbs_connection.h"

#include <absl/container/btree_set.h>
#include <absl/container/flat_hash_map.h>
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <atomic>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/diagnostics.h"
#include "rpc/auth.h"
#include "rpc/proto/transport.pb.h"
#include "rpc/region_table.h"
#include "rpc/socket_util.h"
#include "rpc/verbs/verbs_cm.h"
#include "rpc/verbs/verbs_link.h"
#include "rpc/verbs/verbs_resources.h"
#include "rpc/verbs/verbs_transport.h"

namespace cell::rpc::verbs {
namespace {

// Waits for `expected` on the connection's (non-blocking) event channel; Unavailable saying why if another event
// comes or the deadline passes.
Status AwaitCmEvent(rdma_event_channel* ec, rdma_cm_event_type expected, Clock::time_point deadline,
                    const std::string& uri, CmEvent* event) {
  while (true) {
    while (NextCmEvent(ec, event)) {
      if (event->type == expected) return Status::OK();
      switch (event->type) {
        case RDMA_CM_EVENT_REJECTED: {
          std::string_view data = event->private_data;
          if (data.substr(0, kRejectPrefix.size()) == kRejectPrefix) {
            data.remove_prefix(kRejectPrefix.size());
            data = data.substr(0, data.find('\0'));
            return Status::Unavailable(fmt::format("cannot connect to {}: the server refused: {}", uri, data));
          }
          return Status::Unavailable(fmt::format(
              "cannot connect to {}: connection rejected (reason {}; is a Cell verbs server listening there?)", uri,
              event->status));
        }
        case RDMA_CM_EVENT_ADDR_ERROR:
          return Status::Unavailable(fmt::format(
              "cannot connect to {}: address resolution failed ({}): is the host reachable through an RDMA device?",
              uri, std::strerror(std::abs(event->status))));
        case RDMA_CM_EVENT_ROUTE_ERROR:
          return Status::Unavailable(
              fmt::format("cannot connect to {}: no route ({})", uri, std::strerror(std::abs(event->status))));
        case RDMA_CM_EVENT_UNREACHABLE:
          return Status::Unavailable(
              fmt::format("cannot connect to {}: the server is unreachable (status {})", uri, event->status));
        default:
          return Status::Unavailable(fmt::format("cannot connect to {}: {} (status {}) while waiting for {}", uri,
                                                 rdma_event_str(event->type), event->status, rdma_event_str(expected)));
      }
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return Status::Unavailable(fmt::format("cannot connect to {}: {}", uri, Errno("rdma_get_cm_event")));
    }
    const int wait = MillisLeft(deadline);
    if (wait <= 0 && Clock::now() >= deadline) {
      return Status::Unavailable(
          fmt::format("cannot connect to {}: timed out waiting for {}", uri, rdma_event_str(expected)));
    }
    pollfd p{ec->fd, POLLIN, 0};
    poll(&p, 1, std::max(wait, 1));
  }
}

}  // namespace

StatusOr<std::unique_ptr<Connection>> VerbsConnection::Open(const Endpoint& endpoint, const ConnectOptions& options) {
  const std::string uri = Uri(endpoint.host, endpoint.port);
  const auto deadline = Clock::now() + options.connect_timeout;
  auto fail = [&](std::string_view what) {
    return Status::Unavailable(fmt::format("cannot connect to {}: {}", uri, what));
  };
  auto ec = CreateEventChannel();
  if (!ec.ok()) return ec.status();
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(ec->get(), &raw, nullptr, RDMA_PS_TCP) != 0) return fail(Errno("rdma_create_id"));
  CmIdPtr id(raw);
  auto addr = ResolveAddress(endpoint.host, endpoint.port, false);
  if (!addr.ok()) return fail(addr.status().message());
  if (rdma_resolve_addr(id.get(), nullptr, reinterpret_cast<sockaddr*>(&*addr), std::max(1, MillisLeft(deadline))) !=
      0) {
    return fail(Errno("rdma_resolve_addr"));
  }
  CmEvent event;
  CELL_RETURN_IF_ERROR(AwaitCmEvent(ec->get(), RDMA_CM_EVENT_ADDR_RESOLVED, deadline, uri, &event));
  if (rdma_resolve_route(id.get(), std::max(1, MillisLeft(deadline))) != 0) return fail(Errno("rdma_resolve_route"));
  CELL_RETURN_IF_ERROR(AwaitCmEvent(ec->get(), RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, uri, &event));

  PdPtr pd(ibv_alloc_pd(id->verbs));
  if (pd == nullptr) return fail(Errno("ibv_alloc_pd"));
  auto link = Link::Create(id.get(), pd.get(), kReadSlots);
  if (!link.ok()) return fail(link.status().message());
  ibv_device_attr attr{};
  if (int err = ibv_query_device(id->verbs, &attr); err != 0) return fail(Errno("ibv_query_device", err));

  char data[WireHello::kBytes];
  Link::OurHello(options.max_message_bytes).Encode(data);
  rdma_conn_param param{};
  param.private_data = data;
  param.private_data_len = sizeof(data);
  param.initiator_depth = static_cast<uint8_t>(std::min(attr.max_qp_init_rd_atom, 255));  // reads in flight
  param.responder_resources = static_cast<uint8_t>(std::min(attr.max_qp_rd_atom, 255));
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  if (rdma_connect(id.get(), &param) != 0) return fail(Errno("rdma_connect"));
  CELL_RETURN_IF_ERROR(AwaitCmEvent(ec->get(), RDMA_CM_EVENT_ESTABLISHED, deadline, uri, &event));
  WireHello server;
  if (!server.Decode(event.private_data.data(), event.private_data.size())) {
    return fail("the server's accept carried no valid hello (not a Cell verbs server?)");
  }
  (*link)->SetPeer(server);

  const uint32_t send_limit = server.max_message_bytes != 0 && server.max_message_bytes < options.max_message_bytes
                                  ? server.max_message_bytes
                                  : options.max_message_bytes;
  auto connection = std::unique_ptr<VerbsConnection>(new VerbsConnection(uri, options, send_limit));
  connection->ec_ = std::move(*ec);
  connection->id_ = std::move(id);
  connection->pd_ = std::move(pd);
  connection->link_ = std::move(*link);
  if (connection->wake_.fd() < 0) return fail(Errno("eventfd"));
  connection->io_ = std::thread([c = connection.get()] { c->IoLoop(); });
  CELL_RETURN_IF_ERROR(connection->Handshake(deadline));
  return std::unique_ptr<Connection>(std::move(connection));
}

Status VerbsConnection::Handshake(Clock::time_point deadline) {
  ClientAuth auth(options_.key);
  proto::Hello hello;
  hello.set_role(proto::ROLE_RPC);
  hello.set_max_message_bytes(options_.max_message_bytes);
  auth.FillHello(&hello);
  auto answer = Exchange(FrameType::kHello, hello.SerializeAsString(), FrameType::kHelloReply, deadline);
  proto::HelloReply reply;
  Status s = answer.status();
  if (s.ok() && !reply.ParseFromString(*answer)) s = Status::Unavailable("unparsable reply to Hello");
  std::string proof;
  if (s.ok()) s = auth.OnHelloReply(reply, uri_, &proof);
  if (s.ok() && !proof.empty()) s = Exchange(FrameType::kAuth, proof, FrameType::kAuthReply, deadline).status();
  if (s.ok() || s.IsPermissionDenied()) return s;  // a refused key is final: the message says which is missing
  return Status::Unavailable(fmt::format("cannot set up a connection to {}: {}", uri_, s.ToString()));
}

StatusOr<std::string> VerbsConnection::Exchange(FrameType type, std::string_view payload, FrameType expect,
                                                Clock::time_point deadline) {
  std::promise<StatusOr<std::string>> promise;
  auto future = promise.get_future();
  {
    std::lock_guard lock(mu_);
    if (!health_.ok()) return health_;
    const uint64_t id = next_id_++;
    calls_.emplace(id, PendingCall{[&promise](const Status& s, std::string_view answer) {
                                     if (s.ok()) {
                                       promise.set_value(std::string(answer));
                                     } else {
                                       promise.set_value(s);
                                     }
                                   },
                                   deadline, expect});
    deadlines_.emplace(deadline, id);
    if (Status s = link_->SendFrameLocked(type, 0, id, payload); !s.ok()) BreakLocked(s);
    NoteDeadlineLocked(deadline);
  }
  return future.get();  // every call completes: answer, error, deadline, or the connection's end
}

VerbsConnection::~VerbsConnection() {
  Close();
  if (io_.joinable()) io_.join();
}

void VerbsConnection::NoteDeadlineLocked(Clock::time_point deadline) {
  if (deadline < io_wakes_at_) {
    io_wakes_at_ = deadline;
    wake_.Wake();
  }
}

void VerbsConnection::BreakLocked(const Status& why) {
  if (health_.ok()) health_ = Status::Unavailable(fmt::format("connection to {} lost: {}", uri_, why.message()));
  wake_.Wake();
}

void VerbsConnection::Call(uint16_t method, std::string_view request, RpcCallback done, Clock::time_point deadline) {
  if (request.size() > send_limit_) {
    done(Status::InvalidArgument(
             fmt::format("request of {} bytes exceeds the message limit of {} bytes", request.size(), send_limit_)),
         {});
    return;
  }
  if (deadline == Clock::time_point{}) deadline = Clock::now() + options_.call_timeout;
  std::unique_lock lock(mu_);
  if (!health_.ok()) {
    const Status s = health_;
    lock.unlock();
    done(s, {});
    return;
  }
  const uint64_t id = next_id_++;
  calls_.emplace(id, PendingCall{std::move(done), deadline, FrameType::kResponse});
  deadlines_.emplace(deadline, id);
  if (Status s = link_->SendFrameLocked(FrameType::kRequest, method, id, request); !s.ok()) BreakLocked(s);
  NoteDeadlineLocked(deadline);
}

void VerbsConnection::IoLoop() {
  MarkTransportThread();
  Status end;
  pollfd fds[3] = {{link_->comp_fd(), POLLIN, 0}, {ec_->fd, POLLIN, 0}, {wake_.fd(), POLLIN, 0}};
  while (true) {
    int timeout_ms = -1;
    {
      std::lock_guard lock(mu_);
      if (!health_.ok()) break;  // Close(), or a post failed
      io_wakes_at_ = deadlines_.empty() ? Clock::time_point::max() : deadlines_.begin()->first;
      if (!deadlines_.empty()) timeout_ms = MillisLeft(io_wakes_at_);
    }
    const int n = poll(fds, 3, timeout_ms);
    if (n < 0 && errno != EINTR) {
      end = Status::Unavailable(fmt::format("connection to {} failed: poll: {}", uri_, std::strerror(errno)));
      break;
    }
    if (fds[2].revents != 0) wake_.Drain();
    CmEvent event;
    Status lost;
    while (lost.ok() && NextCmEvent(ec_.get(), &event)) {
      if (event.type == RDMA_CM_EVENT_DISCONNECTED) {
        lost = Status::Unavailable(fmt::format("connection to {} lost: the server closed it or died", uri_));
      } else if (event.type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
        lost = Status::Unavailable(fmt::format("connection to {} lost: the RDMA device was removed", uri_));
      } else if (event.type != RDMA_CM_EVENT_TIMEWAIT_EXIT && event.type != RDMA_CM_EVENT_ADDR_CHANGE) {
        lost = Status::Unavailable(
            fmt::format("connection to {} lost: {} (status {})", uri_, rdma_event_str(event.type), event.status));
      }
    }
    // What arrived before the end is delivered first (a refused connection's reason comes just before it).
    ProcessCompletions(&end);
    if (end.ok()) end = lost;
    if (!end.ok()) break;
    ExpireDeadlines();
  }
  {
    std::lock_guard lock(mu_);
    if (health_.ok()) health_ = end;
    end = health_;
    rdma_disconnect(id_.get());  // QP to error: nothing more lands in our buffers; the server hears of it
  }
  FailAll(end);
}

void VerbsConnection::ProcessCompletions(Status* end) {
  link_->DrainCqEvents();
  ibv_wc wc[kCompletionsPerPoll];
  bool armed = false;
  while (end->ok()) {
    const int n = link_->Poll(wc, kCompletionsPerPoll);
    if (n < 0) {
      *end = Status::Unavailable(fmt::format("connection to {} failed: ibv_poll_cq", uri_));
      return;
    }
    if (n == 0) {
      if (armed) return;
      if (Status s = link_->ArmCq(); !s.ok()) {
        *end = Status::Unavailable(fmt::format("connection to {} failed: {}", uri_, s.message()));
        return;
      }
      armed = true;
      continue;
    }
    armed = false;
    ProcessBatch(wc, n, end);
  }
}

void VerbsConnection::ProcessBatch(const ibv_wc* wc, int n, Status* end) {
  bool credit_only[kCompletionsPerPoll] = {};
  std::vector<ReadCallback> reads_done;
  // A failed completion ends the connection, but what completed before it is delivered first: a server that refuses
  // a connection sends its reason, then disconnects, and the flushed receives come after that reason.
  Status failed;
  bool violated = false;  // the server broke the protocol: the connection ends, nothing more is sent or delivered
  {
    std::lock_guard lock(mu_);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        failed = Status::Unavailable(
            fmt::format("connection to {} lost: work completion failed: {}", uri_, ibv_wc_status_str(wc[i].status)));
        n = i;
        break;
      }
      if (!TakeCompletionLocked(wc[i], &credit_only[i], &reads_done, end)) {
        violated = true;
        break;
      }
    }
    if (!violated) {
      PumpReadsLocked();
      if (Status s = link_->FlushLocked(); !s.ok()) BreakLocked(s);
    }
  }
  // Reads that completed before a violation are done (their bytes landed): their callbacks, taken out of the
  // pending reads, are the only ones that would ever call them.
  for (ReadCallback& done : reads_done) done(Status::OK());
  if (violated) return;
  DeliverReplies(wc, n, credit_only, end);
  if (end->ok() && !failed.ok()) *end = failed;
  if (!end->ok()) return;
  RepostReceives(wc, n, credit_only);
}

bool VerbsConnection::TakeCompletionLocked(const ibv_wc& wc, bool* credit_only, std::vector<ReadCallback>* reads_done,
                                           Status* end) {
  switch (WrKindOf(wc.wr_id)) {
    case WrKind::kSend:
    case WrKind::kCredit:
      link_->SendDoneLocked(wc.wr_id);
      break;
    case WrKind::kRecv:
      if (!(wc.wc_flags & IBV_WC_WITH_IMM)) {
        *end = Status::Unavailable(
            fmt::format("connection to {} closed: protocol violation: a SEND without immediate data", uri_));
        return false;
      }
      *credit_only = link_->AcceptImmediateLocked(wc);
      break;
    case WrKind::kRead:
      ReadPieceLandedLocked(WrIndexOf(wc.wr_id), reads_done);
      break;
    default:
      break;
  }
  return true;
}

void VerbsConnection::DeliverReplies(const ibv_wc* wc, int n, const bool* credit_only, Status* end) {
  // Replies: payloads point into the receive buffers (or the reassembly buffer), reposted after the callbacks.
  for (int i = 0; i < n && end->ok(); ++i) {
    if (WrKindOf(wc[i].wr_id) != WrKind::kRecv || credit_only[i]) continue;
    Status s = receiver_.Feed(link_->Received(wc[i]),
                              [&](const FrameHeader& h, std::string_view payload) { OnReplyFrame(h, payload, end); });
    if (!s.ok() && end->ok()) {
      *end = Status::Unavailable(fmt::format("connection to {} closed: malformed reply: {}", uri_, s.message()));
    }
  }
}

void VerbsConnection::OnReplyFrame(const FrameHeader& h, std::string_view payload, Status* end) {
  if (h.type != FrameType::kResponse && h.type != FrameType::kError && h.type != FrameType::kMapReply &&
      h.type != FrameType::kHelloReply && h.type != FrameType::kAuthReply) {
    if (end->ok()) {
      *end = Status::Unavailable(fmt::format("connection to {} closed: unexpected frame type {} from the server", uri_,
                                             static_cast<int>(h.type)));
    }
    return;
  }
  PendingCall call;
  {
    std::lock_guard lock(mu_);
    auto it = calls_.find(h.request_id);
    if (it == calls_.end()) return;  // its caller already timed out
    call = std::move(it->second);
    calls_.erase(it);
    deadlines_.erase({call.deadline, h.request_id});
  }
  if (h.type == FrameType::kError) {
    call.done(ErrorFromFrame(h.aux, payload), {});
  } else if (h.type != call.expect) {
    call.done(Status::Internal(fmt::format("unexpected frame type {} in reply", static_cast<int>(h.type))), {});
  } else {
    call.done(Status::OK(), payload);
  }
}

void VerbsConnection::RepostReceives(const ibv_wc* wc, int n, const bool* credit_only) {
  std::lock_guard lock(mu_);
  for (int i = 0; i < n; ++i) {
    if (WrKindOf(wc[i].wr_id) != WrKind::kRecv) continue;
    if (Status s = link_->RepostLocked(wc[i].wr_id, !credit_only[i]); !s.ok()) {
      BreakLocked(s);
      return;
    }
  }
  if (Status s = link_->FlushLocked(); !s.ok()) BreakLocked(s);
}

void VerbsConnection::ExpireDeadlines() {
  std::vector<RpcCallback> calls;
  std::vector<ReadCallback> reads;
  {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      const uint64_t id = deadlines_.begin()->second;
      deadlines_.erase(deadlines_.begin());
      if (auto it = calls_.find(id); it != calls_.end()) {
        calls.push_back(std::move(it->second.done));
        calls_.erase(it);
      } else if (auto r = reads_.find(id); r != reads_.end()) {
        reads.push_back(std::move(r->second->done));  // its slots stay busy until their READs complete
        reads_.erase(r);
      }
    }
  }
  for (auto& done : calls) done(Status::DeadlineExceeded(fmt::format("no reply from {} in time", uri_)), {});
  for (auto& done : reads) {
    done(Status::DeadlineExceeded(fmt::format("one-sided read from {} did not complete in time", uri_)));
  }
}

void VerbsConnection::FailAll(const Status& why) {
  absl::flat_hash_map<uint64_t, PendingCall> calls;
  absl::flat_hash_map<uint64_t, std::unique_ptr<ReadOp>> reads;
  std::vector<WaitingRead> waiting;
  {
    std::lock_guard lock(mu_);
    calls.swap(calls_);
    reads.swap(reads_);
    waiting.swap(waiting_);
    deadlines_.clear();
    read_queue_.clear();
  }
  for (auto& [id, call] : calls) call.done(why, {});
  for (auto& [id, op] : reads) op->done(why);
  for (WaitingRead& w : waiting) w.done(why);
  waiting.clear();
  {
    std::lock_guard lock(mu_);  // a region-list callback above may have queued more; health_ stops new ones
    waiting.swap(waiting_);
  }
  for (WaitingRead& w : waiting) w.done(why);  // outside the lock: a callback may issue another read
}

StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint, const ConnectOptions& options) {
  CELL_RETURN_IF_ERROR(CheckDevice());
  return VerbsConnection::Open(endpoint, options);
}

}  // namespace cell::rpc::verbs
