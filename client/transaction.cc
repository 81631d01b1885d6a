// Transactions, compare-and-swap and atomic batches (include/cell/transaction.h). Not built yet: every call fails.
#include "cell/client.h"

namespace cell {

StatusOr<std::unique_ptr<Transaction>> Client::BeginTransaction(const TransactionOptions&) {
  return Status::Internal("transactions are not built yet");
}
Status Client::CompareAndSwap(std::string_view, const std::optional<std::string>&, const std::optional<std::string>&) {
  return Status::Internal("compare-and-swap is not built yet");
}
Status Client::Write(const WriteBatch&) { return Status::Internal("batches are not built yet"); }
Status RunTransaction(Client&, const std::function<Status(Transaction&)>&, int, const TransactionOptions&) {
  return Status::Internal("transactions are not built yet");
}

}  // namespace cell
