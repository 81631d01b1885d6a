// ConnectionCache: one connection per server, shared by every caller. A missing or failed connection is made again
// on demand, on one connecting thread per server while every caller that needs it waits (asynchronously) for that
// one attempt; a connection that failed is dropped only by those who saw it fail, so a fresh one put in its place
// meanwhile stays. The client library (StoreClient) and a server's calls to its peers (ServerPeers) both keep theirs
// here.
//
// Thread-safe. Callbacks run on the connecting thread (or the caller's, when the answer is known at once) and must
// not call Close.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cell/status.h"
#include "common/thread_memo.h"
#include "rpc/transport.h"

namespace cell::rpc {

class ConnectionCache {
 public:
  using Done = std::function<void(const StatusOr<std::shared_ptr<Connection>>& connection)>;
  // Makes a connection to a server (on the connecting thread; it may take up to its own timeout).
  using Dial = std::function<StatusOr<std::unique_ptr<Connection>>()>;

  // `on_connecting_thread`, if set, runs first on each connecting thread (e.g. to mark it as the owner's).
  explicit ConnectionCache(std::function<void()> on_connecting_thread = {});
  ~ConnectionCache();  // Close()
  ConnectionCache(const ConnectionCache&) = delete;
  ConnectionCache& operator=(const ConnectionCache&) = delete;

  // Calls `done` with `server`'s healthy cached connection, or else once a connection made by `dial` (any callable
  // a Dial can hold; or by a dial already under way for that server) is there, or with its error. Unavailable once
  // closed. The cached connection is the fast path: neither `dial` nor `done` (any callable a Done can hold) is
  // copied into a std::function then.
  template <typename DialFn, typename DoneFn>
  void GetAsync(uint64_t server, DialFn&& dial, DoneFn&& done) {
    if (std::shared_ptr<Connection> cached = Cached(server)) {
      return done(StatusOr<std::shared_ptr<Connection>>(std::move(cached)));
    }
    Dialing(server, Dial(std::forward<DialFn>(dial)), Done(std::forward<DoneFn>(done)));
  }
  // `server`'s healthy cached connection, or null (the fast path of GetAsync and Get, for a caller that would
  // otherwise build a dial it does not need). The calling thread remembers the answer (weakly) while the cache is
  // unchanged, so this takes no lock when a thread asks again.
  std::shared_ptr<Connection> Cached(uint64_t server);
  // The same, waiting for it. Not on a connecting thread.
  template <typename DialFn>
  StatusOr<std::shared_ptr<Connection>> Get(uint64_t server, DialFn&& dial) {
    if (std::shared_ptr<Connection> cached = Cached(server)) return cached;
    return Await(server, Dial(std::forward<DialFn>(dial)));
  }
  // Drops `server`'s connection if it is `failed` (any, if null). Not on `failed`'s own threads (it may release the
  // connection's last reference, and closing it runs its callbacks).
  void Drop(uint64_t server, const Connection* failed);
  // The servers with a connection now.
  std::vector<uint64_t> Connected();
  // Closes every connection (their outstanding calls complete with Unavailable) and waits for the connecting threads
  // (each within its dial's timeout); from then on every Get fails. Idempotent.
  void Close();

 private:
  struct Connector {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  // GetAsync and Get past the fast path.
  void Dialing(uint64_t server, const Dial& dial, Done done);
  StatusOr<std::shared_ptr<Connection>> Await(uint64_t server, const Dial& dial);
  // On the connecting thread: dials, stores the connection (keeping a healthy one stored first), answers the waiters.
  void Connect(uint64_t server, const Dial& dial);

  std::function<void()> on_connecting_thread_;
  std::mutex mu_;  // guards what follows
  bool closed_ = false;
  std::map<uint64_t, std::shared_ptr<Connection>> connections_;
  std::map<uint64_t, std::vector<Done>> waiting_;  // server -> callers waiting for the dial under way
  std::vector<Connector> connectors_;              // joined once finished, and by Close
  // The calling thread's answers (weak: a thread's memory keeps no connection open); Changed under mu_ by every
  // change of connections_ or closed_.
  ThreadMemo<uint64_t, std::weak_ptr<Connection>> remembered_;
};

}  // namespace cell::rpc
