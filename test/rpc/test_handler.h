// The request handler and memory region the transport tests serve (in-process and from rpc_test_server).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rpc/proto/transport.pb.h"
#include "rpc/transport.h"

namespace cell::testing {

enum TestMethod : uint16_t {
  kEcho = 1,       // replies with the request bytes
  kSized = 2,      // EchoRequest: replies with reply_bytes bytes
  kHang = 3,       // never replies (the responder is kept until the handler dies)
  kAsyncEcho = 4,  // echoes from another thread, after the handler returned
  kDrop = 5,       // drops the responder without replying
};

class TestHandler final : public rpc::RpcHandler {
 public:
  ~TestHandler() override {
    for (auto& t : async_) t.join();
  }

  void Handle(uint16_t method, std::string_view request, rpc::Responder responder) override {
    {
      std::lock_guard lock(mu_);
      threads_.insert(std::this_thread::get_id());
    }
    switch (method) {
      case kEcho:
        responder.Reply(request);
        return;
      case kSized: {
        rpc::proto::EchoRequest r;
        r.ParseFromArray(request.data(), static_cast<int>(request.size()));
        responder.Reply(std::string(r.reply_bytes(), 'x'));
        return;
      }
      case kHang: {
        std::lock_guard lock(mu_);
        hung_.push_back(std::move(responder));
        return;
      }
      case kAsyncEcho: {
        std::lock_guard lock(mu_);
        async_.emplace_back([r = std::move(responder), copy = std::string(request)]() mutable { r.Reply(copy); });
        return;
      }
      case kDrop:
        return;
      default:
        responder.Fail(Status::InvalidArgument("unknown method"));
    }
  }

  size_t distinct_threads() {
    std::lock_guard lock(mu_);
    return threads_.size();
  }

 private:
  std::mutex mu_;
  std::set<std::thread::id> threads_;
  std::vector<rpc::Responder> hung_;
  std::vector<std::thread> async_;
};

// A memfd-backed region of `size` bytes filled with seeded random bytes.
class TestRegion {
 public:
  TestRegion(uint32_t id, size_t size, uint64_t seed) : id_(id), size_(size) {
    fd_ = memfd_create("cell-test-region", MFD_CLOEXEC);
    if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(size)) != 0) std::abort();
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) std::abort();
    base_ = static_cast<char*>(p);
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i < size; i += 8) {
      const uint64_t v = rng();
      std::memcpy(base_ + i, &v, 8);
    }
  }
  ~TestRegion() {
    munmap(base_, size_);
    close(fd_);
  }
  rpc::RegionRegistration registration() const { return {id_, base_, size_, fd_}; }
  const char* base() const { return base_; }
  char* writable_base() { return base_; }  // the server's side of the memory (tests that change it under readers)
  size_t size() const { return size_; }

 private:
  uint32_t id_;
  size_t size_;
  int fd_;
  char* base_;
};

}  // namespace cell::testing
