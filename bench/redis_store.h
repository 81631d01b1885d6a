// cell-bench's Redis store (bench/store.h) over hiredis, so that Cell and Redis run the same workloads in one
// harness. The mapping:
//   get    GET key                                   (nil: NotFound)
//   put    SET key value; an insert (and every put of the load) also ZADD cell-bench:keys 0 key, so scans find it
//   scan   ZRANGEBYLEX cell-bench:keys [start + LIMIT 0 n, then MGET of the keys it named
//   reverse scan (ScanReverse)
//          ZREVRANGEBYLEX cell-bench:keys (before - LIMIT 0 n ("+" for no bound), then MGET: scan's mirror image
//   transaction (RunTransaction)
//          a get: WATCH key, GET key; a scan: WATCH cell-bench:keys, ZRANGEBYLEX, then WATCH and MGET of its keys;
//          puts wait in the session until the commit: MULTI, SET key value and ZADD cell-bench:keys 0 key for each,
//          EXEC. EXEC answers nil when a watched key changed since its WATCH: a conflict, run again. Every read
//          follows its WATCH, so what a transaction that commits read was still current at its EXEC: serializable,
//          and scans see no phantoms (the index is watched). A ZADD of a key already in the set changes nothing and
//          disturbs no WATCH, so updates do not conflict with scans.
// Every member of the set has score 0, so the set is ordered by the keys' bytes (memcmp), the order Cell keeps. An
// insert's SET goes before its ZADD on the same connection, and Redis runs one connection's commands in order, so a
// key a scan finds in the set always has its value.
//
// A session is a connection of its own (one redisContext per bench thread). Commands go out as soon as an operation
// starts (one send each, as Cell's asynchronous calls do) and are pipelined: Redis answers in order, so a FIFO of the
// pending operations matches the replies. Replies are read only by the session's thread (completes_in_caller):
// AwaitCompletion, Scan and ScanReverse wait for them; Progress and WaitUntil take those that have come, by poll() on
// the socket and hiredis's reader, so an open loop records a latency when its reply arrives, not when the thread next
// looks.
//
// Errors: a reply of type error fails its operation (FailedPrecondition with Redis's text). A lost connection, a
// protocol error or no reply within the timeout fails the session: every pending operation, and every later one,
// completes with Unavailable (or DeadlineExceeded) naming the address. Writes are send(MSG_NOSIGNAL), so a closed
// connection never raises SIGPIPE. The keys are Redis's own: use a Redis of the bench's own (the load adds to it and
// nothing is deleted).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "bench/store.h"

namespace cell::bench {

// Where Redis listens: "HOST:PORT" (an IPv6 host in brackets: "[::1]:6379") or "unix:/path/to/socket".
struct RedisAddress {
  std::string host;  // empty for a Unix socket
  int port = 0;
  std::string unix_path;
  std::string ToString() const;
};
// InvalidArgument, naming the forms, for anything else.
StatusOr<RedisAddress> ParseRedisAddress(std::string_view text);

struct RedisStoreOptions {
  // For connecting, for sending, and for the first reply an operation waits for.
  std::chrono::milliseconds timeout{10000};
};

class RedisStore final : public Store {
 public:
  // The sorted set that indexes the keys for scans.
  static constexpr std::string_view kKeySet = "cell-bench:keys";

  // Checks that a Redis answers PING at `address`: InvalidArgument for a malformed address, otherwise Unavailable
  // with the message "cannot connect to redis at <address>: <why>".
  static StatusOr<std::unique_ptr<RedisStore>> Open(std::string_view address, RedisStoreOptions options = {});

  // A new connection, for one thread; Unavailable "cannot connect to redis at ...: <why>".
  StatusOr<std::unique_ptr<StoreSession>> NewSession() override;
  // Redis has no search sides, retries or node cache: zeros.
  Client::Stats stats() const override { return {}; }
  const RedisAddress& address() const { return address_; }

 private:
  RedisStore(RedisAddress address, RedisStoreOptions options) : address_(std::move(address)), options_(options) {}
  RedisAddress address_;
  RedisStoreOptions options_;
};

}  // namespace cell::bench
