// The verbs client connection (Connection over verbs): RPCs as frames over one Link, one-sided reads as RDMA READs
// through registered bounce slots, and one I/O thread that waits on the completion channel. verbs_connection.cc
// connects and runs the I/O thread; verbs_connection_reads.cc starts the reads and fetches the region list they
// need. The protocol is described in verbs_transport.h.
#pragma once

#include <absl/container/btree_set.h>
#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "rpc/transport.h"
#include "rpc/verbs/verbs_link.h"
#include "rpc/verbs/verbs_resources.h"

namespace cell::rpc::verbs {

// A client's connection to a verbs server (Connect in verbs_transport.h opens one). Any thread may call and read;
// the I/O thread completes them.
class VerbsConnection final : public Connection {
 public:
  static StatusOr<std::unique_ptr<Connection>> Open(const Endpoint& endpoint, const ConnectOptions& options);
  ~VerbsConnection() override;

  void Call(uint16_t method, std::string_view request, RpcCallback done, Clock::time_point deadline) override;
  void Read(GlobalPtr remote, uint32_t length, void* dest, ReadCallback done) override;
  Status health() const override {
    std::lock_guard lock(mu_);
    return health_;
  }
  const std::string& uri() const override { return uri_; }
  void Close() override {
    {
      std::lock_guard lock(mu_);
      if (health_.ok()) health_ = Status::Unavailable(fmt::format("connection to {} closed by the client", uri_));
    }
    wake_.Wake();  // the I/O thread fails what waits, disconnects and exits
  }

 private:
  struct PendingCall {
    RpcCallback done;
    Clock::time_point deadline;
    FrameType expect = FrameType::kResponse;
  };
  struct ReadOp {
    ReadCallback done;
    char* dest = nullptr;
    uint64_t remote_address = 0;
    uint32_t rkey = 0;
    uint32_t length = 0;
    uint32_t posted = 0;       // bytes whose RDMA READ has been posted
    uint32_t outstanding = 0;  // bytes not yet landed in `dest`
    Clock::time_point deadline;
  };
  struct Slot {
    uint64_t op = 0;
    uint32_t offset = 0;
    uint32_t length = 0;
  };
  struct RemoteRegion {
    uint64_t address = 0;
    uint64_t size = 0;
    uint32_t rkey = 0;
  };
  struct WaitingRead {  // for a region missing from our list: resolved after region-list fetch `fetch`
    GlobalPtr remote;
    uint32_t length = 0;
    void* dest = nullptr;
    ReadCallback done;
    uint64_t fetch = 0;
  };

  VerbsConnection(std::string uri, const ConnectOptions& options, uint32_t send_limit)
      : uri_(std::move(uri)), options_(options), send_limit_(send_limit), receiver_(options.max_message_bytes) {
    slots_.resize(kReadSlots);
    for (uint32_t i = kReadSlots; i > 0; --i) free_slots_.push_back(i - 1);
  }

  // The Hello and, when the server requires a key, the proofs (rpc/auth.h), before the connection is handed out.
  Status Handshake(Clock::time_point deadline);
  // Sends one frame of `type` and waits for its answer, which must be of type `expect` (or an error).
  StatusOr<std::string> Exchange(FrameType type, std::string_view payload, FrameType expect,
                                 Clock::time_point deadline);
  // Starts `read` if its region is known (or fails it if it is not inside); unknown regions wait for a fetch of
  // the region list when `may_fetch`, and fail as not registered otherwise.
  void StartRead(WaitingRead read, bool may_fetch);
  void StartFetchLocked();
  void OnRegionList(uint64_t fetch, const Status& status, std::string_view payload);
  void PumpReadsLocked();
  void NoteDeadlineLocked(Clock::time_point deadline);
  // Records that the QP broke while posting; the I/O thread fails everything.
  void BreakLocked(const Status& why);
  void IoLoop();
  void ProcessCompletions(Status* end);
  // Handles one batch of `n` completions: sends done, replies delivered to their callers, read pieces copied out,
  // receive buffers reposted. Sets *end when the connection must close.
  void ProcessBatch(const ibv_wc* wc, int n, Status* end);
  // The bookkeeping of one successful completion, under mu_; false (and *end set) on a protocol violation.
  bool TakeCompletionLocked(const ibv_wc& wc, bool* credit_only, std::vector<ReadCallback>* reads_done, Status* end);
  // A READ into bounce slot `index` completed: copies its piece to the read's destination, and moves the read's
  // callback to `reads_done` when it was the last piece.
  void ReadPieceLandedLocked(uint32_t index, std::vector<ReadCallback>* reads_done);
  // Feeds the batch's data receives to the frame receiver, answering each reply's call.
  void DeliverReplies(const ibv_wc* wc, int n, const bool* credit_only, Status* end);
  // One reply frame from the server: completes the call waiting for it (if it has not timed out).
  void OnReplyFrame(const FrameHeader& h, std::string_view payload, Status* end);
  // Gives the batch's receive buffers back to the QP (returning credits for the data ones).
  void RepostReceives(const ibv_wc* wc, int n, const bool* credit_only);
  void ExpireDeadlines();
  void FailAll(const Status& why);

  const std::string uri_;
  const ConnectOptions options_;
  const uint32_t send_limit_;  // the smaller of ours and the server's
  // Destroyed in reverse: link (QP, CQ, buffers), PD, cm id, event channel.
  EventChannelPtr ec_;
  CmIdPtr id_;
  PdPtr pd_;
  std::unique_ptr<Link> link_;
  WakeFd wake_;
  FrameReceiver receiver_;  // I/O thread only
  std::thread io_;

  mutable std::mutex mu_;  // guards the link's send state and what follows
  Status health_;
  uint64_t next_id_ = 1;
  absl::flat_hash_map<uint64_t, PendingCall> calls_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<ReadOp>> reads_;
  absl::btree_set<std::pair<Clock::time_point, uint64_t>> deadlines_;  // of calls and reads
  std::deque<uint64_t> read_queue_;                                    // reads with pieces not yet posted, oldest first
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  absl::flat_hash_map<uint32_t, RemoteRegion> regions_;
  std::vector<WaitingRead> waiting_;
  uint64_t fetches_started_ = 0;
  bool fetch_in_flight_ = false;
  Clock::time_point io_wakes_at_ = Clock::time_point::max();
};

}  // namespace cell::rpc::verbs
