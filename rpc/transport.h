// The transport interface: request/response RPC and one-sided reads between a client and a server.
//
// Everything above rpc/ uses only this header. A URI picks the transport:
//   tcp://host:port          TCP; one-sided reads are served by the server's "NIC" threads, never its workers
//   shm:///path/to/socket    same host; RPC over a Unix socket, one-sided reads copy from a read-only mapping
//   verbs://host:port        RDMA (rdma-core): SEND/RECV for RPC, IBV_WR_RDMA_READ for one-sided reads
//
// Server: Listen(uri, options, handler) -> Server. Requests run on a pool of exactly `options.workers` threads (the
// "server CPUs" of every experiment). Regions registered with RegisterRegion can be read one-sidedly, read-only.
//
// Client: Connect(uri, options) -> Connection. Call() and Read() are asynchronous and may be issued from any thread,
// many at a time; each completes exactly once, through its callback, with OK or the error (timeout, peer gone,
// refused read, ...). Callbacks run on a transport thread (for shm reads without a NIC model: inline, before Read
// returns); they must not block, and must not destroy the Connection they belong to (Close() is fine).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cell/status.h"
#include "common/global_ptr.h"
#include "rpc/key.h"

namespace cell::rpc {

using Clock = std::chrono::steady_clock;

// Completion of Call(): the status, and on success the response payload (valid only during the callback).
using RpcCallback = std::function<void(const Status& status, std::string_view response)>;
// Completion of Read(): OK once `length` bytes are at `dest`.
using ReadCallback = std::function<void(const Status& status)>;

// Where a server replies to one request. Move-only; exactly one Reply or Fail per request. A Responder destroyed
// without either answers the client with an Internal error, so a handler bug never leaves a caller waiting.
class Responder {
 public:
  // The connection-side end a Responder writes to (one per transport).
  class Sink {
   public:
    virtual ~Sink() = default;
    virtual void Send(uint64_t request_id, const Status& status, std::string_view payload) = 0;
  };

  Responder() = default;
  Responder(std::shared_ptr<Sink> sink, uint64_t request_id) : sink_(std::move(sink)), id_(request_id) {}
  Responder(Responder&&) = default;
  Responder& operator=(Responder&& other) noexcept;
  ~Responder();

  void Reply(std::string_view payload);
  void Fail(const Status& status);
  bool pending() const { return sink_ != nullptr; }

 private:
  std::shared_ptr<Sink> sink_;
  uint64_t id_ = 0;
};

// The server's request handler. Runs on a worker thread; may answer later, from any thread, through the Responder.
class RpcHandler {
 public:
  virtual ~RpcHandler() = default;
  virtual void Handle(uint16_t method, std::string_view request, Responder responder) = 0;
};

// Memory a server lets clients read one-sidedly. `base` must be 8-byte aligned and `size` a multiple of 8; the shm
// transport also needs `fd`, the region's memfd (read-only descriptors of it are handed to clients).
struct RegionRegistration {
  uint32_t id = 0;
  const void* base = nullptr;
  uint64_t size = 0;
  int fd = -1;
};

struct ServerOptions {
  int workers = 1;               // threads that run RpcHandler::Handle (and the RPC sockets' I/O)
  int nic_threads = 1;           // tcp: threads that serve one-sided reads
  std::vector<int> worker_cpus;  // pin worker i to worker_cpus[i % size]; empty: no pinning
  std::vector<int> nic_cpus;     // pin NIC thread i likewise
  // How long a worker (and a tcp NIC thread) keeps polling for requests after its last before it sleeps
  // (WaitForEvent, rpc/socket_util.h): for a server whose threads have cores of their own, requests taken without a
  // wake-up, at the price of those cores while they poll. 0: sleep at once.
  std::chrono::microseconds poll{0};
  uint32_t max_message_bytes = 16u << 20;
  // shm: "reads_per_s=R,bytes_per_s=B,latency_us=L" (any subset): a NIC model every shm client of this server
  // obeys: reads are paced by one shared token bucket and complete L microseconds late. Empty: no model.
  std::string nic_model;
  // Authentication (rpc/auth.h): every connection must prove it holds one of these keys (by name, e.g. "client" and
  // "peer") before anything else, its one-sided reads and region descriptors included. Empty: anyone may connect.
  std::vector<Key> keys;
  // Authorization: whether a connection that proved the key named `key_name` (empty on a server without keys) may
  // call `method`. An error is sent as that request's reply and the connection is closed. Null: every method.
  std::function<Status(uint16_t method, const std::string& key_name)> authorize;
  // shm: the socket file is created mode 0600 and only processes of the server's own user (or root) may connect
  // (checked again with SO_PEERCRED); with a group name, mode 0660 owned by that group, and its members may too.
  std::string shm_group;
};

struct ServerStats {
  uint64_t requests = 0;  // RPC requests handled
  uint64_t reads = 0;     // one-sided reads served by NIC threads (tcp only; shm and verbs need no server)
  uint64_t read_bytes = 0;
  double worker_cpu_seconds = 0;  // CPU time of the worker pool
  double nic_cpu_seconds = 0;     // CPU time of the NIC threads, reported apart: it is not the server's CPU
  uint64_t connections_closed_for_protocol_errors = 0;
};

class Server {
 public:
  virtual ~Server() = default;  // stops the server
  // The URI clients connect to (with the port actually bound, if the listen URI said port 0).
  virtual const std::string& uri() const = 0;
  // Makes [base, base + size) readable one-sidedly as region `id`. Registered regions stay registered until the
  // server stops: clients may keep reading them.
  virtual Status RegisterRegion(const RegionRegistration& region) = 0;
  virtual ServerStats stats() const = 0;
  // Closes every connection (their callers see Unavailable) and joins every thread. Idempotent.
  virtual void Stop() = 0;
};

struct ConnectOptions {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds call_timeout{10000};  // default per-request timeout, for Call and Read
  uint32_t max_message_bytes = 16u << 20;
  // The key this client proves it holds (rpc/auth.h); it also requires the server to prove it holds the same key.
  // Empty: none (only a server without keys accepts the connection).
  Key key;
};

class Connection {
 public:
  virtual ~Connection() = default;  // closes the connection
  // Unique among this process's connections, never reused: what a caller remembering something of one connection
  // (a region's mapping) keys it by, since another connection may later sit at the same address.
  uint64_t serial() const { return serial_; }
  // Sends `request` to the server's handler as `method`; its bytes are copied (or sent) before Call returns, so the
  // caller may reuse them. A request over the message limit fails at once with InvalidArgument; no answer by
  // `deadline` (Clock::time_point{}: ConnectOptions::call_timeout from now) fails with DeadlineExceeded. A deadline,
  // not a timeout: the caller's operation has one already, and turning it into a timeout and back would read the
  // clock twice per request.
  virtual void Call(uint16_t method, std::string_view request, RpcCallback done,
                    Clock::time_point deadline = Clock::time_point{}) = 0;
  // Copies `length` bytes at `remote` on the server into `dest` (which must stay valid until `done` runs). A read
  // that is not entirely inside a registered region fails with InvalidArgument and reads nothing.
  virtual void Read(GlobalPtr remote, uint32_t length, void* dest, ReadCallback done) = 0;
  // The same read, waited for. The default waits on Read's callback; a transport that can copy at once (shm without
  // a NIC model) overrides it to skip the callback.
  virtual Status ReadNow(GlobalPtr remote, uint32_t length, void* dest);
  // Whether this connection can hand out the server's memory to read in place, without a copy: shm without a NIC
  // model, whose client maps the server's regions read-only. Other transports only copy (use Read).
  virtual bool reads_in_place() const { return false; }
  // Where region `region` is in this process's read-only mapping of the server's memory: all of its bytes, valid
  // while the connection lives (the region is mapped on first use). The server writes them while they are read, so a
  // reader validates what it read as the server's own searches do (the node's version, btree/node_source.h), and
  // keeps its reads inside the span, as Read would (ReadOutsideRegion, rpc/region_table.h). Unavailable for a region
  // the server does not serve, or once the connection has failed; FailedPrecondition (and only then) if
  // !reads_in_place(). A reader asks once per region and search, then reads the span directly.
  virtual StatusOr<std::span<const char>> RegionInPlace(uint32_t region);
  // OK while the connection is usable; otherwise the error that ended it.
  virtual Status health() const = 0;
  virtual const std::string& uri() const = 0;
  // Fails every outstanding request with Unavailable and releases the connection's threads. Idempotent.
  virtual void Close() = 0;

 private:
  static uint64_t NextSerial();
  const uint64_t serial_ = NextSerial();
};

// Starts a server at `uri` (tcp://host:port, port 0 picks a free one; shm:///path; verbs://host:port). `handler`
// must outlive the server.
StatusOr<std::unique_ptr<Server>> Listen(std::string_view uri, const ServerOptions& options, RpcHandler* handler);

// Connects to the server at `uri`. PermissionDenied if either side cannot prove it holds the other's key.
StatusOr<std::unique_ptr<Connection>> Connect(std::string_view uri, const ConnectOptions& options = {});

// Connects to a server that offers several transports (`addresses`: transport -> URI), trying `transports` in order
// of preference until one connects. `time_left`, if given, is asked before each attempt for its connect timeout (so
// that all attempts together keep to one deadline). Unavailable naming every failure, or that none was offered;
// PermissionDenied (naming every failure) if none connected and a server refused the key, or could not prove it
// holds it: retrying cannot help.
StatusOr<std::unique_ptr<Connection>> ConnectFirst(const std::map<std::string, std::string>& addresses,
                                                   const std::vector<std::string>& transports, ConnectOptions options,
                                                   const std::function<std::chrono::milliseconds()>& time_left = {});

// Held sends, for a thread that starts many requests at once: while it holds them, a socket transport (tcp, shm)
// queues the thread's requests and reads in their connection's buffer instead of writing each with a system call of
// its own, and writes them together when the thread calls FlushHeldSends() or ends its last hold. A thread about to
// wait for one of them must flush first (CallSync, ReadSync and ReadNow do). Nothing is held forever without a
// flush: a request issued when its connection has nothing in flight is written at once, and a connection's I/O
// thread writes what is queued each time it takes in a reply or expires a request, so a held request waits at most
// for the reply (or the deadline) of a request ahead of it. Holds nest. Verbs posts each request at once.
// (The public face is cell::SendHold, cell/client.h.)
void BeginHoldingSends();
void EndHoldingSends();  // the last one flushes
// Writes what the calling thread holds; the hold goes on. Cheap when it holds nothing.
void FlushHeldSends();

// Blocking helpers over the asynchronous calls (they wait on the callback).
StatusOr<std::string> CallSync(Connection& connection, uint16_t method, std::string_view request,
                               std::chrono::microseconds timeout = std::chrono::microseconds{0});
Status ReadSync(Connection& connection, GlobalPtr remote, uint32_t length, void* dest);

// True on a thread a transport runs callbacks on (a connection's I/O or completion thread). Code there must not wait
// for another request or read (CallSync, ReadSync): completing it may be that very thread's job.
bool OnTransportThread();
// For transports: marks the calling thread as one of theirs, for its life.
void MarkTransportThread();

// A parsed transport URI.
struct Endpoint {
  enum class Scheme { kTcp, kShm, kVerbs };
  Scheme scheme = Scheme::kTcp;
  std::string host;  // tcp, verbs
  uint16_t port = 0;
  std::string path;  // shm
  static StatusOr<Endpoint> Parse(std::string_view uri);
};

}  // namespace cell::rpc
