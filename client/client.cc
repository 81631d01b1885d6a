#include "cell/client.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>

#include "client/client_impl.h"
#include "client/remote_table.h"
#include "client/store_client.h"
#include "client/transaction.h"
#include "rpc/key.h"
#include "rpc/proto/store.pb.h"

namespace cell {

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Status WriteNewKeyFile(const std::string& path) { return rpc::WriteNewKeyFile(path); }

SendHold::SendHold() { rpc::BeginHoldingSends(); }
SendHold::~SendHold() { rpc::EndHoldingSends(); }
void SendHold::Flush() { rpc::FlushHeldSends(); }

StatusOr<std::unique_ptr<Client>> Client::Open(const ClientOptions& options) {
  if (options.cluster.empty()) {
    return Status::InvalidArgument(
        "no cluster given: set ClientOptions::cluster (cellctl: --cluster) to zk://host:port[/root/cluster] or to an "
        "embedded server's tcp://host:port");
  }
  std::string key_file = options.key_file;
  if (key_file.empty()) {
    const char* env = std::getenv("CELL_KEY_FILE");
    if (env != nullptr) key_file = env;
  }
  rpc::Key key;
  if (!key_file.empty()) {
    CELL_ASSIGN_OR_RETURN(key, rpc::ReadKeyFile(key_file, rpc::kClientKeyName));
  }
  client::TableOptions table_options;
  table_options.rpc.key = key;
  table_options.rpc.connect_timeout = options.timeout;
  table_options.rpc.call_timeout = options.timeout;
  table_options.zk_operation_timeout = options.timeout;
  client::StoreClientOptions store_options;
  store_options.key = key;
  store_options.timeout = options.timeout;
  store_options.transports = options.transports;
  if (options.node_cache_levels < 1) {
    return Status::InvalidArgument(
        fmt::format("node_cache_levels must be >= 1 (leaves are never cached), not {}", options.node_cache_levels));
  }
  store_options.node_cache_bytes = options.node_cache_bytes;
  store_options.node_cache_levels = options.node_cache_levels;
  store_options.search = options.search;
  CELL_RETURN_IF_ERROR(selector::MakeSelector(options.search).status());  // before connecting to anything
  const SelectorOptions& sel = options.selector;
  if (sel.window < 2 || !(sel.outlier_sigmas >= 0) || !(sel.explore >= 0 && sel.explore <= 1) ||
      sel.idle_reset.count() <= 0 || sel.max_age.count() < 0 || !(sel.initial_reads >= 1) || sel.sample_one_in < 1 ||
      !(sel.steer_per_s >= 0 && sel.steer_per_s <= 1000) || !(sel.load_step == 0 || sel.load_step > 1)) {
    return Status::InvalidArgument(
        "selector options out of range: window >= 2, outlier_sigmas >= 0 (0: keep every sample), explore in 0..1, "
        "idle_reset > 0, max_age >= 0, initial_reads >= 1, sample_one_in >= 1, steer_per_s in 0..1000, load_step 0 "
        "(off) or > 1");
  }
  CELL_ASSIGN_OR_RETURN(const selector::SelectorOptions::Floor floor, selector::ParseFloor(sel.floor));
  store_options.sample_one_in = sel.sample_one_in;
  store_options.selector = {.window = sel.window,
                            .outlier_sigmas = sel.outlier_sigmas,
                            .explore = sel.explore,
                            .idle_reset_us = static_cast<uint64_t>(sel.idle_reset.count()) * 1000,
                            .max_age_us = static_cast<uint64_t>(sel.max_age.count()) * 1000,
                            .initial_reads = sel.initial_reads,
                            .floor = floor,
                            .steer_per_s = sel.steer_per_s,
                            .load_step = sel.load_step};
  for (const std::string& t : options.transports) {
    if (t != "tcp" && t != "shm" && t != "verbs") {
      return Status::InvalidArgument(fmt::format("unknown transport '{}' (tcp, shm or verbs)", t));
    }
  }
  auto impl = std::make_unique<Impl>();
  CELL_ASSIGN_OR_RETURN(impl->table, client::OpenRegionTable(options.cluster, table_options));
  // One read now, so that a cluster that is not there fails Open rather than the first operation.
  CELL_RETURN_IF_ERROR(impl->table->ListServers().status());
  CELL_ASSIGN_OR_RETURN(impl->store, client::StoreClient::Create(impl->table.get(), store_options));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Status Client::Get(std::string_view key, std::string* value) { return impl_->store->Get(key, value); }
Status Client::Put(std::string_view key, std::string_view value) { return impl_->store->Put(key, value); }
Status Client::Delete(std::string_view key) { return impl_->store->Delete(key); }
void Client::GetAsync(std::string_view key, std::function<void(const Status&, std::string_view)> done) {
  impl_->store->GetAsync(key, std::move(done));
}
void Client::PutAsync(std::string_view key, std::string_view value, std::function<void(const Status&)> done) {
  impl_->store->PutAsync(key, value, std::move(done));
}
void Client::DeleteAsync(std::string_view key, std::function<void(const Status&)> done) {
  impl_->store->DeleteAsync(key, std::move(done));
}

Status Client::Scan(std::string_view start, std::string_view end, size_t limit,
                    std::vector<std::pair<std::string, std::string>>* out) {
  std::vector<btree::KeyValue> pairs;
  CELL_RETURN_IF_ERROR(impl_->store->Scan(start, end, limit, &pairs));
  for (auto& kv : pairs) out->emplace_back(std::move(kv.key), std::move(kv.value));
  return Status::OK();
}

StatusOr<std::unique_ptr<Transaction>> Client::BeginTransaction(const TransactionOptions& options) {
  return client::NewTransaction(*impl_->store, options);
}
Status Client::CompareAndSwap(std::string_view key, const std::optional<std::string>& expected,
                              const std::optional<std::string>& new_value) {
  return impl_->store->CompareAndSwap(key, expected, new_value);
}
Status Client::Write(const WriteBatch& batch) { return client::WriteBatchAtomically(*impl_->store, batch); }

Status RunTransaction(Client& client, const std::function<Status(Transaction&)>& fn, int max_attempts,
                      const TransactionOptions& options) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  auto pause = std::chrono::microseconds(500);
  Status last = Status::Aborted("the transaction was not run (max_attempts < 1)");
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    CELL_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> txn, client.BeginTransaction(options));
    last = fn(*txn);
    if (last.ok()) last = txn->Commit();
    if (!last.IsAborted()) return last;
    // A randomized, doubling back-off, so that transactions that conflicted do not meet again at once.
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % static_cast<uint64_t>(pause.count() + 1)));
    pause = std::min(pause * 2, std::chrono::microseconds(50000));
  }
  return last;
}

Client::Stats Client::stats() const {
  const auto& s = impl_->store->stats();
  Stats out;
  out.server_searches = s.server_searches.load();
  out.client_searches = s.client_searches.load();
  out.in_place_searches = s.in_place_searches.load();
  out.retries = s.retries.load();
  if (const btree::NodeCache* nodes = impl_->store->node_cache()) {
    out.node_cache_hits = nodes->stats().hits.load();
    out.node_cache_misses = nodes->stats().misses.load();
    out.node_cache_forgotten = nodes->stats().forgotten.load();
  }
  const selector::SelectorStats sel = impl_->store->selector().stats();
  out.explorations = sel.explorations;
  out.load_steps = sel.load_steps;
  out.reads_per_search = sel.reads_per_search;
  for (const auto& e : sel.servers) {
    out.estimates.push_back({.server = e.server,
                             .server_search_us = e.server_search_us,
                             .read_us = e.read_us,
                             .rtt_us = e.rtt_us,
                             .server_rtt_us = e.server_rtt_us});
  }
  return out;
}

StatusOr<std::vector<Client::ServerStats>> Client::StoreStats() {
  CELL_ASSIGN_OR_RETURN(auto replies, impl_->store->ServerStats());
  std::vector<ServerStats> out;
  for (const std::string& bytes : replies) {
    cell::proto::StoreStats s;
    if (!s.ParseFromString(bytes)) return Status::Corruption("malformed stats reply from a server");
    out.push_back({.server = s.server(),
                   .meganodes = s.meganodes(),
                   .meganode_splits = s.meganode_splits(),
                   .remote_splits = s.remote_splits(),
                   .root_splits = s.root_splits(),
                   .requests = s.requests(),
                   .redirects = s.redirects(),
                   .extent_bytes_used = s.extent_bytes_used(),
                   .extent_bytes_free = s.extent_bytes_free(),
                   .node_bytes_used = s.node_bytes_used(),
                   .node_bytes_free = s.node_bytes_free(),
                   .held_writes = s.held_writes(),
                   .room_splits = s.room_splits(),
                   .txn_locks = s.txn_locks(),
                   .txn_resolved = s.txn_resolved()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.server < b.server; });
  return out;
}

StatusOr<std::vector<ServerDescription>> Client::Servers() {
  CELL_ASSIGN_OR_RETURN(auto servers, impl_->table->ListServers());
  std::vector<ServerDescription> out;
  for (const auto& s : servers)
    out.push_back({.id = s.id, .addresses = s.addresses, .capacity_bytes = s.capacity_bytes});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

StatusOr<std::vector<RegionDescription>> Client::Regions() {
  CELL_ASSIGN_OR_RETURN(auto regions, impl_->table->ListRegions());
  std::vector<RegionDescription> out;
  for (const auto& r : regions) out.push_back({.id = r.region, .owner = r.owner, .epoch = r.epoch});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  StatusOr<uint32_t> root = impl_->table->RootRegion();
  if (!root.ok() && !root.status().IsNotFound()) return root.status();  // NotFound: no server has claimed it yet
  for (RegionDescription& r : out) r.root = root.ok() && r.id == *root;
  return out;
}

}  // namespace cell
