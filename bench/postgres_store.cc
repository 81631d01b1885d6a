// cell-bench's PostgreSQL store over libpq (see postgres_store.h): synchronous prepared statements on one
// connection per session, and serializable transactions retried on SQLSTATE 40001 and 40P01.
#include "bench/postgres_store.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <thread>

namespace cell::bench {

namespace {

// PostgreSQL's type OIDs (pg_type.h, a server header; these never change).
constexpr Oid kByteaOid = 17, kInt8Oid = 20;
constexpr int kBinary = 1, kText = 0;

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;
struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnDeleter>;

// libpq takes a null pointer for SQL NULL: an empty view may have one.
const char* Bytes(std::string_view v) { return v.data() != nullptr ? v.data() : ""; }

std::string Trimmed(const char* message) {
  std::string m = message != nullptr ? message : "";
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

// A connection with a bounded connect (10 s unless `conninfo` says otherwise); Unavailable saying why not.
StatusOr<ConnPtr> Connect(std::string_view conninfo) {
  const std::string info(conninfo);
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"10", "cell-bench", info.c_str(), nullptr};
  ConnPtr c(PQconnectdbParams(keys, values, /*expand_dbname=*/1));  // later values (conninfo's own) win
  if (c == nullptr) return Status::Unavailable("cannot connect to postgres: out of memory");
  if (PQstatus(c.get()) != CONNECTION_OK) {
    return Status::Unavailable(
        fmt::format("cannot connect to postgres at '{}': {}", conninfo, Trimmed(PQerrorMessage(c.get()))));
  }
  return c;
}

class PostgresSession;

// A transaction's operations: the session's statements, run inside its BEGIN ... COMMIT.
class PostgresTxnOps final : public TxnOps {
 public:
  explicit PostgresTxnOps(PostgresSession& session) : session_(session) {}
  Status Get(std::string_view key, std::string* value) override;
  Status Put(std::string_view key, std::string_view value) override;
  Status Scan(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) override;

 private:
  PostgresSession& session_;
};

class PostgresSession final : public StoreSession {
 public:
  PostgresSession(ConnPtr conn, std::string where) : c_(std::move(conn)), where_(std::move(where)) {}

  // Prepares the statements on this connection.
  Status Prepare() {
    const Oid get_types[] = {kByteaOid}, put_types[] = {kByteaOid, kByteaOid}, scan_types[] = {kByteaOid, kInt8Oid};
    struct {
      const char* name;
      const char* sql;
      int n;
      const Oid* types;
    } const statements[] = {
        {"get", "SELECT v FROM kv WHERE k = $1", 1, get_types},
        {"put", "INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v", 2, put_types},
        {"scan", "SELECT k, v FROM kv WHERE k >= $1 ORDER BY k LIMIT $2", 2, scan_types},
        {"scan_reverse", "SELECT k, v FROM kv WHERE k < $1 ORDER BY k DESC LIMIT $2", 2, scan_types},
        {"scan_reverse_all", "SELECT k, v FROM kv ORDER BY k DESC LIMIT $1", 1, scan_types + 1},
    };
    for (const auto& s : statements) {
      ResultPtr r(PQprepare(c_.get(), s.name, s.sql, s.n, s.types));
      if (Status st = Check(r.get(), s.name, PGRES_COMMAND_OK); !st.ok()) return st;
    }
    return Status::OK();
  }

  void Get(std::string_view key, GetDone done) override {
    std::string value;
    const Status s = GetNow(key, &value);
    done(s, s.ok() ? std::string_view(value) : std::string_view());
  }
  void Put(std::string_view key, std::string_view value, bool /*insert*/, PutDone done) override {
    done(PutNow(key, value));
  }
  Status Scan(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) override {
    return ScanNow(start, limit, out);
  }
  Status ScanReverse(std::string_view before, size_t limit,
                     std::vector<std::pair<std::string, std::string>>* out) override {
    if (limit == 0) return failed_;
    const std::string count = std::to_string(limit);
    const char* values[] = {Bytes(before), count.c_str()};
    const int lengths[] = {static_cast<int>(before.size()), 0}, formats[] = {kBinary, kText};
    auto r = before.empty() ? Exec("scan_reverse_all", 1, values + 1, lengths + 1, formats + 1)  // no bound
                            : Exec("scan_reverse", 2, values, lengths, formats);
    if (!r.ok()) return r.status();
    AppendRows(r->get(), out);
    return Status::OK();
  }

  // Everything completes before the call returns: there is never anything outstanding to wait for.
  bool completes_in_caller() const override { return true; }
  void Flush() override {}
  void AwaitCompletion() override {}
  void Progress() override {}
  void WaitUntil(Clock::time_point until) override { std::this_thread::sleep_until(until); }
  Status status() const override { return failed_; }

  Status RunTransaction(const TxnBody& body, int* attempts) override {
    *attempts = 0;
    Status s = failed_;
    for (int attempt = 1; attempt <= kTransactionAttempts && failed_.ok(); ++attempt) {
      ++*attempts;
      s = Simple("BEGIN ISOLATION LEVEL SERIALIZABLE", "BEGIN");
      if (s.ok()) {
        PostgresTxnOps ops(*this);
        s = body(ops);
      }
      if (s.ok()) s = Commit();
      if (!s.ok() && failed_.ok() && PQtransactionStatus(c_.get()) != PQTRANS_IDLE) {
        (void)Simple("ROLLBACK", "ROLLBACK");  // a failure here fails the session, which the loop sees
      }
      if (!s.IsAborted()) break;
      if (attempt < kTransactionAttempts) std::this_thread::sleep_for(ConflictBackoff(attempt));
    }
    return failed_.ok() ? s : failed_;
  }

  Status GetNow(std::string_view key, std::string* value) {
    const char* values[] = {Bytes(key)};
    const int lengths[] = {static_cast<int>(key.size())}, formats[] = {kBinary};
    auto r = Exec("get", 1, values, lengths, formats);
    if (!r.ok()) return r.status();
    if (PQntuples(r->get()) == 0) return Status::NotFound("postgres: no such key");
    value->assign(PQgetvalue(r->get(), 0, 0), PQgetlength(r->get(), 0, 0));
    return Status::OK();
  }

  Status PutNow(std::string_view key, std::string_view value) {
    const char* values[] = {Bytes(key), Bytes(value)};
    const int lengths[] = {static_cast<int>(key.size()), static_cast<int>(value.size())};
    const int formats[] = {kBinary, kBinary};
    return Exec("put", 2, values, lengths, formats).status();
  }

  Status ScanNow(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) {
    if (limit == 0) return failed_;
    const std::string count = std::to_string(limit);
    const char* values[] = {Bytes(start), count.c_str()};
    const int lengths[] = {static_cast<int>(start.size()), 0}, formats[] = {kBinary, kText};
    auto r = Exec("scan", 2, values, lengths, formats);
    if (!r.ok()) return r.status();
    AppendRows(r->get(), out);
    return Status::OK();
  }

 private:
  // A scan's rows (k, v), in the result's order.
  static void AppendRows(const PGresult* r, std::vector<std::pair<std::string, std::string>>* out) {
    for (int i = 0; i < PQntuples(r); ++i) {
      out->emplace_back(std::string(PQgetvalue(r, i, 0), PQgetlength(r, i, 0)),
                        std::string(PQgetvalue(r, i, 1), PQgetlength(r, i, 1)));
    }
  }

  // Runs a prepared statement with binary results: its rows, or the error (see Check).
  StatusOr<ResultPtr> Exec(const char* name, int n, const char* const* values, const int* lengths, const int* formats) {
    if (!failed_.ok()) return failed_;
    ResultPtr r(PQexecPrepared(c_.get(), name, n, values, lengths, formats, kBinary));
    if (Status s = Check(r.get(), name, PGRES_TUPLES_OK, PGRES_COMMAND_OK); !s.ok()) return s;
    return r;
  }

  Status Simple(const char* sql, const char* what) {
    if (!failed_.ok()) return failed_;
    ResultPtr r(PQexec(c_.get(), sql));
    return Check(r.get(), what, PGRES_COMMAND_OK);
  }

  // COMMIT, which reports a transaction that had failed by rolling it back instead.
  Status Commit() {
    if (!failed_.ok()) return failed_;
    ResultPtr r(PQexec(c_.get(), "COMMIT"));
    if (Status s = Check(r.get(), "COMMIT", PGRES_COMMAND_OK); !s.ok()) return s;
    if (std::strcmp(PQcmdStatus(r.get()), "COMMIT") != 0) {
      return Status::Internal(
          fmt::format("postgres at {}: COMMIT answered {}: a statement had failed", where_, PQcmdStatus(r.get())));
    }
    return Status::OK();
  }

  // OK if `r` has one of the statuses wanted. Otherwise: Aborted for a serialization failure or a deadlock (the
  // transaction's conflict), Unavailable (failing the session) if the connection is gone, else FailedPrecondition
  // with the server's SQLSTATE and message.
  Status Check(const PGresult* r, std::string_view what, ExecStatusType want, ExecStatusType also = PGRES_COMMAND_OK) {
    const ExecStatusType got = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (got == want || got == also) return Status::OK();
    if (PQstatus(c_.get()) == CONNECTION_BAD) {
      failed_ = Status::Unavailable(
          fmt::format("postgres at {}: connection lost: {}", where_, Trimmed(PQerrorMessage(c_.get()))));
      return failed_;
    }
    const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    const std::string sqlstate = state != nullptr ? state : "?????";
    const std::string message = Trimmed(r != nullptr ? PQresultErrorMessage(r) : PQerrorMessage(c_.get()));
    if (sqlstate == "40001" || sqlstate == "40P01") {
      return Status::Aborted(fmt::format("postgres {}: {} ({})", what, message, sqlstate));
    }
    return Status::FailedPrecondition(fmt::format("postgres {}: {} ({})", what, message, sqlstate));
  }

  ConnPtr c_;
  const std::string where_;
  Status failed_;
};

Status PostgresTxnOps::Get(std::string_view key, std::string* value) { return session_.GetNow(key, value); }
Status PostgresTxnOps::Put(std::string_view key, std::string_view value) { return session_.PutNow(key, value); }
Status PostgresTxnOps::Scan(std::string_view start, size_t limit,
                            std::vector<std::pair<std::string, std::string>>* out) {
  return session_.ScanNow(start, limit, out);
}

}  // namespace

StatusOr<std::unique_ptr<PostgresStore>> PostgresStore::Open(std::string_view conninfo) {
  auto c = Connect(conninfo);
  if (!c.ok()) return c.status();
  ResultPtr r(PQexec(c->get(), "CREATE TABLE IF NOT EXISTS kv (k bytea PRIMARY KEY, v bytea NOT NULL)"));
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
    return Status::FailedPrecondition(
        fmt::format("postgres at '{}': cannot create table kv: {}", conninfo, Trimmed(PQresultErrorMessage(r.get()))));
  }
  return std::unique_ptr<PostgresStore>(new PostgresStore(std::string(conninfo)));
}

StatusOr<std::unique_ptr<StoreSession>> PostgresStore::NewSession() {
  auto c = Connect(conninfo_);
  if (!c.ok()) return c.status();
  const std::string where = fmt::format("{}:{}", PQhost(c->get()), PQport(c->get()));
  auto session = std::make_unique<PostgresSession>(std::move(*c), where);
  if (Status s = session->Prepare(); !s.ok()) return s;
  return std::unique_ptr<StoreSession>(std::move(session));
}

StatusOr<std::string> PostgresStore::Show(std::string_view name) const {
  if (name.empty() || !std::all_of(name.begin(), name.end(),
                                   [](char ch) { return std::islower(static_cast<unsigned char>(ch)) || ch == '_'; })) {
    return Status::InvalidArgument(fmt::format("'{}' is not a setting's name", name));
  }
  auto c = Connect(conninfo_);
  if (!c.ok()) return c.status();
  ResultPtr r(PQexec(c->get(), fmt::format("SHOW {}", name).c_str()));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1) {
    return Status::FailedPrecondition(
        fmt::format("postgres: SHOW {}: {}", name, Trimmed(PQresultErrorMessage(r.get()))));
  }
  return std::string(PQgetvalue(r.get(), 0, 0));
}

}  // namespace cell::bench
