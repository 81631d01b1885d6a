// StoreClient: its threads, connections, and the synchronous and asynchronous calls (see store_client.h). The
// requests' state machine is in request_op.cc, client-side searches in one_sided_search.cc.
#include "client/store_client.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <future>
#include <optional>
#include <thread>
#include <utility>

#include "btree/global_reader.h"
#include "btree/node_source.h"
#include "client/store_client_internal.h"
#include "common/key_limits.h"
#include "common/lent.h"
#include "rpc/proto/store.pb.h"

namespace cell::client {

using cell::proto::StoreMethod;

StatusOr<std::unique_ptr<StoreClient>> StoreClient::Create(membership::RegionTableReader* table,
                                                           const StoreClientOptions& options) {
  CELL_ASSIGN_OR_RETURN(std::unique_ptr<selector::Selector> selector,
                        selector::MakeSelector(options.search, options.selector));
  selector::SelectorOptions scans = options.selector;
  // A client-side scan is reported as one read, and the rule compares whole scans: their latencies vary with their
  // lengths, not only with the queues, so a side's fastest scan is no measure of its no-queue cost.
  scans.initial_reads = 1;
  scans.floor = selector::SelectorOptions::Floor::kNone;
  CELL_ASSIGN_OR_RETURN(std::unique_ptr<selector::Selector> scan_selector,
                        selector::MakeSelector(options.search, scans));
  return std::unique_ptr<StoreClient>(new StoreClient(table, options, std::move(selector), std::move(scan_selector)));
}

namespace {
// True on this client's timer thread and connecting threads, where callbacks run: a synchronous call there could wait
// for the thread's own next step.
thread_local bool on_client_thread = false;
}  // namespace

void MarkClientThread() { on_client_thread = true; }

namespace {
struct ClientSideValueTag;  // GetAsync's value of a client-side search (common/lent.h)

uint64_t NextClientId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

Status CheckMayWait() {
  if (!on_client_thread && !rpc::OnTransportThread()) return Status::OK();
  return Status::FailedPrecondition(
      "a synchronous Get, Put, Delete or Scan was called in an asynchronous operation's callback, whose thread it "
      "would wait on: use GetAsync, PutAsync or DeleteAsync there");
}

StoreClient::StoreClient(membership::RegionTableReader* table, const StoreClientOptions& options,
                         std::unique_ptr<selector::Selector> selector,
                         std::unique_ptr<selector::Selector> scan_selector)
    : table_(table),
      cache_(table),
      options_(options),
      selector_(std::move(selector)),
      scan_selector_(std::move(scan_selector)),
      measure_(selector_->Measures()),
      id_(NextClientId()),
      connections_([] { MarkClientThread(); }),
      timers_(TaskScheduler::AtStop::kRunNow, [] { MarkClientThread(); }) {
  if (options.node_cache_bytes > 0) {
    nodes_ = std::make_unique<btree::NodeCache>(options.node_cache_bytes, options.node_cache_levels);
  }
}

StoreClient::~StoreClient() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  // Outstanding calls complete now (Unavailable), and connections being made finish (each within kConnectTimeout);
  // the operations waiting for them fail as closing, and their retries fail at once since closing_ is set.
  connections_.Close();
  timers_.Stop();  // every remaining timer runs at once: each fails as closing
}

void StoreClient::Schedule(Deadline due, std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (!closing_) return timers_.PostAt(due, std::move(task));
  }
  task();
}

bool StoreClient::SearchOnServer(GlobalPtr start, bool may_block, uint64_t* server, Decider decider) {
  *server = 0;
  if (!measure_) return selector_->Choose(0, 0, 0) == selector::Side::kServer;
  uint32_t region = start.region;
  if (start.is_null()) {
    region = root_.load(std::memory_order_acquire);
    if (region == 0 && may_block) {
      auto root = Root();
      region = root.ok() ? *root : 0;
    }
  }
  if (region != 0) {
    *server = cache_.CachedOwner(region);
    if (*server == 0 && may_block) {  // not cached yet: look it up (the operation would now anyway)
      auto route = cache_.Lookup(region);
      if (route.ok()) *server = route->owner().id;
    }
  }
  // Not knowing the server yet: by RPC (the request finds its way), measuring nothing.
  if (*server == 0) return true;
  const uint64_t now = SelectorMicros();
  switch (decider) {
    case Decider::kGet:
      return selector_->Choose(*server, start.Pack(), now) == selector::Side::kServer;
    case Decider::kFollow:
      return selector_->Follow(*server, start.Pack(), now) == selector::Side::kServer;
    case Decider::kScan:
      return scan_selector_->Choose(*server, 0, now) == selector::Side::kServer;
  }
  return true;
}

StatusOr<uint32_t> StoreClient::Root() {
  if (const uint32_t root = root_.load(std::memory_order_acquire); root != 0) return root;
  // The region the first server claimed; it never changes once the cluster exists.
  CELL_ASSIGN_OR_RETURN(uint32_t root, table_->RootRegion());
  root_.store(root, std::memory_order_release);
  return root;
}

StatusOr<std::unique_ptr<rpc::Connection>> StoreClient::Dial(const membership::ServerInfo& server, Deadline deadline) {
  rpc::ConnectOptions rpc_options;
  rpc_options.call_timeout = options_.timeout;
  rpc_options.key = options_.key;
  // Each transport tried gets what is left of the deadline, up to kConnectTimeout: a server that is paused (its kernel
  // accepts, it never answers the handshake) must not hold the operation until its deadline; the operation retries,
  // re-reading the route, and finds the survivor once one has taken the server's regions over.
  auto connection = rpc::ConnectFirst(server.addresses, options_.transports, rpc_options, [deadline] {
    return std::min(Remaining(deadline), std::chrono::duration_cast<std::chrono::milliseconds>(kConnectTimeout));
  });
  if (connection.ok()) {
    key_accepted_.store(true, std::memory_order_relaxed);
    return connection;
  }
  if (!connection.status().IsPermissionDenied()) {
    return Status::Unavailable(fmt::format("cannot reach server {}: {}", server.id, connection.status().message()));
  }
  // A refused key stays refused (not retried) while no server has accepted it: the key is wrong or missing.
  if (!key_accepted_.load(std::memory_order_relaxed)) {
    return Status::PermissionDenied(
        fmt::format("cannot reach server {}: {}", server.id, connection.status().message()));
  }
  return Status::Unavailable(fmt::format(
      "server {} is not at its addresses (other servers of the cluster accept this client's key; what answers there "
      "refuses it: the server died and another process listens there, or it runs with other keys): {}",
      server.id, connection.status().message()));
}

StatusOr<std::shared_ptr<rpc::Connection>> StoreClient::Closing() {
  return Status::Unavailable("the client is closing");
}

StatusOr<std::shared_ptr<rpc::Connection>> StoreClient::ConnectionTo(
    std::shared_ptr<const membership::ServerInfo> server, Deadline deadline) {
  if (closing_.load(std::memory_order_acquire)) return Closing();
  const uint64_t id = server->id;
  return connections_.Get(id, [this, server = std::move(server), deadline] { return Dial(*server, deadline); });
}

void StoreClient::DropServer(uint64_t server, const rpc::Connection* failed) {
  cache_.OnServerUnreachable(server);
  connections_.Drop(server, failed);
}

StatusOr<StoreClient::Side> StoreClient::SideFor(std::string_view search) {
  if (search.empty() || search == "adaptive") return Side::kSelector;
  if (search == "server") return Side::kServer;
  if (search == "client") return Side::kClient;
  return Status::InvalidArgument(fmt::format(
      "a call's search is \"\" (the client's), \"server\", \"client\" or \"adaptive\", not \"{}\"", search));
}

Status StoreClient::Get(std::string_view key, std::string* value) {
  return Get(key, value, Side::kSelector, NewDeadline());
}

Status StoreClient::Get(std::string_view key, std::string* value, Side side, Deadline deadline) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, {}));
  CELL_RETURN_IF_ERROR(CheckMayWait());
  uint64_t server = 0;
  std::optional<GlobalPtr> cached;  // the selector's start for the key, asked once
  if (measure_ && side == Side::kSelector) cached = paths_.Lookup(key);
  if (side == Side::kServer ||
      (side == Side::kSelector && SearchOnServer(cached.value_or(GlobalPtr()), /*may_block=*/true, &server))) {
    stats_.server_searches.fetch_add(1, std::memory_order_relaxed);
    if (server == 0) return GetServerSide(key, value, deadline);
    const Clock::time_point begin = Clock::now();  // after the decision, which may have looked the owner up
    Status s = GetServerSide(key, value, deadline);
    if (s.ok() || s.IsNotFound()) ReportServerSearch(server, begin);
    return s;
  }
  stats_.client_searches.fetch_add(1, std::memory_order_relaxed);
  return GetClientSide(key, value, deadline, server != 0 && SampleThisSearch() ? server : 0, nullptr, cached);
}

void StoreClient::ReportServerSearch(uint64_t server, Clock::time_point begin) {
  selector_->OnServerSearch(server, MicrosBetween(begin, Clock::now()), SelectorMicros());
}

void StoreClient::GetAsync(std::string_view key, GetCallback done) {
  if (Status s = CheckKeyValue(key, {}); !s.ok()) return done(s, {});
  uint64_t server = 0;
  // A client-side search waits for its reads; in a callback (a transport's thread, or this client's) that could wait
  // for itself, or hold up others, so a get started there searches on the server whatever the selector says.
  std::optional<GlobalPtr> cached;  // the selector's start for the key, asked once
  if (measure_) cached = paths_.Lookup(key);
  const Deadline deadline = NewDeadline();
  if (!SearchOnServer(cached.value_or(GlobalPtr()), /*may_block=*/false, &server) && CheckMayWait().ok()) {
    stats_.client_searches.fetch_add(1, std::memory_order_relaxed);
    Lent<std::string, ClientSideValueTag> value;  // the thread's: its memory kept from one get to the next
    value->clear();
    Status s = GetClientSide(key, &*value, deadline, server != 0 && SampleThisSearch() ? server : 0, nullptr, cached);
    if (value->capacity() > kLentKeepBytes) value.Shrink();
    return done(s, *value);
  }
  stats_.server_searches.fetch_add(1, std::memory_order_relaxed);
  if (server != 0) {
    // The server-side search's latency, for the selector, from here to the reply.
    const Clock::time_point begin = Clock::now();
    done = [this, server, begin, inner = std::move(done)](const Status& s, std::string_view value) {
      if (s.ok() || s.IsNotFound()) ReportServerSearch(server, begin);
      inner(s, value);
    };
  }
  // Told the reply's value, or the error (NotFound too: RequestOp's KeyRequest).
  StartKeyOp(StoreMethod::STORE_GET, /*idempotent=*/true, key, nullptr, deadline, std::move(done));
}

void StoreClient::PutAsync(std::string_view key, std::string_view value, DoneCallback done) {
  if (Status s = CheckKeyValue(key, value); !s.ok()) return done(s);
  StartKeyOp(StoreMethod::STORE_PUT, /*idempotent=*/false, key, &value, NewDeadline(), std::move(done));
}

void StoreClient::DeleteAsync(std::string_view key, DoneCallback done) {
  if (Status s = CheckKeyValue(key, {}); !s.ok()) return done(s);
  StartKeyOp(StoreMethod::STORE_DELETE, /*idempotent=*/false, key, nullptr, NewDeadline(), std::move(done));
}

std::vector<StoreClient::StepResult> StoreClient::RunKeySteps(
    uint16_t method, const std::vector<std::string>& keys,
    const std::function<void(size_t i, cell::proto::KeyRequest*)>& fill, Deadline deadline) {
  std::vector<StepResult> results(keys.size());
  std::mutex mu;
  std::condition_variable cv;
  size_t left = keys.size();
  for (size_t i = 0; i < keys.size(); ++i) {
    StartKeyStep(
        method, /*idempotent=*/true, keys[i], [&fill, i](cell::proto::KeyRequest* r) { fill(i, r); }, deadline,
        [&, i](const Status& s, cell::proto::StoreReply* reply) {
          results[i].status = s;
          if (reply != nullptr) results[i].reply = std::move(*reply);
          std::lock_guard lock(mu);
          if (--left == 0) cv.notify_all();
        });
  }
  rpc::FlushHeldSends();
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return left == 0; });
  return results;
}

Status StoreClient::CompareAndSwap(std::string_view key, const std::optional<std::string>& expected,
                                   const std::optional<std::string>& new_value) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, new_value.value_or(std::string())));
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, expected.value_or(std::string())));
  proto::StoreReply reply;
  CELL_RETURN_IF_ERROR(RunKeyStep(
      StoreMethod::STORE_CAS, /*idempotent=*/false, key,
      [&](proto::KeyRequest* r) {
        r->set_expect_absent(!expected.has_value());
        if (expected) r->set_expected(*expected);
        r->set_delete_(!new_value.has_value());
        if (new_value) r->set_value(*new_value);
      },
      NewDeadline(), &reply));
  if (!reply.conflict().empty()) return Status::FailedPrecondition(reply.conflict());
  return Status::OK();
}

std::vector<uint64_t> StoreClient::ConnectedServers() { return connections_.Connected(); }

StatusOr<std::vector<std::string>> StoreClient::ServerStats() {
  CELL_ASSIGN_OR_RETURN(auto servers, table_->ListServers());
  std::vector<std::string> out;
  for (const auto& server : servers) {
    CELL_ASSIGN_OR_RETURN(auto connection,
                          ConnectionTo(std::make_shared<const membership::ServerInfo>(server), NewDeadline()));
    CELL_ASSIGN_OR_RETURN(std::string reply, rpc::CallSync(*connection, StoreMethod::STORE_STATS, ""));
    out.push_back(std::move(reply));
  }
  return out;
}

Status StoreClient::Put(std::string_view key, std::string_view value) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, value));
  CELL_RETURN_IF_ERROR(CheckMayWait());
  cell::proto::StoreReply reply;
  return RunKey(StoreMethod::STORE_PUT, /*idempotent=*/false, key, &value, NewDeadline(), &reply);
}

Status StoreClient::Delete(std::string_view key) {
  CELL_RETURN_IF_ERROR(CheckKeyValue(key, {}));
  CELL_RETURN_IF_ERROR(CheckMayWait());
  cell::proto::StoreReply reply;
  return RunKey(StoreMethod::STORE_DELETE, /*idempotent=*/false, key, nullptr, NewDeadline(), &reply);
}

}  // namespace cell::client
