// The server's write sink over the region logs, and recovery's appliers (see region_logger.h).
#include "server/region_logger.h"

#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "btree/node_lock.h"
#include "common/log.h"
#include "common/shared_words.h"

namespace cell::server {
namespace {

// What this thread added since its last Commit, per logger.
struct Pending {
  std::vector<std::pair<logging::RegionLog*, uint64_t>> lsns;
  Status error;
};
// Keyed by the logger's id, never reused, so that a logger made where a destroyed one was finds nothing of it.
thread_local std::unordered_map<uint64_t, Pending> pending;
std::atomic<uint64_t> next_logger_id{1};

}  // namespace

RegionLogger::RegionLogger() : id_(next_logger_id.fetch_add(1)) {}

void RegionLogger::Add(GlobalPtr at, const void* bytes, size_t n) {
  Pending& p = pending[id_];
  auto it = logs_.find(at.region);
  if (it == logs_.end()) {
    if (p.error.ok()) p.error = Status::Internal(fmt::format("a write to region {}, which has no log", at.region));
    return;
  }
  logging::LogRecord record;
  record.ranges.push_back({at.offset, std::string(static_cast<const char*>(bytes), n)});
  auto lsn = it->second->Add(record);
  if (!lsn.ok()) {
    if (p.error.ok()) p.error = lsn.status();
    return;
  }
  for (auto& [log, last] : p.lsns) {
    if (log == it->second) {
      last = *lsn;
      return;
    }
  }
  p.lsns.emplace_back(it->second, *lsn);
}

void RegionLogger::NodeWritten(GlobalPtr node, const btree::NodeImage& image) {
  Add(node, image.w, btree::kNodeSize);
}

void RegionLogger::BytesWritten(GlobalPtr at, const uint64_t* words, size_t n) { Add(at, words, n * 8); }

Status RegionLogger::Commit() {
  Pending& p = pending[id_];
  Status result = p.error;
  for (const auto& [log, lsn] : p.lsns) {
    if (Status s = log->Commit(lsn); !s.ok() && result.ok()) result = s;
  }
  p = Pending();
  return result;
}

Status ApplyToNodeRegion(uint64_t* words, uint64_t size, const logging::LogRecord& record) {
  for (const auto& r : record.ranges) {
    if (r.offset % btree::kNodeSize != 0 || r.bytes.size() % btree::kNodeSize != 0 || r.offset > size ||
        r.bytes.size() > size - r.offset) {
      return Status::Corruption(fmt::format("a node region's log record of {} bytes at offset {}: not whole nodes "
                                            "inside the {}-byte region",
                                            r.bytes.size(), r.offset, size));
    }
    for (size_t at = 0; at < r.bytes.size(); at += btree::kNodeSize) {
      uint64_t image[btree::kNodeWords];
      std::memcpy(image, r.bytes.data() + at, btree::kNodeSize);
      uint64_t* node = words + (r.offset + at) / 8;
      if (image[0] >= LoadSharedWord(node)) CopyToShared(node, image, btree::kNodeWords);
    }
  }
  return Status::OK();
}

Status ApplyToExtentRegion(uint64_t* words, uint64_t size, const logging::LogRecord& record) {
  for (const auto& r : record.ranges) {
    if (r.offset % 8 != 0 || r.bytes.size() % 8 != 0 || r.offset > size || r.bytes.size() > size - r.offset) {
      return Status::Corruption(fmt::format("an extent region's log record of {} bytes at offset {}: outside the "
                                            "{}-byte region or not whole words",
                                            r.bytes.size(), r.offset, size));
    }
    std::vector<uint64_t> copy(r.bytes.size() / 8);
    std::memcpy(copy.data(), r.bytes.data(), r.bytes.size());
    CopyToShared(words + r.offset / 8, copy.data(), copy.size());
  }
  return Status::OK();
}

Status CopyNodeRegion(const uint64_t* words, uint64_t offset, size_t n, char* out) {
  if (offset % btree::kNodeSize != 0 || n % btree::kNodeSize != 0) {
    return Status::InvalidArgument(fmt::format("a node region is copied in whole nodes, not {} bytes at offset {}", n,
                                               offset));
  }
  uint64_t image[btree::kNodeWords];
  for (size_t at = 0; at < n; at += btree::kNodeSize) {
    const uint64_t* node = words + (offset + at) / 8;
    for (;;) {
      const uint64_t before = btree::WaitStableVersion(node);
      CopyFromShared(image, node, btree::kNodeWords);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (LoadSharedWord(node) == before && image[0] == before) break;
    }
    std::memcpy(out + at, image, btree::kNodeSize);
  }
  return Status::OK();
}

}  // namespace cell::server
