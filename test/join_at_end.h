// JoinAtEnd: however a test ends (a failed assertion returns early), its threads are told to stop and are joined.
#pragma once

#include <atomic>
#include <thread>
#include <vector>

namespace cell::testing {

struct JoinAtEnd {
  std::atomic<bool>& stop;
  std::vector<std::thread>& threads;
  ~JoinAtEnd() {
    stop = true;
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }
};

}  // namespace cell::testing
