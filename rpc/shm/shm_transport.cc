#include "rpc/shm/shm_transport.h"

#include <absl/container/flat_hash_map.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/diagnostics.h"
#include "rpc/region_table.h"
#include "rpc/shm/nic_model.h"
#include "rpc/socket_channel.h"
#include "rpc/socket_server.h"
#include "rpc/socket_util.h"

namespace cell::rpc::shm {
namespace {

constexpr size_t kNicStateBytes = 4096;

std::string Uri(const std::string& path) { return "shm://" + path; }

class ShmServer final : public SocketServer {
 public:
  ShmServer(const std::string& path, int listen_fd, const ServerOptions& options, RpcHandler* handler, NicModel model,
            int nic_fd, gid_t group)
      : SocketServer(Uri(path), listen_fd, options, Personality{.share_regions = true}, handler),
        path_(path),
        model_(model),
        nic_fd_(nic_fd),
        group_(group) {}
  ~ShmServer() override {
    Stop();
    if (nic_fd_ >= 0) close(nic_fd_);
  }

  void Stop() override {
    SocketServer::Stop();
    std::lock_guard lock(unlink_mu_);
    if (!unlinked_) unlink(path_.c_str());
    unlinked_ = true;
  }

 protected:
  // Only processes of this server's user, root, or (with --shm-group) that group's members: the socket file's mode
  // says the same, and this holds even if someone widens it.
  Status AdmitPeer(int fd) const override {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      return Status::PermissionDenied(fmt::format("cannot read the peer's credentials: {}", std::strerror(errno)));
    }
    if (cred.uid == geteuid() || cred.uid == 0) return Status::OK();
    if (group_ != static_cast<gid_t>(-1)) {
      if (cred.gid == group_) return Status::OK();
      gid_t groups[256];
      socklen_t glen = sizeof(groups);
      if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0) {
        for (size_t i = 0; i < glen / sizeof(gid_t); ++i) {
          if (groups[i] == group_) return Status::OK();
        }
      }
    }
    return Status::PermissionDenied(fmt::format(
        "{} serves only processes of user {}{} (this one runs as user {}, pid {})", uri(), geteuid(),
        group_ != static_cast<gid_t>(-1) ? fmt::format(" or group {}", group_) : std::string(), cred.uid, cred.pid));
  }

  void FillHelloReply(proto::HelloReply* reply) const override {
    reply->set_nic_reads_per_s(model_.reads_per_s);
    reply->set_nic_bytes_per_s(model_.bytes_per_s);
    reply->set_nic_latency_us(model_.latency_us);
  }

  bool AnswerMapRequest(int fd, uint64_t request_id, std::string_view payload) override {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    proto::MapRequest request;
    if (!request.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      diag::Warning("{}: closing a map connection: unparsable MapRequest", uri());
      return false;
    }
    Status refused;
    int pass_fd = -1;
    proto::MapReply reply;
    if (request.nic_state()) {
      if (nic_fd_ < 0) refused = Status::FailedPrecondition("this server has no NIC model");
      pass_fd = dup(nic_fd_);
      reply.set_size(kNicStateBytes);
    } else if (auto region = regions().Find(request.region()); !region) {
      refused = NotRegistered(request.region());
    } else {
      // A descriptor opened O_RDONLY cannot be mapped writable: the client can read the region, never change it.
      const std::string proc = fmt::format("/proc/self/fd/{}", region->fd);
      pass_fd = open(proc.c_str(), O_RDONLY | O_CLOEXEC);
      if (pass_fd < 0) {
        refused = Status::Internal(
            fmt::format("cannot reopen region {} read-only: {}", request.region(), std::strerror(errno)));
      }
      reply.set_region(request.region());
      reply.set_size(region->size);
    }
    std::string frame;
    Status sent;
    if (!refused.ok()) {
      if (pass_fd >= 0) close(pass_fd);
      AppendFrame(frame, FrameType::kError, static_cast<uint16_t>(refused.code()), request_id, refused.message());
      sent = SendAllBy(fd, frame, deadline);
    } else {
      AppendFrame(frame, FrameType::kMapReply, 0, request_id, reply.SerializeAsString());
      sent = SendWithDescriptor(fd, frame, pass_fd, deadline);
      close(pass_fd);
    }
    if (!sent.ok()) diag::Warning("{}: closing a map connection: {}", uri(), sent.ToString());
    return sent.ok();
  }

 private:
  const std::string path_;
  const NicModel model_;
  const int nic_fd_;
  const gid_t group_;  // -1: none
  std::mutex unlink_mu_;
  bool unlinked_ = false;
};

struct Mapping {
  const char* base = nullptr;
  uint64_t size = 0;
};
using MappingTable = absl::flat_hash_map<uint32_t, Mapping>;

class ShmConnection final : public Connection {
 public:
  ShmConnection(std::string uri, std::unique_ptr<SocketChannel> rpc, int map_fd, const ConnectOptions& options,
                NicModel model)
      : uri_(std::move(uri)), rpc_(std::move(rpc)), map_fd_(map_fd), options_(options), model_(model) {
    tables_.push_back(std::make_unique<MappingTable>());
    table_.store(tables_.back().get());
  }

  ~ShmConnection() override {
    Close();
    if (nic_thread_.joinable()) nic_thread_.join();
    for (const auto& [id, m] : *table_.load()) munmap(const_cast<char*>(m.base), m.size);
    if (nic_word_ != nullptr) munmap(nic_word_, kNicStateBytes);
    close(map_fd_);
  }

  // Maps the server's NIC pacer and starts the thread that completes reads when the model says they are done.
  Status StartNicModel() {
    std::lock_guard lock(map_mu_);
    int fd = -1;
    uint64_t size = 0;
    CELL_RETURN_IF_ERROR(RequestDescriptor(proto::MapRequest(), /*nic_state=*/true, &fd, &size));
    void* p = mmap(nullptr, kNicStateBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return Status::Unavailable(fmt::format("cannot map the NIC model: {}", std::strerror(errno)));
    nic_word_ = static_cast<std::atomic<int64_t>*>(p);
    nic_thread_ = std::thread([this] { NicLoop(); });
    return Status::OK();
  }

  void Call(uint16_t method, std::string_view request, RpcCallback done, Clock::time_point deadline) override {
    rpc_->Call(method, request, std::move(done), deadline);
  }

  void Read(GlobalPtr remote, uint32_t length, void* dest, ReadCallback done) override {
    const char* src = nullptr;
    if (Status s = Source(remote, length, &src); !s.ok()) return done(s);
    if (nic_word_ == nullptr) {
      Copy(dest, src, length);
      return done(Status::OK());
    }
    {
      std::lock_guard lock(nic_mu_);
      if (!nic_stopping_) {
        // Reserved under the queue's lock, so the queue stays in due-time order.
        const auto due =
            ReserveNic(nic_word_, model_.BusyNanos(length), static_cast<int64_t>(model_.latency_us * 1000));
        nic_queue_.push_back(NicJob{due, src, dest, length, std::move(done)});
        nic_cv_.notify_one();
        return;
      }
    }
    done(Status::Unavailable(fmt::format("connection to {} closed by the client", uri_)));
  }

  Status ReadNow(GlobalPtr remote, uint32_t length, void* dest) override {
    const char* src = nullptr;
    CELL_RETURN_IF_ERROR(Source(remote, length, &src));
    if (nic_word_ != nullptr) {
      // The NIC model, waited for in the caller: it reserves its turn on the shared NIC clock and waits for its due
      // time itself. Handing the read to the NIC thread instead costs two wake-ups per read, and on a client with
      // few cores that thread's spinning for the last microseconds starved the very threads it served (client-side
      // gets ran at 9k/s whatever the model's rate; docs/BENCHMARKS.md).
      const auto due = ReserveNic(nic_word_, model_.BusyNanos(length), static_cast<int64_t>(model_.latency_us * 1000));
      CELL_RETURN_IF_ERROR(WaitUntil(due));
    }
    Copy(dest, src, length);
    return Status::OK();
  }

  bool reads_in_place() const override { return nic_word_ == nullptr; }
  StatusOr<std::span<const char>> RegionInPlace(uint32_t region) override {
    if (nic_word_ != nullptr) return Connection::RegionInPlace(region);  // the model paces copies only
    Mapping m;
    CELL_RETURN_IF_ERROR(Find(region, &m));
    return std::span<const char>(m.base, m.size);
  }

  Status health() const override { return rpc_->health(); }
  const std::string& uri() const override { return uri_; }

  void Close() override {
    rpc_->Close(Status::Unavailable(fmt::format("connection to {} closed by the client", uri_)));
    shutdown(map_fd_, SHUT_RDWR);  // ends a map request in progress
    std::lock_guard lock(nic_mu_);
    nic_stopping_ = true;
    nic_cv_.notify_all();
  }

 private:
  // Where region `region` is mapped in this process (mapped on first use).
  Status Find(uint32_t region, Mapping* m) {
    if (!rpc_->alive()) return rpc_->health();
    const MappingTable* table = table_.load(std::memory_order_acquire);
    auto it = table->find(region);
    if (it != table->end()) {
      *m = it->second;
      return Status::OK();
    }
    return MapRegion(region, m);
  }

  // Where `length` bytes at `remote` are in this process (the region is mapped on first use).
  Status Source(GlobalPtr remote, uint32_t length, const char** src) {
    Mapping m;
    CELL_RETURN_IF_ERROR(Find(remote.region, &m));
    if (remote.offset > m.size || length > m.size - remote.offset) {
      return ReadOutsideRegion(remote.region, remote.offset, length, m.size);
    }
    *src = m.base + remote.offset;
    return Status::OK();
  }

  // The region is written by the server process while we copy, as an RDMA READ races with the CPU; callers validate
  // what they read (node checksums, extent checksums). Touching every line first lets the misses of a node overlap
  // instead of queueing behind memcpy's in-order loads.
  static void Copy(void* dest, const char* src, uint32_t length) {
    if (length <= 4096) {
      for (uint32_t line = 0; line < length; line += 64) __builtin_prefetch(src + line);
    }
    std::memcpy(dest, src, length);
  }

  // Sleeps until the time, in slices of at most 1 ms so that Close() releases the thread (its health turns to the
  // error). The thread's timer slack is 1 ns while it waits (Linux's default of 50 us would make every wake-up that
  // late; the caller's own setting is put back after); even so a wake-up comes ~30-40 us late on this project's VMs,
  // and a read's latency is the model's plus that (docs/BENCHMARKS.md). Sleeping, not spinning or yielding, leaves a
  // small client's CPUs to its other work: with dozens of threads waiting on reads, yielding alone kept a core busy.
  Status WaitUntil(Clock::time_point due) {
    const int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (slack > 1) prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    Status status;
    for (auto now = Clock::now(); now < due; now = Clock::now()) {
      if (!rpc_->alive()) {
        status = rpc_->health();
        break;
      }
      std::this_thread::sleep_until(std::min(due, now + std::chrono::milliseconds(1)));
    }
    if (status.ok() && !rpc_->alive()) status = rpc_->health();
    if (slack > 1) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(slack), 0, 0, 0);
    return status;
  }

  struct NicJob {
    Clock::time_point due;
    const char* src;
    void* dest;
    uint32_t length;
    ReadCallback done;
  };

  // Completes reads in the order they reserved the NIC (their due times never decrease: see nic_model.h).
  void NicLoop() {
    MarkTransportThread();
    std::unique_lock lock(nic_mu_);
    while (true) {
      nic_cv_.wait(lock, [&] { return nic_stopping_ || !nic_queue_.empty(); });
      if (nic_stopping_) break;
      const auto due = nic_queue_.front().due;
      if (due - Clock::now() > std::chrono::microseconds(50)) {
        nic_cv_.wait_until(lock, due - std::chrono::microseconds(20), [&] { return nic_stopping_; });
        continue;
      }
      lock.unlock();
      // The last few microseconds: a condition variable is too coarse; yield rather than spin, so that a client on
      // few cores runs its other threads meanwhile.
      while (Clock::now() < due) std::this_thread::yield();
      lock.lock();
      NicJob job = std::move(nic_queue_.front());
      nic_queue_.pop_front();
      lock.unlock();
      std::memcpy(job.dest, job.src, job.length);
      job.done(Status::OK());
      lock.lock();
    }
    std::deque<NicJob> left;
    left.swap(nic_queue_);
    lock.unlock();
    for (NicJob& job : left) job.done(Status::Unavailable(fmt::format("connection to {} closed", uri_)));
  }

  // Sends a MapRequest and receives the reply and its descriptor. The map socket carries one request at a time; a
  // request that fails half-way (timeout, malformed reply) leaves it out of step, so it is not used again.
  Status RequestDescriptor(proto::MapRequest request, bool nic_state, int* fd, uint64_t* size) {
    *fd = -1;
    if (!map_health_.ok()) return map_health_;
    bool refused = false;
    Status s = ExchangeMapRequest(std::move(request), nic_state, fd, size, &refused);
    if (!s.ok() && !refused) {
      map_health_ = Status::Unavailable(fmt::format("region map channel to {} is broken: {}", uri_, s.ToString()));
      shutdown(map_fd_, SHUT_RDWR);
    }
    return s;
  }

  // *refused: the error is the server's answer (the socket is still in step), not a failure of the exchange.
  Status ExchangeMapRequest(proto::MapRequest request, bool nic_state, int* fd, uint64_t* size, bool* refused) {
    const auto deadline = Clock::now() + options_.connect_timeout;
    request.set_nic_state(nic_state);
    std::string frame;
    const uint64_t id = ++map_requests_;
    AppendFrame(frame, FrameType::kMapRequest, 0, id, request.SerializeAsString());
    CELL_RETURN_IF_ERROR(SendAllBy(map_fd_, frame, deadline));
    char header_bytes[kFrameHeaderBytes];
    CELL_RETURN_IF_ERROR(ReceiveWithDescriptor(map_fd_, header_bytes, sizeof(header_bytes), fd, deadline));
    FrameHeader header;
    Status s = DecodeFrameHeader(std::string_view(header_bytes, sizeof(header_bytes)), 1 << 16, &header);
    std::string payload(s.ok() ? header.length : 0, '\0');
    int extra_fd = -1;
    if (s.ok()) s = ReceiveWithDescriptor(map_fd_, payload.data(), payload.size(), &extra_fd, deadline);
    if (extra_fd >= 0) close(extra_fd);
    if (s.ok() && header.request_id != id) {
      s = Status::Unavailable(fmt::format("map reply for request {} while waiting for {}", header.request_id, id));
    } else if (s.ok() && header.type == FrameType::kError) {
      s = ErrorFromFrame(header.aux, payload);
      *refused = true;
    } else if (s.ok()) {
      proto::MapReply reply;
      if (header.type != FrameType::kMapReply || !reply.ParseFromString(payload) || *fd < 0 ||
          (!nic_state && reply.region() != request.region())) {
        s = Status::Unavailable(fmt::format("malformed map reply from {}", uri_));
      }
      *size = reply.size();
    }
    if (!s.ok() && *fd >= 0) {
      close(*fd);
      *fd = -1;
    }
    return s;
  }

  // Maps region `id` read-only (once per region per connection).
  Status MapRegion(uint32_t id, Mapping* out) {
    std::lock_guard lock(map_mu_);
    const MappingTable* table = table_.load();
    if (auto it = table->find(id); it != table->end()) {
      *out = it->second;
      return Status::OK();
    }
    proto::MapRequest request;
    request.set_region(id);
    int fd = -1;
    uint64_t size = 0;
    CELL_RETURN_IF_ERROR(RequestDescriptor(request, false, &fd, &size));
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < size) {
      close(fd);
      return Status::Internal(fmt::format("region {} descriptor is smaller than the region", id));
    }
    void* p = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      return Status::Unavailable(fmt::format("cannot map region {}: {}", id, std::strerror(errno)));
    }
    // Where the server's region is in transparent huge pages (meganode/region.cc), so is this mapping of it: a
    // client-side search then misses the TLB far less. Advisory.
    madvise(p, size, MADV_HUGEPAGE);
    // Readers use the table without a lock: publish a new one and keep the old until the connection goes.
    auto next = std::make_unique<MappingTable>(*table);
    (*next)[id] = Mapping{static_cast<const char*>(p), size};
    *out = (*next)[id];
    table_.store(next.get(), std::memory_order_release);
    tables_.push_back(std::move(next));
    return Status::OK();
  }

  const std::string uri_;
  std::unique_ptr<SocketChannel> rpc_;
  const int map_fd_;
  const ConnectOptions options_;
  const NicModel model_;

  std::mutex map_mu_;  // serialises map requests and guards tables_, map_requests_ and map_health_
  uint64_t map_requests_ = 0;
  Status map_health_;
  std::atomic<const MappingTable*> table_{nullptr};
  std::vector<std::unique_ptr<MappingTable>> tables_;

  std::atomic<int64_t>* nic_word_ = nullptr;
  std::thread nic_thread_;
  std::mutex nic_mu_;
  std::condition_variable nic_cv_;
  std::deque<NicJob> nic_queue_;
  bool nic_stopping_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<Server>> Listen(const Endpoint& endpoint, const ServerOptions& options, RpcHandler* handler) {
  auto model = NicModel::Parse(options.nic_model);
  if (!model.ok()) return model.status();
  int nic_fd = -1;
  if (model->enabled()) {
    nic_fd = memfd_create("cell-nic-model", MFD_CLOEXEC);
    if (nic_fd < 0 || ftruncate(nic_fd, kNicStateBytes) != 0) {
      if (nic_fd >= 0) close(nic_fd);
      return Status::Unavailable(fmt::format("cannot create the NIC model state: {}", std::strerror(errno)));
    }
  }
  gid_t gid = static_cast<gid_t>(-1);
  if (!options.shm_group.empty()) {
    std::vector<char> buffer(16384);
    struct group grp {};
    struct group* found = nullptr;
    if (getgrnam_r(options.shm_group.c_str(), &grp, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
      if (nic_fd >= 0) close(nic_fd);
      return Status::InvalidArgument(fmt::format("--shm-group: no group named '{}'", options.shm_group));
    }
    gid = found->gr_gid;
  }
  StatusOr<int> fd = ListenUnix(endpoint.path, gid == static_cast<gid_t>(-1) ? 0600 : 0660, gid);
  if (!fd.ok()) {
    if (nic_fd >= 0) close(nic_fd);
    return fd.status();
  }
  auto server = std::make_unique<ShmServer>(endpoint.path, *fd, options, handler, *model, nic_fd, gid);
  CELL_RETURN_IF_ERROR(server->Start());
  return std::unique_ptr<Server>(std::move(server));
}

StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint, const ConnectOptions& options) {
  const std::string uri = Uri(endpoint.path);
  StatusOr<int> rpc_fd = ConnectUnix(endpoint.path, Clock::now() + options.connect_timeout);
  if (!rpc_fd.ok()) return rpc_fd.status();
  proto::HelloReply reply;
  auto rpc = SocketChannel::Open(*rpc_fd, uri, proto::ROLE_RPC, options, &reply);
  if (!rpc.ok()) return rpc.status();
  StatusOr<int> map_fd = ConnectUnix(endpoint.path, Clock::now() + options.connect_timeout);
  if (!map_fd.ok()) return map_fd.status();
  proto::HelloReply map_reply;
  if (Status s = ExchangeHello(*map_fd, uri, proto::ROLE_MAP, options, &map_reply); !s.ok()) {
    close(*map_fd);
    return s;
  }
  const NicModel model{reply.nic_reads_per_s(), reply.nic_bytes_per_s(), reply.nic_latency_us()};
  auto connection = std::make_unique<ShmConnection>(uri, std::move(*rpc), *map_fd, options, model);
  if (model.enabled()) CELL_RETURN_IF_ERROR(connection->StartNicModel());
  return std::unique_ptr<Connection>(std::move(connection));
}

}  // namespace cell::rpc::shm
