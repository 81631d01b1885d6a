// A Cell server: joins the cluster's membership, listens on its transports and answers requests.
//
// This is the server's skeleton (membership, listeners, the table service, fencing); the store's requests (search,
// get, put, delete, scan) join the same handler.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "membership/membership.h"
#include "rpc/transport.h"
#include "server/table_service.h"

namespace cell::server {

struct ServerConfig {
  uint64_t id = 0;                     // 0: 1 with embedded membership; required with ZooKeeper
  std::vector<std::string> listen;     // transport URIs (port 0 picks a free port)
  std::string membership = "embedded";  // "embedded" or zk://host:port[,...][/root/cluster]
  std::string zk_auth;                 // "user:password" (digest); ZooKeeper only
  std::chrono::milliseconds zk_session_timeout{6000};
  uint64_t capacity_bytes = uint64_t{1} << 30;
  int workers = 1;
};

class CellServer final : public rpc::RpcHandler {
 public:
  // Opens the membership, starts the listeners, registers this server and makes sure the cluster has a root region.
  static StatusOr<std::unique_ptr<CellServer>> Start(const ServerConfig& config);
  ~CellServer() override;

  // The URIs actually bound (with real ports), one per --listen.
  const std::vector<std::string>& uris() const { return uris_; }
  uint64_t id() const { return config_.id; }
  membership::Membership& membership() { return *membership_; }

  // Called periodically by the main loop: after a ZooKeeper session expiry (fencing) renews the session, registers
  // again and re-reads the table. Returns the serving status after that.
  Status CheckFencing();

  // Unregisters (a clean leave) and stops the listeners. Idempotent.
  void Stop();

  void Handle(uint16_t method, std::string_view request, rpc::Responder responder) override;

 private:
  explicit CellServer(const ServerConfig& config) : config_(config) {}
  membership::ServerInfo Self() const;

  ServerConfig config_;
  std::unique_ptr<membership::Membership> membership_;
  std::unique_ptr<TableService> table_service_;  // embedded only: a ZooKeeper cluster's clients read ZooKeeper
  std::vector<std::unique_ptr<rpc::Server>> listeners_;
  std::vector<std::string> uris_;
  std::atomic<bool> fenced_{false};
  bool stopped_ = false;
};

}  // namespace cell::server
