#include "rpc/verbs/verbs_cm.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <infiniband/verbs.h>
#include <netdb.h>

#include <algorithm>
#include <cstring>

namespace cell::rpc::verbs {

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

std::string Uri(const std::string& host, uint16_t port) { return fmt::format("verbs://{}:{}", host, port); }

StatusOr<sockaddr_storage> ResolveAddress(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int err = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); err != 0) {
    return Status::Unavailable(fmt::format("cannot resolve '{}': {}", host, gai_strerror(err)));
  }
  sockaddr_storage addr{};
  const addrinfo* pick = found;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {  // prefer IPv4, as the tcp transport does
      pick = a;
      break;
    }
  }
  std::memcpy(&addr, pick->ai_addr, pick->ai_addrlen);
  freeaddrinfo(found);
  return addr;
}

std::string AddressText(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa == nullptr) return "?";
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    return fmt::format("{}:{}", text, ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    return fmt::format("[{}]:{}", text, ntohs(in6->sin6_port));
  }
  return "?";
}

bool NextCmEvent(rdma_event_channel* ec, CmEvent* out) {
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(ec, &event) != 0) return false;
  out->type = event->event;
  out->id = event->id;
  out->status = event->status;
  out->initiator_depth = event->param.conn.initiator_depth;
  const bool has_conn_param = event->event == RDMA_CM_EVENT_CONNECT_REQUEST ||
                              event->event == RDMA_CM_EVENT_ESTABLISHED || event->event == RDMA_CM_EVENT_REJECTED;
  if (has_conn_param && event->param.conn.private_data != nullptr) {
    out->private_data.assign(static_cast<const char*>(event->param.conn.private_data),
                             event->param.conn.private_data_len);
  } else {
    out->private_data.clear();
  }
  rdma_ack_cm_event(event);
  return true;
}

int MillisLeft(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 60000));
}

}  // namespace cell::rpc::verbs
