// RAII owners for rdma-core objects, and the small helpers every part of the verbs transport uses.
//
// Every object an error path could leak has an owner here; destruction order is the order of the owners' declaration
// (reversed), so structs that hold several declare them from "outermost" (event channel, cm id, PD) to "innermost"
// (CQ, QP). A QP must go before its CQ and PD, an MR before its PD, a cm id before its event channel.
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "cell/status.h"

namespace cell::rpc::verbs {

namespace internal {
struct EventChannelDeleter {
  void operator()(rdma_event_channel* ec) const { rdma_destroy_event_channel(ec); }
};
struct CmIdDeleter {
  void operator()(rdma_cm_id* id) const { rdma_destroy_id(id); }
};
struct PdDeleter {
  void operator()(ibv_pd* pd) const { ibv_dealloc_pd(pd); }
};
struct CompChannelDeleter {
  void operator()(ibv_comp_channel* c) const { ibv_destroy_comp_channel(c); }
};
struct CqDeleter {
  void operator()(ibv_cq* cq) const { ibv_destroy_cq(cq); }
};
struct MrDeleter {
  void operator()(ibv_mr* mr) const { ibv_dereg_mr(mr); }
};
struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
}  // namespace internal

using EventChannelPtr = std::unique_ptr<rdma_event_channel, internal::EventChannelDeleter>;
using CmIdPtr = std::unique_ptr<rdma_cm_id, internal::CmIdDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, internal::PdDeleter>;
using CompChannelPtr = std::unique_ptr<ibv_comp_channel, internal::CompChannelDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, internal::CqDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, internal::MrDeleter>;
using AlignedBuffer = std::unique_ptr<char, internal::FreeDeleter>;

// The QP rdma_create_qp made on a cm id; destroyed (rdma_destroy_qp) before the id itself.
class QpOnId {
 public:
  QpOnId() = default;
  explicit QpOnId(rdma_cm_id* id) : id_(id) {}
  QpOnId(const QpOnId&) = delete;
  QpOnId& operator=(const QpOnId&) = delete;
  ~QpOnId() {
    if (id_ != nullptr && id_->qp != nullptr) rdma_destroy_qp(id_);
  }
  ibv_qp* get() const { return id_ != nullptr ? id_->qp : nullptr; }

 private:
  rdma_cm_id* id_ = nullptr;
};

// An eventfd that wakes a poll() loop; closed on destruction.
class WakeFd {
 public:
  WakeFd() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;
  ~WakeFd() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  void Wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(fd_, &one, sizeof(one));
  }
  void Drain() const {
    uint64_t value;
    [[maybe_unused]] ssize_t n = read(fd_, &value, sizeof(value));
  }

 private:
  int fd_;
};

// "what: <strerror(errno)>" for a failed rdma-core call (they set errno, or return it: pass it as `err`).
inline std::string Errno(std::string_view what, int err = errno) {
  return fmt::format("{}: {}", what, std::strerror(err));
}

inline bool SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// A new event channel whose fd is non-blocking (rdma_get_cm_event then returns EAGAIN instead of blocking).
inline StatusOr<EventChannelPtr> CreateEventChannel() {
  EventChannelPtr ec(rdma_create_event_channel());
  if (ec == nullptr) return Status::Unavailable(Errno("rdma_create_event_channel"));
  if (!SetNonBlocking(ec->fd)) return Status::Unavailable(Errno("fcntl(O_NONBLOCK) on the rdma_cm event channel"));
  return ec;
}

// Registers [base, base + size) with `access`; the error says how to raise the locked-memory limit.
inline StatusOr<MrPtr> RegisterMemory(ibv_pd* pd, const void* base, size_t size, int access, std::string_view what) {
  MrPtr mr(ibv_reg_mr(pd, const_cast<void*>(base), size, access));
  if (mr == nullptr) {
    const int err = errno;
    return Status::ResourceExhausted(fmt::format(
        "ibv_reg_mr of {} ({} bytes) failed: {}; RDMA pins registered memory: check the locked-memory limit "
        "(`ulimit -l`, LimitMEMLOCK= in systemd units) or run with CAP_IPC_LOCK",
        what, size, std::strerror(err)));
  }
  return mr;
}

}  // namespace cell::rpc::verbs
