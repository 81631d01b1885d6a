#include "rpc/verbs/verbs_transport.h"

#include <infiniband/verbs.h>

namespace cell::rpc::verbs {
namespace {

Status CheckDevice() {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list != nullptr) ibv_free_device_list(list);
  if (count == 0) {
    return Status::Unavailable(
        "no RDMA device: verbs:// needs an RDMA NIC or a Soft-RoCE device (rdma link add rxe0 type rxe netdev "
        "<if>); use tcp:// or shm:// on this host");
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::unique_ptr<Server>> Listen(const Endpoint&, const ServerOptions&, RpcHandler*) {
  CELL_RETURN_IF_ERROR(CheckDevice());
  return Status::Unavailable("verbs transport: not built yet");
}

StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint&, const ClientOptions&) {
  CELL_RETURN_IF_ERROR(CheckDevice());
  return Status::Unavailable("verbs transport: not built yet");
}

}  // namespace cell::rpc::verbs
