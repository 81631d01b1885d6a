// The client half of one stream-transport socket: pipelined requests matched to replies by request id.
//
// Any thread may issue requests; each is written to the socket at once by the calling thread (under the channel's
// lock), or, when the socket is full, by the I/O thread once it drains. A thread that holds its sends
// (BeginHoldingSends, rpc/transport.h) only queues them while the channel has requests in flight; they are written when
// it flushes, with the next request another thread writes, or by the I/O thread after its next turn (a reply, an
// expiry or a wake-up). One I/O thread per channel reads replies, runs
// their callbacks and expires requests past their deadline. When the socket fails or the peer closes it, every waiting
// request fails with Unavailable, and so does every later one.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rpc/frame.h"
#include "rpc/proto/transport.pb.h"
#include "rpc/transport.h"

namespace cell::rpc {

// Sends a Hello for `role` on `fd` (connected, non-blocking) and waits for the HelloReply; the error if the peer
// refuses the role, answers something else, or does not answer within the connect timeout.
Status ExchangeHello(int fd, const std::string& uri, proto::Role role, const ConnectOptions& options,
                     proto::HelloReply* reply);

class SocketChannel {
 public:
  // Says hello on `fd` (a connected non-blocking socket, which the channel then owns) as `role`, waits for the
  // reply, and starts the I/O thread.
  static StatusOr<std::unique_ptr<SocketChannel>> Open(int fd, std::string uri, proto::Role role,
                                                       const ConnectOptions& options, proto::HelloReply* reply);
  ~SocketChannel();

  void Call(uint16_t method, std::string_view request, RpcCallback done, Clock::time_point deadline);
  // A kReadRequest served by the server's NIC threads; the reply's bytes are copied to `dest`.
  void Read(GlobalPtr remote, uint32_t length, void* dest, ReadCallback done);
  Status health() const;
  // health().ok(), without taking the lock.
  bool alive() const { return alive_.load(std::memory_order_relaxed); }
  void Close(const Status& why);

  // What a thread holding its sends keeps to flush the channels it queued on: the channel while it lives.
  struct HeldRef {
    std::mutex mu;
    SocketChannel* channel = nullptr;  // null once the channel is being destroyed
  };

 private:
  struct Pending {
    RpcCallback rpc;    // set for calls
    ReadCallback read;  // set for reads
    void* dest = nullptr;
    uint32_t length = 0;
    Clock::time_point deadline;
  };
  // A request whose reply (or failure) has arrived; its callback runs after mu_ is released.
  struct Completion {
    Pending pending;
    Status status;
    std::string_view payload;  // points into the I/O thread's FrameDecoder until its Consume()
  };

  SocketChannel(int fd, std::string uri, const ConnectOptions& options, uint32_t server_max);
  // Registers a request (moving `pending` in) and writes its frame; on failure, returns the status instead and
  // leaves `pending` with the caller.
  Status Issue(Pending& pending, FrameType type, uint16_t aux, std::string_view payload);
  // The I/O thread: waits for the socket, the wake-up eventfd or the next deadline; sends what Issue could not,
  // receives replies, matches them to their requests and runs their callbacks; at the end fails what is left.
  void IoLoop();
  // How long the I/O thread may sleep: until earliest_deadline_ (at most a minute), or -1 for no request in flight.
  // Records it in io_wakes_at_, so Issue wakes the thread only for an earlier deadline.
  int NextWaitMs();
  // Empties the eventfd Issue writes to wake the I/O thread.
  void DrainWakeups();
  // The socket has room: sends queued frames, and stops watching for room once the queue is empty.
  Status FlushWhenWritable();
  // Receives everything the socket holds into `decoder`; Unavailable if the server closed it or it failed.
  Status ReceiveAvailable(FrameDecoder& decoder);
  // Moves each whole reply in `decoder` to `ready` with its request; Unavailable on a malformed frame.
  Status MatchRepliesLocked(FrameDecoder& decoder, std::vector<Completion>* ready);
  // Moves the requests past their deadline to `ready`, failed with DeadlineExceeded, once earliest_deadline_ passed.
  void ExpireLocked(std::vector<Completion>* ready);
  // Runs the callbacks of `ready` (mu_ not held), copying read replies to their destinations.
  static void RunCompletions(std::vector<Completion>& ready);
  // The connection ended with `end` (unless Close gave a reason first): marks it dead and fails every request.
  void EndIo(Status end);
  void FailAll(const Status& why);  // with mu_ not held
  // Writes what is queued, unless the I/O thread waits for room to; false if the socket failed.
  bool WriteQueuedLocked();
  bool FlushLocked();
  void ArmLocked(bool want_write);
  friend void FlushHeldSends();

  const int fd_;
  const std::string uri_;
  const ConnectOptions options_;
  const uint32_t send_limit_;  // the smaller of ours and the server's
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread io_;
  std::atomic<bool> alive_{true};
  const std::shared_ptr<HeldRef> held_ref_ = std::make_shared<HeldRef>();

  mutable std::mutex mu_;  // guards what follows
  Status health_;
  uint64_t next_id_ = 1;
  absl::flat_hash_map<uint64_t, Pending> pending_;
  // No later than the earliest deadline of a request in flight: lowered as requests are issued, raised by
  // ExpireLocked's pass over them, reset when none is in flight (NextWaitMs, FailAll). The I/O thread wakes then and
  // expires what is due.
  Clock::time_point earliest_deadline_ = Clock::time_point::max();
  std::string out_;
  size_t sent_ = 0;
  bool write_armed_ = false;
  Clock::time_point io_wakes_at_ = Clock::time_point::max();  // when the I/O thread will next check deadlines
};

}  // namespace cell::rpc
