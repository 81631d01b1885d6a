// WriteSink: where writers report each change they make to region memory, just before making it, so that the
// server can log it (logging/region_log.h) and a restarted server rebuild its regions byte for byte. Two kinds of
// change, and no other, write a GlobalTree's region memory (a tree opened without a sink, as meganode::LocalStore's
// for demos, benchmarks and tests, reports to no one):
//   - a node's new image, reported under the node's lock before it is published (NodeStore::Publish), so images
//     of one slot reach the sink in version order (word 0, even);
//   - a record's bytes, reported just after they are copied into a freshly allocated extent block (so a checkpoint
//     whose lsn is past the report holds them) and before any node points to them; reports of one block are in the
//     order the writes were made (an allocation follows the free of the block's last use).
// Reported before visible: whatever a reader or writer can see or build on, the sink has heard of first.
// Lock words taken and released unchanged are not changes. Called from many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "btree/node_format.h"
#include "cell/status.h"
#include "common/global_ptr.h"

namespace cell::btree {

class WriteSink {
 public:
  virtual ~WriteSink() = default;
  // The node at `node` now holds `image` (sealed: its version is even).
  virtual void NodeWritten(GlobalPtr node, const NodeImage& image) = 0;
  // `words` now hold the n words at `at`.
  virtual void BytesWritten(GlobalPtr at, const uint64_t* words, size_t n) = 0;
  // A meganode split `split` begins (with what the split is, for whoever reads the log) or ends. Recovery decides
  // from the nodes' bytes (meganode/tree_recovery.cc); these mark the splits in the log for its report.
  virtual void SplitMarked(bool /*begin*/, uint64_t /*split*/, std::string_view /*info*/) {}
  // Makes everything reported so far durable; called before another server is told of what was written here (a
  // remote split's unseal, a separator naming a meganode here), so that no server builds on what a crash here could
  // undo.
  virtual Status Sync() { return Status::OK(); }
};

}  // namespace cell::btree
