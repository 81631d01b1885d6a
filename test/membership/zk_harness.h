// A real ZooKeeper for tests: started with the project's own deploy/zookeeper/zk-start.sh, stopped at exit.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace cell::testing {

class ZooKeeperHarness {
 public:
  // Starts `nodes` nodes (1 or 3); on failure, connect() is empty and error() says why.
  explicit ZooKeeperHarness(int nodes = 1) {
    const std::string command =
        std::string(CELL_SOURCE_DIR) + "/deploy/zookeeper/zk-start.sh --nodes=" + std::to_string(nodes) + " 2>&1";
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
  // Stops node `i` (1-based): a crash with `kill`, else a clean shutdown. Its data stays for RestartNode.
  bool StopNode(int i, bool kill) {
    return Run("zk-stop.sh --dir=" + dir_ + " --node=" + std::to_string(i) + (kill ? " --kill" : ""));
  }
  // Starts node `i` again with its data; with `wait`, until it serves.
  bool RestartNode(int i, bool wait = true) {
    return Run("zk-start.sh --dir=" + dir_ + " --restart-node=" + std::to_string(i) + (wait ? "" : " --no-wait"));
  }
  // The node that leads the ensemble now (1-based), or 0 if none does.
  int Leader() const {
    const std::string command =
        std::string(CELL_SOURCE_DIR) + "/deploy/zookeeper/zk-status.sh --dir=" + dir_ + " 2>/dev/null";
    FILE* out = popen(command.c_str(), "r");
    if (out == nullptr) return 0;
    char line[512];
    int leader = 0;
    while (std::fgets(line, sizeof(line), out) != nullptr) {
      if (std::strncmp(line, "ZK_LEADER=", 10) == 0) leader = std::atoi(line + 10);
    }
    pclose(out);
    return leader;
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
  static bool Run(const std::string& script_and_args) {
    const std::string command =
        std::string(CELL_SOURCE_DIR) + "/deploy/zookeeper/" + script_and_args + " >/dev/null 2>&1";
    return std::system(command.c_str()) == 0;
  }
  std::string connect_, dir_, error_;
};

}  // namespace cell::testing
