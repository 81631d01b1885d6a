// Transactions, conditional writes and atomic batches: what a database layer needs to keep an index, a uniqueness
// constraint or a balance correct across keys and servers.
//
//   auto txn = client->BeginTransaction();
//   std::string a, b;
//   CELL_RETURN_IF_ERROR(txn->Get("alice", &a));
//   CELL_RETURN_IF_ERROR(txn->Get("bob", &b));
//   txn->Put("alice", Debit(a));
//   txn->Put("bob", Credit(b));
//   cell::Status s = txn->Commit();   // OK, or Aborted (a conflict: run it again), or another error
//
// or, retrying conflicts with back-off:
//
//   cell::Status s = cell::RunTransaction(*client, [&](cell::Transaction& t) -> cell::Status { ... });
//
// What is guaranteed (docs/DESIGN.md, "Transactions", says how):
// - Strict serializability for transactions that commit: each appears to take effect at one instant between its
//   first operation and the return of Commit, over any keys on any servers. Scans are validated as ranges, so a key
//   that a concurrent transaction inserts into (or deletes from) a range this one scanned is a conflict (no phantoms).
// - Reads inside a transaction see its own writes; reads are optimistic (no locks are taken before Commit), so a
//   transaction that commits saw one consistent state, and one that aborts may have seen an inconsistent one: treat
//   what an aborted transaction read as void.
// - Non-transactional Get, Put, Delete and Scan stay linearizable together with transactions: a key being committed
//   by a transaction is locked for a moment, and plain operations on it wait (retry) until it is not.
// - A transaction whose client dies while committing is finished (committed or rolled back, depending on whether its
//   decision was made) by the servers within a bounded time; a server that dies mid-commit is finished by its
//   survivor from its log. Nothing is ever half applied.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cell/iterator.h"
#include "cell/status.h"

namespace cell {

class Client;

// Limits of one transaction or batch (larger ones fail with InvalidArgument, nothing applied).
inline constexpr size_t kMaxTransactionWrites = 1000;            // puts and deletes (distinct keys)
inline constexpr size_t kMaxTransactionBytes = size_t{4} << 20;  // keys and values written, in total
inline constexpr size_t kMaxTransactionReads = 10000;            // keys read, scanned pairs included

struct TransactionOptions {
  // From BeginTransaction to the end of Commit: past it, operations fail with DeadlineExceeded and Commit aborts.
  // 0: the client's timeout (ClientOptions::timeout).
  std::chrono::milliseconds timeout{0};
  // Puts and deletes are refused (FailedPrecondition); Commit only validates what was read.
  bool read_only = false;
  // How reads and validation search the tree: "" (the client's ClientOptions::search), "server", "client", or any
  // other ClientOptions::search value. Client-side validation reads only the leaves, with no server CPU.
  std::string search;
};

// Puts and deletes applied together by Client::Write: all or none, whichever servers hold the keys.
class WriteBatch {
 public:
  void Put(std::string_view key, std::string_view value) { ops_.push_back({std::string(key), std::string(value)}); }
  void Delete(std::string_view key) { ops_.push_back({std::string(key), std::nullopt}); }
  void Clear() { ops_.clear(); }
  size_t size() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }

  struct Op {
    std::string key;
    std::optional<std::string> value;  // nullopt: delete
  };
  // In the order added; a later op on the same key replaces an earlier one.
  const std::vector<Op>& ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
};

// One transaction. Not thread-safe: use it from one thread at a time. Destroying a transaction that has not
// committed rolls it back.
class Transaction {
 public:
  virtual ~Transaction() = default;

  // The value of `key` as of this transaction: its own write if it made one, else the store's. OK, NotFound, or an
  // error (Aborted when the key was locked by another committing transaction for longer than a short wait).
  virtual Status Get(std::string_view key, std::string* value) = 0;
  // Up to `limit` pairs with start <= key < end (empty end: no bound), in key order, this transaction's own writes
  // included, appended to *out. The range read (up to the last pair returned, when `limit` cut it short) is validated
  // at Commit.
  virtual Status Scan(std::string_view start, std::string_view end, size_t limit,
                      std::vector<std::pair<std::string, std::string>>* out) = 0;
  // Scan, descending (the greatest key first); the range read (down to the last pair returned, when `limit` cut it
  // short) is validated at Commit.
  virtual Status ScanReverse(std::string_view start, std::string_view end, size_t limit,
                             std::vector<std::pair<std::string, std::string>>* out) = 0;
  // An iterator that reads through this transaction (its own writes included, its ranges validated at Commit).
  // Destroy it before the transaction.
  virtual std::unique_ptr<Iterator> NewIterator(const IteratorOptions& options = {}) = 0;
  // Buffered until Commit. InvalidArgument for keys and values outside cell/limits.h or a transaction over the
  // limits above; FailedPrecondition in a read-only transaction or after Commit or Rollback.
  virtual Status Put(std::string_view key, std::string_view value) = 0;
  // Buffered until Commit; deleting an absent key is not an error.
  virtual Status Delete(std::string_view key) = 0;

  // Makes the writes visible atomically if nothing this transaction read has changed since. OK: committed.
  // Aborted: a conflict (conflict_key() names the key; nothing applied; run the transaction again).
  // DeadlineExceeded: the timeout passed (nothing applied). Unavailable: the outcome could not be learned (a server
  // failed at the decision; the transaction may or may not have committed, like a Put whose reply was lost).
  // FailedPrecondition: Commit or Rollback already ran.
  virtual Status Commit() = 0;
  // Commit without waiting: `done` runs exactly once, on a thread of the client's, with what Commit would return. Keep
  // the transaction and its client until it has run.
  virtual void CommitAsync(std::function<void(const Status&)> done) = 0;
  // Drops the buffered writes; the transaction can no longer be used. Nothing was applied.
  virtual void Rollback() = 0;

  // After an Aborted: the key whose change (or lock) made the transaction abort ("" if none is known).
  virtual const std::string& conflict_key() const = 0;
};

// Runs `fn` in a new transaction and commits it, again (after a randomized, doubling back-off) while fn or Commit
// returns Aborted, up to `max_attempts` times. Returns the first other outcome, or the last Aborted. `fn` must be
// safe to run again: it sees a fresh transaction each time.
Status RunTransaction(Client& client, const std::function<Status(Transaction&)>& fn, int max_attempts = 10,
                      const TransactionOptions& options = {});

}  // namespace cell
