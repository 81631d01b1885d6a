// One RC queue pair carrying RPC frames both ways: its CQ, buffers, credits and receive-side reassembly.
//
// Used by both ends (VerbsServer's connections and VerbsConnection). See verbs_transport.h for the protocol. The
// Link has no lock of its own: its owner serializes every *Locked call with one mutex (the same one that guards
// the owner's request state, so that registering a request and sending it are atomic). Polling the CQ and
// reading received buffers happen on one thread at a time (the owner guarantees it), without the lock.
#pragma once

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/little_endian.h"
#include "rpc/frame.h"
#include "rpc/verbs/verbs_resources.h"

namespace cell::rpc::verbs {

// Every SEND carries at most this many bytes of the frame stream; every receive buffer holds this many.
inline constexpr uint32_t kBufferBytes = 16 << 10;
// Data messages one side may have sent and the other not yet processed (the initial credits).
inline constexpr uint32_t kCredits = 32;
// Receive buffers beyond the credits, for credit-only messages (at most 2 can be unprocessed; see the header).
inline constexpr uint32_t kCreditOnlyBuffers = 4;
inline constexpr uint32_t kRecvBuffers = kCredits + kCreditOnlyBuffers;
// Registered send buffers (a SEND's buffer is busy until its completion).
inline constexpr uint32_t kSendBuffers = 32;
// Owed credits are returned with an explicit credit-only message once this many pile up with nothing to send.
inline constexpr uint32_t kReturnThreshold = kCredits / 2;
// Client: one-sided reads land in registered bounce slots of this size; bigger reads are split into pieces.
inline constexpr uint32_t kReadSlotBytes = 8 << 10;
inline constexpr uint32_t kReadSlots = 64;

// Immediate data of every SEND: the credits returned, and whether the SEND is credit-only (no payload).
inline constexpr uint32_t kCreditOnlyFlag = 1u << 31;

// Work request ids: the kind in the top byte, a buffer or slot index below.
enum class WrKind : uint8_t { kRecv = 1, kSend = 2, kCredit = 3, kRead = 4 };
inline uint64_t MakeWrId(WrKind kind, uint32_t index) { return (uint64_t{static_cast<uint8_t>(kind)} << 56) | index; }
inline WrKind WrKindOf(uint64_t wr_id) { return static_cast<WrKind>(wr_id >> 56); }
inline uint32_t WrIndexOf(uint64_t wr_id) { return static_cast<uint32_t>(wr_id); }

// The rdma_cm private data of the connect request and of the accept: 16 bytes, little-endian.
//   0  magic 'CVB1' (0x31425643)   4  max_message_bytes   8  credits (receive buffers posted for data)
//   12 buffer_bytes (largest SEND the sender of this hello can receive)
struct WireHello {
  static constexpr uint32_t kMagic = 0x31425643;
  static constexpr size_t kBytes = 16;
  uint32_t max_message_bytes = 0;
  uint32_t credits = 0;
  uint32_t buffer_bytes = 0;

  void Encode(char* out) const {
    const uint32_t words[4] = {kMagic, max_message_bytes, credits, buffer_bytes};
    for (int i = 0; i < 4; ++i) EncodeFixed32(out + i * 4, words[i]);
  }
  // False unless `data` (transports may pad it) starts with a well-formed hello.
  bool Decode(const void* data, size_t size) {
    if (data == nullptr || size < kBytes) return false;
    const auto* p = static_cast<const char*>(data);
    uint32_t words[4];
    for (int i = 0; i < 4; ++i) words[i] = DecodeFixed32(p + i * 4);
    max_message_bytes = words[1];
    credits = words[2];
    buffer_bytes = words[3];
    return words[0] == kMagic && credits >= 2 && credits < (1u << 16) && buffer_bytes >= 4096;
  }
};

// Reject private data starts with this, then the reason as text.
inline constexpr std::string_view kRejectPrefix = "CELL:";

// Cuts frames out of the stream of received SEND payloads. A SEND that holds only whole frames is delivered in
// place, without a copy; frames that straddle SENDs are reassembled in a FrameDecoder.
class FrameReceiver {
 public:
  explicit FrameReceiver(uint32_t max_payload) : max_payload_(max_payload), decoder_(max_payload) {}

  // Calls deliver(header, payload) for every frame `chunk` completes, in order; the payload is valid only during
  // the call. An error (malformed stream) means the connection must be closed.
  template <typename Deliver>
  Status Feed(std::string_view chunk, Deliver&& deliver) {
    if (decoder_.buffered() == 0) {
      while (chunk.size() >= kFrameHeaderBytes) {
        FrameHeader header;
        CELL_RETURN_IF_ERROR(DecodeFrameHeader(chunk, max_payload_, &header));
        if (chunk.size() - kFrameHeaderBytes < header.length) break;
        deliver(header, chunk.substr(kFrameHeaderBytes, header.length));
        chunk.remove_prefix(kFrameHeaderBytes + header.length);
      }
      if (chunk.empty()) return Status::OK();
    }
    decoder_.Append(chunk);
    FrameHeader header;
    std::string_view payload;
    while (true) {
      const auto r = decoder_.Next(&header, &payload);
      if (r == FrameDecoder::Result::kNeedMore) break;
      if (r == FrameDecoder::Result::kMalformed) return decoder_.error();
      deliver(header, payload);
    }
    decoder_.Consume();
    return Status::OK();
  }

 private:
  const uint32_t max_payload_;
  FrameDecoder decoder_;
};

class Link {
 public:
  // Creates the CQ (with a non-blocking completion channel, armed), the RC QP on `id` (which must have a route or
  // a connect request), registers the buffers (plus `read_slots` read bounce slots) and posts every receive.
  static StatusOr<std::unique_ptr<Link>> Create(rdma_cm_id* id, ibv_pd* pd, uint32_t read_slots) {
    auto link = std::unique_ptr<Link>(new Link());
    link->comp_.reset(ibv_create_comp_channel(id->verbs));
    if (link->comp_ == nullptr) return Status::Unavailable(Errno("ibv_create_comp_channel"));
    if (!SetNonBlocking(link->comp_->fd)) return Status::Unavailable(Errno("fcntl on the completion channel"));
    const uint32_t send_wrs = kSendBuffers + kCreditOnlyBuffers + read_slots;
    const int cqe = static_cast<int>(kRecvBuffers + send_wrs);
    link->cq_.reset(ibv_create_cq(id->verbs, cqe, nullptr, link->comp_.get(), 0));
    if (link->cq_ == nullptr) return Status::Unavailable(Errno(fmt::format("ibv_create_cq({} entries)", cqe)));
    if (int err = ibv_req_notify_cq(link->cq_.get(), 0); err != 0) {
      return Status::Unavailable(Errno("ibv_req_notify_cq", err));
    }
    ibv_qp_init_attr attr{};
    attr.send_cq = link->cq_.get();
    attr.recv_cq = link->cq_.get();
    attr.qp_type = IBV_QPT_RC;
    attr.sq_sig_all = 1;
    attr.cap.max_send_wr = send_wrs;
    attr.cap.max_recv_wr = kRecvBuffers;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(id, pd, &attr) != 0) return Status::Unavailable(Errno("rdma_create_qp"));
    link->qp_ = std::make_unique<QpOnId>(id);

    const size_t bytes = size_t{kRecvBuffers + kSendBuffers} * kBufferBytes + size_t{read_slots} * kReadSlotBytes;
    link->memory_.reset(static_cast<char*>(std::aligned_alloc(4096, bytes)));
    if (link->memory_ == nullptr) return Status::ResourceExhausted("out of memory for RDMA buffers");
    auto mr = RegisterMemory(pd, link->memory_.get(), bytes, IBV_ACCESS_LOCAL_WRITE, "the connection's buffers");
    if (!mr.ok()) return mr.status();
    link->mr_ = std::move(*mr);
    for (uint32_t i = 0; i < kRecvBuffers; ++i) CELL_RETURN_IF_ERROR(link->PostRecv(i));
    for (uint32_t i = kSendBuffers; i > 0; --i) link->free_send_.push_back(i - 1);
    return link;
  }

  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // After the handshake: the peer's receive credits and buffer size.
  void SetPeer(const WireHello& peer) {
    send_credits_ = peer.credits;
    chunk_bytes_ = std::min(kBufferBytes, peer.buffer_bytes);
  }
  static WireHello OurHello(uint32_t max_message_bytes) { return WireHello{max_message_bytes, kCredits, kBufferBytes}; }

  int comp_fd() const { return comp_->fd; }
  ibv_qp* qp() const { return qp_->get(); }

  // Takes every pending event off the completion channel (non-blocking) and acknowledges it.
  void DrainCqEvents() {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    unsigned events = 0;
    while (ibv_get_cq_event(comp_.get(), &cq, &context) == 0) ++events;
    if (events > 0) ibv_ack_cq_events(cq_.get(), events);
  }
  // Re-arms the CQ's notification; the caller polls once more afterwards (a completion may have slipped in).
  Status ArmCq() {
    if (int err = ibv_req_notify_cq(cq_.get(), 0); err != 0)
      return Status::Unavailable(Errno("ibv_req_notify_cq", err));
    return Status::OK();
  }
  int Poll(ibv_wc* wc, int max) { return ibv_poll_cq(cq_.get(), max, wc); }

  // The bytes a receive completion delivered into buffer `index`.
  std::string_view Received(const ibv_wc& wc) const {
    return std::string_view(recv_buffer(WrIndexOf(wc.wr_id)), std::min(wc.byte_len, kBufferBytes));
  }

  // ---- the rest: the caller holds its lock ----

  // Queues one frame and sends what credits and buffers allow. An error means the QP is broken.
  Status SendFrameLocked(FrameType type, uint16_t aux, uint64_t request_id, std::string_view payload) {
    const size_t total = kFrameHeaderBytes + payload.size();
    if (out_sent_ == out_.size() && send_credits_ > 0 && !free_send_.empty() && total <= chunk_bytes_) {
      const uint32_t index = free_send_.back();  // fast path: straight into a send buffer
      free_send_.pop_back();
      char* buffer = send_buffer(index);
      EncodeFrameHeader(FrameHeader{type, aux, static_cast<uint32_t>(payload.size()), request_id}, buffer);
      if (!payload.empty()) std::memcpy(buffer + kFrameHeaderBytes, payload.data(), payload.size());
      return PostSend(index, static_cast<uint32_t>(total));
    }
    AppendFrame(out_, type, aux, request_id, payload);
    return FlushLocked();
  }

  // Sends queued bytes while the peer has credits for them and send buffers are free.
  Status FlushLocked() {
    while (out_sent_ < out_.size() && send_credits_ > 0 && !free_send_.empty()) {
      const uint32_t index = free_send_.back();
      free_send_.pop_back();
      const size_t n = std::min<size_t>(chunk_bytes_, out_.size() - out_sent_);
      std::memcpy(send_buffer(index), out_.data() + out_sent_, n);
      out_sent_ += n;
      CELL_RETURN_IF_ERROR(PostSend(index, static_cast<uint32_t>(n)));
    }
    if (out_sent_ == out_.size()) {
      if (out_.capacity() > (1u << 20)) {
        std::string().swap(out_);  // a huge message passed; do not keep its memory
      } else {
        out_.clear();
      }
      out_sent_ = 0;
    }
    return ReturnCreditsLocked();
  }

  // A receive completion's immediate data: credits the peer returns. True if it was a credit-only message.
  bool AcceptImmediateLocked(const ibv_wc& wc) {
    const uint32_t imm = (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0;
    send_credits_ += imm & ~kCreditOnlyFlag;
    return (imm & kCreditOnlyFlag) != 0;
  }
  // A SEND (data or credit-only) completed: its buffer is free again.
  void SendDoneLocked(uint64_t wr_id) {
    if (WrKindOf(wr_id) == WrKind::kSend) {
      free_send_.push_back(WrIndexOf(wr_id));
    } else {
      --credit_sends_in_flight_;
    }
  }
  // Posts receive buffer `index` again; a data message's buffer becomes a credit owed to the peer.
  Status RepostLocked(uint64_t wr_id, bool data) {
    CELL_RETURN_IF_ERROR(PostRecv(WrIndexOf(wr_id)));
    if (data) ++owed_;
    return Status::OK();
  }
  bool output_queued() const { return out_sent_ < out_.size(); }
  // Every data SEND queued so far has completed (its bytes reached the peer).
  bool sends_done() const { return !output_queued() && free_send_.size() == kSendBuffers; }

  // Client reads: bounce slot `slot` and the post of one RDMA READ of `length` bytes into it.
  char* read_slot(uint32_t slot) const {
    return memory_.get() + size_t{kRecvBuffers + kSendBuffers} * kBufferBytes + size_t{slot} * kReadSlotBytes;
  }
  Status PostReadLocked(uint32_t slot, uint64_t remote_address, uint32_t rkey, uint32_t length) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(read_slot(slot)), length, mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = MakeWrId(WrKind::kRead, slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote_address;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    if (int err = ibv_post_send(qp(), &wr, &bad); err != 0)
      return Status::Unavailable(Errno("ibv_post_send(RDMA_READ)", err));
    return Status::OK();
  }

 private:
  Link() = default;

  char* recv_buffer(uint32_t index) const { return memory_.get() + size_t{index} * kBufferBytes; }
  char* send_buffer(uint32_t index) const { return memory_.get() + size_t{kRecvBuffers + index} * kBufferBytes; }

  Status PostRecv(uint32_t index) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(recv_buffer(index)), kBufferBytes, mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = MakeWrId(WrKind::kRecv, index);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (int err = ibv_post_recv(qp(), &wr, &bad); err != 0) return Status::Unavailable(Errno("ibv_post_recv", err));
    return Status::OK();
  }

  // One SEND of `length` bytes from send buffer `index`, returning every owed credit; consumes one peer credit.
  Status PostSend(uint32_t index, uint32_t length) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(send_buffer(index)), length, mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = MakeWrId(WrKind::kSend, index);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(owed_);
    ibv_send_wr* bad = nullptr;
    if (int err = ibv_post_send(qp(), &wr, &bad); err != 0) {
      free_send_.push_back(index);
      return Status::Unavailable(Errno("ibv_post_send(SEND)", err));
    }
    --send_credits_;
    owed_ = 0;
    return Status::OK();
  }

  // A credit-only SEND (no payload, no peer credit consumed) once enough credits are owed and nothing carries them.
  Status ReturnCreditsLocked() {
    if (owed_ < kReturnThreshold || credit_sends_in_flight_ >= kCreditOnlyBuffers) return Status::OK();
    ibv_send_wr wr{};
    wr.wr_id = MakeWrId(WrKind::kCredit, 0);
    wr.num_sge = 0;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(kCreditOnlyFlag | owed_);
    ibv_send_wr* bad = nullptr;
    if (int err = ibv_post_send(qp(), &wr, &bad); err != 0)
      return Status::Unavailable(Errno("ibv_post_send(credits)", err));
    ++credit_sends_in_flight_;
    owed_ = 0;
    return Status::OK();
  }

  // Declared so that they are destroyed in a valid order: QP, CQ, completion channel; MR, memory.
  AlignedBuffer memory_;
  MrPtr mr_;
  CompChannelPtr comp_;
  CqPtr cq_;
  std::unique_ptr<QpOnId> qp_;

  // Send state (owner's lock).
  uint32_t send_credits_ = 0;  // data SENDs the peer can still take
  uint32_t owed_ = 0;          // receive buffers reposted since we last told the peer
  uint32_t credit_sends_in_flight_ = 0;
  uint32_t chunk_bytes_ = kBufferBytes;
  std::vector<uint32_t> free_send_;
  std::string out_;  // frames waiting for credits or buffers, as one byte stream
  size_t out_sent_ = 0;
};

}  // namespace cell::rpc::verbs
