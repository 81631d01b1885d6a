// Region: one large contiguous memory area with a cluster-wide id; the unit that pointers name and servers own.
//
// Backed by a memfd by default, so that a later layer can hand a read-only descriptor to clients on the same host
// (shared-memory one-sided reads); by anonymous memory; or by a hugetlbfs memfd (MFD_HUGETLB, needs huge pages
// reserved by the administrator). Memory is committed lazily, as pages are first touched.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "btree/node_source.h"
#include "cell/status.h"
#include "common/global_ptr.h"

namespace cell::meganode {

enum class RegionBacking { kMemfd, kAnonymous, kHugetlb };

class Region {
 public:
  // `size` must be a positive multiple of 4 KiB (of the huge page size for kHugetlb) and at most 1 TiB.
  static StatusOr<std::unique_ptr<Region>> Create(uint32_t id, uint64_t size, RegionBacking backing);
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  uint32_t id() const { return id_; }
  uint64_t size() const { return size_; }
  char* base() const { return base_; }
  int fd() const { return fd_; }  // -1 for anonymous memory
  // True if [offset, offset + n) was never written (a hole of the memfd: reading it would only commit zero pages).
  // False when that is not known (anonymous memory, or a file system that does not report holes).
  bool IsHole(uint64_t offset, uint64_t n) const;
  // The words at [offset, offset + bytes), or nullptr if that is not inside the region.
  uint64_t* Resolve(uint64_t offset, size_t bytes) const {
    if (offset > size_ || bytes > size_ - offset) return nullptr;
    return reinterpret_cast<uint64_t*>(base_ + offset);
  }

 private:
  Region(uint32_t id, uint64_t size, char* base, int fd) : id_(id), size_(size), base_(base), fd_(fd) {}
  uint32_t id_;
  uint64_t size_;
  char* base_;
  int fd_;
};

// The regions this process holds, looked up by id (a handful per server, so a linear scan).
class RegionSet final : public btree::LocalMemory {
 public:
  void Add(const Region* region) { regions_.push_back(region); }
  // The words at [ptr, ptr + bytes) for writing, or nullptr if that range is not all inside one region held here.
  uint64_t* Resolve(GlobalPtr ptr, size_t bytes) const {
    for (const Region* r : regions_) {
      if (r->id() == ptr.region) return r->Resolve(ptr.offset, bytes);
    }
    return nullptr;
  }
  const uint64_t* Readable(GlobalPtr ptr, size_t bytes) const override { return Resolve(ptr, bytes); }

 private:
  std::vector<const Region*> regions_;
};

}  // namespace cell::meganode
