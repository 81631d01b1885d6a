// The process's shared Cell clients (sql/client_registry.h).
#include "sql/client_registry.h"

#include <map>
#include <mutex>
#include <tuple>
#include <utility>

namespace cell::sql {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::tuple<std::string, std::string, std::string>, std::weak_ptr<Client>> clients;
};

Registry& TheRegistry() {
  // Never destroyed: a client may still be let go of while the process exits.
  static auto* registry = new Registry;
  return *registry;
}

}  // namespace

StatusOr<std::shared_ptr<Client>> SharedClient(const std::string& cluster, const std::string& key_file,
                                               const std::string& search) {
  Registry& r = TheRegistry();
  // Held while opening, so that two tables opening at once share one client.
  std::lock_guard lock(r.mu);
  std::weak_ptr<Client>& slot = r.clients[{cluster, key_file, search}];
  if (std::shared_ptr<Client> client = slot.lock()) return client;
  ClientOptions options;
  options.cluster = cluster;
  options.key_file = key_file;
  if (!search.empty()) options.search = search;
  CELL_ASSIGN_OR_RETURN(std::unique_ptr<Client> opened, Client::Open(options));
  std::shared_ptr<Client> client(std::move(opened));
  slot = client;
  return client;
}

}  // namespace cell::sql
