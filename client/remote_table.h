// Reading a cluster's region table, wherever it lives:
//   zk://host:port[,host:port...][/root/cluster]   a ZooKeeper cluster (default path /cell/default): read ZooKeeper
//                                                  directly, creating nothing (NotFound if the cluster is not there)
//   tcp://..., shm://..., verbs://...               an embedded server (--membership=embedded): read it over RPC
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "membership/membership.h"
#include "rpc/transport.h"

namespace cell::client {

struct TableOptions {
  rpc::ConnectOptions rpc;                             // embedded: connect and per-call timeouts
  std::chrono::milliseconds zk_session_timeout{6000};  // ZooKeeper
  std::chrono::milliseconds zk_operation_timeout{10000};
};

// The table of an embedded server, read over RPC. Thread-safe. After its connection fails, the next call connects
// again (the server may have restarted); each call fails within the RPC timeouts (connect, then call), never hangs.
class RemoteTable final : public membership::RegionTableReader {
 public:
  RemoteTable(std::string uri, const rpc::ConnectOptions& options) : uri_(std::move(uri)), options_(options) {}

  StatusOr<std::vector<membership::ServerInfo>> ListServers() override;
  StatusOr<membership::RegionEntry> GetRegion(uint32_t region) override;
  StatusOr<std::vector<membership::RegionEntry>> ListRegions() override;
  StatusOr<uint32_t> RootRegion() override;

 private:
  StatusOr<std::string> Call(uint16_t method, uint32_t region = 0);

  const std::string uri_;
  const rpc::ConnectOptions options_;
  std::mutex mu_;
  std::shared_ptr<rpc::Connection> connection_;  // guarded by mu_; replaced once it fails
};

// Opens the table named by a cluster URI (see the top of this file).
StatusOr<std::unique_ptr<membership::RegionTableReader>> OpenRegionTable(std::string_view cluster_uri,
                                                                         const TableOptions& options = {});

}  // namespace cell::client
