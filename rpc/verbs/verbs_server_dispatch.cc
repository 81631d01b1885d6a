// The verbs server's side of the conversation on a connection: the handshake (Hello, then the key's proof when
// keys are required), requests handed to the RpcHandler, and the region list (with rkeys) for one-sided reads. A
// frame out of turn refuses or closes only its own connection.
#include <fmt/format.h>

#include <mutex>
#include <string>
#include <string_view>

#include "common/diagnostics.h"
#include "rpc/auth.h"
#include "rpc/proto/transport.pb.h"
#include "rpc/verbs/verbs_server.h"

namespace cell::rpc::verbs {

void VerbsServer::Dispatch(const std::shared_ptr<Conn>& conn, const FrameHeader& header, std::string_view payload,
                           std::string* protocol_error) {
  {
    std::lock_guard lock(conn->mu);
    if (conn->refused) return;  // nothing more is served; the connection closes once the refusal is sent
  }
  if (!conn->auth.authenticated()) return Handshake(conn, header, payload);
  switch (header.type) {
    case FrameType::kRequest:
      if (options_.authorize) {
        if (Status allowed = options_.authorize(header.aux, conn->auth.key_name()); !allowed.ok()) {
          diag::Warning("{}: closing connection from {}: {}", uri_, conn->peer, allowed.message());
          std::lock_guard lock(conn->mu);
          conn->refused = true;
          if (!conn->closed) (void)conn->SendReplyLocked(header.request_id, allowed, {});
          return;
        }
      }
      requests_.fetch_add(1, std::memory_order_relaxed);
      handler_->Handle(header.aux, payload, Responder(conn, header.request_id));
      return;
    case FrameType::kMapRequest: {
      // The rkeys go only to connections that have proved their key.
      proto::VerbsRegionList list;
      {
        std::lock_guard lock(core_->devices_mu);
        for (const RegionRegistration& r : regions_.All()) {
          auto it = conn->device->region_mrs.find(r.id);
          if (it == conn->device->region_mrs.end()) continue;
          proto::VerbsRegion* v = list.add_regions();
          v->set_region(r.id);
          v->set_address(reinterpret_cast<uintptr_t>(r.base));
          v->set_size(r.size);
          v->set_rkey(it->second->rkey);
        }
      }
      const std::string bytes = list.SerializeAsString();
      std::lock_guard lock(conn->mu);
      if (!conn->closed) (void)conn->link->SendFrameLocked(FrameType::kMapReply, 0, header.request_id, bytes);
      return;
    }
    default:
      *protocol_error =
          fmt::format("protocol violation: unexpected frame type {} from a client", static_cast<int>(header.type));
      return;
  }
}

void VerbsServer::Handshake(const std::shared_ptr<Conn>& conn, const FrameHeader& header, std::string_view payload) {
  // Answers with `why` and closes the connection once that answer has been sent.
  auto refuse = [&](const Status& why) {
    diag::Warning("{}: closing connection from {}: {}", uri_, conn->peer, why.message());
    std::lock_guard lock(conn->mu);
    conn->refused = true;
    if (!conn->closed) (void)conn->SendReplyLocked(header.request_id, why, {});
  };
  if (conn->auth.awaiting_proof()) {
    if (header.type != FrameType::kAuth) {
      return refuse(Status::PermissionDenied("the connection sent a request before proving its key"));
    }
    if (Status s = conn->auth.OnProof(payload, uri_); !s.ok()) return refuse(s);
    std::lock_guard lock(conn->mu);
    if (!conn->closed) (void)conn->link->SendFrameLocked(FrameType::kAuthReply, 0, header.request_id, {});
    return;
  }
  if (conn->said_hello || header.type != FrameType::kHello) {
    return refuse(Status::PermissionDenied(
        "the connection sent a request before its Hello: a client must say Hello (and prove its key) first"));
  }
  conn->said_hello = true;
  proto::Hello hello;
  if (!hello.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return refuse(Status::InvalidArgument("unparsable Hello"));
  }
  if (hello.role() != proto::ROLE_RPC) {
    return refuse(Status::InvalidArgument(
        fmt::format("this server does not accept {} connections", proto::Role_Name(hello.role()))));
  }
  proto::HelloReply reply;
  if (Status s = conn->auth.OnHello(hello, uri_, &reply); !s.ok()) return refuse(s);
  reply.set_max_message_bytes(options_.max_message_bytes);
  const std::string bytes = reply.SerializeAsString();
  std::lock_guard lock(conn->mu);
  if (!conn->closed) (void)conn->link->SendFrameLocked(FrameType::kHelloReply, 0, header.request_id, bytes);
}

}  // namespace cell::rpc::verbs
