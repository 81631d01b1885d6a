// Serves a region table to clients over RPC (methods TABLE_* of membership/proto/table.proto). This is how clients of
// an embedded server (--membership=embedded) find regions: they have no ZooKeeper to read.
#pragma once

#include <cstdint>
#include <string_view>

#include "membership/membership.h"
#include "rpc/transport.h"

namespace cell::server {

class TableService {
 public:
  // `table` must outlive the service and answer at once (an in-memory table: requests run on the RPC workers).
  explicit TableService(membership::RegionTableReader* table) : table_(table) {}

  static bool IsTableMethod(uint16_t method);
  // Answers a table request (IsTableMethod(method) must hold).
  void Handle(uint16_t method, std::string_view request, rpc::Responder responder);

 private:
  membership::RegionTableReader* table_;
};

}  // namespace cell::server
