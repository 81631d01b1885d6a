// Parsing schema='...' into columns (sql/schema.h), and the declarations made from them.
#include "sql/schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

namespace cell::sql {

namespace {

constexpr size_t kMaxColumns = 2000;  // SQLite's own default limit (SQLITE_MAX_COLUMN)

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// The definitions of `text`, split at commas outside quotes and parentheses.
std::vector<std::string_view> SplitDefinitions(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0, depth = 0;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'' || c == '`') {
      quote = c;
    } else if (c == '[') {
      quote = ']';
    } else if (c == '(') {
      ++depth;
    } else if (c == ')' && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(text.substr(start));
  return parts;
}

// Words of one definition: a quoted identifier is one word (unquoted); `quoted` says which words were.
struct Words {
  std::vector<std::string> words;
  std::vector<bool> quoted;
};

StatusOr<Words> SplitWords(std::string_view def) {
  Words w;
  size_t i = 0;
  while (i < def.size()) {
    const char c = def[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (c == '"' || c == '`' || c == '[') {
      const char close = c == '[' ? ']' : c;
      std::string word;
      size_t j = i + 1;
      for (;; ++j) {
        if (j >= def.size()) return Status::InvalidArgument(fmt::format("unterminated quote in '{}'", def));
        if (def[j] != close) {
          word += def[j];
        } else if (close != ']' && j + 1 < def.size() && def[j + 1] == close) {
          word += close;  // a doubled quote stands for one
          ++j;
        } else {
          break;
        }
      }
      w.words.push_back(std::move(word));
      w.quoted.push_back(true);
      i = j + 1;
      continue;
    }
    size_t j = i;
    while (j < def.size() && !std::isspace(static_cast<unsigned char>(def[j]))) ++j;
    w.words.emplace_back(def.substr(i, j - i));
    w.quoted.push_back(false);
    i = j;
  }
  return w;
}

std::optional<ColumnType> TypeOf(std::string_view word) {
  if (EqualsIgnoreCase(word, "INTEGER") || EqualsIgnoreCase(word, "INT")) return ColumnType::kInteger;
  if (EqualsIgnoreCase(word, "REAL")) return ColumnType::kReal;
  if (EqualsIgnoreCase(word, "TEXT")) return ColumnType::kText;
  if (EqualsIgnoreCase(word, "BLOB")) return ColumnType::kBlob;
  return std::nullopt;
}

// One definition: NAME TYPE [PRIMARY KEY] [NOT NULL], in any order after the type.
Status ParseColumn(std::string_view def, Column* column, bool* primary_key) {
  CELL_ASSIGN_OR_RETURN(Words w, SplitWords(def));
  if (w.words.empty()) return Status::InvalidArgument("an empty column definition (two commas in a row?)");
  column->name = w.words[0];
  if (column->name.empty()) return Status::InvalidArgument(fmt::format("an empty column name in '{}'", def));
  if (!w.quoted[0] && (EqualsIgnoreCase(column->name, "PRIMARY") || EqualsIgnoreCase(column->name, "UNIQUE") ||
                       EqualsIgnoreCase(column->name, "CONSTRAINT"))) {
    return Status::InvalidArgument(
        fmt::format("table constraints are not supported ('{}'): declare the key column itself PRIMARY KEY", def));
  }
  if (w.words.size() < 2) {
    return Status::InvalidArgument(fmt::format("column {} has no type (INTEGER, REAL, TEXT or BLOB)", column->name));
  }
  const auto type = TypeOf(w.words[1]);
  if (!type) {
    return Status::InvalidArgument(
        fmt::format("column {}: type '{}' is not supported (INTEGER, REAL, TEXT or BLOB)", column->name, w.words[1]));
  }
  column->type = *type;
  *primary_key = false;
  for (size_t i = 2; i < w.words.size(); i += 2) {
    const bool pair = i + 1 < w.words.size();
    if (pair && EqualsIgnoreCase(w.words[i], "PRIMARY") && EqualsIgnoreCase(w.words[i + 1], "KEY")) {
      *primary_key = true;
    } else if (pair && EqualsIgnoreCase(w.words[i], "NOT") && EqualsIgnoreCase(w.words[i + 1], "NULL")) {
      column->not_null = true;
    } else {
      return Status::InvalidArgument(fmt::format(
          "column {}: '{}' is not supported (after the type: PRIMARY KEY, NOT NULL)", column->name, w.words[i]));
    }
  }
  return Status::OK();
}

}  // namespace

std::string_view TypeName(ColumnType type) {
  switch (type) {
    case ColumnType::kInteger:
      return "INTEGER";
    case ColumnType::kReal:
      return "REAL";
    case ColumnType::kText:
      return "TEXT";
    case ColumnType::kBlob:
      return "BLOB";
  }
  return "BLOB";
}

std::string QuoteIdentifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

int Schema::Find(std::string_view name) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (EqualsIgnoreCase(columns[i].name, name)) return static_cast<int>(i);
  }
  return -1;
}

std::string Schema::Declaration() const {
  // NOT NULL is left out: SQLite does not enforce constraints on a virtual table (xUpdate does).
  std::string out = "CREATE TABLE x(";
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i > 0) out += ", ";
    out += QuoteIdentifier(columns[i].name) + " " + std::string(TypeName(columns[i].type));
    if (static_cast<int>(i) == primary_key) out += " PRIMARY KEY";
  }
  out += ")";
  if (!has_rowid()) out += " WITHOUT ROWID";
  return out;
}

std::string Schema::Canonical() const {
  std::string out;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i > 0) out += ", ";
    out += QuoteIdentifier(columns[i].name) + " " + std::string(TypeName(columns[i].type));
    if (static_cast<int>(i) == primary_key) out += " PRIMARY KEY";
    if (columns[i].not_null) out += " NOT NULL";
  }
  return out;
}

StatusOr<Schema> ParseSchema(std::string_view text) {
  Schema schema;
  const auto bad = [](const Status& s) { return Status::InvalidArgument("schema: " + s.message()); };
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return bad(Status::InvalidArgument("no columns (schema='id INTEGER PRIMARY KEY, name TEXT, ...')"));
  }
  for (std::string_view def : SplitDefinitions(text)) {
    Column column;
    bool primary_key = false;
    if (Status s = ParseColumn(def, &column, &primary_key); !s.ok()) return bad(s);
    if (schema.Find(column.name) >= 0) {
      return bad(Status::InvalidArgument(fmt::format("column {} is declared twice", column.name)));
    }
    if (primary_key) {
      if (schema.primary_key >= 0) {
        return bad(Status::InvalidArgument(fmt::format("two PRIMARY KEY columns ({} and {}): a key is one column",
                                                       schema.columns[schema.primary_key].name, column.name)));
      }
      if (column.type != ColumnType::kInteger && column.type != ColumnType::kText) {
        return bad(Status::InvalidArgument(
            fmt::format("PRIMARY KEY column {} is {}: a key is INTEGER or TEXT", column.name, TypeName(column.type))));
      }
      schema.primary_key = static_cast<int>(schema.columns.size());
    }
    schema.columns.push_back(std::move(column));
  }
  if (schema.columns.size() > kMaxColumns) {
    return bad(Status::InvalidArgument(fmt::format("more than {} columns", kMaxColumns)));
  }
  return schema;
}

}  // namespace cell::sql
