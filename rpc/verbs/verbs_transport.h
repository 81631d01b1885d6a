// verbs://host:port — RDMA through rdma-core (libibverbs + librdmacm).
//
// Connections are RC queue pairs set up with rdma_cm. RPC is SEND/RECV into pre-posted receive buffers with
// credit-based flow control; one-sided reads are IBV_WR_RDMA_READ into registered client buffers. Server regions
// are registered with remote read access only (never remote write). Without an RDMA device, Listen and Connect fail
// with "no RDMA device".
#pragma once

#include <memory>

#include "rpc/transport.h"

namespace cell::rpc::verbs {

StatusOr<std::unique_ptr<Server>> Listen(const Endpoint& endpoint, const ServerOptions& options,
                                         RpcHandler* handler);
StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint, const ClientOptions& options);

}  // namespace cell::rpc::verbs
