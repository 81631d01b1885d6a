// One-sided reads of a verbs client connection: each read is cut into pieces of at most a bounce slot, posted as
// RDMA READs while slots are free, and copied to the caller's buffer as the pieces land (ProcessBatch). A read of a
// region the connection does not know yet waits for a region list fetched after it asked (kMapRequest; one fetch in
// flight at a time).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "rpc/proto/transport.pb.h"
#include "rpc/region_table.h"
#include "rpc/verbs/verbs_connection.h"

namespace cell::rpc::verbs {

void VerbsConnection::Read(GlobalPtr remote, uint32_t length, void* dest, ReadCallback done) {
  if (length > send_limit_) {
    done(Status::InvalidArgument(
        fmt::format("one-sided read of {} bytes exceeds the message limit of {} bytes", length, send_limit_)));
    return;
  }
  StartRead(WaitingRead{remote, length, dest, std::move(done), 0}, true);
}

void VerbsConnection::StartRead(WaitingRead read, bool may_fetch) {
  std::unique_lock lock(mu_);
  Status refused;
  if (!health_.ok()) {
    refused = health_;
  } else if (auto it = regions_.find(read.remote.region); it == regions_.end()) {
    if (may_fetch) {
      // A fetch already in flight may have left the server before the region was registered: wait for a new one.
      read.fetch = fetches_started_ + 1;
      waiting_.push_back(std::move(read));
      if (!fetch_in_flight_) StartFetchLocked();
      return;
    }
    refused = NotRegistered(read.remote.region);
  } else if (const RemoteRegion& r = it->second;
             read.remote.offset > r.size || read.length > r.size - read.remote.offset) {
    refused = ReadOutsideRegion(read.remote.region, read.remote.offset, read.length, r.size);
  } else if (read.length > 0) {
    const uint64_t id = next_id_++;
    auto op = std::make_unique<ReadOp>();
    op->done = std::move(read.done);
    op->dest = static_cast<char*>(read.dest);
    op->remote_address = r.address + read.remote.offset;
    op->rkey = r.rkey;
    op->length = read.length;
    op->outstanding = read.length;
    op->deadline = Clock::now() + options_.call_timeout;
    deadlines_.emplace(op->deadline, id);
    NoteDeadlineLocked(op->deadline);
    reads_.emplace(id, std::move(op));
    read_queue_.push_back(id);
    PumpReadsLocked();
    return;
  }
  lock.unlock();
  read.done(refused);  // OK for an empty read
}

void VerbsConnection::StartFetchLocked() {
  const uint64_t fetch = ++fetches_started_;
  fetch_in_flight_ = true;
  const uint64_t id = next_id_++;
  const auto deadline = Clock::now() + options_.call_timeout;
  calls_.emplace(
      id, PendingCall{[this, fetch](const Status& s, std::string_view payload) { OnRegionList(fetch, s, payload); },
                      deadline, FrameType::kMapReply});
  deadlines_.emplace(deadline, id);
  if (Status s = link_->SendFrameLocked(FrameType::kMapRequest, 0, id, {}); !s.ok()) BreakLocked(s);
  NoteDeadlineLocked(deadline);
}

void VerbsConnection::OnRegionList(uint64_t fetch, const Status& status, std::string_view payload) {
  Status s = status;
  std::vector<WaitingRead> ready;
  {
    std::lock_guard lock(mu_);
    fetch_in_flight_ = false;
    proto::VerbsRegionList list;
    if (s.ok() && !list.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      s = Status::Internal(fmt::format("unparsable region list from {}", uri_));
    }
    if (s.ok()) {
      regions_.clear();
      for (const proto::VerbsRegion& r : list.regions()) {
        regions_[r.region()] = RemoteRegion{r.address(), r.size(), r.rkey()};
      }
    }
    auto later =
        std::partition(waiting_.begin(), waiting_.end(), [&](const WaitingRead& w) { return w.fetch > fetch; });
    ready.assign(std::make_move_iterator(later), std::make_move_iterator(waiting_.end()));
    waiting_.erase(later, waiting_.end());
    if (!waiting_.empty() && health_.ok()) StartFetchLocked();
  }
  for (WaitingRead& w : ready) {
    if (s.ok()) {
      StartRead(std::move(w), false);
    } else {
      w.done(s);
    }
  }
}

void VerbsConnection::PumpReadsLocked() {
  while (!free_slots_.empty() && !read_queue_.empty() && health_.ok()) {
    const uint64_t id = read_queue_.front();
    auto it = reads_.find(id);
    if (it == reads_.end()) {  // timed out before all its pieces were posted
      read_queue_.pop_front();
      continue;
    }
    ReadOp& op = *it->second;
    const uint32_t slot = free_slots_.back();
    const uint32_t length = std::min(kReadSlotBytes, op.length - op.posted);
    if (Status s = link_->PostReadLocked(slot, op.remote_address + op.posted, op.rkey, length); !s.ok()) {
      BreakLocked(s);
      return;
    }
    free_slots_.pop_back();
    slots_[slot] = Slot{id, op.posted, length};
    op.posted += length;
    if (op.posted == op.length) read_queue_.pop_front();
  }
}

void VerbsConnection::ReadPieceLandedLocked(uint32_t index, std::vector<ReadCallback>* reads_done) {
  const Slot slot = slots_[index];
  free_slots_.push_back(index);
  auto it = reads_.find(slot.op);
  if (it == reads_.end()) return;  // it timed out: its bytes are dropped, never written to dest
  ReadOp& op = *it->second;
  std::memcpy(op.dest + slot.offset, link_->read_slot(index), slot.length);
  op.outstanding -= slot.length;
  if (op.outstanding == 0) {
    reads_done->push_back(std::move(op.done));
    deadlines_.erase({op.deadline, slot.op});
    reads_.erase(it);
  }
}

}  // namespace cell::rpc::verbs
