// The server's write sink over the region logs, and recovery's appliers (see region_logger.h).
#include "server/region_logger.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "btree/node_lock.h"
#include "common/diagnostics.h"
#include "common/shared_words.h"

namespace cell::server {
namespace {

// What this thread added since its last Commit, per logger: the last lsn (every one before it is committed with it).
struct Pending {
  uint64_t lsn = 0;
  Status error;
};
// Keyed by the logger's id, never reused, so that a logger made where a destroyed one was finds nothing of it.
thread_local std::unordered_map<uint64_t, Pending> pending;
std::atomic<uint64_t> next_logger_id{1};

}  // namespace

RegionLogger::RegionLogger(logging::RegionLog* log, std::vector<uint32_t> regions)
    : id_(next_logger_id.fetch_add(1)), log_(log), regions_(std::move(regions)) {}

void RegionLogger::Add(logging::LogRecord&& record) {
  Pending& p = pending[id_];
  if (log_ == nullptr) {
    if (p.error.ok()) p.error = Status::Internal("a write before the log was opened");
    return;
  }
  auto lsn = log_->Add(record);
  if (!lsn.ok()) {
    if (p.error.ok()) p.error = lsn.status();
    return;
  }
  p.lsn = *lsn;
}

void RegionLogger::AddBytes(GlobalPtr at, const void* bytes, size_t n) {
  if (std::find(regions_.begin(), regions_.end(), at.region) == regions_.end()) {
    Pending& p = pending[id_];
    if (p.error.ok())
      p.error = Status::Internal(fmt::format("a write to region {}, which this log does not hold", at.region));
    return;
  }
  logging::LogRecord record;
  record.ranges.push_back({at.offset, std::string(static_cast<const char*>(bytes), n), at.region});
  Add(std::move(record));
}

void RegionLogger::NodeWritten(GlobalPtr node, const btree::NodeImage& image) {
  AddBytes(node, image.w, btree::kNodeSize);
}

void RegionLogger::BytesWritten(GlobalPtr at, const uint64_t* words, size_t n) { AddBytes(at, words, n * 8); }

void RegionLogger::SplitMarked(bool begin, uint64_t split, std::string_view info) {
  logging::LogRecord record;
  record.kind = begin ? logging::LogRecord::Kind::kSplitBegin : logging::LogRecord::Kind::kSplitEnd;
  record.split = split;
  if (begin) record.info = std::string(info);
  Add(std::move(record));
}

Status RegionLogger::Sync() {
  if (log_ == nullptr) return Status::Internal("a sync before the log was opened");
  return log_->Flush();
}

Status RegionLogger::Commit() {
  Pending& p = pending[id_];
  Status result = p.error;
  if (p.lsn != 0) {
    if (Status s = log_->Commit(p.lsn); !s.ok() && result.ok()) result = s;
  }
  p = Pending();
  return result;
}

void RegionLogger::CommitThen(logging::RegionLog::DurableFn done) {
  Pending& p = pending[id_];
  const Pending taken = p;
  p = Pending();
  if (!taken.error.ok() || taken.lsn == 0 || log_ == nullptr) {
    std::move(done)(taken.error);
    return;
  }
  log_->WhenDurable(taken.lsn, std::move(done));
}

Status ApplyLogRecord(const logging::LogRecord& record, const RegionMemory& nodes, const RegionMemory& extents) {
  for (const auto& r : record.ranges) {
    if (r.region == nodes.id) {
      CELL_RETURN_IF_ERROR(ApplyToNodeRegion(nodes.words, nodes.size, r));
    } else if (r.region == extents.id) {
      CELL_RETURN_IF_ERROR(ApplyToExtentRegion(extents.words, extents.size, r));
    } else {
      return Status::Corruption(
          fmt::format("a log record writes region {}, which is neither this log's node region "
                      "{} nor its extent region {}",
                      r.region, nodes.id, extents.id));
    }
  }
  return Status::OK();
}

Status ApplyToNodeRegion(uint64_t* words, uint64_t size, const logging::LogRecord::Range& r) {
  {
    if (r.offset % btree::kNodeSize != 0 || r.bytes.size() % btree::kNodeSize != 0 || r.offset > size ||
        r.bytes.size() > size - r.offset) {
      return Status::Corruption(
          fmt::format("a node region's log record of {} bytes at offset {}: not whole nodes "
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

Status ApplyToExtentRegion(uint64_t* words, uint64_t size, const logging::LogRecord::Range& r) {
  {
    if (r.offset % 8 != 0 || r.bytes.size() % 8 != 0 || r.offset > size || r.bytes.size() > size - r.offset) {
      return Status::Corruption(
          fmt::format("an extent region's log record of {} bytes at offset {}: outside the "
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
    return Status::InvalidArgument(
        fmt::format("a node region is copied in whole nodes, not {} bytes at offset {}", n, offset));
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

std::vector<logging::CheckpointRegion> TreeCheckpointRegions(const meganode::Region& nodes,
                                                             const meganode::Region& extents) {
  const auto write = [](const meganode::Region* r) {
    return [r](uint64_t offset, std::string_view bytes) {
      if (offset > r->size() || bytes.size() > r->size() - offset) {
        return Status::Corruption(
            fmt::format("{} bytes at offset {} of region {} ({} bytes)", bytes.size(), offset, r->id(), r->size()));
      }
      std::memcpy(r->base() + offset, bytes.data(), bytes.size());
      return Status::OK();
    };
  };
  return {
      {.id = nodes.id(),
       .size = nodes.size(),
       .read = [&nodes](uint64_t offset, size_t n,
                        char* out) { return CopyNodeRegion(nodes.Resolve(0, nodes.size()), offset, n, out); },
       .write = write(&nodes),
       // Never written: zeros, not read (reading would commit memory to them).
       .hole = [&nodes](uint64_t offset, size_t n) { return nodes.IsHole(offset, n); }},
      {.id = extents.id(),
       .size = extents.size(),
       .read =
           [&extents](uint64_t offset, size_t n, char* out) {
             CopyBytesFromShared(out, extents.base() + offset, n);
             return Status::OK();
           },
       .write = write(&extents),
       .hole = [&extents](uint64_t offset, size_t n) { return extents.IsHole(offset, n); }},
  };
}

}  // namespace cell::server
