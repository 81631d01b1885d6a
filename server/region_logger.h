// RegionLogger: the server's write sink (btree/write_sink.h). Every node image and record the tree writes goes, as a
// byte-range record naming its region, into the one log of the tree's regions (logging/region_log.h): one log, so
// that the log's order is the order the writes were made in, and whatever a durable record depends on (the record
// a leaf points to; the leaf that stopped pointing to a reused block) is durable before it. Each thread remembers the
// last lsn it added; Commit() waits until it (and so every record before it, whoever added it) is durable, and a
// request is acknowledged only after it. Writes made off any request (the tree's background thread) become durable
// with the next commit or flush.
//
// Recovery's side: ApplyLogRecord lays a record's ranges over the regions' memory: a node image over its slot only if
// its version is at least the one there (a checkpoint may hold a newer image than a record replayed over it; an equal
// version is the same image), record bytes in log order. CopyNodeRegion copies node memory for a checkpoint with the
// readers' protocol, so no node in a checkpoint is torn: a node locked mid-write whose image never reached the log
// (a crash) would otherwise be lost with the image before it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "btree/write_sink.h"
#include "cell/status.h"
#include "logging/checkpoint.h"
#include "logging/region_log.h"
#include "meganode/region.h"

namespace cell::server {

class RegionLogger final : public btree::WriteSink {
 public:
  // Writes to `regions` go to `log` (not owned; outlives the logger; may be set later, before the first write); a
  // write to another region, or before there is a log, fails the commit.
  RegionLogger(logging::RegionLog* log, std::vector<uint32_t> regions);
  void set_log(logging::RegionLog* log) { log_ = log; }

  void NodeWritten(GlobalPtr node, const btree::NodeImage& image) override;
  void BytesWritten(GlobalPtr at, const uint64_t* words, size_t n) override;
  void SplitMarked(bool begin, uint64_t split, std::string_view info) override;
  // Flushes the log: every record added so far, by any thread, on disk.
  Status Sync() override;

  // Waits until every record this thread added since its last Commit is durable. The first error since then: a
  // record that could not be added, or a log that failed.
  Status Commit();
  // The asynchronous Commit: what this thread added since its last Commit (or TakePending) becomes durable, then
  // `done` runs (RegionLog::WhenDurable), with the first error since then, if any.
  void CommitThen(logging::RegionLog::DurableFn done);

 private:
  void Add(logging::LogRecord&& record);
  void AddBytes(GlobalPtr at, const void* bytes, size_t n);

  const uint64_t id_;  // keys this logger's pending lsn in each thread
  logging::RegionLog* log_;
  const std::vector<uint32_t> regions_;
};

// A region's memory, for replay.
struct RegionMemory {
  uint32_t id = 0;
  uint64_t* words = nullptr;
  uint64_t size = 0;
};
// Lays a logged record over the node and extent regions, each range by its region. Corruption for a range of another
// region, or one that does not fit (below).
Status ApplyLogRecord(const logging::LogRecord& record, const RegionMemory& nodes, const RegionMemory& extents);
// Lays one range over a node region's memory (`words`, `size` bytes): 1 KB images, each only if its version is at
// least the one in memory. Corruption for a range that is not whole node images inside the region.
Status ApplyToNodeRegion(uint64_t* words, uint64_t size, const logging::LogRecord::Range& range);
// Lays one range's bytes over an extent region's memory. Corruption for ranges outside it.
Status ApplyToExtentRegion(uint64_t* words, uint64_t size, const logging::LogRecord::Range& range);
// Copies n bytes (whole nodes) of a live node region at `offset` into out, each node stable (not locked, unchanged
// across the copy). InvalidArgument unless offset and n are whole nodes.
Status CopyNodeRegion(const uint64_t* words, uint64_t offset, size_t n, char* out);
// A tree's node and extent regions as a checkpoint holds them: read live (nodes with CopyNodeRegion, extents as they
// are) for TakeCheckpoint, written (before the tree is opened on them) by Recover.
std::vector<logging::CheckpointRegion> TreeCheckpointRegions(const meganode::Region& nodes,
                                                             const meganode::Region& extents);

}  // namespace cell::server
