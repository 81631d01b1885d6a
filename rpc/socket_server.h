// The server half of the stream transports (tcp and shm): framed RPC over sockets, served by a fixed pool of
// worker threads, plus (tcp) a pool of NIC threads that serve one-sided reads.
//
// Threads:
//   acceptor      accepts connections and hands them to the worker pool; does no request work.
//   workers (N)   share one epoll set. Connections are armed EPOLLONESHOT, so one worker at a time owns a
//                 connection: it drains the socket, runs the handler for every whole request, writes all replies
//                 with one send(), and re-arms. All RPC CPU (socket I/O included) is spent on these N threads.
//   NIC threads   the same loop over connections whose Hello said ROLE_READ: bounds-check and copy region bytes,
//                 never touching the handler, tree locks or the worker pool.
// The first frame of a connection is kHello: it says whether the connection carries RPCs, reads or (shm) region
// descriptor requests. With keys (ServerOptions::keys) the connection then proves it holds one (rpc/auth.h) before
// any other frame is accepted; every RPC is checked against ServerOptions::authorize.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "rpc/frame.h"
#include "rpc/proto/transport.pb.h"
#include "rpc/region_table.h"
#include "rpc/transport.h"

namespace cell::rpc {

class SocketServer : public Server {
 public:
  class Conn;

  // What a transport adds to the common server.
  struct Personality {
    bool serve_reads = false;    // tcp: accept ROLE_READ connections and serve kReadRequest on NIC threads
    bool share_regions = false;  // shm: accept ROLE_MAP connections and answer kMapRequest with descriptors
  };

  SocketServer(std::string uri, int listen_fd, const ServerOptions& options, Personality personality,
               RpcHandler* handler);
  ~SocketServer() override;

  Status Start();
  const std::string& uri() const override { return uri_; }
  Status RegisterRegion(const RegionRegistration& region) override;
  ServerStats stats() const override;
  void Stop() override;

 protected:
  // shm: values put into every HelloReply (its NIC model).
  virtual void FillHelloReply(proto::HelloReply* reply) const { (void)reply; }
  // Called on a connection's Hello, before anything else: an error is sent to the client as the Hello's answer and
  // the connection closed. shm checks the peer process's credentials here.
  virtual Status AdmitPeer(int fd) const {
    (void)fd;
    return Status::OK();
  }
  // shm: answers a kMapRequest on `fd`; returns false (after logging) to close the connection.
  virtual bool AnswerMapRequest(int fd, uint64_t request_id, std::string_view payload) {
    (void)fd, (void)request_id, (void)payload;
    return false;
  }
  const RegionTable& regions() const { return regions_; }
  const ServerOptions& options() const { return options_; }

 private:
  struct Pool {
    int epoll_fd = -1;
    std::vector<std::thread> threads;
    std::atomic<double> exited_cpu_seconds{0};
    std::vector<clockid_t> clocks;  // CPU clocks of the live threads
    mutable std::mutex clocks_mu;
  };

  void AcceptLoop();
  void PoolLoop(Pool* pool, int index, const std::vector<int>& cpus, const char* what);
  void Serve(Conn* conn, Pool* pool);
  // Handles one frame; false closes the connection (the reason is already logged).
  bool Dispatch(Conn* conn, const FrameHeader& header, std::string_view payload, Pool** move_to);
  // The handshake's frames (kHello, then kAuth when keys are required), before the connection has its role.
  bool Handshake(Conn* conn, const FrameHeader& header, std::string_view payload, Pool** move_to);
  void CloseConn(Conn* conn, const std::string& reason);
  static double PoolCpuSeconds(const Pool& pool);

  const std::string uri_;
  const int listen_fd_;
  const ServerOptions options_;
  const Personality personality_;
  RpcHandler* const handler_;
  RegionTable regions_;

  Pool workers_;
  Pool nics_;
  int wake_fd_ = -1;  // eventfd; written once at Stop to wake every pool thread
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;

  std::mutex conns_mu_;
  std::unordered_map<Conn*, std::shared_ptr<Conn>> conns_;

  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> reads_{0};
  std::atomic<uint64_t> read_bytes_{0};
  std::atomic<uint64_t> protocol_errors_{0};
};

}  // namespace cell::rpc
