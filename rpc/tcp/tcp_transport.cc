#include "rpc/tcp/tcp_transport.h"

#include <fmt/format.h>

#include "rpc/socket_channel.h"
#include "rpc/socket_server.h"
#include "rpc/socket_util.h"

namespace cell::rpc::tcp {
namespace {

class TcpConnection final : public Connection {
 public:
  TcpConnection(std::string uri, std::unique_ptr<SocketChannel> rpc, std::unique_ptr<SocketChannel> reads)
      : uri_(std::move(uri)), rpc_(std::move(rpc)), reads_(std::move(reads)) {}
  ~TcpConnection() override { Close(); }

  void Call(uint16_t method, std::string_view request, RpcCallback done, Clock::time_point deadline) override {
    rpc_->Call(method, request, std::move(done), deadline);
  }
  void Read(GlobalPtr remote, uint32_t length, void* dest, ReadCallback done) override {
    reads_->Read(remote, length, dest, std::move(done));
  }
  Status health() const override {
    Status s = rpc_->health();
    return s.ok() ? reads_->health() : s;
  }
  const std::string& uri() const override { return uri_; }
  void Close() override {
    const Status why = Status::Unavailable(fmt::format("connection to {} closed by the client", uri_));
    rpc_->Close(why);
    reads_->Close(why);
  }

 private:
  const std::string uri_;
  std::unique_ptr<SocketChannel> rpc_;
  std::unique_ptr<SocketChannel> reads_;
};

std::string Uri(const std::string& host, uint16_t port) { return fmt::format("tcp://{}:{}", host, port); }

}  // namespace

StatusOr<std::unique_ptr<Server>> Listen(const Endpoint& endpoint, const ServerOptions& options, RpcHandler* handler) {
  uint16_t port = 0;
  StatusOr<int> fd = ListenTcp(endpoint.host, endpoint.port, &port);
  if (!fd.ok()) return fd.status();
  auto server = std::make_unique<SocketServer>(Uri(endpoint.host, port), *fd, options,
                                               SocketServer::Personality{.serve_reads = true}, handler);
  CELL_RETURN_IF_ERROR(server->Start());
  return std::unique_ptr<Server>(std::move(server));
}

StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint, const ConnectOptions& options) {
  const std::string uri = Uri(endpoint.host, endpoint.port);
  std::unique_ptr<SocketChannel> channels[2];
  const proto::Role roles[2] = {proto::ROLE_RPC, proto::ROLE_READ};
  for (int i = 0; i < 2; ++i) {
    StatusOr<int> fd = ConnectTcp(endpoint.host, endpoint.port, Clock::now() + options.connect_timeout);
    if (!fd.ok()) return fd.status();
    proto::HelloReply reply;
    auto channel = SocketChannel::Open(*fd, uri, roles[i], options, &reply);
    if (!channel.ok()) return channel.status();
    channels[i] = std::move(*channel);
  }
  return std::unique_ptr<Connection>(
      std::make_unique<TcpConnection>(uri, std::move(channels[0]), std::move(channels[1])));
}

}  // namespace cell::rpc::tcp
