// The verbs server's parts, shared by the files that implement it: the devices regions are registered in, the
// server (rdma_cm listener, worker pool) and one client connection (Conn). verbs_server.cc accepts connections and
// runs the workers that poll their completions; verbs_server_dispatch.cc serves the frames a client sends. The
// protocol is described in verbs_transport.h; per-QP messaging is in verbs_link.h.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "rpc/auth.h"
#include "rpc/region_table.h"
#include "rpc/transport.h"
#include "rpc/verbs/verbs_cm.h"
#include "rpc/verbs/verbs_link.h"
#include "rpc/verbs/verbs_resources.h"

namespace cell::rpc::verbs {

// One RDMA device the server accepts connections on: its PD and the region MRs (remote read only) registered in it.
struct Device {
  ibv_context* context = nullptr;
  uint8_t max_qp_rd_atom = 0;
  PdPtr pd;                                        // declared before the MRs: deallocated after them
  std::unordered_map<uint32_t, MrPtr> region_mrs;  // guarded by ServerCore::devices_mu
};

// What connections share with the server and may need after it stopped (a Responder can outlive the server): the
// event channel their cm ids belong to, and the devices whose PD their QPs use.
struct ServerCore {
  EventChannelPtr ec;
  std::mutex devices_mu;
  std::vector<std::shared_ptr<Device>> devices;
};

// A verbs server (Listen in verbs_transport.h starts one): a thread for rdma_cm events and a pool of workers, each
// serving one connection's completions at a time.
class VerbsServer final : public Server {
 public:
  class Conn;

  VerbsServer(std::string uri, const ServerOptions& options, RpcHandler* handler, std::shared_ptr<ServerCore> core,
              CmIdPtr listen_id)
      : uri_(std::move(uri)),
        options_(options),
        handler_(handler),
        core_(std::move(core)),
        listen_id_(std::move(listen_id)) {}
  ~VerbsServer() override { Stop(); }

  Status Start();
  const std::string& uri() const override { return uri_; }
  Status RegisterRegion(const RegionRegistration& region) override;
  ServerStats stats() const override;
  void Stop() override;

 private:
  static constexpr uint64_t kWakeKey = 0;   // epoll data of the stop eventfd
  static constexpr uint64_t kReadyKey = 1;  // epoll data of the ready-queue eventfd
  static constexpr uint64_t kFirstConnKey = 2;

  void CmLoop();
  void OnConnectRequest(const CmEvent& event);
  void WorkerLoop(int index);
  void Serve(const std::shared_ptr<Conn>& conn);
  // Handles one batch of completions; false if the connection must close (*reason says why; empty: quietly).
  bool ProcessBatch(const std::shared_ptr<Conn>& conn, const ibv_wc* wc, int n, std::string* reason,
                    bool* protocol_error);
  void Dispatch(const std::shared_ptr<Conn>& conn, const FrameHeader& header, std::string_view payload,
                std::string* protocol_error);
  // The handshake's frames (kHello, then kAuth when keys are required), before anything else is accepted.
  void Handshake(const std::shared_ptr<Conn>& conn, const FrameHeader& header, std::string_view payload);
  void CloseConn(const std::shared_ptr<Conn>& conn, const std::string& reason, bool protocol_error);
  std::shared_ptr<Conn> FindConn(uint64_t key);
  void Rearm(const std::shared_ptr<Conn>& conn);

  const std::string uri_;
  const ServerOptions options_;
  RpcHandler* const handler_;
  RegionTable regions_;
  std::shared_ptr<ServerCore> core_;
  CmIdPtr listen_id_;

  int epoll_fd_ = -1;
  WakeFd stop_fd_;     // written once at Stop; never drained, so it wakes every thread
  int ready_fd_ = -1;  // EFD_SEMAPHORE: one count per connection in ready_
  std::mutex ready_mu_;
  std::deque<uint64_t> ready_;  // connections that yielded their worker with completions left
  std::thread cm_thread_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;

  std::mutex conns_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<Conn>> conns_;
  uint64_t next_key_ = kFirstConnKey;  // cm thread only

  mutable std::mutex clocks_mu_;
  std::vector<clockid_t> clocks_;
  double exited_cpu_seconds_ = 0;  // guarded by clocks_mu_

  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> protocol_errors_{0};
};

// One client connection: its QP (in the Link), the handshake's progress, and the replies its Responders send.
class VerbsServer::Conn final : public Responder::Sink {
 public:
  Conn(uint64_t key, std::string peer, std::shared_ptr<ServerCore> core, std::shared_ptr<Device> device,
       rdma_cm_id* cm_id, uint32_t max_message, uint32_t reply_limit, const std::vector<Key>* keys)
      : key(key),
        peer(std::move(peer)),
        core(std::move(core)),
        device(std::move(device)),
        id(cm_id),
        receiver(max_message),
        reply_limit(reply_limit),
        auth(keys) {}

  void Send(uint64_t request_id, const Status& status, std::string_view payload) override {
    std::lock_guard lock(mu);
    if (closed) return;  // the client is gone; nobody waits for this reply
    // A failed post means the QP broke; its flushed completions make the worker close the connection.
    (void)SendReplyLocked(request_id, status, payload);
  }

  Status SendReplyLocked(uint64_t request_id, const Status& status, std::string_view payload) {
    if (status.ok() && payload.size() <= reply_limit) {
      return link->SendFrameLocked(FrameType::kResponse, 0, request_id, payload);
    }
    const Status error = ReplyError(status, payload.size(), reply_limit);
    return link->SendFrameLocked(FrameType::kError, static_cast<uint16_t>(error.code()), request_id, error.message());
  }

  const uint64_t key;
  const std::string peer;
  // Destroyed in reverse: link (QP, CQ, buffers), then the cm id, then the device (PD) and core (event channel).
  const std::shared_ptr<ServerCore> core;
  const std::shared_ptr<Device> device;
  CmIdPtr id;
  std::unique_ptr<Link> link;
  FrameReceiver receiver;  // touched only by the worker serving the connection
  const uint32_t reply_limit;
  ServerAuth auth;          // likewise
  bool said_hello = false;  // likewise

  std::mutex mu;  // guards the link's send state and what follows
  bool closed = false;
  // The connection was refused (a missing or wrong key, a request before the handshake): the refusal is being sent,
  // nothing more is served, and the connection closes once its SENDs have completed.
  bool refused = false;
};

}  // namespace cell::rpc::verbs
