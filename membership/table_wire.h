// The region table's wire form (membership/proto/table.proto) to and from the membership structs.
#pragma once

#include "membership/membership.h"
#include "membership/proto/table.pb.h"

namespace cell::membership {

inline void ToProto(const ServerInfo& in, proto::Server* out) {
  out->set_id(in.id);
  out->set_capacity_bytes(in.capacity_bytes);
  for (const auto& [transport, uri] : in.addresses) (*out->mutable_addresses())[transport] = uri;
}

inline ServerInfo FromProto(const proto::Server& in) {
  ServerInfo out;
  out.id = in.id();
  out.capacity_bytes = in.capacity_bytes();
  for (const auto& [transport, uri] : in.addresses()) out.addresses[transport] = uri;
  return out;
}

inline void ToProto(const RegionEntry& in, proto::Region* out) {
  out->set_region(in.region);
  out->set_owner(in.owner);
  out->set_epoch(in.epoch);
  out->set_log_epoch(in.log_epoch);
}

inline RegionEntry FromProto(const proto::Region& in) {
  return RegionEntry{.region = in.region(), .owner = in.owner(), .epoch = in.epoch(), .log_epoch = in.log_epoch()};
}

}  // namespace cell::membership
