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
#include "meganode/local_store.h"
#include "server/proto/store.pb.h"

namespace cell::client {

using server::proto::StoreMethod;

StatusOr<std::unique_ptr<StoreClient>> StoreClient::Create(membership::RegionTableReader* table,
                                                           const StoreClientOptions& options) {
  CELL_ASSIGN_OR_RETURN(std::unique_ptr<selector::Selector> selector,
                        selector::MakeSelector(options.search, options.selector));
  return std::unique_ptr<StoreClient>(new StoreClient(table, options, std::move(selector)));
}

namespace {
// True on this client's timer thread and connecting threads, where callbacks run: a synchronous call there could wait
// for the thread's own next step.
thread_local bool on_client_thread = false;

// A synchronous operation waits for replies, connections and timers that this client's and the transports' threads
// deliver: it must not run on one of them (in a callback).
Status CheckMayWait() {
  if (!on_client_thread && !rpc::OnTransportThread()) return Status::OK();
  return Status::FailedPrecondition(
      "a synchronous Get, Put, Delete or Scan was called in an asynchronous operation's callback, whose thread it "
      "would wait on: use GetAsync, PutAsync or DeleteAsync there");
}
}  // namespace

StoreClient::StoreClient(membership::RegionTableReader* table, const StoreClientOptions& options,
                         std::unique_ptr<selector::Selector> selector)
    : table_(table), cache_(table), options_(options), selector_(std::move(selector)), measure_(selector_->Measures()) {
  if (options.node_cache_bytes > 0) {
    nodes_ = std::make_unique<btree::NodeCache>(options.node_cache_bytes, options.node_cache_levels);
  }
  timer_thread_ = std::thread([this] { TimerLoop(); });
}

StoreClient::~StoreClient() {
  std::map<uint64_t, std::shared_ptr<rpc::Connection>> connections;
  {
    std::lock_guard lock(mu_);
    closing_ = true;
    connections.swap(connections_);
    timer_cv_.notify_all();
  }
  // Outstanding calls complete now (Unavailable); their retries, if any, fail at once since closing_ is set.
  for (auto& [id, connection] : connections) connection->Close();
  // Connections being made finish (each within kConnectTimeout); their waiting operations fail as closing. No new
  // connector starts once closing_ is set.
  std::vector<Connector> connectors;
  {
    std::lock_guard lock(mu_);
    connectors.swap(connectors_);
  }
  for (auto& c : connectors) c.thread.join();
  timer_thread_.join();  // it runs every remaining timer at once: each fails as closing
}

void StoreClient::Schedule(Deadline due, std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      const bool first = timers_.empty() || due < timers_.begin()->first;
      timers_.emplace(due, std::move(task));
      if (first) timer_cv_.notify_one();
      return;
    }
  }
  task();  // closing: the timer thread may be gone; the task fails at once, so run it here
}

void StoreClient::TimerLoop() {
  on_client_thread = true;
  std::unique_lock lock(mu_);
  while (true) {
    std::vector<std::function<void()>> due;
    if (closing_) {
      if (timers_.empty()) return;
      for (auto& [when, task] : timers_) due.push_back(std::move(task));
      timers_.clear();
    } else if (timers_.empty()) {
      timer_cv_.wait(lock);
      continue;
    } else if (const Deadline first = timers_.begin()->first; first > Clock::now()) {
      timer_cv_.wait_until(lock, first);
      continue;
    } else {
      const auto end = timers_.upper_bound(Clock::now());
      for (auto it = timers_.begin(); it != end; ++it) due.push_back(std::move(it->second));
      timers_.erase(timers_.begin(), end);
    }
    lock.unlock();
    for (auto& task : due) task();
    lock.lock();
  }
}

bool StoreClient::SearchOnServer(GlobalPtr start, bool may_block, uint64_t* server) {
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
  return selector_->Choose(*server, start.Pack(), NowUs()) == selector::Side::kServer;
}

StatusOr<uint32_t> StoreClient::Root() {
  if (const uint32_t root = root_.load(std::memory_order_acquire); root != 0) return root;
  // The region the first server claimed; it never changes once the cluster exists.
  CELL_ASSIGN_OR_RETURN(uint32_t root, table_->RootRegion());
  root_.store(root, std::memory_order_release);
  return root;
}

namespace {
std::chrono::milliseconds Remaining(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}
}  // namespace

StatusOr<std::shared_ptr<rpc::Connection>> StoreClient::Connect(const membership::ServerInfo& server,
                                                                Deadline deadline) {
  rpc::ClientOptions rpc_options;
  rpc_options.call_timeout = options_.timeout;
  rpc_options.key = options_.key;
  // Each transport tried gets what is left of the deadline, up to kConnectTimeout: a server that is paused (its kernel
  // accepts, it never answers the handshake) must not hold the operation until its deadline; the operation retries,
  // re-reading the route, and finds the survivor once one has taken the server's regions over.
  auto connection = rpc::ConnectFirst(server.addresses, options_.transports, rpc_options, [deadline] {
    return std::min(Remaining(deadline), std::chrono::duration_cast<std::chrono::milliseconds>(kConnectTimeout));
  });
  if (!connection.ok()) {
    // A refused key stays refused (PermissionDenied, not retried); anything else may pass (Unavailable).
    return Status::FromCode(
        connection.status().IsPermissionDenied() ? Status::Code::kPermissionDenied : Status::Code::kUnavailable,
        fmt::format("cannot reach server {}: {}", server.id, connection.status().message()));
  }
  std::shared_ptr<rpc::Connection> shared = std::move(*connection);
  std::shared_ptr<rpc::Connection> old;  // released after the lock: closing it runs its callbacks, which lock mu_
  {
    std::lock_guard lock(mu_);
    if (closing_) {
      old = std::move(shared);
      return Status::Unavailable("the client is closing");
    }
    auto& slot = connections_[server.id];
    // Another thread may have connected meanwhile: keep its healthy connection (callers may have calls on it).
    if (slot != nullptr && slot->health().ok()) {
      old = std::move(shared);
      shared = slot;
    } else {
      old = std::exchange(slot, shared);
    }
  }
  return shared;
}

void StoreClient::ConnectAsync(const membership::ServerInfo& server, Deadline deadline, ConnectDone done) {
  StatusOr<std::shared_ptr<rpc::Connection>> ready = Status::Unavailable("the client is closing");
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      auto it = connections_.find(server.id);
      if (it != connections_.end() && it->second->health().ok()) {
        ready = it->second;
      } else {
        std::vector<ConnectDone>& waiting = connecting_[server.id];
        waiting.push_back(std::move(done));
        if (waiting.size() > 1) return;  // a connector is at work for this server already
        // Joins the connectors that have finished (each sets `finished` as its last act), then starts one.
        std::erase_if(connectors_, [](Connector& c) {
          if (!c.finished->load(std::memory_order_acquire)) return false;
          c.thread.join();
          return true;
        });
        auto finished = std::make_shared<std::atomic<bool>>(false);
        connectors_.push_back(Connector{std::thread([this, server, deadline, finished] {
                                          on_client_thread = true;
                                          auto connection = Connect(server, deadline);
                                          std::vector<ConnectDone> waiters;
                                          {
                                            std::lock_guard lock(mu_);
                                            waiters = std::move(connecting_[server.id]);
                                            connecting_.erase(server.id);
                                          }
                                          for (auto& w : waiters) w(connection);
                                          finished->store(true, std::memory_order_release);
                                        }),
                                        finished});
        return;
      }
    }
  }
  done(ready);
}

StatusOr<std::shared_ptr<rpc::Connection>> StoreClient::ConnectionTo(const membership::ServerInfo& server,
                                                                     Deadline deadline) {
  std::promise<StatusOr<std::shared_ptr<rpc::Connection>>> promise;
  auto future = promise.get_future();
  ConnectAsync(server, deadline, [&promise](const StatusOr<std::shared_ptr<rpc::Connection>>& connection) {
    promise.set_value(connection);
  });
  return future.get();
}

void StoreClient::Forget(uint64_t server, const rpc::Connection* failed) {
  cache_.OnServerUnreachable(server);
  std::shared_ptr<rpc::Connection> old;  // released after the lock (see ConnectionTo)
  std::lock_guard lock(mu_);
  auto it = connections_.find(server);
  // Only the connection that failed: another thread may already have put a fresh one there.
  if (it == connections_.end() || (failed != nullptr && it->second.get() != failed)) return;
  old = std::move(it->second);
  connections_.erase(it);
}

Status StoreClient::Attempts::GoOn(GlobalPtr next) {
  if (++hops_ < 256) {
    at_ = next;
    return Status::OK();
  }
  hops_ = 0;
  at_ = GlobalPtr();
  return Status::Aborted("a request was sent on from server to server more than 256 times");
}

StatusOr<StoreClient::Deadline> StoreClient::Attempts::Retry(const Status& why) {
  const Deadline now = Clock::now();
  if (now + backoff_ >= deadline_) {
    // No server could be reached: Unavailable; anything else kept failing until the deadline: DeadlineExceeded.
    return Status::FromCode(why.IsUnavailable() ? Status::Code::kUnavailable : Status::Code::kDeadlineExceeded,
                            fmt::format("gave up after {} ms: {}", timeout_.count(), why.ToString()));
  }
  const Deadline due = now + backoff_;
  backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(100));
  return due;
}

Status StoreClient::Run(const Operation& op, Deadline deadline, GlobalPtr start) {
  Attempts tries(deadline, start, options_.timeout);
  while (true) {
    if (closing_.load(std::memory_order_acquire)) return Status::Unavailable("the client is closing");
    Status why;
    uint32_t region = tries.at().region;
    if (tries.at().is_null()) {
      auto root = Root();
      if (!root.ok()) return root.status();
      region = *root;
    }
    auto route = cache_.Lookup(region);
    if (route.ok()) {
      auto connection = ConnectionTo(route->owner(), deadline);
      if (connection.ok()) {
        Attempt attempt = op(**connection, *route, tries.at(), deadline);
        if (!attempt.next.is_null()) {
          why = tries.GoOn(attempt.next);
          if (why.ok()) continue;
        } else if (!attempt.retry) {
          return attempt.status;
        } else {
          why = attempt.status;
        }
      } else if (connection.status().IsPermissionDenied()) {
        return connection.status();  // retrying cannot help: the key is wrong or missing
      } else {
        Forget(route->owner().id, nullptr);
        why = connection.status();
      }
    } else if (route.status().IsUnavailable()) {
      why = route.status();  // no live owner right now: wait for a takeover or a restart
    } else {
      return route.status();
    }
    CELL_ASSIGN_OR_RETURN(const Deadline due, tries.Retry(why));
    stats_.retries.fetch_add(1, std::memory_order_relaxed);
    std::this_thread::sleep_until(due);  // a retry's back-off in the caller's own thread, not synchronisation
  }
}

GlobalPtr StoreClient::NextFrom(const server::proto::StoreReply& reply) {
  if (reply.leaf() != 0) {
    paths_.Insert(btree::MeganodeRange{GlobalPtr::Unpack(reply.leaf()), reply.leaf_min(), reply.leaf_max()});
  }
  // (The first meganode stands for the root: the server it names starts at the root.)
  return GlobalPtr::Unpack(reply.elsewhere());
}

namespace {
// Sorts the outcome of a client-side search: a failed read (its server gone, or a region not reachable now) and a
// search that kept meeting changes are tried again.
bool ShouldRetry(const Status& s) { return s.IsUnavailable() || s.IsAborted(); }
}  // namespace

class StoreClient::ReadRouter {
 public:
  // `connection`: the connection to `route`'s owner that the operation already holds (alive while it runs).
  ReadRouter(StoreClient* client, Deadline deadline, const Route& route, rpc::Connection& connection)
      : client_(client), deadline_(deadline), home_server_(route.owner().id), home_(&connection) {
    links_[0] = Link{route.entry.region, home_server_, home_, nullptr};
    next_ = 1;
  }

  btree::NodeFetcher Fetcher() {
    return [this](GlobalPtr p, size_t words, uint64_t* dst) { return Read(p, words, dst); };
  }

  // For the selector: from now on, time each read from `server` and count all reads.
  void Measure(uint64_t server) {
    measure_ = true;
    measured_server_ = server;
  }
  // Tells the selector what this search's reads from that server took, and how many reads it made in all (a
  // traversal from `meganode`).
  void Report(selector::Selector& selector, uint64_t meganode) const {
    if (!measure_ || reads_ == 0) return;
    if (samples_taken_ > 0) selector.OnReads(measured_server_, samples_.data(), samples_taken_, NowUs());
    selector.OnTraversal(meganode, reads_);
  }

 private:
  // The connection to `region`'s owner: from the few this search has used (node and extent regions, a server or
  // two), else looked up.
  struct Link {
    uint32_t region = 0;
    uint64_t server = 0;
    rpc::Connection* connection = nullptr;
    std::shared_ptr<rpc::Connection> owned;               // keeps `connection` alive, unless it is the operation's own
    std::chrono::steady_clock::time_point lease_until{};  // reads of `server` may begin until then (ReadLease)
  };
  StatusOr<Link*> LinkFor(uint32_t region) {
    for (Link& l : links_) {
      if (l.region == region && l.connection != nullptr) return &l;
    }
    // Most reads are of the operation's own server's regions (its node and extent regions): no lookup of addresses.
    if (home_ != nullptr && client_->cache_.CachedOwner(region) == home_server_) {
      Link& slot = links_[next_++ % links_.size()];
      slot = Link{region, home_server_, home_, nullptr};
      return &slot;
    }
    auto route = client_->cache_.Lookup(region);
    if (!route.ok()) {
      return route.status().IsNotFound()
                 ? Status::Corruption(fmt::format("a pointer names region {}, which does not exist", region))
                 : route.status();
    }
    // Under a lease first (Read): no connection is made to a server that is no longer registered.
    auto lease = client_->cache_.ReadLease(route->owner().id);
    if (!lease.ok()) {
      return Status::Unavailable(
          fmt::format("reading from server {}: {}", route->owner().id, lease.status().message()));
    }
    auto connection = client_->ConnectionTo(route->owner(), deadline_);
    if (!connection.ok()) {
      client_->Forget(route->owner().id, nullptr);
      return connection.status();
    }
    Link& slot = links_[next_++ % links_.size()];
    rpc::Connection* raw = connection->get();
    slot = Link{region, route->owner().id, raw, std::move(*connection), *lease};
    return &slot;
  }

  Status Read(GlobalPtr p, size_t words, uint64_t* dst) {
    CELL_ASSIGN_OR_RETURN(Link * link, LinkFor(p.region));
    // Only under a lease on the server (docs/DESIGN.md, "One-sided reads and a deposed owner"): a server that lost
    // its registration may be paused or cut off and deposed, and its memory older than a survivor's writes.
    const auto now = std::chrono::steady_clock::now();
    if (now >= link->lease_until) {
      auto lease = client_->cache_.ReadLease(link->server);
      if (!lease.ok()) {
        const uint64_t server = link->server;
        if (link->connection == home_) home_ = nullptr;
        for (Link& l : links_) {
          if (l.server == server) l = Link{};
        }
        return Status::Unavailable(fmt::format("reading from server {}: {}", server, lease.status().message()));
      }
      link->lease_until = *lease;
    }
    const auto begin = measure_ ? now : std::chrono::steady_clock::time_point();
    Status s = rpc::ReadSync(*link->connection, p, static_cast<uint32_t>(words * 8), dst);
    if (measure_ && s.ok()) {
      ++reads_;
      if (link->server == measured_server_ && samples_taken_ < samples_.size()) {
        samples_[samples_taken_++] =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - begin).count();
      }
    }
    if (!s.ok() && !link->connection->health().ok()) {
      client_->Forget(link->server, link->connection);
      const uint64_t server = link->server;
      if (link->connection == home_) home_ = nullptr;
      for (Link& l : links_) {
        if (l.server == server) l = Link{};
      }
      return Status::Unavailable(fmt::format("reading from server {}: {}", server, s.message()));
    }
    if (s.IsUnavailable()) {
      // The server does not serve the region (yet: a takeover is registering it; or any more): the route is re-read
      // from the table before the operation retries.
      client_->cache_.OnWrongOwner(p.region, link->server, 0);
      const uint64_t server = link->server;
      for (Link& l : links_) {
        if (l.region == p.region) l = Link{};
      }
      return Status::Unavailable(fmt::format("reading region {} from server {}: {}", p.region, server, s.message()));
    }
    return s;
  }

  StoreClient* const client_;
  const Deadline deadline_;
  const uint64_t home_server_;
  rpc::Connection* home_;
  std::array<Link, 4> links_;
  size_t next_ = 0;
  bool measure_ = false;
  uint64_t measured_server_ = 0;
  int reads_ = 0;
  std::array<double, 32> samples_;
  size_t samples_taken_ = 0;
};

namespace {
double MicrosSince(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - begin).count();
}
}  // namespace

Status StoreClient::Get(std::string_view key, std::string* value) {
  CELL_RETURN_IF_ERROR(meganode::CheckKeyValue(key, {}));
  CELL_RETURN_IF_ERROR(CheckMayWait());
  uint64_t server = 0;
  if (SearchOnServer(measure_ ? paths_.Lookup(key) : GlobalPtr(), /*may_block=*/true, &server)) {
    stats_.server_searches.fetch_add(1, std::memory_order_relaxed);
    if (server == 0) return GetServerSide(key, value, NewDeadline());
    const auto begin = std::chrono::steady_clock::now();
    Status s = GetServerSide(key, value, NewDeadline());
    if (s.ok() || s.IsNotFound()) selector_->OnServerSearch(server, MicrosSince(begin), NowUs());
    return s;
  }
  stats_.client_searches.fetch_add(1, std::memory_order_relaxed);
  return GetClientSide(key, value, NewDeadline(), server != 0 && SampleThisSearch() ? server : 0);
}

void StoreClient::GetAsync(std::string_view key, GetCallback done) {
  if (Status s = meganode::CheckKeyValue(key, {}); !s.ok()) return done(s, {});
  uint64_t server = 0;
  // A client-side search waits for its reads; in a callback (a transport's thread, or this client's) that could wait
  // for itself, or hold up others, so a get started there searches on the server whatever the selector says.
  if (!SearchOnServer(measure_ ? paths_.Lookup(key) : GlobalPtr(), /*may_block=*/false, &server) &&
      CheckMayWait().ok()) {
    stats_.client_searches.fetch_add(1, std::memory_order_relaxed);
    std::string value;
    Status s = GetClientSide(key, &value, NewDeadline(), server != 0 && SampleThisSearch() ? server : 0);
    return done(s, value);
  }
  stats_.server_searches.fetch_add(1, std::memory_order_relaxed);
  if (server != 0) {
    // The server-side search's latency, for the selector, from here to the reply.
    done = [this, server, begin = std::chrono::steady_clock::now(), inner = std::move(done)](const Status& s,
                                                                                             std::string_view value) {
      if (s.ok() || s.IsNotFound()) selector_->OnServerSearch(server, MicrosSince(begin), NowUs());
      inner(s, value);
    };
  }
  StartKeyOp(StoreMethod::STORE_GET, /*idempotent=*/true, key, nullptr, NewDeadline(),
             [done = std::move(done), k = std::string(key)](const Status& status, server::proto::StoreReply* reply) {
               if (!status.ok()) return done(status, {});
               if (!reply->found()) return done(Status::NotFound(fmt::format("no key '{}'", k)), {});
               done(Status::OK(), reply->value());
             });
}

void StoreClient::PutAsync(std::string_view key, std::string_view value, DoneCallback done) {
  if (Status s = meganode::CheckKeyValue(key, value); !s.ok()) return done(s);
  StartKeyOp(StoreMethod::STORE_PUT, /*idempotent=*/false, key, &value, NewDeadline(),
             [done = std::move(done)](const Status& status, server::proto::StoreReply*) { done(status); });
}

void StoreClient::DeleteAsync(std::string_view key, DoneCallback done) {
  if (Status s = meganode::CheckKeyValue(key, {}); !s.ok()) return done(s);
  StartKeyOp(StoreMethod::STORE_DELETE, /*idempotent=*/false, key, nullptr, NewDeadline(),
             [done = std::move(done), k = std::string(key)](const Status& status, server::proto::StoreReply* reply) {
               if (!status.ok()) return done(status);
               if (!reply->found()) return done(Status::NotFound(fmt::format("no key '{}'", k)));
               done(Status::OK());
             });
}

struct StoreClient::RequestOp {
  RequestOp(uint16_t method, bool idempotent, bool follow, GlobalPtr start, Deadline deadline,
            std::chrono::milliseconds timeout, BuildRequest build, RequestDone done)
      : method(method),
        idempotent(idempotent),
        follow(follow),
        build(std::move(build)),
        tries(deadline, start, timeout),
        done(std::move(done)) {}
  const uint16_t method;
  const bool idempotent;  // may be sent again after its connection died (a write may have been applied: it is not)
  const bool follow;      // goes on to the meganode a reply's `elsewhere` names (a scan's caller does that itself)
  const BuildRequest build;
  Attempts tries;  // touched by one step at a time: each step starts the next
  const RequestDone done;
};

void StoreClient::StartRequest(uint16_t method, bool idempotent, bool follow, GlobalPtr start, Deadline deadline,
                               BuildRequest build, RequestDone done) {
  Step(std::make_shared<RequestOp>(method, idempotent, follow, start, deadline, options_.timeout, std::move(build),
                                   std::move(done)));
}

Status StoreClient::RunRequest(uint16_t method, bool idempotent, bool follow, GlobalPtr start, Deadline deadline,
                               BuildRequest build, server::proto::StoreReply* reply) {
  std::promise<Status> promise;
  auto future = promise.get_future();
  StartRequest(method, idempotent, follow, start, deadline, std::move(build),
               [&promise, reply](const Status& status, server::proto::StoreReply* answer) {
                 if (answer != nullptr) *reply = std::move(*answer);
                 promise.set_value(status);
               });
  return future.get();
}

void StoreClient::StartKeyOp(uint16_t method, bool idempotent, std::string_view key, const std::string_view* value,
                             Deadline deadline, RequestDone done) {
  const GlobalPtr cached = paths_.Lookup(key);
  StartRequest(method, idempotent, /*follow=*/true, cached, deadline, KeyRequestFor(key, value, cached),
               std::move(done));
}

StoreClient::BuildRequest StoreClient::KeyRequestFor(std::string_view key, const std::string_view* value,
                                                     GlobalPtr cached) {
  // `cached`: the meganode the path cache gave for the key, where the first attempt begins; any other start (a
  // redirect's) asks for the range of the leaf meganode that answers, so that the next operation on the key begins
  // there.
  return [key = std::string(key), value = value != nullptr ? std::optional<std::string>(*value) : std::nullopt, cached](
             const Route& route, GlobalPtr start) {
    server::proto::KeyRequest request;
    request.mutable_target()->set_region(route.entry.region);
    request.mutable_target()->set_epoch(route.entry.epoch);
    request.set_key(key);
    if (value) request.set_value(*value);
    request.set_meganode(start.Pack());
    request.set_want_range(!start.is_null() && !(start == cached));
    return request.SerializeAsString();
  };
}

void StoreClient::Step(const std::shared_ptr<RequestOp>& op) {
  if (closing_.load(std::memory_order_acquire)) return op->done(Status::Unavailable("the client is closing"), nullptr);
  // A transport's thread must not wait on the table (it may be completing other operations' replies): a step that
  // would runs on the timer thread instead, at once.
  const bool may_block = !rpc::OnTransportThread();
  uint32_t region = op->tries.at().region;
  if (op->tries.at().is_null()) {
    region = root_.load(std::memory_order_acquire);
    if (region == 0) {
      if (!may_block) return Schedule(Clock::now(), [this, op] { Step(op); });
      auto root = Root();
      if (!root.ok()) return op->done(root.status(), nullptr);
      region = *root;
    }
  }
  if (!may_block && cache_.CachedOwner(region) == 0) return Schedule(Clock::now(), [this, op] { Step(op); });
  auto route = cache_.Lookup(region);
  if (!route.ok()) {
    // No live owner right now: wait for a takeover or a restart. Anything else is final.
    if (route.status().IsUnavailable()) return Retry(op, route.status());
    return op->done(route.status(), nullptr);
  }
  ConnectAsync(route->owner(), op->tries.deadline(),
               [this, op, r = *route](const StatusOr<std::shared_ptr<rpc::Connection>>& connection) {
                 if (connection.ok()) return Send(op, r, connection->get());
                 // A refused key stays refused; a server not reached may have failed (its regions moving).
                 if (connection.status().IsPermissionDenied()) return op->done(connection.status(), nullptr);
                 Forget(r.owner().id, nullptr);
                 Retry(op, connection.status());
               });
}

void StoreClient::Send(const std::shared_ptr<RequestOp>& op, const Route& route, rpc::Connection* connection) {
  // The callback holds the connection only by pointer (alive while its callbacks run): dropping its last reference
  // from its own thread would destroy it there. The client's map keeps it; the destructor closes it first.
  connection->Call(
      op->method, op->build(route, op->tries.at()),
      [this, op, route, connection](const Status& status, std::string_view response) {
        OnReply(op, route, connection, status, response);
      },
      std::chrono::duration_cast<std::chrono::microseconds>(Remaining(op->tries.deadline())));
}

void StoreClient::OnReply(const std::shared_ptr<RequestOp>& op, const Route& route, rpc::Connection* connection,
                          const Status& status, std::string_view response) {
  if (!status.ok()) {
    if (status.IsUnavailable() && !connection->health().ok()) {
      // The connection died: the server may be gone, its regions moving. (Its replacement is made by the next step
      // that needs one; it is not released here, on its own thread.)
      cache_.OnServerUnreachable(route.owner().id);
      if (!op->idempotent) {
        // A write whose connection died may have been applied: say so rather than send it again.
        return op->done(Status::Unavailable(fmt::format(
                            "the connection to server {} failed after the request was sent; it may or may not have "
                            "been applied: {}",
                            route.owner().id, status.message())),
                        nullptr);
      }
      return Retry(op, status);
    }
    if (status.IsUnavailable()) return Retry(op, status);  // fenced for now
    return op->done(status, nullptr);
  }
  server::proto::StoreReply reply;
  if (!reply.ParseFromArray(response.data(), static_cast<int>(response.size()))) {
    return op->done(
        Status::Corruption(fmt::format("malformed reply ({} bytes) from server {}", response.size(), route.owner().id)),
        nullptr);
  }
  if (!reply.not_acknowledged().empty()) {
    return op->done(Status::Unavailable(fmt::format(
                        "server {} made the write but may not acknowledge it ({}); it may or may not have been "
                        "applied",
                        route.owner().id, reply.not_acknowledged())),
                    nullptr);
  }
  if (reply.has_wrong_owner()) {
    cache_.OnWrongOwner(route.entry.region, route.owner().id, reply.wrong_owner().epoch());
    return Retry(
        op, Status::Unavailable(fmt::format("server {} no longer owns region {} (it knows epoch {})", route.owner().id,
                                            route.entry.region, reply.wrong_owner().epoch())));
  }
  if (const GlobalPtr next = op->follow ? NextFrom(reply) : GlobalPtr(); !next.is_null()) {
    // Another server's meganode: go on there now.
    Status went = op->tries.GoOn(next);
    if (went.ok()) return Step(op);
    return Retry(op, went);
  }
  op->done(Status::OK(), &reply);
}

void StoreClient::Retry(const std::shared_ptr<RequestOp>& op, const Status& why) {
  auto due = op->tries.Retry(why);
  if (!due.ok()) return op->done(due.status(), nullptr);
  stats_.retries.fetch_add(1, std::memory_order_relaxed);
  Schedule(*due, [this, op] { Step(op); });
}

Status StoreClient::RunKey(uint16_t method, bool idempotent, std::string_view key, const std::string_view* value,
                           Deadline deadline, server::proto::StoreReply* reply) {
  const GlobalPtr cached = paths_.Lookup(key);
  return RunRequest(method, idempotent, /*follow=*/true, cached, deadline, KeyRequestFor(key, value, cached), reply);
}

Status StoreClient::GetServerSide(std::string_view key, std::string* value, Deadline deadline) {
  server::proto::StoreReply reply;
  CELL_RETURN_IF_ERROR(RunKey(StoreMethod::STORE_GET, /*idempotent=*/true, key, nullptr, deadline, &reply));
  if (!reply.found()) return Status::NotFound(fmt::format("no key '{}'", key));
  *value = std::move(*reply.mutable_value());
  return Status::OK();
}

Status StoreClient::GetClientSide(std::string_view key, std::string* value, Deadline deadline, uint64_t sample_server) {
  // Routed to the server of the meganode it begins at (the key's cached leaf, else the root's): a search that
  // begins at a leaf needs no other server, the root's included (down, it may be taken over meanwhile).
  return Run(
      [&](rpc::Connection& connection, const Route& route, GlobalPtr, Deadline d) -> Attempt {
        auto root = Root();
        if (!root.ok()) return {root.status(), root.status().IsUnavailable() || root.status().IsDeadlineExceeded()};
        ReadRouter router(this, d, route, connection);
        if (sample_server != 0) router.Measure(sample_server);
        btree::CopyingNodeSource source(router.Fetcher(), nodes_.get());
        btree::GlobalReader reader(&source, GlobalPtr{*root, 0});
        GlobalPtr start = paths_.Lookup(key);
        const bool cached = !start.is_null();
        if (!cached) {
          std::lock_guard lock(mu_);
          start = root_meganode_;
        }
        if (start.is_null()) {
          auto root = reader.Root();
          if (root.ok()) {
            start = *root;
            std::lock_guard lock(mu_);
            root_meganode_ = start;
          }
        }
        Status s = reader.Get(key, value, start);
        if (s.ok() || s.IsNotFound()) router.Report(*selector_, cached ? start.Pack() : 0);
        if ((s.ok() || s.IsNotFound()) && !(cached && reader.answered() == start)) {
          btree::MeganodeRange range;  // one more read, to begin at this leaf meganode next time
          if (reader.RangeOf(reader.answered(), &range).ok()) paths_.Insert(range);
        }
        if (reader.stats().restarts > 0) {
          std::lock_guard lock(mu_);
          root_meganode_ = GlobalPtr();  // the root has moved (or split): read it again next time
        }
        if (ShouldRetry(s)) return {s, true};
        if (s.IsNotFound()) return {Status::NotFound(fmt::format("no key '{}'", key)), false};
        return {s, false};
      },
      deadline, paths_.Lookup(key));
}

std::vector<uint64_t> StoreClient::ConnectedServers() {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> out;
  for (const auto& [id, connection] : connections_) out.push_back(id);
  return out;
}

StatusOr<std::vector<std::string>> StoreClient::ServerStats() {
  CELL_ASSIGN_OR_RETURN(auto servers, table_->ListServers());
  std::vector<std::string> out;
  for (const auto& server : servers) {
    CELL_ASSIGN_OR_RETURN(auto connection, ConnectionTo(server, NewDeadline()));
    CELL_ASSIGN_OR_RETURN(std::string reply, rpc::CallSync(*connection, StoreMethod::STORE_STATS, ""));
    out.push_back(std::move(reply));
  }
  return out;
}

Status StoreClient::Put(std::string_view key, std::string_view value) {
  CELL_RETURN_IF_ERROR(meganode::CheckKeyValue(key, value));
  CELL_RETURN_IF_ERROR(CheckMayWait());
  server::proto::StoreReply reply;
  return RunKey(StoreMethod::STORE_PUT, /*idempotent=*/false, key, &value, NewDeadline(), &reply);
}

Status StoreClient::Delete(std::string_view key) {
  CELL_RETURN_IF_ERROR(meganode::CheckKeyValue(key, {}));
  CELL_RETURN_IF_ERROR(CheckMayWait());
  server::proto::StoreReply reply;
  CELL_RETURN_IF_ERROR(RunKey(StoreMethod::STORE_DELETE, /*idempotent=*/false, key, nullptr, NewDeadline(), &reply));
  if (!reply.found()) return Status::NotFound(fmt::format("no key '{}'", key));
  return Status::OK();
}

Status StoreClient::Scan(std::string_view start, std::string_view end, size_t limit,
                         std::vector<btree::KeyValue>* out) {
  if (limit == 0) return Status::OK();
  CELL_RETURN_IF_ERROR(CheckMayWait());
  const size_t had = out->size();
  // A scan begins at the start key's leaf meganode from the path cache, as a get does (null: the root), so that it
  // needs no meganode above it: those of a failed server, say.
  const GlobalPtr cached = paths_.Lookup(start);
  uint64_t server = 0;
  if (SearchOnServer(measure_ ? cached : GlobalPtr(), /*may_block=*/true, &server)) {
    stats_.server_searches.fetch_add(1, std::memory_order_relaxed);
    std::string from(start);
    GlobalPtr at = cached;                    // the meganode the next page begins at (null: the root)
    const Deadline deadline = NewDeadline();  // one for the whole scan, every page
    while (out->size() - had < limit) {
      GlobalPtr began;  // the meganode the page's last attempt began at (a redirect may have moved it)
      const uint32_t want = static_cast<uint32_t>(std::min<size_t>(limit - (out->size() - had), UINT32_MAX));
      server::proto::StoreReply reply;
      CELL_RETURN_IF_ERROR(RunRequest(
          StoreMethod::STORE_SCAN, /*idempotent=*/true, /*follow=*/false, at, deadline,
          [&from, end = std::string(end), want, &began](const Route& route, GlobalPtr begin) {
            began = begin;
            server::proto::ScanRequest request;
            request.mutable_target()->set_region(route.entry.region);
            request.mutable_target()->set_epoch(route.entry.epoch);
            request.set_start(from);
            request.set_end(end);
            request.set_limit(want);
            request.set_meganode(begin.Pack());
            return request.SerializeAsString();
          },
          &reply));
      for (auto& kv : *reply.mutable_pairs()) {
        out->push_back({std::move(*kv.mutable_key()), std::move(*kv.mutable_value())});
      }
      if (!reply.more()) break;
      // The page ended (its size, or the range goes on at another server's meganode): go on from `resume`.
      if (reply.resume().empty() || (reply.pairs_size() == 0 && reply.elsewhere() == 0)) {
        return Status::Corruption("a scan page asked to go on but did not say where");
      }
      from = reply.resume();
      at = reply.elsewhere() != 0 ? NextFrom(reply) : began;
    }
    return Status::OK();
  }
  stats_.client_searches.fetch_add(1, std::memory_order_relaxed);
  return Run(
      [&](rpc::Connection& connection, const Route& route, GlobalPtr begin, Deadline d) -> Attempt {
        auto root = Root();
        if (!root.ok()) return {root.status(), root.status().IsUnavailable() || root.status().IsDeadlineExceeded()};
        ReadRouter router(this, d, route, connection);
        btree::CopyingNodeSource source(router.Fetcher(), nodes_.get());
        btree::GlobalReader reader(&source, GlobalPtr{*root, 0});
        std::vector<btree::KeyValue> pairs;
        Status s = reader.Scan(start, end, limit, &pairs, begin);
        if (s.ok()) {
          for (auto& kv : pairs) out->push_back(std::move(kv));
        }
        if (ShouldRetry(s)) return {s, true};
        return {s, false};
      },
      NewDeadline(), cached);
}

}  // namespace cell::client
