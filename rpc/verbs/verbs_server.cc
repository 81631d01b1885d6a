// The verbs server: rdma_cm listener, per-device region registration (remote read only), a worker pool that owns
// one connection at a time and handles its completions; the frames themselves are served in
// verbs_server_dispatch.cc. The protocol is described in verbs_transport.h; per-QP messaging is in verbs_link.h.
#include "rpc/verbs/verbs_server.h"

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

// The device state for `context`, created (PD, every region in `regions` registered) on first use. The caller holds
// core.devices_mu.
StatusOr<std::shared_ptr<Device>> DeviceForLocked(ServerCore& core, ibv_context* context,
                                                  const std::vector<RegionRegistration>& regions) {
  for (auto& d : core.devices) {
    if (d->context == context) return d;
  }
  auto device = std::make_shared<Device>();
  device->context = context;
  ibv_device_attr attr{};
  if (int err = ibv_query_device(context, &attr); err != 0) return Status::Unavailable(Errno("ibv_query_device", err));
  device->max_qp_rd_atom = static_cast<uint8_t>(std::min(attr.max_qp_rd_atom, 255));
  device->pd.reset(ibv_alloc_pd(context));
  if (device->pd == nullptr) return Status::Unavailable(Errno("ibv_alloc_pd"));
  for (const RegionRegistration& r : regions) {
    auto mr = RegisterMemory(device->pd.get(), r.base, r.size, IBV_ACCESS_REMOTE_READ, fmt::format("region {}", r.id));
    if (!mr.ok()) return mr.status();
    device->region_mrs[r.id] = std::move(*mr);
  }
  core.devices.push_back(device);
  return device;
}

}  // namespace

Status VerbsServer::Start() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  ready_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
  if (epoll_fd_ < 0 || ready_fd_ < 0 || stop_fd_.fd() < 0) {
    return Status::Unavailable(Errno("epoll/eventfd"));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeKey;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_.fd(), &ev);
  ev.data.u64 = kReadyKey;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ready_fd_, &ev);
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
  cm_thread_ = std::thread([this] { CmLoop(); });
  return Status::OK();
}

void VerbsServer::Stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopping_.exchange(true)) return;
  stop_fd_.Wake();
  if (cm_thread_.joinable()) cm_thread_.join();
  for (auto& t : workers_) t.join();
  workers_.clear();
  std::unordered_map<uint64_t, std::shared_ptr<Conn>> conns;
  {
    std::lock_guard lock(conns_mu_);
    conns.swap(conns_);
  }
  for (auto& [key, conn] : conns) {
    std::lock_guard lock(conn->mu);
    conn->closed = true;
    rdma_disconnect(conn->id.get());  // the client sees RDMA_CM_EVENT_DISCONNECTED: its callers get Unavailable
  }
  conns.clear();  // each connection's QP, CQ and buffers go when its last Responder does
  listen_id_.reset();
  for (int fd : {epoll_fd_, ready_fd_}) {
    if (fd >= 0) close(fd);
  }
  epoll_fd_ = ready_fd_ = -1;
}

Status VerbsServer::RegisterRegion(const RegionRegistration& region) {
  std::lock_guard lock(core_->devices_mu);
  if (region.base == nullptr || region.size == 0 || regions_.Find(region.id).has_value()) {
    return regions_.Add(region);  // the table says what is wrong
  }
  std::vector<std::pair<Device*, MrPtr>> mrs;  // registered everywhere, or nowhere
  for (auto& d : core_->devices) {
    auto mr = RegisterMemory(d->pd.get(), region.base, region.size, IBV_ACCESS_REMOTE_READ,
                             fmt::format("region {}", region.id));
    if (!mr.ok()) return mr.status();
    mrs.emplace_back(d.get(), std::move(*mr));
  }
  CELL_RETURN_IF_ERROR(regions_.Add(region));
  for (auto& [device, mr] : mrs) device->region_mrs[region.id] = std::move(mr);
  return Status::OK();
}

ServerStats VerbsServer::stats() const {
  ServerStats s;
  s.requests = requests_.load(std::memory_order_relaxed);
  s.connections_closed_for_protocol_errors = protocol_errors_.load(std::memory_order_relaxed);
  std::lock_guard lock(clocks_mu_);
  s.worker_cpu_seconds = exited_cpu_seconds_;
  for (clockid_t clock : clocks_) {
    timespec ts{};
    if (clock_gettime(clock, &ts) == 0) s.worker_cpu_seconds += static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
  }
  return s;  // reads stay 0: one-sided reads never reach the server's CPUs
}

std::shared_ptr<VerbsServer::Conn> VerbsServer::FindConn(uint64_t key) {
  std::lock_guard lock(conns_mu_);
  auto it = conns_.find(key);
  return it == conns_.end() ? nullptr : it->second;
}

void VerbsServer::CmLoop() {
  pollfd fds[2] = {{core_->ec->fd, POLLIN, 0}, {stop_fd_.fd(), POLLIN, 0}};
  CmEvent event;
  while (!stopping_.load()) {
    const int n = poll(fds, 2, -1);
    if (n < 0 && errno != EINTR) {
      diag::Error("{}: poll on the rdma_cm channel failed: {}", uri_, std::strerror(errno));
      break;
    }
    if (fds[1].revents != 0) break;
    while (!stopping_.load() && NextCmEvent(core_->ec.get(), &event)) {
      if (event.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        OnConnectRequest(event);
        continue;
      }
      const auto key = reinterpret_cast<uintptr_t>(event.id->context);
      if (key < kFirstConnKey) {  // the listening id
        if (event.type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
          diag::Error("{}: the RDMA device was removed; no more connections will be accepted", uri_);
        }
        continue;
      }
      std::shared_ptr<Conn> conn = FindConn(key);
      if (conn == nullptr) continue;
      switch (event.type) {
        case RDMA_CM_EVENT_ESTABLISHED:
        case RDMA_CM_EVENT_TIMEWAIT_EXIT:
        case RDMA_CM_EVENT_ADDR_CHANGE:
          break;
        case RDMA_CM_EVENT_DISCONNECTED:
          CloseConn(conn, "", false);
          break;
        default:
          CloseConn(conn, fmt::format("{} (status {})", rdma_event_str(event.type), event.status), false);
          break;
      }
    }
  }
}

void VerbsServer::OnConnectRequest(const CmEvent& event) {
  CmIdPtr id(event.id);  // ours now; rejected requests are destroyed on return
  const std::string peer = AddressText(rdma_get_peer_addr(id.get()));
  auto reject = [&](const std::string& reason) {
    diag::Warning("{}: refused a connection from {}: {}", uri_, peer, reason);
    const std::string data = fmt::format("{}{}", kRejectPrefix, reason).substr(0, 140);
    rdma_reject(id.get(), data.data(), static_cast<uint8_t>(data.size()));
  };
  WireHello hello;
  if (!hello.Decode(event.private_data.data(), event.private_data.size())) {
    protocol_errors_.fetch_add(1, std::memory_order_relaxed);
    reject("not a Cell verbs client (no valid hello in the connect request)");
    return;
  }
  std::shared_ptr<Device> device;
  {
    std::lock_guard lock(core_->devices_mu);
    auto d = DeviceForLocked(*core_, id->verbs, regions_.All());
    if (!d.ok()) {
      reject(d.status().message());
      return;
    }
    device = std::move(*d);
  }
  const uint64_t key = next_key_++;
  rdma_cm_id* raw = id.get();
  auto link = Link::Create(raw, device->pd.get(), 0);
  if (!link.ok()) {
    reject(link.status().message());
    return;
  }
  (*link)->SetPeer(hello);
  auto conn = std::make_shared<Conn>(key, peer, core_, device, id.release(), options_.max_message_bytes,
                                     std::min(options_.max_message_bytes, hello.max_message_bytes), &options_.keys);
  conn->link = std::move(*link);
  raw->context = reinterpret_cast<void*>(static_cast<uintptr_t>(key));
  {
    std::lock_guard lock(conns_mu_);
    conns_[key] = conn;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = key;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, conn->link->comp_fd(), &ev);

  char data[WireHello::kBytes];
  Link::OurHello(options_.max_message_bytes).Encode(data);
  rdma_conn_param param{};
  param.private_data = data;
  param.private_data_len = sizeof(data);
  param.responder_resources = std::min(event.initiator_depth, device->max_qp_rd_atom);
  param.initiator_depth = 0;  // the server never reads
  param.rnr_retry_count = 7;
  if (rdma_accept(raw, &param) != 0) CloseConn(conn, Errno("rdma_accept"), false);
}

void VerbsServer::CloseConn(const std::shared_ptr<Conn>& conn, const std::string& reason, bool protocol_error) {
  {
    std::lock_guard lock(conn->mu);
    if (conn->closed) return;
    conn->closed = true;
    rdma_disconnect(conn->id.get());  // QP to error (flushing what is posted); the client hears DISCONNECTED
  }
  if (protocol_error) protocol_errors_.fetch_add(1, std::memory_order_relaxed);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn->link->comp_fd(), nullptr);
  // One line per closed connection, at most ten a second (a flood of bad clients must not flood the diagnostics).
  static diag::RateLimit closes;
  if (uint64_t dropped = 0; !reason.empty() && closes.Allow(&dropped)) {
    diag::Warning("{}: closed connection from {}: {}{}", uri_, conn->peer, reason,
                  dropped == 0 ? "" : fmt::format(" ({} more closed since, not shown)", dropped));
  }
  std::lock_guard lock(conns_mu_);
  conns_.erase(conn->key);  // resources go when the last Responder and worker let go of the connection
}

void VerbsServer::WorkerLoop(int index) {
  if (!options_.worker_cpus.empty()) {
    PinThisThread(options_.worker_cpus[static_cast<size_t>(index) % options_.worker_cpus.size()], "worker");
  }
  clockid_t clock{};
  pthread_getcpuclockid(pthread_self(), &clock);
  {
    std::lock_guard lock(clocks_mu_);
    clocks_.push_back(clock);
  }
  while (true) {
    epoll_event ev{};
    const int n = WaitForEvent(epoll_fd_, &ev, options_.poll);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      diag::Error("{}: epoll_wait failed: {}", uri_, std::strerror(errno));
      break;
    }
    if (n == 0) continue;
    uint64_t key = ev.data.u64;
    if (key == kWakeKey) break;  // Stop()
    if (key == kReadyKey) {
      uint64_t one;
      if (read(ready_fd_, &one, sizeof(one)) != sizeof(one)) continue;  // another worker took it
      std::lock_guard lock(ready_mu_);
      if (ready_.empty()) continue;
      key = ready_.front();
      ready_.pop_front();
    }
    if (std::shared_ptr<Conn> conn = FindConn(key)) Serve(conn);
  }
  std::lock_guard lock(clocks_mu_);
  std::erase(clocks_, clock);
  exited_cpu_seconds_ += ThreadCpuSeconds();
}

void VerbsServer::Serve(const std::shared_ptr<Conn>& conn) {
  conn->link->DrainCqEvents();
  std::string reason;  // why the connection must close (empty: quietly)
  bool close = false;
  bool protocol_error = false;
  ibv_wc wc[kCompletionsPerPoll];
  bool armed = false;
  for (int polls = 0;; ++polls) {
    if (polls == kPollsPerTurn) {
      // Completions may remain: go to the back of the ready queue rather than re-arming (fairness). The
      // connection's epoll registration stays disarmed, so no other worker serves it meanwhile.
      {
        std::lock_guard lock(ready_mu_);
        ready_.push_back(conn->key);
      }
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t w = write(ready_fd_, &one, sizeof(one));
      return;
    }
    const int n = conn->link->Poll(wc, kCompletionsPerPoll);
    if (n < 0) {
      reason = "ibv_poll_cq failed";
      close = true;
      break;
    }
    if (n == 0) {
      if (armed) break;
      if (Status s = conn->link->ArmCq(); !s.ok()) {
        reason = s.message();
        close = true;
        break;
      }
      armed = true;  // poll once more: a completion may have arrived before the arm
      continue;
    }
    armed = false;
    if (!ProcessBatch(conn, wc, n, &reason, &protocol_error)) {
      close = true;
      break;
    }
  }
  if (close) {
    CloseConn(conn, reason, protocol_error);
    return;
  }
  Rearm(conn);
}

void VerbsServer::Rearm(const std::shared_ptr<Conn>& conn) {
  std::lock_guard lock(conn->mu);  // CloseConn removes it from the epoll set under this lock's protection
  if (conn->closed) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = conn->key;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, conn->link->comp_fd(), &ev);
}

bool VerbsServer::ProcessBatch(const std::shared_ptr<Conn>& conn, const ibv_wc* wc, int n, std::string* reason,
                               bool* protocol_error) {
  bool credit_only[kCompletionsPerPoll] = {};
  {
    std::lock_guard lock(conn->mu);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        // A flush follows a disconnect (the client left, or we closed): no news. Anything else is worth a line.
        if (!conn->closed && wc[i].status != IBV_WC_WR_FLUSH_ERR) {
          *reason = fmt::format("work completion failed: {}", ibv_wc_status_str(wc[i].status));
        }
        return false;
      }
      const WrKind kind = WrKindOf(wc[i].wr_id);
      if (kind == WrKind::kSend || kind == WrKind::kCredit) {
        conn->link->SendDoneLocked(wc[i].wr_id);
      } else if (kind == WrKind::kRecv) {
        if (!(wc[i].wc_flags & IBV_WC_WITH_IMM)) {
          *reason = "protocol violation: a SEND without immediate data";
          *protocol_error = true;
          return false;
        }
        credit_only[i] = conn->link->AcceptImmediateLocked(wc[i]);
      }
    }
    if (Status s = conn->link->FlushLocked(); !s.ok()) {
      *reason = s.message();
      return false;
    }
  }
  // Requests run here, without the lock; their payloads point into the receive buffers, reposted after.
  std::string violation;
  for (int i = 0; i < n && violation.empty(); ++i) {
    if (WrKindOf(wc[i].wr_id) != WrKind::kRecv || credit_only[i]) continue;
    Status s = conn->receiver.Feed(conn->link->Received(wc[i]), [&](const FrameHeader& h, std::string_view p) {
      if (violation.empty()) Dispatch(conn, h, p, &violation);
    });
    if (!s.ok()) violation = s.message();
  }
  if (!violation.empty()) {
    *reason = violation;
    *protocol_error = true;
    return false;
  }
  std::lock_guard lock(conn->mu);
  if (conn->closed) return false;
  if (conn->refused && conn->link->sends_done()) {
    *reason = "refused (see above)";
    return false;
  }
  for (int i = 0; i < n; ++i) {
    if (WrKindOf(wc[i].wr_id) != WrKind::kRecv) continue;
    if (Status s = conn->link->RepostLocked(wc[i].wr_id, !credit_only[i]); !s.ok()) {
      *reason = s.message();
      return false;
    }
  }
  if (Status s = conn->link->FlushLocked(); !s.ok()) {
    *reason = s.message();
    return false;
  }
  return true;
}

StatusOr<std::unique_ptr<Server>> Listen(const Endpoint& endpoint, const ServerOptions& options, RpcHandler* handler) {
  CELL_RETURN_IF_ERROR(CheckDevice());
  auto fail = [&](std::string_view what) {
    return Status::Unavailable(fmt::format("cannot listen at {}: {}", Uri(endpoint.host, endpoint.port), what));
  };
  auto core = std::make_shared<ServerCore>();
  auto ec = CreateEventChannel();
  if (!ec.ok()) return ec.status();
  core->ec = std::move(*ec);
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(core->ec.get(), &raw, nullptr, RDMA_PS_TCP) != 0) return fail(Errno("rdma_create_id"));
  CmIdPtr listen_id(raw);
  auto addr = ResolveAddress(endpoint.host, endpoint.port, true);
  if (!addr.ok()) return fail(addr.status().message());
  if (rdma_bind_addr(listen_id.get(), reinterpret_cast<sockaddr*>(&*addr)) != 0) {
    const int err = errno;
    if (err == ENODEV || err == EADDRNOTAVAIL) {
      return fail(
          fmt::format("rdma_bind_addr: {}: no RDMA device has the address {}", std::strerror(err), endpoint.host));
    }
    return fail(Errno("rdma_bind_addr", err));
  }
  if (rdma_listen(listen_id.get(), kListenBacklog) != 0) return fail(Errno("rdma_listen"));
  const uint16_t port = ntohs(rdma_get_src_port(listen_id.get()));

  {
    // The devices regions are registered in: the one the address is on, or (a wildcard address) every device.
    // Connections arriving on another device get theirs when they come.
    std::lock_guard lock(core->devices_mu);
    if (listen_id->verbs != nullptr) {
      auto d = DeviceForLocked(*core, listen_id->verbs, {});
      if (!d.ok()) return fail(d.status().message());
    } else {
      int count = 0;
      ibv_context** contexts = rdma_get_devices(&count);
      Status s;
      for (int i = 0; i < count && s.ok(); ++i) s = DeviceForLocked(*core, contexts[i], {}).status();
      if (contexts != nullptr) rdma_free_devices(contexts);
      if (!s.ok()) return fail(s.message());
    }
  }
  auto server =
      std::make_unique<VerbsServer>(Uri(endpoint.host, port), options, handler, std::move(core), std::move(listen_id));
  CELL_RETURN_IF_ERROR(server->Start());
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace cell::rpc::verbs
