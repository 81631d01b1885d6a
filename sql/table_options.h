// The arguments of CREATE VIRTUAL TABLE t USING cell(...): option=value pairs, values quoted with ' or " (a doubled
// quote inside stands for one) or bare.
//
//   cluster='zk://127.0.0.1:2181/cell/default'    required: ClientOptions::cluster
//   schema='id INTEGER PRIMARY KEY, name TEXT'    required: the columns (sql/schema.h)
//   key_file='/etc/cell/client.key'               ClientOptions::key_file (empty: CELL_KEY_FILE, if set)
//   prefix='t'                                    the tuple prefix of the table's keys (default: the table's name)
//   index='name'                                  a secondary index on that column; repeat for more
//   search='client'                               how the table's reads search: adaptive (the default), server,
//                                                 client, dex or fixed:<fraction> (ClientOptions::search)
#pragma once

#include <string>
#include <vector>

#include "cell/status.h"
#include "sql/schema.h"

namespace cell::sql {

struct TableOptions {
  std::string cluster;
  std::string key_file;
  std::string prefix;
  Schema schema;
  std::vector<int> indexes;  // indexed columns, in the order given
  std::string search;        // ClientOptions::search ("": the client's default)
};

// Longest prefix accepted, packed as a tuple: keys need room after it for the primary key (cell/limits.h: 255 bytes
// in all).
inline constexpr size_t kMaxPrefixBytes = 130;

// Parses the module arguments (argv[3..] of xCreate/xConnect) of table `table_name`. InvalidArgument with a message
// a user can act on: an unknown or repeated option, a missing cluster or schema, a bad schema, an index on no column.
StatusOr<TableOptions> ParseTableOptions(const std::string& table_name, const std::vector<std::string>& args);

}  // namespace cell::sql
