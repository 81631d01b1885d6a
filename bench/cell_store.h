// cell-bench's Cell store (bench/store.h): every thread's session goes through one shared cell::Client, and its
// operations complete on the client's own threads (GetAsync, PutAsync; scans are synchronous). Transactions are
// cell::RunTransaction's (include/cell/transaction.h): it retries Aborted with a back-off of its own.
#pragma once

#include <memory>

#include "bench/store.h"
#include "cell/client.h"

namespace cell::bench {

class CellStore final : public Store {
 public:
  explicit CellStore(std::unique_ptr<Client> client) : client_(std::move(client)) {}
  StatusOr<std::unique_ptr<StoreSession>> NewSession() override;
  Client::Stats stats() const override { return client_->stats(); }

 private:
  std::unique_ptr<Client> client_;
};

}  // namespace cell::bench
