// What the module keeps per SQLite connection (the module's client data, freed when the connection closes): the
// open Cell transaction on each Client (sql/session.h), and the connection's Cell tables by name (for the
// cell_sql_counters function).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "cell/client.h"
#include "sql/session.h"
#include "sql/sqlite_api.h"

namespace cell::sql {

struct Table;

class Connection {
 public:
  explicit Connection(sqlite3* db) : db_(db) {}
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* db() const { return db_; }
  // Whether SQLite is outside BEGIN ... COMMIT.
  bool autocommit() const { return sqlite3_get_autocommit(db_) != 0; }

  // The open session on `client`, or nullptr. Drops a session that only read (SQLite never ends those) once it is
  // stale: when the connection is back in autocommit mode, or when its timeout has passed.
  Session* Active(Client* client);
  // The open session on `client`, started if there is none.
  StatusOr<Session*> Open(const std::shared_ptr<Client>& client);
  // Forgets the session on `client` (after its commit or rollback); nothing if there is none.
  void End(Client* client);

  void AddTable(Table* table);
  void RemoveTable(Table* table);
  // The table named `name` (case-insensitive) of this connection, or nullptr.
  const Table* FindTable(const std::string& name) const;

 private:
  sqlite3* const db_;
  std::map<Client*, std::unique_ptr<Session>> sessions_;
  std::map<std::string, Table*> tables_;  // by lower-case name
};

}  // namespace cell::sql
