// Per-connection state of the module (sql/connection.h).
#include "sql/connection.h"

#include <algorithm>
#include <cctype>

#include "sql/table.h"

namespace cell::sql {

namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

Connection::~Connection() {
  for (auto& [client, session] : sessions_) session->Rollback();
}

Session* Connection::Active(Client* client) {
  auto it = sessions_.find(client);
  if (it == sessions_.end()) return nullptr;
  Session& s = *it->second;
  if (!s.joined() && (autocommit() || s.expired())) {
    s.Rollback();  // it only read: nothing to undo
    sessions_.erase(it);
    return nullptr;
  }
  return &s;
}

StatusOr<Session*> Connection::Open(const std::shared_ptr<Client>& client) {
  if (Session* s = Active(client.get())) return s;
  CELL_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Start(client));
  Session* s = session.get();
  sessions_[client.get()] = std::move(session);
  return s;
}

void Connection::End(Client* client) { sessions_.erase(client); }

void Connection::AddTable(Table* table) { tables_[Lower(table->name)] = table; }

void Connection::RemoveTable(Table* table) {
  auto it = tables_.find(Lower(table->name));
  if (it != tables_.end() && it->second == table) tables_.erase(it);
}

const Table* Connection::FindTable(const std::string& name) const {
  auto it = tables_.find(Lower(name));
  return it == tables_.end() ? nullptr : it->second;
}

}  // namespace cell::sql
