// One cell::Client per (cluster, key file, search mode) in the process, shared by every Cell table of every SQLite
// connection.
//
// Reference-counted: a table (and each transaction or scan under way) holds a shared_ptr; the client is opened by the
// first table that needs it and closed when the last holder lets go, so the process keeps no connections to a
// cluster it no longer has tables on (and a connection that closes leaves no threads behind).
#pragma once

#include <memory>
#include <string>

#include "cell/client.h"
#include "cell/status.h"

namespace cell::sql {

// The client of (cluster, key_file, search), opened now if no table holds one (search: ClientOptions::search, ""
// for its default). The error of Client::Open if it fails.
StatusOr<std::shared_ptr<Client>> SharedClient(const std::string& cluster, const std::string& key_file,
                                               const std::string& search = "");

}  // namespace cell::sql
