// The Cell client: the C++ API a database layer uses. Thread-safe; errors come back as Status values.
//
//   cell::ClientOptions options;
//   options.cluster = "zk://127.0.0.1:2181/cell/default";   // or an embedded server: "tcp://127.0.0.1:7000"
//   auto client = cell::Client::Open(options);
//   if (!client.ok()) { ... client.status().ToString() ... }
//   auto servers = (*client)->Servers();
//
//   cell::Status s = (*client)->Put("user42", "hello");
//   std::string value;
//   s = (*client)->Get("user42", &value);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cell/iterator.h"
#include "cell/selector_options.h"
#include "cell/status.h"
#include "cell/transaction.h"

namespace cell {

struct ClientOptions {
  // Where the cluster's region table is:
  //   zk://host:port[,host:port...][/root/cluster]   a cluster whose membership is in ZooKeeper (default path
  //                                                  /cell/default)
  //   tcp://host:port, shm:///path, verbs://host:port  a server started with --membership=embedded
  std::string cluster;
  // How long one operation may take, retries included, before it fails with DeadlineExceeded (or Unavailable when no
  // server could be reached). A scan gets one timeout for all its pages. Counted on the kernel's coarse clock: an
  // operation gets this long, or up to two of its ticks (a few milliseconds) more.
  std::chrono::milliseconds timeout{5000};
  // How gets and scans search the tree:
  //   "adaptive"    the side that costs less, from the latencies this client measures (Cell's model, each side at
  //                 its marginal cost: server-side when l_s^2 / S_s < m x l_r^2 / S_r, S the fastest of each);
  //                 the rule steers the fraction of each server's searches sent to it, and each operation draws
  //                 from that fraction (see `selector` below and cell/selector_options.h)
  //   "server"      by RPC: the server walks its meganodes (costs server CPU, one round trip)
  //   "client"      by one-sided reads: the client fetches 1 KB nodes and walks them itself (no server CPU)
  //   "fixed:<x>"   server-side with probability x (0..1), client-side otherwise
  //   "dex"         DEX's heuristic (VLDB'24), for comparison
  // Puts and deletes always run on the server.
  std::string search = "adaptive";
  // The adaptive selector's constants (cell/selector_options.h): research knobs, with defaults that suit a database
  // layer (docs/BENCHMARKS.md says what each one measured).
  SelectorOptions selector;
  using Selector = SelectorOptions;  // the name it had when it was declared here
  // The transports to reach servers by, in order of preference: the first one a server offers that connects is
  // used. shm works only on the server's own host.
  std::vector<std::string> transports = {"shm", "verbs", "tcp"};
  // Client-side search keeps copies of the tree's upper levels between searches, so that it reads fewer nodes: nodes
  // at least `node_cache_levels` levels above the leaves, up to `node_cache_bytes` (0: no cache). A stale copy costs a
  // retry, never a wrong answer.
  size_t node_cache_bytes = size_t{128} << 20;
  int node_cache_levels = 4;
  // The cluster's client key: a file holding the secret that servers started with --client-key-file hold (mode 0600;
  // `cellctl keygen FILE` makes one). Every connection proves the client holds it, and each server proves it holds
  // it too. Empty: the CELL_KEY_FILE environment variable, if set; else no key (only servers started without keys
  // accept such a client). A missing or wrong key fails Open with PermissionDenied, saying which key is missing.
  std::string key_file;
};

struct ServerDescription {
  uint64_t id = 0;
  std::map<std::string, std::string> addresses;  // transport ("tcp", "shm", "verbs") -> URI
  uint64_t capacity_bytes = 0;
};

struct RegionDescription {
  uint32_t id = 0;
  uint64_t owner = 0;  // server id; 0 while the region has no owner (its server failed, not yet taken over)
  uint64_t epoch = 0;  // grows by one at every change of owner
  bool root = false;   // the root region (claimed by the cluster's first server): holds the first meganode
};

// Writes a new random key to `path` (which must not exist): 64 hex digits, mode 0600. For servers'
// --client-key-file and --peer-key-file, and clients' ClientOptions::key_file.
Status WriteNewKeyFile(const std::string& path);

class Client {
 public:
  // Connects to the cluster and reads its live servers once: InvalidArgument for a malformed URI or an unusable key
  // file, Unavailable (or DeadlineExceeded) if nothing answers within the timeout, NotFound if ZooKeeper holds no
  // such cluster, PermissionDenied if a server refuses the key (or cannot prove it holds it).
  static StatusOr<std::unique_ptr<Client>> Open(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The value stored for `key`: OK, NotFound, or the error (InvalidArgument for an empty or oversized key).
  Status Get(std::string_view key, std::string* value);
  // Inserts or replaces. InvalidArgument for a key outside 1..255 bytes or a value over 1 MiB (cell/limits.h);
  // ResourceExhausted when the store is full (nothing changed). A Put or Delete whose connection fails after it was
  // sent, or that its server made but could no longer acknowledge (it lost its lease meanwhile), is not sent again
  // (it may have been applied): it fails with Unavailable, saying so, and the caller decides.
  Status Put(std::string_view key, std::string_view value);
  // Asynchronous Get, Put and Delete, so that one thread keeps many operations in flight. `done` runs exactly once:
  // for a server-side operation on a client thread when the reply arrives (or on the client's timer or connecting
  // thread, after a stale route or a failed server), within the timeout; in the calling thread, before GetAsync
  // returns, for a client-side search, for invalid arguments, and while the client is being destroyed. Operations
  // still pending when the Client is destroyed complete with Unavailable before the destructor returns. `done` must
  // not block and must not destroy the Client: a synchronous Get, Put, Delete or Scan there fails with
  // FailedPrecondition; a GetAsync it starts searches on the server whatever the search mode (a client-side search
  // there could wait on the very thread running it). `key` (and `value` of PutAsync) need outlive only the call;
  // `value` of the callback is valid only during the callback.
  void GetAsync(std::string_view key, std::function<void(const Status& status, std::string_view value)> done);
  void PutAsync(std::string_view key, std::string_view value, std::function<void(const Status& status)> done);
  // Removes `key`; NotFound if it was absent. As for Put, a Delete whose connection fails after it was sent is not
  // sent again (Unavailable, saying so). DeleteAsync's `done` runs as PutAsync's does.
  Status Delete(std::string_view key);
  void DeleteAsync(std::string_view key, std::function<void(const Status& status)> done);
  // Up to `limit` pairs with start <= key < end (empty end: no bound), in key order, appended to *out.
  Status Scan(std::string_view start, std::string_view end, size_t limit,
              std::vector<std::pair<std::string, std::string>>* out);

  // Reads for a database layer (cell/iterator.h). Bounds are keys of at most 255 bytes (InvalidArgument otherwise);
  // `options.read` sets the call's timeout and search ("", "server", "client" or "adaptive"; InvalidArgument else).
  // Get with per-call options.
  Status Get(std::string_view key, std::string* value, const ReadOptions& options);
  // Up to `limit` pairs with start <= key < end, descending: the greatest first. Appended to *out.
  Status ScanReverse(std::string_view start, std::string_view end, size_t limit,
                     std::vector<std::pair<std::string, std::string>>* out);
  // One page of a scan: up to `limit` pairs of [start, end) in the order `options` says (reverse: the greatest
  // first; keys_only: no values). page->pairs is replaced; page->continuation names what is left ("" if nothing).
  Status Scan(std::string_view start, std::string_view end, size_t limit, const ScanOptions& options, ScanPage* page);
  // The next page of the scan that `continuation` (a ScanPage::continuation) names, in its order and with its
  // options. InvalidArgument for a token that is not one.
  Status ScanContinue(std::string_view continuation, size_t limit, ScanPage* page);
  // The whole range, page by page, without holding the caller: `on_page` runs once per page of up to `page_pairs`
  // pairs, in order, on a thread of the client's, and again while it returns true and pairs are left; last with a
  // non-OK status if a page failed (then nothing follows). Its final call has page.continuation empty (the range is
  // done) or is the one that returned false. The callback may call the Client's synchronous methods but must not
  // destroy the Client, whose destructor waits for scans still running (they stop at their next page, Unavailable).
  void ScanAsync(std::string_view start, std::string_view end, const ScanOptions& options, size_t page_pairs,
                 std::function<bool(const Status& status, ScanPage& page)> on_page);
  // Many gets at once: keys grouped by the server that holds them, one request per server (or client-side searches,
  // as the search mode says). (*values)[i] is keys[i]'s value; the result's [i] is its status (OK, NotFound or an
  // error). The keys need not be sorted or distinct.
  std::vector<Status> MultiGet(const std::vector<std::string>& keys, std::vector<std::string>* values,
                               const ReadOptions& options = {});
  // Deletes every key with start <= key < end (empty end: no bound) atomically: one transaction (cell/transaction.h)
  // that scans the range and deletes what it found, so a concurrent write into the range is a conflict, retried.
  // At most kMaxTransactionWrites (1,000) keys: a larger range fails with InvalidArgument and deletes nothing
  // (delete it in smaller ranges). Returns the number deleted in *deleted (if not null).
  Status DeleteRange(std::string_view start, std::string_view end, size_t* deleted = nullptr);
  // An estimate of how many keys [start, end) holds (empty end: no bound) and their bytes, for planning (a query
  // planner's row counts, where to cut a range into parts), never for correctness: read from the shape of the trees
  // the range lies in, two descents per meganode it overlaps and no keys counted, so it costs the same whatever the
  // range holds. Exact when the range lies within one leaf node (a few dozen keys); otherwise within a factor of two of
  // the truth, give or take a leaf's worth of keys at each end (nodes are between half and wholly full). Searched as
  // options.search says, like any read.
  StatusOr<SizeEstimate> ApproximateSize(std::string_view start, std::string_view end, const ReadOptions& options = {});
  // An iterator over [options.lower, options.upper) (cell/iterator.h). Bad options show in its status().
  std::unique_ptr<Iterator> NewIterator(const IteratorOptions& options = {});

  // Transactions (cell/transaction.h): serializable across keys and servers, optimistic, validated at Commit.
  StatusOr<std::unique_ptr<Transaction>> BeginTransaction(const TransactionOptions& options = {});
  // Atomically, if the key's current value is `expected` (nullopt: the key is absent), sets it to `new_value`
  // (nullopt: deletes it). OK: swapped. FailedPrecondition: the current value is another (nothing changed; the
  // message says whether the key was present). As for Put, Unavailable may mean "applied or not".
  Status CompareAndSwap(std::string_view key, const std::optional<std::string>& expected,
                        const std::optional<std::string>& new_value);
  // Applies every put and delete of `batch` atomically (all or none), whichever servers hold the keys. A batch
  // commits as a transaction that read nothing, so it never aborts for a conflict; InvalidArgument past the
  // transaction limits (cell/transaction.h).
  Status Write(const WriteBatch& batch);

  struct Stats {
    uint64_t server_searches = 0;    // gets and scans searched by RPC
    uint64_t client_searches = 0;    // gets and scans searched with one-sided reads
    uint64_t in_place_searches = 0;  // client-side search attempts (retries too) that read in place (shm), not copies
    uint64_t retries = 0;            // attempts repeated after a stale route, a failed server or a fenced one
    uint64_t node_cache_hits = 0;    // client-side search: nodes found in the node cache instead of read
    uint64_t node_cache_misses = 0;
    uint64_t node_cache_forgotten = 0;  // cached copies dropped because they were stale
    uint64_t explorations = 0;    // adaptive: searches sent the side estimated slower, to keep both estimates fresh
    double reads_per_search = 0;  // adaptive and dex: m, the mean one-sided reads of a client-side search
    uint64_t load_steps = 0;      // adaptive: steps in this client's load that rescaled a server's fraction (load_step)
    // adaptive and dex: what the selector believes of each server (mean latencies over its windows, microseconds).
    struct SearchEstimate {
      uint64_t server = 0;
      double server_search_us = 0;  // l_s: a get searched on the server, round trip included
      double read_us = 0;           // l_r: a one-sided read
      double rtt_us = 0;            // the fastest read seen: a read's cost with no queue
      double server_rtt_us = 0;     // the fastest server-side search seen: its cost with no queue
    };
    std::vector<SearchEstimate> estimates;
  };
  Stats stats() const;

  // What each live server's store holds and has done (cellctl stats).
  struct ServerStats {
    uint64_t server = 0;
    uint64_t meganodes = 0;        // meganodes in use
    uint64_t meganode_splits = 0;  // splits of this server's meganodes
    uint64_t remote_splits = 0;    // of which put the right half on another server
    uint64_t root_splits = 0;
    uint64_t requests = 0;           // store requests answered
    uint64_t redirects = 0;          // of which were sent on to another server's meganode
    uint64_t extent_bytes_used = 0;  // record memory (the server's own extent region)
    uint64_t extent_bytes_free = 0;
    uint64_t node_bytes_used = 0;  // meganodes (the server's own node region, in whole meganodes)
    uint64_t node_bytes_free = 0;
    uint64_t held_writes = 0;  // writes that met a meganode split holding off its right half (waited or retried)
    uint64_t room_splits = 0;  // remote splits made because the server had no room for a write
    // Of every region the server holds, those it took over from a failed server included:
    uint64_t txn_locks = 0;     // keys locked by transactions now (committing, or awaiting the resolver)
    uint64_t txn_resolved = 0;  // transaction locks the server's resolvers ended (their client went away)
  };
  StatusOr<std::vector<ServerStats>> StoreStats();

  // The live servers, by id.
  StatusOr<std::vector<ServerDescription>> Servers();
  // The region table, by region id.
  StatusOr<std::vector<RegionDescription>> Regions();

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Holds the calling thread's sends, so that a thread starting many asynchronous operations at once (GetAsync,
// PutAsync, DeleteAsync) makes one system call per connection rather than one per request, as a pipelining Redis
// client does. While a SendHold lives, a request to a server that already has requests in flight waits in its
// connection's buffer until Flush() or the end of the hold writes it. Call Flush() before waiting for the operations
// (a synchronous call flushes on its own). Without a flush, a held request waits for the next reply (or expiry) of
// a request ahead of it on its connection: a slow one (a durable write, a large scan page) holds it that long, and
// a held get's latency, which the adaptive selector measures, includes the wait. So hold sends only around a burst
// of operations, and flush when it ends. Holds nest; the outermost one's end flushes. Over tcp and shm; verbs posts
// each request at once.
//
//   cell::SendHold hold;
//   for (const auto& key : keys) client->GetAsync(key, done);
//   hold.Flush();   // one write per server
//   ... wait for the callbacks ...
class SendHold {
 public:
  SendHold();
  ~SendHold();
  SendHold(const SendHold&) = delete;
  SendHold& operator=(const SendHold&) = delete;
  // Writes what this thread holds, for every client; the hold goes on.
  static void Flush();
};

}  // namespace cell
