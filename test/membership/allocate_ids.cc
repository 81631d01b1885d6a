// Allocates region ids from ZooKeeper in its own process and prints them, one per line, for the test that checks
// that concurrent processes get disjoint ids.
//   allocate_ids <zk connect> <cluster> <count>
#include <cstdio>
#include <cstdlib>

#include "membership/zookeeper_membership.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: allocate_ids <zk connect> <cluster> <count>\n");
    return 2;
  }
  cell::membership::ZooKeeperOptions options;
  options.connect = argv[1];
  options.cluster = argv[2];
  auto m = cell::membership::ZooKeeperMembership::Open(options);
  if (!m.ok()) {
    std::fprintf(stderr, "allocate_ids: %s\n", m.status().ToString().c_str());
    return 1;
  }
  const int count = std::atoi(argv[3]);
  for (int i = 0; i < count; ++i) {
    auto id = (*m)->AllocateRegionId();
    if (!id.ok()) {
      std::fprintf(stderr, "allocate_ids: %s\n", id.status().ToString().c_str());
      return 1;
    }
    std::printf("%u\n", *id);
  }
  return 0;
}
