// The Cell transaction of one SQL transaction: one SQLite connection's reads and writes on the tables of one Client,
// with the undo log that makes SQLite's savepoints (a statement that fails halfway, ROLLBACK TO) possible over a
// cell::Transaction, which has none.
//
// Every write records what the key held before (as the transaction saw it); xRollbackTo(N) writes those back in
// reverse order down to where savepoint N began (N = -1: the start of the transaction, when a SAVEPOINT began it),
// which leaves the transaction's writes as they were then (a key put back to its old value is written again at
// Commit, with that value: the same outcome).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cell/client.h"
#include "cell/transaction.h"

namespace cell::sql {

// How long a SQL transaction may last (TransactionOptions::timeout), from its first statement on a Cell table to
// COMMIT; past it, its statements fail with SQLITE_BUSY (DeadlineExceeded: run it again).
inline constexpr std::chrono::milliseconds kTransactionTimeout{10000};

// A Cell transaction with the client it belongs to, so that the client outlives the transaction and the
// transaction outlives the iterators opened on it (each holds the handle).
struct TxnHandle {
  std::shared_ptr<Client> client;
  std::unique_ptr<Transaction> txn;
};

// Starts a transaction on `client`: read-write for SQL transactions, read-only for a statement's own reads.
StatusOr<std::shared_ptr<TxnHandle>> BeginTxn(const std::shared_ptr<Client>& client, bool read_only);

class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> Start(const std::shared_ptr<Client>& client);

  const std::shared_ptr<TxnHandle>& handle() const { return handle_; }
  Transaction& txn() { return *handle_->txn; }
  // Whether SQLite has called xBegin on a table of this session (it will then call xSync and xCommit, or
  // xRollback). A session that only read, in BEGIN ... COMMIT, is never told that the SQL transaction ended.
  bool joined() const { return joined_; }
  void Join() { joined_ = true; }
  // Its timeout has passed: it can do nothing more.
  bool expired() const { return std::chrono::steady_clock::now() >= started_ + kTransactionTimeout; }

  // Writes, logged for the savepoints. `prior`: what the key held, as this transaction saw it.
  Status Put(std::string_view key, std::string_view value, std::optional<std::string> prior);
  Status Delete(std::string_view key, std::optional<std::string> prior);

  // xSavepoint, xRelease and xRollbackTo (sql/cell_vtab.cc); idempotent, as each table of the session calls them.
  // SQLite reopens a savepoint only after xRelease or xRollbackTo closed it, so an xSavepoint(N) for an open N
  // comes from another table of the session and changes nothing.
  void Savepoint(int n);
  void Release(int n);
  Status RollbackTo(int n);

  // Commits once; a later call returns the first outcome (every table of the session gets xSync).
  Status Commit();
  bool ended() const { return outcome_.has_value(); }
  void Rollback();

 private:
  explicit Session(std::shared_ptr<TxnHandle> handle) : handle_(std::move(handle)) {}
  void Log(std::string_view key, std::optional<std::string> prior);

  struct Undo {
    std::string key;
    std::optional<std::string> prior;  // nullopt: the key was absent
  };
  std::shared_ptr<TxnHandle> handle_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  bool joined_ = false;
  std::optional<Status> outcome_;
  std::vector<Undo> undo_;
  std::vector<size_t> savepoints_;  // savepoint n began at undo_[savepoints_[n]]
};

}  // namespace cell::sql
