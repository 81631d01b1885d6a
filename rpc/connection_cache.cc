// ConnectionCache (see connection_cache.h).
#include "rpc/connection_cache.h"

#include <future>
#include <utility>

namespace cell::rpc {

ConnectionCache::ConnectionCache(std::function<void()> on_connecting_thread)
    : on_connecting_thread_(std::move(on_connecting_thread)) {}

ConnectionCache::~ConnectionCache() { Close(); }

std::shared_ptr<Connection> ConnectionCache::Cached(uint64_t server) {
  if (const std::weak_ptr<Connection>* r = remembered_.Find(server)) {
    std::shared_ptr<Connection> c = r->lock();
    if (c != nullptr && c->health().ok()) return c;
  }
  std::lock_guard lock(mu_);
  if (closed_) return nullptr;
  auto it = connections_.find(server);
  if (it == connections_.end() || !it->second->health().ok()) return nullptr;
  remembered_.Remember(server, it->second);
  return it->second;
}

void ConnectionCache::Dialing(uint64_t server, const Dial& dial, Done done) {
  StatusOr<std::shared_ptr<Connection>> ready = Status::Unavailable("closing: no new connections");
  {
    std::lock_guard lock(mu_);
    if (!closed_) {
      auto it = connections_.find(server);
      if (it != connections_.end() && it->second->health().ok()) {
        ready = it->second;
      } else {
        std::vector<Done>& waiting = waiting_[server];
        waiting.push_back(std::move(done));
        if (waiting.size() > 1) return;  // a dial is under way for this server already
        // Joins the connectors that have finished (each sets `finished` as its last act), then starts one.
        std::erase_if(connectors_, [](Connector& c) {
          if (!c.finished->load(std::memory_order_acquire)) return false;
          c.thread.join();
          return true;
        });
        auto finished = std::make_shared<std::atomic<bool>>(false);
        connectors_.push_back(Connector{std::thread([this, server, dial, finished] {
                                          if (on_connecting_thread_) on_connecting_thread_();
                                          Connect(server, dial);
                                          finished->store(true, std::memory_order_release);
                                        }),
                                        finished});
        return;
      }
    }
  }
  done(ready);
}

void ConnectionCache::Connect(uint64_t server, const Dial& dial) {
  StatusOr<std::unique_ptr<Connection>> made = dial();
  StatusOr<std::shared_ptr<Connection>> result = made.status();
  std::shared_ptr<Connection> old;  // released after the lock: closing it runs its callbacks
  std::vector<Done> waiters;
  {
    std::lock_guard lock(mu_);
    if (made.ok()) {
      std::shared_ptr<Connection> shared = std::move(*made);
      auto& slot = connections_[server];
      if (closed_) {
        old = std::move(shared);
        connections_.erase(server);
        result = Status::Unavailable("closing: no new connections");
      } else if (slot != nullptr && slot->health().ok()) {
        old = std::move(shared);  // another caller's connection is there and healthy: callers may have calls on it
        result = slot;
      } else {
        remembered_.Changed();
        old = std::exchange(slot, shared);
        result = shared;
      }
    }
    waiters = std::move(waiting_[server]);
    waiting_.erase(server);
  }
  for (auto& w : waiters) w(result);
}

StatusOr<std::shared_ptr<Connection>> ConnectionCache::Await(uint64_t server, const Dial& dial) {
  std::promise<StatusOr<std::shared_ptr<Connection>>> promise;
  auto future = promise.get_future();
  Dialing(server, dial, [&promise](const StatusOr<std::shared_ptr<Connection>>& c) { promise.set_value(c); });
  return future.get();
}

void ConnectionCache::Drop(uint64_t server, const Connection* failed) {
  std::shared_ptr<Connection> old;  // released after the lock
  std::lock_guard lock(mu_);
  auto it = connections_.find(server);
  // Only the connection that failed: another caller may already have put a fresh one there.
  if (it == connections_.end() || (failed != nullptr && it->second.get() != failed)) return;
  remembered_.Changed();
  old = std::move(it->second);
  connections_.erase(it);
}

std::vector<uint64_t> ConnectionCache::Connected() {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> out;
  for (const auto& [id, connection] : connections_) out.push_back(id);
  return out;
}

void ConnectionCache::Close() {
  std::map<uint64_t, std::shared_ptr<Connection>> connections;
  {
    std::lock_guard lock(mu_);
    remembered_.Changed();
    closed_ = true;
    connections.swap(connections_);
  }
  for (auto& [id, connection] : connections) connection->Close();  // their outstanding calls complete now
  // Dials under way finish (each within its timeout); their waiters are told the cache is closing.
  std::vector<Connector> connectors;
  {
    std::lock_guard lock(mu_);
    connectors.swap(connectors_);
  }
  for (auto& c : connectors) c.thread.join();
}

}  // namespace cell::rpc
