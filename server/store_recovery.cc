// A StoreService's write-ahead log: opening it with the tree (a new log on a first start, or the regions recovered
// from a log on a restart or a takeover), the MANIFEST that keeps a log's regions in one shape, and the checkpoints
// taken in the background so that a restart need not replay the whole log.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "common/diagnostics.h"
#include "logging/checkpoint.h"
#include "logging/env.h"
#include "server/store_files.h"
#include "server/store_service.h"

namespace cell::server {

namespace {
// What the MANIFEST of regions of this shape holds.
disk::Manifest ManifestOf(const StoreConfig& c, uint32_t node, uint32_t extent, bool root) {
  disk::Manifest manifest;
  manifest.set_node_region(node);
  manifest.set_extent_region(extent);
  manifest.set_meganode_bytes(c.meganode_bytes);
  manifest.set_meganodes(c.meganodes);
  manifest.set_extent_region_bytes(c.extent_region_bytes);
  manifest.set_root(root);
  return manifest;
}
}  // namespace

Status StoreService::OpenLogged(const StoreConfig& config, meganode::GlobalTreeOptions options, bool restart,
                                const std::string& recover_from, logging::RecoverMode mode) {
  CELL_RETURN_IF_ERROR(env_->CreateDirs(log_dir_));
  const disk::Manifest manifest = ManifestOf(config, node_region_, extent_region_, options.root);
  CELL_RETURN_IF_ERROR(restart ? CheckManifest(manifest) : BeginLogDir(manifest));
  const logging::RegionLogOptions log_options{
      .durability = config.durability, .async_flush_interval = config.async_flush_interval, .env = env_};
  logger_ = std::make_unique<RegionLogger>(nullptr, std::vector<uint32_t>{node_region_, extent_region_});
  options.write_sink = logger_.get();
  const auto start = std::chrono::steady_clock::now();
  if (restart) {
    options.restore = [&](meganode::Region& nodes, meganode::Region& extents) -> Status {
      return RecoverRegions(nodes, extents, recover_from, mode, log_options);
    };
  } else {
    CELL_ASSIGN_OR_RETURN(log_, logging::RegionLog::Open(log_dir_, 1, log_options));
    logger_->set_log(log_.get());
  }
  auto store = meganode::GlobalTree::Open(options);
  if (!store.ok()) {
    return Status::FromCode(store.status().code(),
                            fmt::format("{} the store's regions ({} meganodes of {} B, {} B of extents): {}",
                                        restart ? "recovering" : "creating", config.meganodes, config.meganode_bytes,
                                        config.extent_region_bytes, store.status().message()));
  }
  store_ = std::move(*store);
  // The first meganode, or recovery's repairs, are durable before anything is served.
  CELL_RETURN_IF_ERROR(log_->Flush());
  if (restart) {
    recovery_.tree = store_->recovery();
    recovery_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    LogRecovery();
  }
  return Status::OK();
}

Status StoreService::CheckManifest(const disk::Manifest& expected) const {
  const std::string path = ManifestPath(log_dir_);
  auto found = logging::ReadFileToString(env_, path);
  if (!found.ok()) {
    return Status::FromCode(found.status().code(), fmt::format("restarting with regions {} and {}: {}", node_region_,
                                                               extent_region_, found.status().message()));
  }
  CELL_ASSIGN_OR_RETURN(const disk::Manifest manifest, ParseManifest(*found, path));
  if (!SameShape(manifest, expected)) {
    return Status::FailedPrecondition(
        fmt::format("{} describes regions of another shape than this server's options (--meganode-size, --meganodes, "
                    "--region-size must stay as they were): it holds\n{}but the options give\n{}",
                    path, *found, FormatManifest(expected)));
  }
  return Status::OK();
}

Status StoreService::BeginLogDir(const disk::Manifest& manifest) const {
  if (env_->FileExists(log_dir_)) {
    CELL_ASSIGN_OR_RETURN(const std::vector<uint64_t> files, logging::RegionLog::Files(log_dir_, env_));
    if (!files.empty()) {
      return Status::FailedPrecondition(fmt::format(
          "{} already holds a log, but region {} is new to this server: it is left by a first start that did not "
          "finish, or by another cluster; remove it if so",
          log_dir_, node_region_));
    }
  }
  CELL_RETURN_IF_ERROR(env_->CreateDirs(log_dir_));
  return logging::WriteFileAtomically(env_, ManifestPath(log_dir_), FormatManifest(manifest));
}

Status StoreService::RecoverRegions(meganode::Region& nodes, meganode::Region& extents, const std::string& recover_from,
                                    logging::RecoverMode mode, const logging::RegionLogOptions& log_options) {
  const RegionMemory n{nodes.id(), nodes.Resolve(0, nodes.size()), nodes.size()};
  const RegionMemory e{extents.id(), extents.Resolve(0, extents.size()), extents.size()};
  std::map<uint64_t, std::string> splits;  // begun and not (yet) ended
  auto r = logging::Recover(
      recover_from, TreeCheckpointRegions(nodes, extents),
      [&](uint64_t, const logging::LogRecord& record) {
        if (record.kind == logging::LogRecord::Kind::kSplitBegin) {
          splits[record.split] = record.info;
        } else if (record.kind == logging::LogRecord::Kind::kSplitEnd) {
          splits.erase(record.split);
        }
        return ApplyLogRecord(record, n, e);
      },
      env_, mode);
  if (!r.ok()) {
    return Status::FromCode(r.status().code(), fmt::format("recovering regions {} and {} from {}: {}", node_region_,
                                                           extent_region_, recover_from, r.status().message()));
  }
  recovery_.recovered = true;
  recovery_.checkpoint_lsn = r->checkpoint_lsn;
  recovery_.records_replayed = r->replay.records;
  recovery_.damage = r->replay.damage;
  recovery_.unfinished_splits = splits.size();
  for (const auto& [id, info] : splits) diag::Info("recovery: a split the crash interrupted: {}", info);
  CELL_ASSIGN_OR_RETURN(log_, logging::RegionLog::Open(log_dir_, r->next_lsn(), log_options));
  logger_->set_log(log_.get());
  return Status::OK();
}

void StoreService::LogRecovery() const {
  const auto& t = recovery_.tree;
  diag::Info(
      "server {}: recovered regions {} and {} in {:.2f} s: checkpoint at lsn {}, {} log records replayed{}; "
      "{} meganodes, {} records ({} bytes); repaired: {} unfinished splits ({} right halves kept, {} orphans "
      "freed, {} nodes cut); {} sealed meganodes await their splitting server",
      server_id_, node_region_, extent_region_, recovery_.seconds, recovery_.checkpoint_lsn, recovery_.records_replayed,
      recovery_.damage.empty() ? "" : "; the log ended early: " + recovery_.damage, t.meganodes, t.records,
      t.record_bytes, recovery_.unfinished_splits, t.pending_kept, t.orphans_freed, t.nodes_cut, t.sealed);
}

void StoreService::StartCheckpointer(const StoreConfig& config) {
  TaskScheduler* scheduler = config.scheduler;
  if (scheduler == nullptr) {
    own_scheduler_ = std::make_unique<TaskScheduler>(TaskScheduler::AtStop::kDrop);
    scheduler = own_scheduler_.get();
  }
  checkpoint_every_ = config.checkpoint_log_bytes;
  checkpoint_due_ = recovery_.records_replayed > 0;  // the next restart need not replay the same records again
  checkpointer_ = std::make_unique<TaskScheduler::Lane>(*scheduler);
  checkpointer_->PostAfter(checkpoint_due_ ? std::chrono::seconds(0) : std::chrono::seconds(1),
                           [this] { Checkpoint(); });
}

void StoreService::Checkpoint() {
  const auto next = [this](std::chrono::seconds after) { checkpointer_->PostAfter(after, [this] { Checkpoint(); }); };
  if (!checkpoint_due_ &&
      log_->appended_bytes() - checkpoint_at_last_ < std::max(checkpoint_every_, checkpoint_held_)) {
    return next(std::chrono::seconds(1));
  }
  checkpoint_due_ = false;
  if (lost_.load(std::memory_order_acquire)) return;  // another server's regions now: their directory too
  const auto start = std::chrono::steady_clock::now();
  const uint64_t bytes = log_->appended_bytes();
  const uint64_t held = store_->node_bytes_used() + store_->extent_bytes_used();
  auto lsn = logging::TakeCheckpoint(log_dir_, log_.get(),
                                     TreeCheckpointRegions(store_->node_region(), store_->extent_region()), env_);
  if (lsn.ok()) {
    checkpoint_at_last_ = bytes;
    checkpoint_held_ = held;
    checkpoint_failures_ = 0;
    diag::Info("server {}: checkpoint at lsn {} in {:.2f} s", server_id_, *lsn,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return next(std::chrono::seconds(1));
  }
  // Backing off (1 s, 2 s, ... 5 min): a full disk or a failed log is not cured by copying the regions again.
  const auto wait = std::chrono::seconds(std::min(300, 1 << std::min(checkpoint_failures_, 9)));
  ++checkpoint_failures_;
  diag::Warning("server {}: checkpoint failed (the log is kept; trying again in {} s): {}", server_id_, wait.count(),
                lsn.status().ToString());
  next(wait);
}

}  // namespace cell::server
