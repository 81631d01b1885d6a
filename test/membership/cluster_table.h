// The membership and region table of a test's cluster, read as a client does: a ZooKeeperMembership opened on the
// cluster's zk:// URI that creates nothing (the cluster's servers made its layout).
#pragma once

#include <memory>
#include <string>

#include "membership/zookeeper_membership.h"

namespace cell::testing {

inline StatusOr<std::unique_ptr<membership::ZooKeeperMembership>> OpenClusterTable(const std::string& cluster) {
  CELL_ASSIGN_OR_RETURN(membership::ZooKeeperOptions options, membership::ParseZooKeeperUri(cluster));
  options.create_layout = false;
  return membership::ZooKeeperMembership::Open(options);
}

}  // namespace cell::testing
