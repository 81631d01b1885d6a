// cell-bench's PostgreSQL store (bench/store.h) over libpq, the SQL peer of the transactional workloads
// (bench/txn_workload.h). One table:
//
//   CREATE TABLE IF NOT EXISTS kv (k bytea PRIMARY KEY, v bytea NOT NULL)
//
// bytea, not text, so that keys compare by their bytes (memcmp), the order Cell keeps, whatever the database's
// collation. Every statement is prepared once per connection, with binary parameters and results:
//   get    SELECT v FROM kv WHERE k = $1                                            (no row: NotFound)
//   put    INSERT INTO kv VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v
//   scan   SELECT k, v FROM kv WHERE k >= $1 ORDER BY k LIMIT $2
//   reverse scan (ScanReverse)
//          SELECT k, v FROM kv WHERE k < $1 ORDER BY k DESC LIMIT $2  (no bound: without the WHERE)
// Outside a transaction each runs on its own (autocommit). RunTransaction runs a body between
// BEGIN ISOLATION LEVEL SERIALIZABLE and COMMIT and runs it again (after ConflictBackoff) when any statement, COMMIT
// included, fails with SQLSTATE 40001 (serialization failure) or 40P01 (deadlock detected): the store's Aborted.
//
// A session is a connection of its own, used synchronously: an operation's callback runs before Get or Put returns
// (completes_in_caller, with nothing ever outstanding), so the YCSB workloads run too, one operation at a time per
// thread. Errors: an SQL error fails its operation (FailedPrecondition with the server's SQLSTATE and message); a
// lost connection fails the session (Unavailable), and every later operation at once. The rows are the database's
// own: use a database of the bench's own (the load adds to it and nothing is deleted), such as the private server
// of bench/private_postgres.h that cell-bench starts when no --postgres is given.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "bench/store.h"

namespace cell::bench {

class PostgresStore final : public Store {
 public:
  // Connects to `conninfo` (libpq's "host=... port=... dbname=..." or a postgresql:// URI) and creates the table if
  // it is not there. Unavailable "cannot connect to postgres at <where>: <why>", or FailedPrecondition if the table
  // cannot be made.
  static StatusOr<std::unique_ptr<PostgresStore>> Open(std::string_view conninfo);

  // A new connection, for one thread.
  StatusOr<std::unique_ptr<StoreSession>> NewSession() override;
  // PostgreSQL has no search sides, retries or node cache: zeros.
  Client::Stats stats() const override { return {}; }

  // The server's setting `name` (SHOW name), e.g. "fsync", "synchronous_commit", "server_version": what the summary
  // records of the server actually measured.
  StatusOr<std::string> Show(std::string_view name) const;

 private:
  explicit PostgresStore(std::string conninfo) : conninfo_(std::move(conninfo)) {}
  std::string conninfo_;
};

}  // namespace cell::bench
