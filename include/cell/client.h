// The Cell client: the C++ API a database layer uses. Thread-safe; errors come back as Status values.
//
//   cell::ClientOptions options;
//   options.cluster = "zk://127.0.0.1:2181/cell/default";   // or an embedded server: "tcp://127.0.0.1:7000"
//   auto client = cell::Client::Open(options);
//   if (!client.ok()) { ... client.status().ToString() ... }
//   auto servers = (*client)->Servers();
//
// The key-value operations (Get, Put, Delete, Scan) join this class with the distributed store.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cell/status.h"

namespace cell {

struct ClientOptions {
  // Where the cluster's region table is:
  //   zk://host:port[,host:port...][/root/cluster]   a cluster whose membership is in ZooKeeper (default path
  //                                                  /cell/default)
  //   tcp://host:port, shm:///path, verbs://host:port  a server started with --membership=embedded
  std::string cluster;
  // How long one request (to a server or to ZooKeeper) may take before it fails with DeadlineExceeded or
  // Unavailable.
  std::chrono::milliseconds timeout{5000};
};

struct ServerDescription {
  uint64_t id = 0;
  std::map<std::string, std::string> addresses;  // transport ("tcp", "shm", "verbs") -> URI
  uint64_t capacity_bytes = 0;
};

struct RegionDescription {
  uint32_t id = 0;
  uint64_t owner = 0;  // server id; 0 while the region has no owner (its server failed, not yet taken over)
  uint64_t epoch = 0;  // grows by one at every change of owner
  bool root = false;   // the lowest region: holds the root pointer
};

class Client {
 public:
  // Connects to the cluster and reads its live servers once: InvalidArgument for a malformed URI, Unavailable (or
  // DeadlineExceeded) if nothing answers within the timeout, NotFound if ZooKeeper holds no such cluster.
  static StatusOr<std::unique_ptr<Client>> Open(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The live servers, by id.
  StatusOr<std::vector<ServerDescription>> Servers();
  // The region table, by region id.
  StatusOr<std::vector<RegionDescription>> Regions();

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cell
