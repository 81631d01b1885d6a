// The module "cell": SQLite's virtual table methods over Table (sql/table.h), Cursor (sql/cursor.h), the row writer
// (sql/row_writer.h) and the connection's sessions (sql/connection.h).
#include "sql/cell_vtab.h"

#include <fmt/format.h>
#include <strings.h>

#include <string>
#include <vector>

#include "sql/client_registry.h"
#include "sql/cursor.h"
#include "sql/row_writer.h"
#include "sql/scan_plan.h"
#include "sql/table.h"

namespace cell::sql {

namespace {

Table* TableOf(sqlite3_vtab* vtab) { return static_cast<Table*>(vtab); }
Cursor* CursorOf(sqlite3_vtab_cursor* cursor) { return static_cast<Cursor*>(cursor); }

// The table record under the prefix: written if absent, else it must equal `record` (one definition per prefix).
Status AttachRecord(Client& client, const TableOptions& options, const std::string& record) {
  const KeyLayout layout(options.prefix);
  std::string existing;
  Status s = client.Get(layout.table_key(), &existing);
  if (s.IsNotFound()) {
    s = client.CompareAndSwap(layout.table_key(), std::nullopt, record);
    if (s.ok()) return s;
    if (s.code() != Status::Code::kFailedPrecondition) return s;
    s = client.Get(layout.table_key(), &existing);  // another connection created it meanwhile
  }
  CELL_RETURN_IF_ERROR(s);
  if (existing != record) {
    return Status::InvalidArgument(fmt::format(
        "prefix '{}' already holds a table defined as\n{}which differs from this definition\n{}give the same schema "
        "and indexes, or another prefix='...'",
        options.prefix, existing, record));
  }
  return Status::OK();
}

int Connect(sqlite3* db, void* aux, int argc, const char* const* argv, sqlite3_vtab** out, char** err) {
  const std::string name = argc > 2 ? argv[2] : "?";
  const auto fail = [&](int code, const std::string& message) {
    *err = sqlite3_mprintf("%s", fmt::format("cell table {}: {}", name, message).c_str());
    return code;
  };
  StatusOr<TableOptions> options = ParseTableOptions(name, std::vector<std::string>(argv + 3, argv + argc));
  if (!options.ok()) return fail(SQLITE_ERROR, options.status().message());
  StatusOr<std::shared_ptr<Client>> client = SharedClient(options->cluster, options->key_file, options->search);
  if (!client.ok()) {
    return fail(SqliteCode(client.status()),
                fmt::format("cannot open cluster {}: {}", options->cluster, client.status().ToString()));
  }
  if (Status s = AttachRecord(**client, *options, TableRecord(options->schema, options->indexes)); !s.ok()) {
    return fail(SqliteCode(s), s.IsInvalidArgument() ? s.message() : "reading the table record: " + s.ToString());
  }
  if (int rc = sqlite3_declare_vtab(db, options->schema.Declaration().c_str()); rc != SQLITE_OK) {
    return fail(
        rc, fmt::format("SQLite refused the declaration {}: {}", options->schema.Declaration(), sqlite3_errmsg(db)));
  }
  sqlite3_vtab_config(db, SQLITE_VTAB_CONSTRAINT_SUPPORT, 1);
  auto* connection = static_cast<Connection*>(aux);
  auto* table = new Table(connection, name, std::move(*options), std::move(*client));
  connection->AddTable(table);
  *out = table;
  return SQLITE_OK;
}

int Create(sqlite3* db, void* aux, int argc, const char* const* argv, sqlite3_vtab** out, char** err) {
  return Connect(db, aux, argc, argv, out, err);
}

// xDisconnect and xDestroy: DROP TABLE leaves the rows in Cell (sql/cell_vtab.h).
int Disconnect(sqlite3_vtab* vtab) {
  Table* table = TableOf(vtab);
  table->connection->RemoveTable(table);
  delete table;
  return SQLITE_OK;
}

PlanInput InputOf(sqlite3_index_info* info) {
  PlanInput in;
  for (int i = 0; i < info->nConstraint; ++i) {
    const auto& c = info->aConstraint[i];
    PlanInput::Constraint pc{c.iColumn, c.op, c.usable != 0, true, false};
    const bool comparison = c.op == SQLITE_INDEX_CONSTRAINT_EQ || c.op == SQLITE_INDEX_CONSTRAINT_GT ||
                            c.op == SQLITE_INDEX_CONSTRAINT_GE || c.op == SQLITE_INDEX_CONSTRAINT_LT ||
                            c.op == SQLITE_INDEX_CONSTRAINT_LE;
    if (comparison) {
      const char* collation = sqlite3_vtab_collation(info, i);
      pc.binary = collation == nullptr || strcasecmp(collation, "BINARY") == 0;
    }
    if (c.op == SQLITE_INDEX_CONSTRAINT_EQ && c.usable) pc.in = sqlite3_vtab_in(info, i, -1) != 0;
    in.constraints.push_back(pc);
  }
  for (int i = 0; i < info->nOrderBy; ++i) {
    in.order_by.push_back({info->aOrderBy[i].iColumn, info->aOrderBy[i].desc != 0});
  }
  return in;
}

int BestIndex(sqlite3_vtab* vtab, sqlite3_index_info* info) {
  const Table* table = TableOf(vtab);
  const PlanChoice choice = ChoosePlan(table->schema(), table->options.indexes, InputOf(info));
  for (size_t i = 0; i < choice.argv.size(); ++i) {
    info->aConstraintUsage[choice.argv[i]].argvIndex = static_cast<int>(i) + 1;
    info->aConstraintUsage[choice.argv[i]].omit = 0;  // SQLite checks every constraint again (sql/key_range.h)
  }
  info->idxNum = choice.plan.Encode();
  info->idxStr = sqlite3_mprintf("%s", choice.plan.Describe(table->schema()).c_str());
  info->needToFreeIdxStr = 1;
  info->orderByConsumed = choice.order_consumed ? 1 : 0;
  info->estimatedCost = choice.cost;
  info->estimatedRows = choice.rows;
  if (choice.unique) info->idxFlags |= SQLITE_INDEX_SCAN_UNIQUE;
  return SQLITE_OK;
}

int Open(sqlite3_vtab* vtab, sqlite3_vtab_cursor** out) {
  *out = new Cursor(TableOf(vtab));
  return SQLITE_OK;
}

int Close(sqlite3_vtab_cursor* cursor) {
  delete CursorOf(cursor);
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* cursor, int idx_num, const char*, int argc, sqlite3_value** argv) {
  return CursorOf(cursor)->Filter(idx_num, argc, argv);
}

int Next(sqlite3_vtab_cursor* cursor) { return CursorOf(cursor)->Next(); }

int Eof(sqlite3_vtab_cursor* cursor) { return CursorOf(cursor)->eof() ? 1 : 0; }

int ColumnOf(sqlite3_vtab_cursor* cursor, sqlite3_context* ctx, int column) {
  return CursorOf(cursor)->Column(ctx, column);
}

int Rowid(sqlite3_vtab_cursor* cursor, sqlite3_int64* rowid) {
  *rowid = CursorOf(cursor)->rowid();
  return SQLITE_OK;
}

int Update(sqlite3_vtab* vtab, int argc, sqlite3_value** argv, sqlite3_int64* rowid) {
  return UpdateRow(TableOf(vtab), argc, argv, rowid);
}

// xBegin: the SQL transaction's Cell transaction (started if none; one that only read so far is kept).
int Begin(sqlite3_vtab* vtab) {
  Table* table = TableOf(vtab);
  StatusOr<Session*> session = table->connection->Open(table->client);
  if (!session.ok()) return Fail(table, session.status());
  (*session)->Join();
  return SQLITE_OK;
}

// xSync: the commit (xCommit cannot fail). The first table of a session commits it; the others see its outcome.
int Sync(sqlite3_vtab* vtab) {
  Table* table = TableOf(vtab);
  Session* session = table->connection->Active(table->client.get());
  if (session == nullptr) return SQLITE_OK;
  if (!session->ended()) ++table->counters.commits;
  Status s = session->Commit();
  return s.ok() ? SQLITE_OK : Fail(table, s);
}

int Commit(sqlite3_vtab* vtab) {
  Table* table = TableOf(vtab);
  table->connection->End(table->client.get());
  return SQLITE_OK;
}

int Rollback(sqlite3_vtab* vtab) {
  Table* table = TableOf(vtab);
  if (Session* session = table->connection->Active(table->client.get())) session->Rollback();
  table->connection->End(table->client.get());
  return SQLITE_OK;
}

int Savepoint(sqlite3_vtab* vtab, int n) {
  Table* table = TableOf(vtab);
  if (Session* session = table->connection->Active(table->client.get())) session->Savepoint(n);
  return SQLITE_OK;
}

int Release(sqlite3_vtab* vtab, int n) {
  Table* table = TableOf(vtab);
  if (Session* session = table->connection->Active(table->client.get())) session->Release(n);
  return SQLITE_OK;
}

int RollbackTo(sqlite3_vtab* vtab, int n) {
  Table* table = TableOf(vtab);
  Session* session = table->connection->Active(table->client.get());
  if (session == nullptr) return SQLITE_OK;
  Status s = session->RollbackTo(n);
  return s.ok() ? SQLITE_OK : Fail(table, s);
}

const sqlite3_module kModule = {
    .iVersion = 2,
    .xCreate = Create,
    .xConnect = Connect,
    .xBestIndex = BestIndex,
    .xDisconnect = Disconnect,
    .xDestroy = Disconnect,
    .xOpen = Open,
    .xClose = Close,
    .xFilter = Filter,
    .xNext = Next,
    .xEof = Eof,
    .xColumn = ColumnOf,
    .xRowid = Rowid,
    .xUpdate = Update,
    .xBegin = Begin,
    .xSync = Sync,
    .xCommit = Commit,
    .xRollback = Rollback,
    .xFindFunction = nullptr,
    .xRename = nullptr,
    .xSavepoint = Savepoint,
    .xRelease = Release,
    .xRollbackTo = RollbackTo,
    .xShadowName = nullptr,
};

void CountersFunction(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const auto* connection = static_cast<const Connection*>(sqlite3_user_data(ctx));
  const auto* name = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const Table* table = name == nullptr ? nullptr : connection->FindTable(name);
  if (table == nullptr) {
    sqlite3_result_error(ctx, "cell_sql_counters: no Cell table of that name on this connection", -1);
    return;
  }
  const TableCounters& c = table->counters;
  const std::string text = fmt::format("gets={} scans={} index_scans={} rows={} commits={} busy={} validations={}",
                                       c.gets, c.scans, c.index_scans, c.rows, c.commits, c.busy, c.validations);
  sqlite3_result_text(ctx, text.c_str(), -1, SQLITE_TRANSIENT);
}

}  // namespace

int Register(sqlite3* db) {
  auto* connection = new Connection(db);
  // On failure too, SQLite calls the destructor.
  int rc =
      sqlite3_create_module_v2(db, "cell", &kModule, connection, [](void* p) { delete static_cast<Connection*>(p); });
  if (rc != SQLITE_OK) return rc;
  return sqlite3_create_function_v2(db, "cell_sql_counters", 1, SQLITE_UTF8, connection, CountersFunction, nullptr,
                                    nullptr, nullptr);
}

}  // namespace cell::sql
