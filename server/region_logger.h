// RegionLogger: the server's write sink (btree/write_sink.h). Every node image and record the tree writes goes, as a
// byte-range record, into the log of the region it was written in (logging/region_log.h). Each thread remembers the
// last lsn it added to each log; Commit() waits until they are durable, and a request is acknowledged only after
// it. Writes made off any request (the tree's background thread) become durable with the next commit or flush.
//
// NOT YET CRASH-CONSISTENT (the next step of issue 7; docs/DESIGN.md, "Durability"): two logs (node region,
// extent region) are synced independently, so a leaf image can become durable before the record it points to, and
// a reused block's new bytes before the leaf that stopped pointing to it. One log per tree, with the region in each
// record, orders them. What holds now, and is tested: replaying everything logged, over a checkpoint, rebuilds the
// regions exactly; and since writes are reported before they are visible and a checkpoint flushes the log before
// it is named, a checkpoint never holds a write the durable log lacks.
//
// Recovery's side: ApplyToNodeRegion lays a logged node image over the slot's node only if its version is at least
// the one there (a checkpoint may hold a newer image than a record replayed over it; an equal version is the same
// image). ApplyToExtentRegion lays record bytes in log order. CopyNodeRegion copies node
// memory for a checkpoint with the readers' protocol, so no node in a checkpoint is torn: a node locked mid-write
// whose image never reached the log (a crash) would otherwise be lost with the image before it.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "btree/write_sink.h"
#include "cell/status.h"
#include "logging/region_log.h"

namespace cell::server {

class RegionLogger final : public btree::WriteSink {
 public:
  RegionLogger();

  // Writes to `region` go to `log` (not owned; outlives the logger). Before the tree writes.
  void AddRegion(uint32_t region, logging::RegionLog* log) { logs_[region] = log; }

  void NodeWritten(GlobalPtr node, const btree::NodeImage& image) override;
  void BytesWritten(GlobalPtr at, const uint64_t* words, size_t n) override;

  // Waits until every record this thread added since its last Commit is durable. The first error since then: a
  // record that could not be added, or a log that failed.
  Status Commit();

 private:
  void Add(GlobalPtr at, const void* bytes, size_t n);

  const uint64_t id_;  // keys this logger's pending lsns in each thread
  std::unordered_map<uint32_t, logging::RegionLog*> logs_;
};

// Lays one logged record over a node region's memory (`words`, `size` bytes): 1 KB images, each only if its version
// is at least the one in memory. Corruption for a record that is not whole node images inside the region.
Status ApplyToNodeRegion(uint64_t* words, uint64_t size, const logging::LogRecord& record);
// Lays one logged record's bytes over an extent region's memory. Corruption for ranges outside it.
Status ApplyToExtentRegion(uint64_t* words, uint64_t size, const logging::LogRecord& record);
// Copies n bytes (whole nodes) of a live node region at `offset` into out, each node stable (not locked, unchanged
// across the copy). InvalidArgument unless offset and n are whole nodes.
Status CopyNodeRegion(const uint64_t* words, uint64_t offset, size_t n, char* out);

}  // namespace cell::server
