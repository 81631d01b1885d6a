#include "client/remote_table.h"

#include <fmt/format.h>

#include "membership/proto/table.pb.h"
#include "membership/table_wire.h"
#include "membership/zookeeper_membership.h"

namespace cell::client {

using membership::proto::TableMethod;

StatusOr<std::string> RemoteTable::Call(uint16_t method, uint32_t region) {
  std::shared_ptr<rpc::Connection> connection;
  {
    std::lock_guard lock(mu_);
    if (connection_ != nullptr && connection_->health().ok()) connection = connection_;
  }
  if (connection == nullptr) {
    // Connect without the lock, so that callers never queue behind each other's connect timeouts; if several
    // connect at once, the last one's connection stays and the others are used once and dropped.
    auto fresh = rpc::Connect(uri_, options_);
    if (!fresh.ok()) {
      return Status::FromCode(fresh.status().code(),
                              fmt::format("reading the region table from {}: {}", uri_, fresh.status().message()));
    }
    connection = std::move(*fresh);
    std::lock_guard lock(mu_);
    connection_ = connection;
  }
  membership::proto::TableRequest request;
  request.set_region(region);
  auto reply = rpc::CallSync(*connection, method, request.SerializeAsString());
  if (!reply.ok() && (reply.status().IsUnavailable() || reply.status().IsDeadlineExceeded())) {
    return Status::FromCode(reply.status().code(),
                            fmt::format("reading the region table from {}: {}", uri_, reply.status().message()));
  }
  return reply;
}

namespace {
template <typename Message>
Status Parse(const std::string& bytes, Message* message, std::string_view uri) {
  if (message->ParseFromString(bytes)) return Status::OK();
  return Status::Corruption(fmt::format("malformed region table reply ({} bytes) from {}", bytes.size(), uri));
}
}  // namespace

StatusOr<std::vector<membership::ServerInfo>> RemoteTable::ListServers() {
  CELL_ASSIGN_OR_RETURN(std::string bytes, Call(TableMethod::TABLE_LIST_SERVERS));
  membership::proto::ServerList list;
  CELL_RETURN_IF_ERROR(Parse(bytes, &list, uri_));
  std::vector<membership::ServerInfo> out;
  for (const auto& s : list.servers()) out.push_back(membership::FromProto(s));
  return out;
}

StatusOr<membership::RegionEntry> RemoteTable::GetRegion(uint32_t region) {
  CELL_ASSIGN_OR_RETURN(std::string bytes, Call(TableMethod::TABLE_GET_REGION, region));
  membership::proto::Region entry;
  CELL_RETURN_IF_ERROR(Parse(bytes, &entry, uri_));
  return membership::FromProto(entry);
}

StatusOr<std::vector<membership::RegionEntry>> RemoteTable::ListRegions() {
  CELL_ASSIGN_OR_RETURN(std::string bytes, Call(TableMethod::TABLE_LIST_REGIONS));
  membership::proto::RegionList list;
  CELL_RETURN_IF_ERROR(Parse(bytes, &list, uri_));
  std::vector<membership::RegionEntry> out;
  for (const auto& r : list.regions()) out.push_back(membership::FromProto(r));
  return out;
}

StatusOr<uint32_t> RemoteTable::RootRegion() {
  CELL_ASSIGN_OR_RETURN(std::string bytes, Call(TableMethod::TABLE_ROOT_REGION));
  membership::proto::Region entry;
  CELL_RETURN_IF_ERROR(Parse(bytes, &entry, uri_));
  return entry.region();
}

StatusOr<std::unique_ptr<membership::RegionTableReader>> OpenRegionTable(std::string_view cluster_uri,
                                                                         const TableOptions& options) {
  if (cluster_uri.substr(0, 5) == "zk://") {
    CELL_ASSIGN_OR_RETURN(membership::ZooKeeperOptions zk, membership::ParseZooKeeperUri(cluster_uri));
    zk.session_timeout = options.zk_session_timeout;
    zk.operation_timeout = options.zk_operation_timeout;
    zk.create_layout = false;  // a reader: a mistyped cluster path is NotFound, not a new empty cluster
    CELL_ASSIGN_OR_RETURN(auto table, membership::ZooKeeperMembership::Open(zk));
    return std::unique_ptr<membership::RegionTableReader>(std::move(table));
  }
  if (!rpc::Endpoint::Parse(cluster_uri).ok()) {
    return Status::InvalidArgument(fmt::format(
        "'{}' is not a cluster URI: expected zk://host:port[,host:port...][/root/cluster] (a ZooKeeper cluster) or "
        "the tcp://host:port, shm:///path or verbs://host:port of an embedded server",
        cluster_uri));
  }
  return std::unique_ptr<membership::RegionTableReader>(
      std::make_unique<RemoteTable>(std::string(cluster_uri), options.rpc));
}

}  // namespace cell::client
