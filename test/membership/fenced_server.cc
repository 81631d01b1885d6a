// A stand-in server for the fencing test: registers with a short ZooKeeper session, then every 20 ms prints whether
// it may serve ("serving" or "fenced: <why>"). When its session has expired it renews it and registers again (and
// says so, "renewing: <status> after <ms> ms", if that failed or took over a second).
//   fenced_server <zk connect> <cluster> <server id>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "membership/zookeeper_membership.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: fenced_server <zk connect> <cluster> <server id>\n");
    return 2;
  }
  cell::membership::ZooKeeperOptions options;
  options.connect = argv[1];
  options.cluster = argv[2];
  options.session_timeout = std::chrono::milliseconds(2000);
  auto m = cell::membership::ZooKeeperMembership::Open(options);
  if (!m.ok()) {
    std::fprintf(stderr, "fenced_server: %s\n", m.status().ToString().c_str());
    return 1;
  }
  const cell::membership::ServerInfo self{std::strtoull(argv[3], nullptr, 10), {{"tcp", "tcp://127.0.0.1:1"}}, 1};
  if (auto s = (*m)->RegisterServer(self); !s.ok()) {
    std::fprintf(stderr, "fenced_server: %s\n", s.ToString().c_str());
    return 1;
  }
  while (true) {
    const cell::Status s = (*m)->ServingStatus();
    if (s.ok()) {
      std::printf("serving\n");
    } else {
      std::printf("fenced: %s\n", s.ToString().c_str());
      if (s.code() == cell::Status::Code::kFailedPrecondition) {
        // Renewing and registering wait on ZooKeeper: a failure, or a slow success, is reported for the test's log.
        const auto began = std::chrono::steady_clock::now();
        cell::Status renewed = (*m)->Renew();
        if (renewed.ok()) renewed = (*m)->RegisterServer(self);
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began).count();
        if (!renewed.ok() || ms > 1000) {
          std::printf("renewing: %s after %lld ms\n", renewed.ToString().c_str(), static_cast<long long>(ms));
        }
      }
    }
    std::fflush(stdout);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(20));  // the pace of its status reports, not a wait for anything
  }
}
