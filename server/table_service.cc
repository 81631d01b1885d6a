#include "server/table_service.h"

#include <fmt/format.h>

#include "membership/table_wire.h"

namespace cell::server {

using membership::proto::TableMethod;

bool TableService::IsTableMethod(uint16_t method) {
  return method != TableMethod::TABLE_METHOD_NONE && membership::proto::TableMethod_IsValid(method);
}

void TableService::Handle(uint16_t method, std::string_view request, rpc::Responder responder) {
  membership::proto::TableRequest req;
  if (!req.ParseFromArray(request.data(), static_cast<int>(request.size()))) {
    responder.Fail(Status::InvalidArgument(fmt::format("malformed table request ({} bytes)", request.size())));
    return;
  }
  std::string out;
  switch (method) {
    case TableMethod::TABLE_LIST_SERVERS: {
      auto servers = table_->ListServers();
      if (!servers.ok()) return responder.Fail(servers.status());
      membership::proto::ServerList list;
      for (const auto& s : *servers) membership::ToProto(s, list.add_servers());
      list.SerializeToString(&out);
      break;
    }
    case TableMethod::TABLE_GET_REGION: {
      auto entry = table_->GetRegion(req.region());
      if (!entry.ok()) return responder.Fail(entry.status());
      membership::proto::Region region;
      membership::ToProto(*entry, &region);
      region.SerializeToString(&out);
      break;
    }
    case TableMethod::TABLE_LIST_REGIONS: {
      auto regions = table_->ListRegions();
      if (!regions.ok()) return responder.Fail(regions.status());
      membership::proto::RegionList list;
      for (const auto& r : *regions) membership::ToProto(r, list.add_regions());
      list.SerializeToString(&out);
      break;
    }
    case TableMethod::TABLE_ROOT_REGION: {
      auto root = table_->RootRegion();
      if (!root.ok()) return responder.Fail(root.status());
      membership::proto::Region region;
      region.set_region(*root);
      region.SerializeToString(&out);
      break;
    }
    default:
      return responder.Fail(Status::InvalidArgument(fmt::format("unknown table method {}", method)));
  }
  responder.Reply(out);
}

}  // namespace cell::server
