// What cell::Client holds (include/cell/client.h): the region table and the store client, and the threads of the
// scans running asynchronously. Shared by the files that implement Client's methods (client.cc, client_reads.cc).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cell/client.h"
#include "client/store_client.h"
#include "membership/membership.h"

namespace cell {

struct Client::Impl {
  std::unique_ptr<membership::RegionTableReader> table;
  std::unique_ptr<client::StoreClient> store;

  // ScanAsync's threads: one per scan running; each ends when its scan does, and the destructor waits for them.
  std::mutex scans_mu;
  bool closing = false;  // guarded by scans_mu; once set, a running scan stops at its next page (Unavailable)
  struct AsyncScan {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;  // set by the thread as it ends: it may be joined without waiting
  };
  std::vector<AsyncScan> scans;
  ~Impl() {
    std::vector<AsyncScan> running;
    {
      std::lock_guard lock(scans_mu);
      closing = true;
      running.swap(scans);
    }
    for (AsyncScan& s : running) s.thread.join();
  }
};

}  // namespace cell
