// A transport test server in its own process, so tests can kill it: serves TestHandler and region 1 (4 MiB, seed
// 7) at --uri, prints "READY <uri>" on stdout, then waits to be killed.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "test/rpc/test_handler.h"

int main(int argc, char** argv) {
  std::string uri;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--uri=", 6) == 0) uri = argv[i] + 6;
  }
  if (uri.empty()) {
    std::fprintf(stderr, "usage: rpc_test_server --uri=tcp://127.0.0.1:0\n");
    return 2;
  }
  cell::testing::TestHandler handler;
  cell::testing::TestRegion region(1, 4 << 20, 7);
  auto server = cell::rpc::Listen(uri, cell::rpc::ServerOptions{}, &handler);
  if (!server.ok()) {
    std::fprintf(stderr, "rpc_test_server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  if (auto s = (*server)->RegisterRegion(region.registration()); !s.ok()) {
    std::fprintf(stderr, "rpc_test_server: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("READY %s\n", (*server)->uri().c_str());
  std::fflush(stdout);
  while (true) pause();
}
