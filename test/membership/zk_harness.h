// A real ZooKeeper for tests: started with the project's own deploy/zookeeper/zk-start.sh, stopped at exit.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace cell::testing {

class ZooKeeperHarness {
 public:
  // Starts `nodes` nodes (1 or 3); on failure, connect() is empty and error() says why.
  explicit ZooKeeperHarness(int nodes = 1) {
    const std::string command = std::string(CELL_SOURCE_DIR) + "/deploy/zookeeper/zk-start.sh --nodes=" +
                                std::to_string(nodes) + " 2>&1";
    FILE* out = popen(command.c_str(), "r");
    if (out == nullptr) {
      error_ = "cannot run " + command;
      return;
    }
    char line[4096];
    std::string all;
    while (std::fgets(line, sizeof(line), out) != nullptr) {
      std::string l(line);
      all += l;
      if (!l.empty() && l.back() == '\n') l.pop_back();
      if (l.rfind("ZK_CONNECT=", 0) == 0) connect_ = l.substr(11);
      if (l.rfind("ZK_DIR=", 0) == 0) dir_ = l.substr(7);
    }
    if (pclose(out) != 0 || connect_.empty()) {
      error_ = "zk-start.sh failed:\n" + all;
      connect_.clear();
    }
  }
  ~ZooKeeperHarness() {
    if (!dir_.empty()) {
      const std::string command =
          std::string(CELL_SOURCE_DIR) + "/deploy/zookeeper/zk-stop.sh --dir=" + dir_ + " >/dev/null 2>&1";
      [[maybe_unused]] int rc = std::system(command.c_str());
    }
  }
  const std::string& connect() const { return connect_; }
  const std::string& dir() const { return dir_; }
  const std::string& error() const { return error_; }

  // One ZooKeeper per test process, stopped when the process exits.
  static ZooKeeperHarness& Shared() {
    static ZooKeeperHarness harness;
    return harness;
  }

 private:
  std::string connect_, dir_, error_;
};

}  // namespace cell::testing
