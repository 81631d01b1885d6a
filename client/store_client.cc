#include "client/store_client.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <optional>
#include <utility>
#include <thread>

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

StoreClient::StoreClient(membership::RegionTableReader* table, const StoreClientOptions& options,
                         std::unique_ptr<selector::Selector> selector)
    : table_(table), cache_(table), options_(options), selector_(std::move(selector)),
      measure_(selector_->Measures()) {
  if (options.node_cache_bytes > 0) {
    nodes_ = std::make_unique<btree::NodeCache>(options.node_cache_bytes, options.node_cache_levels);
  }
  retry_thread_ = std::thread([this] { RetryLoop(); });
}

StoreClient::~StoreClient() {
  std::map<uint64_t, std::shared_ptr<rpc::Connection>> connections;
  {
    std::lock_guard lock(mu_);
    closing_ = true;
    connections.swap(connections_);
    retry_cv_.notify_all();
  }
  // Outstanding calls complete now (Unavailable); their retries, if any, fail at once since closing_ is set.
  for (auto& [id, connection] : connections) connection->Close();
  retry_thread_.join();
}

void StoreClient::PostRetry(std::function<void()> task) {
  stats_.retries.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      retries_.push_back(std::move(task));
      retry_cv_.notify_one();
      return;
    }
  }
  // Closing: the retry thread may be gone; the task fails at once (Run sees closing_), so run it here.
  task();
}

void StoreClient::RetryLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    retry_cv_.wait(lock, [&] { return closing_ || !retries_.empty(); });
    if (retries_.empty()) return;  // closing, and nothing left
    std::vector<std::function<void()>> tasks;
    tasks.swap(retries_);
    lock.unlock();
    for (auto& task : tasks) task();
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

StatusOr<std::shared_ptr<rpc::Connection>> StoreClient::ConnectionTo(const membership::ServerInfo& server,
                                                                     Deadline deadline) {
  {
    std::lock_guard lock(mu_);
    auto it = connections_.find(server.id);
    if (it != connections_.end() && it->second->health().ok()) return it->second;
  }
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

Status StoreClient::Run(const Operation& op, Deadline deadline, GlobalPtr start) {
  Status last;
  auto backoff = std::chrono::milliseconds(1);
  GlobalPtr at = start;
  int hops = 0;
  while (true) {
    if (closing_.load(std::memory_order_acquire)) return Status::Unavailable("the client is closing");
    uint32_t region = at.region;
    if (at.is_null()) {
      auto root = Root();
      if (!root.ok()) return root.status();
      region = *root;
    }
    auto route = cache_.Lookup(region);
    if (route.ok()) {
      auto connection = ConnectionTo(route->owner(), deadline);
      if (connection.ok()) {
        Attempt attempt = op(**connection, *route, at, deadline);
        if (!attempt.next.is_null()) {
          // Another server's meganode: go on there at once (a walk only moves down or right, so this ends).
          at = attempt.next;
          if (++hops < 256) continue;
          last = Status::Aborted("a request was sent on from server to server more than 256 times");
          hops = 0;
          at = GlobalPtr();
        } else if (!attempt.retry) {
          return attempt.status;
        } else {
          last = attempt.status;
        }
      } else if (connection.status().IsPermissionDenied()) {
        return connection.status();  // retrying cannot help: the key is wrong or missing
      } else {
        Forget(route->owner().id, nullptr);
        last = connection.status();
      }
    } else if (route.status().IsUnavailable()) {
      last = route.status();  // no live owner right now: wait for a takeover or a restart
    } else {
      return route.status();
    }
    if (std::chrono::steady_clock::now() + backoff >= deadline) {
      // No server could be reached: Unavailable; anything else kept failing until the deadline: DeadlineExceeded.
      return Status::FromCode(last.IsUnavailable() ? Status::Code::kUnavailable : Status::Code::kDeadlineExceeded,
                              fmt::format("gave up after {} ms: {}", options_.timeout.count(), last.ToString()));
    }
    stats_.retries.fetch_add(1, std::memory_order_relaxed);
    std::this_thread::sleep_for(backoff);  // a retry's back-off, not synchronisation
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
}

GlobalPtr StoreClient::NextFrom(const server::proto::StoreReply& reply) {
  if (reply.leaf() != 0) {
    paths_.Insert(btree::MeganodeRange{GlobalPtr::Unpack(reply.leaf()), reply.leaf_min(), reply.leaf_max()});
  }
  // (The first meganode stands for the root: the server it names starts at the root.)
  return GlobalPtr::Unpack(reply.elsewhere());
}

StoreClient::Attempt StoreClient::Call(rpc::Connection& connection, const Route& route, Deadline deadline,
                                       bool idempotent, uint16_t method, const std::string& request,
                                       server::proto::StoreReply* parsed) {
  auto reply = rpc::CallSync(connection, method, request,
                             std::chrono::duration_cast<std::chrono::microseconds>(Remaining(deadline)));
  if (!reply.ok()) {
    if (reply.status().IsUnavailable() && !connection.health().ok()) {
      Forget(route.owner().id, &connection);  // the connection died: the server may be gone, its regions moving
      if (!idempotent) {
        return {Status::Unavailable(fmt::format(
                    "the connection to server {} failed after the request was sent; it may or may not have been "
                    "applied: {}",
                    route.owner().id, reply.status().message())),
                false};
      }
      return {reply.status(), true};
    }
    if (reply.status().IsUnavailable()) return {reply.status(), true};  // fenced for now: retry
    return {reply.status(), false};
  }
  if (!parsed->ParseFromString(*reply)) {
    return {Status::Corruption(fmt::format("malformed reply ({} bytes) from server {}", reply->size(),
                                           route.owner().id)),
            false};
  }
  if (parsed->has_wrong_owner()) {
    cache_.OnWrongOwner(route.entry.region, route.owner().id, parsed->wrong_owner().epoch());
    return {Status::Unavailable(fmt::format("server {} no longer owns region {} (it knows epoch {})", route.owner().id,
                                            route.entry.region, parsed->wrong_owner().epoch())),
            true};
  }
  return {Status::OK(), false};
}

namespace {
// `cached`: the meganode the path cache gave for the key; any other start (a redirect's) asks for the range of the
// leaf meganode that answers, so that the next operation on the key begins there.
server::proto::KeyRequest KeyRequest(const Route& route, std::string_view key, GlobalPtr start, GlobalPtr cached) {
  server::proto::KeyRequest request;
  request.mutable_target()->set_region(route.entry.region);
  request.mutable_target()->set_epoch(route.entry.epoch);
  request.set_key(std::string(key));
  request.set_meganode(start.Pack());
  request.set_want_range(!start.is_null() && !(start == cached));
  return request;
}

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
    std::shared_ptr<rpc::Connection> owned;  // keeps `connection` alive, unless it is the operation's own
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
      return Status::Unavailable(fmt::format("reading from server {}: {}", route->owner().id, lease.status().message()));
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

void StoreClient::CallAsync(uint16_t method, bool idempotent, Deadline deadline, GlobalPtr start,
                            const std::function<std::string(const Route&, GlobalPtr start)>& build,
                            std::function<void(const Status&, server::proto::StoreReply*)> finish,
                            std::function<void()> retry) {
  std::optional<uint32_t> region;
  if (!start.is_null()) {
    region = start.region;
  } else if (const uint32_t root = root_.load(std::memory_order_acquire); root != 0) {
    region = root;
  }
  auto route = region ? cache_.Lookup(*region) : StatusOr<Route>(Status::Unavailable("root not known yet"));
  if (!route.ok()) return PostRetry(std::move(retry));
  auto connection = ConnectionTo(route->owner(), deadline);
  if (!connection.ok() && connection.status().IsPermissionDenied()) return finish(connection.status(), nullptr);
  if (!connection.ok()) return PostRetry(std::move(retry));
  const Route r = *route;
  // The callback must not hold the connection: dropping the last reference from its own thread would destroy it
  // there. The client's map (or a sync caller) keeps it alive; the destructor closes it before returning.
  rpc::Connection* raw = connection->get();  // alive while its callbacks run; the callback must not own it
  raw->Call(method, build(r, start),
          [this, r, raw, idempotent, finish = std::move(finish), retry = std::move(retry)](
              const Status& status, std::string_view response) mutable {
            if (!status.ok()) {
              // A write whose connection died may have been applied: say so rather than send it again.
              if (status.IsUnavailable() && !idempotent && !raw->health().ok()) {
                return finish(Status::Unavailable("the connection failed after the request was sent; it may or may "
                                                  "not have been applied: " + status.message()),
                              nullptr);
              }
              if (status.IsUnavailable()) return PostRetry(std::move(retry));
              return finish(status, nullptr);
            }
            server::proto::StoreReply reply;
            if (!reply.ParseFromArray(response.data(), static_cast<int>(response.size()))) {
              return finish(Status::Corruption(fmt::format("malformed reply ({} bytes) from server {}",
                                                           response.size(), r.owner().id)),
                            nullptr);
            }
            if (reply.has_wrong_owner()) {
              cache_.OnWrongOwner(r.entry.region, r.owner().id, reply.wrong_owner().epoch());
              return PostRetry(std::move(retry));
            }
            // Another server's meganode: the synchronous form, on the retry thread, follows it.
            if (!NextFrom(reply).is_null()) return PostRetry(std::move(retry));
            finish(Status::OK(), &reply);
          },
          std::chrono::duration_cast<std::chrono::microseconds>(Remaining(deadline)));
}

void StoreClient::GetAsync(std::string_view key, GetCallback done) {
  if (Status s = meganode::CheckKeyValue(key, {}); !s.ok()) return done(s, {});
  uint64_t server = 0;
  // A client-side search waits for its reads; on a transport's own thread (a callback issuing the next get) that
  // could wait for itself, so a get started there searches on the server whatever the selector says.
  if (!SearchOnServer(measure_ ? paths_.Lookup(key) : GlobalPtr(), /*may_block=*/false, &server) &&
      !rpc::OnTransportThread()) {
    stats_.client_searches.fetch_add(1, std::memory_order_relaxed);
    std::string value;
    Status s = GetClientSide(key, &value, NewDeadline(), server != 0 && SampleThisSearch() ? server : 0);
    return done(s, value);
  }
  stats_.server_searches.fetch_add(1, std::memory_order_relaxed);
  if (server != 0) {
    // The server-side search's latency, for the selector, from here to the reply.
    done = [this, server, begin = std::chrono::steady_clock::now(), inner = std::move(done)](
               const Status& s, std::string_view value) {
      if (s.ok() || s.IsNotFound()) selector_->OnServerSearch(server, MicrosSince(begin), NowUs());
      inner(s, value);
    };
  }
  auto shared_done = std::make_shared<GetCallback>(std::move(done));
  std::string k(key);
  // One deadline for the operation, retries included (they run on the retry thread, one after another).
  const Deadline deadline = NewDeadline();
  CallAsync(
      StoreMethod::STORE_GET, /*idempotent=*/true, deadline, paths_.Lookup(k),
      [&k](const Route& route, GlobalPtr start) { return KeyRequest(route, k, start, start).SerializeAsString(); },
      [shared_done, k](const Status& status, server::proto::StoreReply* reply) {
        if (!status.ok()) return (*shared_done)(status, {});
        if (!reply->found()) return (*shared_done)(Status::NotFound(fmt::format("no key '{}'", k)), {});
        (*shared_done)(Status::OK(), reply->value());
      },
      [this, shared_done, k, deadline] {
        std::string value;
        Status s = GetServerSide(k, &value, deadline);
        (*shared_done)(s, value);
      });
}

void StoreClient::PutAsync(std::string_view key, std::string_view value, DoneCallback done) {
  if (Status s = meganode::CheckKeyValue(key, value); !s.ok()) return done(s);
  auto shared_done = std::make_shared<DoneCallback>(std::move(done));
  auto kv = std::make_shared<std::pair<std::string, std::string>>(key, value);
  const Deadline deadline = NewDeadline();
  CallAsync(
      StoreMethod::STORE_PUT, /*idempotent=*/false, deadline, paths_.Lookup(kv->first),
      [&kv](const Route& route, GlobalPtr start) {
        server::proto::KeyRequest request = KeyRequest(route, kv->first, start, start);
        request.set_value(kv->second);
        return request.SerializeAsString();
      },
      [shared_done](const Status& status, server::proto::StoreReply*) { (*shared_done)(status); },
      [this, shared_done, kv, deadline] { (*shared_done)(PutUntil(kv->first, kv->second, deadline)); });
}

void StoreClient::DeleteAsync(std::string_view key, DoneCallback done) {
  if (Status s = meganode::CheckKeyValue(key, {}); !s.ok()) return done(s);
  auto shared_done = std::make_shared<DoneCallback>(std::move(done));
  auto k = std::make_shared<std::string>(key);
  const Deadline deadline = NewDeadline();
  CallAsync(
      StoreMethod::STORE_DELETE, /*idempotent=*/false, deadline, paths_.Lookup(*k),
      [&k](const Route& route, GlobalPtr start) { return KeyRequest(route, *k, start, start).SerializeAsString(); },
      [shared_done, k](const Status& status, server::proto::StoreReply* reply) {
        if (!status.ok()) return (*shared_done)(status);
        if (!reply->found()) return (*shared_done)(Status::NotFound(fmt::format("no key '{}'", *k)));
        (*shared_done)(Status::OK());
      },
      [this, shared_done, k, deadline] { (*shared_done)(DeleteUntil(*k, deadline)); });
}

Status StoreClient::RunKey(uint16_t method, bool idempotent, std::string_view key, const std::string_view* value,
                           Deadline deadline, server::proto::StoreReply* reply) {
  const GlobalPtr cached = paths_.Lookup(key);
  return Run([&](rpc::Connection& connection, const Route& route, GlobalPtr start, Deadline d) -> Attempt {
    server::proto::KeyRequest request = KeyRequest(route, key, start, cached);
    if (value != nullptr) request.set_value(std::string(*value));
    Attempt a = Call(connection, route, d, idempotent, method, request.SerializeAsString(), reply);
    if (a.status.ok()) a.next = NextFrom(*reply);
    return a;
  }, deadline, cached);
}

Status StoreClient::GetServerSide(std::string_view key, std::string* value, Deadline deadline) {
  server::proto::StoreReply reply;
  CELL_RETURN_IF_ERROR(RunKey(StoreMethod::STORE_GET, /*idempotent=*/true, key, nullptr, deadline, &reply));
  if (!reply.found()) return Status::NotFound(fmt::format("no key '{}'", key));
  *value = std::move(*reply.mutable_value());
  return Status::OK();
}

Status StoreClient::GetClientSide(std::string_view key, std::string* value, Deadline deadline,
                                  uint64_t sample_server) {
  // Routed to the server of the meganode it begins at (the key's cached leaf, else the root's): a search that
  // begins at a leaf needs no other server, the root's included (down, it may be taken over meanwhile).
  return Run([&](rpc::Connection& connection, const Route& route, GlobalPtr, Deadline d) -> Attempt {
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
  }, deadline, paths_.Lookup(key));
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

Status StoreClient::Put(std::string_view key, std::string_view value) { return PutUntil(key, value, NewDeadline()); }

Status StoreClient::PutUntil(std::string_view key, std::string_view value, Deadline deadline) {
  CELL_RETURN_IF_ERROR(meganode::CheckKeyValue(key, value));
  server::proto::StoreReply reply;
  return RunKey(StoreMethod::STORE_PUT, /*idempotent=*/false, key, &value, deadline, &reply);
}

Status StoreClient::Delete(std::string_view key) { return DeleteUntil(key, NewDeadline()); }

Status StoreClient::DeleteUntil(std::string_view key, Deadline deadline) {
  CELL_RETURN_IF_ERROR(meganode::CheckKeyValue(key, {}));
  server::proto::StoreReply reply;
  CELL_RETURN_IF_ERROR(RunKey(StoreMethod::STORE_DELETE, /*idempotent=*/false, key, nullptr, deadline, &reply));
  if (!reply.found()) return Status::NotFound(fmt::format("no key '{}'", key));
  return Status::OK();
}

Status StoreClient::Scan(std::string_view start, std::string_view end, size_t limit,
                         std::vector<btree::KeyValue>* out) {
  if (limit == 0) return Status::OK();
  const size_t had = out->size();
  uint64_t server = 0;
  if (SearchOnServer(GlobalPtr(), /*may_block=*/true, &server)) {
    stats_.server_searches.fetch_add(1, std::memory_order_relaxed);
    std::string from(start);
    GlobalPtr at;  // the meganode the next page begins at (null: the root)
    const Deadline deadline = NewDeadline();  // one for the whole scan, every page
    while (out->size() - had < limit) {
      bool more = false;
      Status s = Run([&](rpc::Connection& connection, const Route& route, GlobalPtr begin, Deadline d) -> Attempt {
        server::proto::ScanRequest request;
        request.mutable_target()->set_region(route.entry.region);
        request.mutable_target()->set_epoch(route.entry.epoch);
        request.set_start(from);
        request.set_end(std::string(end));
        request.set_limit(static_cast<uint32_t>(std::min<size_t>(limit - (out->size() - had), UINT32_MAX)));
        request.set_meganode(begin.Pack());
        server::proto::StoreReply reply;
        Attempt a = Call(connection, route, d, /*idempotent=*/true, StoreMethod::STORE_SCAN,
                         request.SerializeAsString(), &reply);
        if (!a.status.ok()) return a;
        for (auto& kv : *reply.mutable_pairs()) {
          out->push_back({std::move(*kv.mutable_key()), std::move(*kv.mutable_value())});
        }
        more = reply.more();
        if (more) {
          // The page ended (its size, or the range goes on at another server's meganode): go on from `resume`.
          if (reply.resume().empty() || (reply.pairs_size() == 0 && reply.elsewhere() == 0)) {
            return {Status::Corruption("a scan page asked to go on but did not say where"), false};
          }
          from = reply.resume();
          at = reply.elsewhere() != 0 ? NextFrom(reply) : begin;
        }
        return {Status::OK(), false};
      }, deadline, at);
      if (!s.ok()) return s;
      if (!more) break;
    }
    return Status::OK();
  }
  stats_.client_searches.fetch_add(1, std::memory_order_relaxed);
  return Run([&](rpc::Connection& connection, const Route& route, GlobalPtr, Deadline d) -> Attempt {
    ReadRouter router(this, d, route, connection);
    btree::CopyingNodeSource source(router.Fetcher(), nodes_.get());
    btree::GlobalReader reader(&source, GlobalPtr{route.entry.region, 0});
    std::vector<btree::KeyValue> pairs;
    Status s = reader.Scan(start, end, limit, &pairs);
    if (s.ok()) {
      for (auto& kv : pairs) out->push_back(std::move(kv));
    }
    if (ShouldRetry(s)) return {s, true};
    return {s, false};
  }, NewDeadline());
}

}  // namespace cell::client
