// Real cell-server and cellctl processes for tests (the binaries' paths come from CMake).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cell/client.h"
#include "test/child_process.h"
#include "test/temp_dir.h"

namespace cell::testing {

// A cell-server process; `uris` are the URIs it reported (with real ports), `ready` its ready line (empty if it
// never became ready).
struct RunningServer {
  std::unique_ptr<ChildProcess> process;
  std::vector<std::string> uris;
  std::string ready;
};

inline RunningServer StartServer(std::vector<std::string> args) {
  using namespace std::chrono_literals;
  args.insert(args.begin(), CELL_SERVER_BINARY);
  RunningServer s;
  s.process = std::make_unique<ChildProcess>(args);
  while (auto line = s.process->ReadLine(30s)) {
    if (line->rfind("listening ", 0) == 0) s.uris.push_back(line->substr(10));
    if (line->rfind("ready ", 0) == 0) {
      s.ready = *line;
      break;
    }
  }
  return s;
}

// Runs cellctl to completion: its exit code and its output (stdout and stderr).
inline std::pair<int, std::string> Cellctl(std::vector<std::string> args) {
  using namespace std::chrono_literals;
  args.insert(args.begin(), CELLCTL_BINARY);
  ChildProcess p(args, /*merge_stderr=*/true);
  std::string out = p.ReadAll(60s);
  return {p.Wait(), out};
}

// The cluster keys of this test process (made once, mode 0600, in ProcessDir()): servers started with
// ServerKeyArgs() accept clients opened with options.key_file = ClientKeyFile() (docs/DESIGN.md, "Security").
struct TestKeys {
  std::string client_file, peer_file;
  static const TestKeys& Get() {
    static const TestKeys keys = [] {
      TestKeys k;
      const std::string& dir = ProcessDir();
      k.client_file = dir + "/client.key";
      k.peer_file = dir + "/peer.key";
      for (const std::string& f : {k.client_file, k.peer_file}) {
        unlink(f.c_str());
        const Status s = WriteNewKeyFile(f);
        if (!s.ok()) ADD_FAILURE() << s.ToString();
      }
      return k;
    }();
    return keys;
  }
};
inline std::vector<std::string> ServerKeyArgs() {
  return {"--client-key-file=" + TestKeys::Get().client_file, "--peer-key-file=" + TestKeys::Get().peer_file};
}
inline const std::string& ClientKeyFile() { return TestKeys::Get().client_file; }

// Waits until the servers' background splits are over: their count of meganode splits unchanged for a second, polled
// every 20 ms (a condition with a deadline, not a timed wait). False if they were still splitting at `timeout`.
inline bool WaitForSplitsToSettle(Client& client, std::chrono::seconds timeout = std::chrono::seconds(30)) {
  using Clock = std::chrono::steady_clock;
  const auto splits = [&] {
    uint64_t n = 0;
    const auto stats = client.StoreStats();
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    for (const auto& s : stats.ok() ? *stats : std::vector<Client::ServerStats>{}) n += s.meganode_splits;
    return n;
  };
  const auto give_up = Clock::now() + timeout;
  uint64_t last = splits();
  auto stable_since = Clock::now();
  while (Clock::now() - stable_since < std::chrono::seconds(1)) {
    if (Clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (const uint64_t now = splits(); now != last) {
      last = now;
      stable_since = Clock::now();
    }
  }
  return true;
}

// A Unix socket path for an shm listener, unique to this test process (in ProcessDir()).
inline std::string ShmPath(std::string_view name) { return fmt::format("{}/{}.sock", ProcessDir(), name); }

}  // namespace cell::testing
