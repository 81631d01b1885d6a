// tcp://host:port — the transport for hosts without RDMA.
//
// A client connection is two sockets: one carries RPCs (served by the server's worker pool), the other one-sided
// reads (served by the server's NIC threads, which emulate an RDMA NIC: they copy region bytes without the worker
// pool, tree locks or the handler, and their CPU is reported apart from the workers').
#pragma once

#include <memory>

#include "rpc/transport.h"

namespace cell::rpc::tcp {

StatusOr<std::unique_ptr<Server>> Listen(const Endpoint& endpoint, const ServerOptions& options, RpcHandler* handler);
StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint, const ConnectOptions& options);

}  // namespace cell::rpc::tcp
