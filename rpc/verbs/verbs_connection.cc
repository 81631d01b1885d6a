// The verbs client connection: rdma_cm connect, RPC over the link, RDMA READs through registered bounce slots, and
// one thread per connection that waits on the completion channel. The protocol is described in verbs_transport.h.
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

#include "common/log.h"
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

// ---------------------------------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------------------------------

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

class VerbsConnection final : public Connection {
 public:
  static StatusOr<std::unique_ptr<Connection>> Open(const Endpoint& endpoint, const ClientOptions& options);
  ~VerbsConnection() override;

  void Call(uint16_t method, std::string_view request, RpcCallback done, std::chrono::microseconds timeout) override;
  void Read(GlobalPtr remote, uint32_t length, void* dest, ReadCallback done) override;
  Status health() const override {
    std::lock_guard lock(mu_);
    return health_;
  }
  const std::string& uri() const override { return uri_; }
  void Close() override {
    {
      std::lock_guard lock(mu_);
      if (health_.ok()) health_ = Status::Unavailable(fmt::format("connection to {} closed by the client", uri_));
    }
    wake_.Wake();  // the I/O thread fails what waits, disconnects and exits
  }

 private:
  struct PendingCall {
    RpcCallback done;
    Clock::time_point deadline;
    FrameType expect = FrameType::kResponse;
  };
  struct ReadOp {
    ReadCallback done;
    char* dest = nullptr;
    uint64_t remote_address = 0;
    uint32_t rkey = 0;
    uint32_t length = 0;
    uint32_t posted = 0;       // bytes whose RDMA READ has been posted
    uint32_t outstanding = 0;  // bytes not yet landed in `dest`
    Clock::time_point deadline;
  };
  struct Slot {
    uint64_t op = 0;
    uint32_t offset = 0;
    uint32_t length = 0;
  };
  struct RemoteRegion {
    uint64_t address = 0;
    uint64_t size = 0;
    uint32_t rkey = 0;
  };
  struct WaitingRead {  // for a region missing from our list: resolved after region-list fetch `fetch`
    GlobalPtr remote;
    uint32_t length = 0;
    void* dest = nullptr;
    ReadCallback done;
    uint64_t fetch = 0;
  };

  VerbsConnection(std::string uri, const ClientOptions& options, uint32_t send_limit)
      : uri_(std::move(uri)), options_(options), send_limit_(send_limit), receiver_(options.max_message_bytes) {
    slots_.resize(kReadSlots);
    for (uint32_t i = kReadSlots; i > 0; --i) free_slots_.push_back(i - 1);
  }

  // The Hello and, when the server requires a key, the proofs (rpc/auth.h), before the connection is handed out.
  Status Handshake(Clock::time_point deadline);
  // Sends one frame of `type` and waits for its answer, which must be of type `expect` (or an error).
  StatusOr<std::string> Exchange(FrameType type, std::string_view payload, FrameType expect,
                                 Clock::time_point deadline);
  // Starts `read` if its region is known (or fails it if it is not inside); unknown regions wait for a fetch of
  // the region list when `may_fetch`, and fail as not registered otherwise.
  void StartRead(WaitingRead read, bool may_fetch);
  void StartFetchLocked();
  void OnRegionList(uint64_t fetch, const Status& status, std::string_view payload);
  void PumpReadsLocked();
  void NoteDeadlineLocked(Clock::time_point deadline);
  // Records that the QP broke while posting; the I/O thread fails everything.
  void BreakLocked(const Status& why);
  void IoLoop();
  void ProcessCompletions(Status* end);
  void ProcessBatch(const ibv_wc* wc, int n, Status* end);
  void ExpireDeadlines();
  void FailAll(const Status& why);

  const std::string uri_;
  const ClientOptions options_;
  const uint32_t send_limit_;  // the smaller of ours and the server's
  // Destroyed in reverse: link (QP, CQ, buffers), PD, cm id, event channel.
  EventChannelPtr ec_;
  CmIdPtr id_;
  PdPtr pd_;
  std::unique_ptr<Link> link_;
  WakeFd wake_;
  FrameReceiver receiver_;  // I/O thread only
  std::thread io_;

  mutable std::mutex mu_;  // guards the link's send state and what follows
  Status health_;
  uint64_t next_id_ = 1;
  absl::flat_hash_map<uint64_t, PendingCall> calls_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<ReadOp>> reads_;
  absl::btree_set<std::pair<Clock::time_point, uint64_t>> deadlines_;  // of calls and reads
  std::deque<uint64_t> read_queue_;                                    // reads with pieces not yet posted, oldest first
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  absl::flat_hash_map<uint32_t, RemoteRegion> regions_;
  std::vector<WaitingRead> waiting_;
  uint64_t fetches_started_ = 0;
  bool fetch_in_flight_ = false;
  Clock::time_point io_wakes_at_ = Clock::time_point::max();
};

StatusOr<std::unique_ptr<Connection>> VerbsConnection::Open(const Endpoint& endpoint, const ClientOptions& options) {
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

void VerbsConnection::Call(uint16_t method, std::string_view request, RpcCallback done,
                           std::chrono::microseconds timeout) {
  if (request.size() > send_limit_) {
    done(Status::InvalidArgument(
             fmt::format("request of {} bytes exceeds the message limit of {} bytes", request.size(), send_limit_)),
         {});
    return;
  }
  const auto deadline =
      Clock::now() + (timeout.count() > 0 ? timeout : std::chrono::microseconds(options_.call_timeout));
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

void VerbsConnection::Read(GlobalPtr remote, uint32_t length, void* dest, ReadCallback done) {
  if (length > send_limit_) {
    done(Status::InvalidArgument(
        fmt::format("one-sided read of {} bytes exceeds the message limit of {} bytes", length, send_limit_)));
    return;
  }
  StartRead(WaitingRead{remote, length, dest, std::move(done), 0}, true);
}

void VerbsConnection::StartRead(WaitingRead read, bool may_fetch) {
  std::unique_lock lock(mu_);
  Status refused;
  if (!health_.ok()) {
    refused = health_;
  } else if (auto it = regions_.find(read.remote.region); it == regions_.end()) {
    if (may_fetch) {
      // A fetch already in flight may have left the server before the region was registered: wait for a new one.
      read.fetch = fetches_started_ + 1;
      waiting_.push_back(std::move(read));
      if (!fetch_in_flight_) StartFetchLocked();
      return;
    }
    refused = NotRegistered(read.remote.region);
  } else if (const RemoteRegion& r = it->second;
             read.remote.offset > r.size || read.length > r.size - read.remote.offset) {
    refused = ReadOutsideRegion(read.remote.region, read.remote.offset, read.length, r.size);
  } else if (read.length > 0) {
    const uint64_t id = next_id_++;
    auto op = std::make_unique<ReadOp>();
    op->done = std::move(read.done);
    op->dest = static_cast<char*>(read.dest);
    op->remote_address = r.address + read.remote.offset;
    op->rkey = r.rkey;
    op->length = read.length;
    op->outstanding = read.length;
    op->deadline = Clock::now() + options_.call_timeout;
    deadlines_.emplace(op->deadline, id);
    NoteDeadlineLocked(op->deadline);
    reads_.emplace(id, std::move(op));
    read_queue_.push_back(id);
    PumpReadsLocked();
    return;
  }
  lock.unlock();
  read.done(refused);  // OK for an empty read
}

void VerbsConnection::StartFetchLocked() {
  const uint64_t fetch = ++fetches_started_;
  fetch_in_flight_ = true;
  const uint64_t id = next_id_++;
  const auto deadline = Clock::now() + options_.call_timeout;
  calls_.emplace(
      id, PendingCall{[this, fetch](const Status& s, std::string_view payload) { OnRegionList(fetch, s, payload); },
                      deadline, FrameType::kMapReply});
  deadlines_.emplace(deadline, id);
  if (Status s = link_->SendFrameLocked(FrameType::kMapRequest, 0, id, {}); !s.ok()) BreakLocked(s);
  NoteDeadlineLocked(deadline);
}

void VerbsConnection::OnRegionList(uint64_t fetch, const Status& status, std::string_view payload) {
  Status s = status;
  std::vector<WaitingRead> ready;
  {
    std::lock_guard lock(mu_);
    fetch_in_flight_ = false;
    proto::VerbsRegionList list;
    if (s.ok() && !list.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      s = Status::Internal(fmt::format("unparsable region list from {}", uri_));
    }
    if (s.ok()) {
      regions_.clear();
      for (const proto::VerbsRegion& r : list.regions()) {
        regions_[r.region()] = RemoteRegion{r.address(), r.size(), r.rkey()};
      }
    }
    auto later =
        std::partition(waiting_.begin(), waiting_.end(), [&](const WaitingRead& w) { return w.fetch > fetch; });
    ready.assign(std::make_move_iterator(later), std::make_move_iterator(waiting_.end()));
    waiting_.erase(later, waiting_.end());
    if (!waiting_.empty() && health_.ok()) StartFetchLocked();
  }
  for (WaitingRead& w : ready) {
    if (s.ok()) {
      StartRead(std::move(w), false);
    } else {
      w.done(s);
    }
  }
}

void VerbsConnection::PumpReadsLocked() {
  while (!free_slots_.empty() && !read_queue_.empty() && health_.ok()) {
    const uint64_t id = read_queue_.front();
    auto it = reads_.find(id);
    if (it == reads_.end()) {  // timed out before all its pieces were posted
      read_queue_.pop_front();
      continue;
    }
    ReadOp& op = *it->second;
    const uint32_t slot = free_slots_.back();
    const uint32_t length = std::min(kReadSlotBytes, op.length - op.posted);
    if (Status s = link_->PostReadLocked(slot, op.remote_address + op.posted, op.rkey, length); !s.ok()) {
      BreakLocked(s);
      return;
    }
    free_slots_.pop_back();
    slots_[slot] = Slot{id, op.posted, length};
    op.posted += length;
    if (op.posted == op.length) read_queue_.pop_front();
  }
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
  {
    std::lock_guard lock(mu_);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        failed = Status::Unavailable(
            fmt::format("connection to {} lost: work completion failed: {}", uri_, ibv_wc_status_str(wc[i].status)));
        n = i;
        break;
      }
      const uint32_t index = WrIndexOf(wc[i].wr_id);
      switch (WrKindOf(wc[i].wr_id)) {
        case WrKind::kSend:
        case WrKind::kCredit:
          link_->SendDoneLocked(wc[i].wr_id);
          break;
        case WrKind::kRecv:
          if (!(wc[i].wc_flags & IBV_WC_WITH_IMM)) {
            *end = Status::Unavailable(
                fmt::format("connection to {} closed: protocol violation: a SEND without immediate data", uri_));
            return;
          }
          credit_only[i] = link_->AcceptImmediateLocked(wc[i]);
          break;
        case WrKind::kRead: {
          const Slot slot = slots_[index];
          free_slots_.push_back(index);
          auto it = reads_.find(slot.op);
          if (it == reads_.end()) break;  // it timed out: its bytes are dropped, never written to dest
          ReadOp& op = *it->second;
          std::memcpy(op.dest + slot.offset, link_->read_slot(index), slot.length);
          op.outstanding -= slot.length;
          if (op.outstanding == 0) {
            reads_done.push_back(std::move(op.done));
            deadlines_.erase({op.deadline, slot.op});
            reads_.erase(it);
          }
          break;
        }
        default:
          break;
      }
    }
    PumpReadsLocked();
    if (Status s = link_->FlushLocked(); !s.ok()) BreakLocked(s);
  }
  for (ReadCallback& done : reads_done) done(Status::OK());

  // Replies: payloads point into the receive buffers (or the reassembly buffer), reposted after the callbacks.
  for (int i = 0; i < n && end->ok(); ++i) {
    if (WrKindOf(wc[i].wr_id) != WrKind::kRecv || credit_only[i]) continue;
    Status s = receiver_.Feed(link_->Received(wc[i]), [&](const FrameHeader& h, std::string_view payload) {
      if (h.type != FrameType::kResponse && h.type != FrameType::kError && h.type != FrameType::kMapReply &&
          h.type != FrameType::kHelloReply && h.type != FrameType::kAuthReply) {
        if (end->ok()) {
          *end = Status::Unavailable(fmt::format("connection to {} closed: unexpected frame type {} from the server",
                                                 uri_, static_cast<int>(h.type)));
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
    });
    if (!s.ok() && end->ok()) {
      *end = Status::Unavailable(fmt::format("connection to {} closed: malformed reply: {}", uri_, s.message()));
    }
  }
  if (end->ok() && !failed.ok()) *end = failed;
  if (!end->ok()) return;
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

}  // namespace

StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint, const ClientOptions& options) {
  CELL_RETURN_IF_ERROR(CheckDevice());
  return VerbsConnection::Open(endpoint, options);
}

}  // namespace cell::rpc::verbs
