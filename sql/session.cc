// A SQL transaction's Cell transaction and its savepoints (sql/session.h).
#include "sql/session.h"

#include <fmt/format.h>

#include <algorithm>

namespace cell::sql {

StatusOr<std::shared_ptr<TxnHandle>> BeginTxn(const std::shared_ptr<Client>& client, bool read_only) {
  TransactionOptions options;
  options.timeout = kTransactionTimeout;
  options.read_only = read_only;
  CELL_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> txn, client->BeginTransaction(options));
  auto handle = std::make_shared<TxnHandle>();
  handle->client = client;
  handle->txn = std::move(txn);
  return handle;
}

StatusOr<std::unique_ptr<Session>> Session::Start(const std::shared_ptr<Client>& client) {
  CELL_ASSIGN_OR_RETURN(std::shared_ptr<TxnHandle> handle, BeginTxn(client, /*read_only=*/false));
  return std::unique_ptr<Session>(new Session(std::move(handle)));
}

void Session::Log(std::string_view key, std::optional<std::string> prior) {
  // Always: a transaction begun by SAVEPOINT (not BEGIN) is rolled back to its start by xRollbackTo(-1).
  undo_.push_back({std::string(key), std::move(prior)});
}

Status Session::Put(std::string_view key, std::string_view value, std::optional<std::string> prior) {
  CELL_RETURN_IF_ERROR(txn().Put(key, value));
  Log(key, std::move(prior));
  return Status::OK();
}

Status Session::Delete(std::string_view key, std::optional<std::string> prior) {
  CELL_RETURN_IF_ERROR(txn().Delete(key));
  Log(key, std::move(prior));
  return Status::OK();
}

void Session::Savepoint(int n) {
  // A savepoint that is still open began earlier: SQLite tells a table that joins the transaction late (its first
  // write) of the open savepoints as if they began now, which for the session is not so. Those the session was
  // never told of began no later than now.
  const auto at = static_cast<size_t>(std::max(n, 0));
  while (savepoints_.size() <= at) savepoints_.push_back(undo_.size());
}

void Session::Release(int n) {
  const auto at = static_cast<size_t>(std::max(n, 0));
  if (savepoints_.size() > at) savepoints_.resize(at);
}

Status Session::RollbackTo(int n) {
  // n < 0: to the start of the transaction (ROLLBACK TO the SAVEPOINT that began it).
  const auto at = static_cast<size_t>(std::max(n, 0));
  if (n >= 0 && at >= savepoints_.size()) return Status::OK();
  const size_t begin = n < 0 ? 0 : savepoints_[at];
  while (undo_.size() > begin) {
    const Undo& u = undo_.back();
    CELL_RETURN_IF_ERROR(u.prior ? txn().Put(u.key, *u.prior) : txn().Delete(u.key));
    undo_.pop_back();
  }
  savepoints_.resize(n < 0 ? 0 : at + 1);  // n stays valid; those above it are gone
  return Status::OK();
}

Status Session::Commit() {
  if (!outcome_) outcome_ = txn().Commit();
  return *outcome_;
}

void Session::Rollback() {
  if (!outcome_) {
    txn().Rollback();
    outcome_ = Status::Aborted("rolled back");
  }
}

}  // namespace cell::sql
