// Region mapping (memfd, anonymous or hugetlbfs memory).
#include "meganode/region.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cell::meganode {

StatusOr<std::unique_ptr<Region>> Region::Create(uint32_t id, uint64_t size, RegionBacking backing) {
  if (id == 0 || id > GlobalPtr::kMaxRegionId) {
    return Status::InvalidArgument("region id " + std::to_string(id) + " is outside 1.." +
                                   std::to_string(GlobalPtr::kMaxRegionId));
  }
  if (size == 0 || size % 4096 != 0 || size > GlobalPtr::kMaxOffset + 1) {
    return Status::InvalidArgument("region size " + std::to_string(size) +
                                   " must be a positive multiple of 4096 bytes, at most 1 TiB");
  }
  int fd = -1;
  if (backing != RegionBacking::kAnonymous) {
    std::string name = "cell-region-" + std::to_string(id);
    unsigned flags = MFD_CLOEXEC | (backing == RegionBacking::kHugetlb ? MFD_HUGETLB : 0);
    fd = memfd_create(name.c_str(), flags);
    if (fd < 0) {
      return Status::ResourceExhausted("memfd_create for region " + std::to_string(id) +
                                       " failed: " + std::strerror(errno));
    }
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      int e = errno;
      close(fd);
      return Status::ResourceExhausted("sizing region " + std::to_string(id) + " to " + std::to_string(size) +
                                       " bytes failed: " + std::strerror(e) +
                                       (backing == RegionBacking::kHugetlb ? " (are huge pages reserved?)" : ""));
    }
  }
  int mflags = fd < 0 ? (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE) : MAP_SHARED;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, mflags, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    if (fd >= 0) close(fd);
    return Status::ResourceExhausted("mapping region " + std::to_string(id) + " of " + std::to_string(size) +
                                     " bytes failed: " + std::strerror(e));
  }
  if (backing != RegionBacking::kHugetlb) {
    // Transparent huge pages where the kernel allows them: far fewer TLB misses and page faults for a tree whose
    // nodes and records are touched at random. Anonymous memory takes them in the "madvise" mode of
    // /sys/kernel/mm/transparent_hugepage/enabled; a memfd region (shared memory) in the "advise" mode of
    // .../shmem_enabled (often "never"; README.md, "Huge pages"). Advisory; failure changes nothing.
    madvise(p, size, MADV_HUGEPAGE);
  }
  return std::unique_ptr<Region>(new Region(id, size, static_cast<char*>(p), fd));
}

Region::~Region() {
  munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

bool Region::IsHole(uint64_t offset, uint64_t n) const {
  if (fd_ < 0) return false;
  const off_t data = ::lseek(fd_, static_cast<off_t>(offset), SEEK_DATA);
  if (data < 0) return errno == ENXIO;  // no data at or after offset
  return static_cast<uint64_t>(data) >= offset + n;
}

}  // namespace cell::meganode
