// rdma_cm plumbing shared by the verbs server (verbs_server.cc) and client (verbs_connection.cc).
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "cell/status.h"
#include "rpc/transport.h"

namespace cell::rpc::verbs {

inline constexpr int kListenBacklog = 128;
inline constexpr int kCompletionsPerPoll = 32;
inline constexpr int kPollsPerTurn = 8;  // then a busy connection yields its worker to the others (fairness)

// OK if the host has at least one RDMA device; otherwise Unavailable "no RDMA device ...".
Status CheckDevice();
std::string Uri(const std::string& host, uint16_t port);
StatusOr<sockaddr_storage> ResolveAddress(const std::string& host, uint16_t port, bool passive);
std::string AddressText(const sockaddr* sa);

// What we keep of an rdma_cm event: it is acknowledged at once (rdma_destroy_id waits for unacknowledged events,
// so holding one while tearing down could deadlock).
struct CmEvent {
  rdma_cm_event_type type{};
  rdma_cm_id* id = nullptr;
  int status = 0;
  std::string private_data;
  uint8_t initiator_depth = 0;
};

// Takes the next event off a non-blocking channel; false if there is none.
bool NextCmEvent(rdma_event_channel* ec, CmEvent* out);
int MillisLeft(Clock::time_point deadline);

}  // namespace cell::rpc::verbs
