// cell-bench's Cell store (see cell_store.h): a session is the shared client, unchanged.
#include "bench/cell_store.h"

#include <thread>

#include "cell/transaction.h"

namespace cell::bench {

namespace {

// A transaction's operations, forwarded.
class CellTxnOps final : public TxnOps {
 public:
  explicit CellTxnOps(Transaction& txn) : txn_(txn) {}
  Status Get(std::string_view key, std::string* value) override { return txn_.Get(key, value); }
  Status Put(std::string_view key, std::string_view value) override { return txn_.Put(key, value); }
  Status Scan(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) override {
    return txn_.Scan(start, "", limit, out);
  }

 private:
  Transaction& txn_;
};

// Thread-safe like the client it wraps: callbacks run on the client's threads and may start operations from there.
class CellSession final : public StoreSession {
 public:
  explicit CellSession(Client& client) : client_(client) {}

  void Get(std::string_view key, GetDone done) override { client_.GetAsync(key, std::move(done)); }
  // Cell needs no index for its scans: an insert is a put.
  void Put(std::string_view key, std::string_view value, bool /*insert*/, PutDone done) override {
    client_.PutAsync(key, value, std::move(done));
  }
  Status Scan(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) override {
    return client_.Scan(start, "", limit, out);
  }
  Status ScanReverse(std::string_view before, size_t limit,
                     std::vector<std::pair<std::string, std::string>>* out) override {
    return client_.ScanReverse("", before, limit, out);
  }

  void Flush() override { SendHold::Flush(); }
  bool completes_in_caller() const override { return false; }
  void AwaitCompletion() override {}
  void Progress() override { SendHold::Flush(); }
  void WaitUntil(Clock::time_point until) override {
    SendHold::Flush();
    std::this_thread::sleep_until(until);
  }
  Status status() const override { return Status::OK(); }

  Status RunTransaction(const TxnBody& body, int* attempts) override {
    *attempts = 0;
    return cell::RunTransaction(
        client_,
        [&](Transaction& txn) {
          ++*attempts;
          CellTxnOps ops(txn);
          return body(ops);
        },
        kTransactionAttempts);
  }

 private:
  Client& client_;
};

}  // namespace

StatusOr<std::unique_ptr<StoreSession>> CellStore::NewSession() {
  return std::unique_ptr<StoreSession>(std::make_unique<CellSession>(*client_));
}

}  // namespace cell::bench
