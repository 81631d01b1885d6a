// Cell errors as SQLite result codes and messages (sql/table.h).
#include <fmt/format.h>

#include "sql/table.h"

namespace cell::sql {

int SqliteCode(const Status& status) {
  switch (status.code()) {
    case Status::Code::kOk:
      return SQLITE_OK;
    case Status::Code::kAborted:
    case Status::Code::kDeadlineExceeded:
      return SQLITE_BUSY;
    case Status::Code::kResourceExhausted:
      return SQLITE_FULL;
    case Status::Code::kPermissionDenied:
      return SQLITE_AUTH;
    case Status::Code::kUnavailable:
      return SQLITE_IOERR;
    default:
      return SQLITE_ERROR;
  }
}

namespace {

// Cell's messages quote keys, which hold any bytes (a tuple's 0x00s): shown as \xNN, so that none ends the C string.
std::string Printable(const std::string& message) {
  std::string out;
  for (const char c : message) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 && c != '\n') {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

int Fail(sqlite3_vtab* vtab, int code, const std::string& message) {
  auto* table = static_cast<Table*>(vtab);
  if (code == SQLITE_BUSY) ++table->counters.busy;
  sqlite3_free(vtab->zErrMsg);
  vtab->zErrMsg = sqlite3_mprintf("%s", Printable(fmt::format("cell table {}: {}", table->name, message)).c_str());
  return code;
}

int Fail(sqlite3_vtab* vtab, const Status& status) {
  std::string message = status.ToString();
  if (status.IsAborted() || status.IsDeadlineExceeded()) message += " (SQLITE_BUSY: roll back and run it again)";
  return Fail(vtab, SqliteCode(status), message);
}

}  // namespace cell::sql
