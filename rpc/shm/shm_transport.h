// shm:///path/to/socket — for clients on the server's own host.
//
// RPC runs over a Unix socket (the same frames and worker pool as tcp). One-sided reads need no server at all: the
// client asks once per region, over a second Unix socket, for a read-only descriptor of the region's memfd
// (SCM_RIGHTS), maps it PROT_READ, and from then on a read is a copy out of that mapping, like an RDMA READ. (The
// first read of a region waits for its descriptor: one round trip on the map socket, bounded by the connect timeout,
// answered by a server worker; later reads never involve the server.) Only memfd-backed regions can be registered. A
// read fails with Unavailable once the RPC socket reports the server gone, so a client never reads a dead server's
// memory as if it were live.
#pragma once

#include <memory>

#include "rpc/transport.h"

namespace cell::rpc::shm {

StatusOr<std::unique_ptr<Server>> Listen(const Endpoint& endpoint, const ServerOptions& options, RpcHandler* handler);
StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint, const ConnectOptions& options);

}  // namespace cell::rpc::shm
