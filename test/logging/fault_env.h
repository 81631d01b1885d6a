// FaultEnv: an Env over the real files that remembers how much of each file it wrote was synced, and which directory
// entries it changed since their directory was last synced, so a test can simulate a power loss (DropUnsyncedData:
// every file it wrote is cut back to its last synced length, and every create, rename and removal not followed by a
// sync of its directory is undone, as LevelDB's fault-injection env does for new files), and can make the next writes
// or syncs fail. Test-only.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "logging/env.h"

namespace cell::logging {

class FaultEnv final : public Env {
 public:
  explicit FaultEnv(Env* base = Env::Posix()) : base_(base) {}

  // From now on, appends (or syncs) fail with Unavailable until this is called with false.
  void FailWrites(bool fail) {
    std::lock_guard lock(mu_);
    fail_writes_ = fail;
  }
  void FailSyncs(bool fail) {
    std::lock_guard lock(mu_);
    fail_syncs_ = fail;
  }
  // Called at the start of every sync, outside the Env's lock (a test can hold a sync there).
  void SetSyncHook(std::function<void()> hook) {
    std::lock_guard lock(mu_);
    sync_hook_ = std::move(hook);
  }
  // A power loss that the process survives to see: every file loses what was not synced (DropUnsyncedData), and
  // from now on nothing reaches the disk (every write, sync, rename, removal or new file fails), as if the machine
  // were off while the process winds down.
  Status PowerLoss() {
    {
      std::lock_guard lock(mu_);
      dead_ = true;
      fail_writes_ = fail_syncs_ = true;
    }
    return DropUnsyncedData();
  }
  // A power loss: every file written through this Env loses what was appended after its last sync, and the directory
  // entries changed since their directory's last sync are as they were then (latest change undone first).
  Status DropUnsyncedData() {
    std::lock_guard lock(mu_);
    for (auto& [path, file] : files_) {
      if (file.size != file.synced) CELL_RETURN_IF_ERROR(base_->Truncate(path, file.synced));
      file.size = file.synced;
    }
    for (auto op = entries_.rbegin(); op != entries_.rend(); ++op) CELL_RETURN_IF_ERROR(Undo(*op));
    entries_.clear();
    return Status::OK();
  }

  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    CELL_RETURN_IF_ERROR(Alive(path));
    const bool created = !base_->FileExists(path);
    CELL_ASSIGN_OR_RETURN(auto file, base_->NewWritableFile(path));
    std::lock_guard lock(mu_);
    files_[path] = {};
    if (created) entries_.push_back(EntryOp{.kind = EntryOp::kCreate, .path = path});
    return std::unique_ptr<WritableFile>(new File(this, path, std::move(file)));
  }
  StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    CELL_RETURN_IF_ERROR(Alive(path));
    const bool created = !base_->FileExists(path);
    const uint64_t size = created ? 0 : base_->FileSize(path).value();
    CELL_ASSIGN_OR_RETURN(auto file, base_->NewAppendableFile(path));
    std::lock_guard lock(mu_);
    if (created) entries_.push_back(EntryOp{.kind = EntryOp::kCreate, .path = path});
    auto [it, fresh] = files_.try_emplace(path, Tracked{size, size});
    if (fresh) it->second = {size, size};  // what was there before this Env saw it counts as durable
    return std::unique_ptr<WritableFile>(new File(this, path, std::move(file)));
  }
  StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    return base_->NewSequentialFile(path);
  }
  StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override { return base_->GetChildren(dir); }
  StatusOr<uint64_t> FileSize(const std::string& path) override { return base_->FileSize(path); }
  bool FileExists(const std::string& path) override { return base_->FileExists(path); }
  Status CreateDirs(const std::string& dir) override { return base_->CreateDirs(dir); }
  Status RemoveFile(const std::string& path) override {
    CELL_RETURN_IF_ERROR(Alive(path));
    std::lock_guard lock(mu_);
    // What a power loss would bring back: the file as durable (its synced bytes, if this Env wrote it).
    EntryOp op{.kind = EntryOp::kRemove, .path = path};
    CELL_ASSIGN_OR_RETURN(op.contents, DurableContents(path));
    CELL_RETURN_IF_ERROR(base_->RemoveFile(path));
    files_.erase(path);
    entries_.push_back(std::move(op));
    return Status::OK();
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    CELL_RETURN_IF_ERROR(Alive(from));
    std::lock_guard lock(mu_);
    EntryOp op{.kind = EntryOp::kRename, .path = to, .from = from};
    op.replaced = base_->FileExists(to);
    if (op.replaced) {
      CELL_ASSIGN_OR_RETURN(op.contents, DurableContents(to));
    }
    CELL_RETURN_IF_ERROR(base_->RenameFile(from, to));
    files_.erase(to);
    if (auto it = files_.find(from); it != files_.end()) {
      files_[to] = it->second;
      files_.erase(it);
    }
    entries_.push_back(std::move(op));
    return Status::OK();
  }
  Status Truncate(const std::string& path, uint64_t size) override {
    CELL_RETURN_IF_ERROR(Alive(path));
    std::lock_guard lock(mu_);
    CELL_RETURN_IF_ERROR(base_->Truncate(path, size));
    if (auto it = files_.find(path); it != files_.end()) it->second = {size, std::min(size, it->second.synced)};
    return Status::OK();
  }
  Status SyncDir(const std::string& dir) override {
    CELL_RETURN_IF_ERROR(Alive(dir));
    CELL_RETURN_IF_ERROR(base_->SyncDir(dir));
    // The directory's entries are durable now: their changes can no longer be lost. (A rename between two
    // directories needs both synced; tests rename within one.)
    std::lock_guard lock(mu_);
    const std::string d = Normal(dir);
    std::erase_if(entries_, [&](const EntryOp& op) { return DirOf(op.path) == d; });
    return Status::OK();
  }

 private:
  Status Alive(const std::string& path) {
    std::lock_guard lock(mu_);
    return dead_ ? Status::Unavailable(path + ": the power is off") : Status::OK();
  }
  struct Tracked {
    uint64_t size = 0, synced = 0;
  };
  // A change to a directory entry since its directory's last sync.
  struct EntryOp {
    enum Kind { kCreate, kRemove, kRename } kind = kCreate;
    std::string path{};      // created, removed, or renamed to
    std::string from{};      // kRename: the old name
    bool replaced = false;   // kRename: `path` existed before, holding `contents`
    std::string contents{};  // kRemove, and kRename that replaced: what the entry held (durably)
  };
  static std::string Normal(const std::string& path) { return std::filesystem::path(path).lexically_normal().string(); }
  static std::string DirOf(const std::string& path) {
    return std::filesystem::path(path).lexically_normal().parent_path().string();
  }
  // The bytes of `path` a power loss would keep (under mu_).
  StatusOr<std::string> DurableContents(const std::string& path) {
    CELL_ASSIGN_OR_RETURN(std::string contents, ReadFileToString(base_, path));
    if (auto it = files_.find(path); it != files_.end() && it->second.synced < contents.size()) {
      contents.resize(it->second.synced);
    }
    return contents;
  }
  // Writes `contents` at `path` through the base Env (undoing a removal or a replacing rename).
  Status Restore(const std::string& path, const std::string& contents) {
    CELL_ASSIGN_OR_RETURN(auto file, base_->NewWritableFile(path));
    CELL_RETURN_IF_ERROR(file->Append(contents));
    CELL_RETURN_IF_ERROR(file->Sync());
    files_[path] = {contents.size(), contents.size()};
    return file->Close();
  }
  Status Undo(const EntryOp& op) {
    switch (op.kind) {
      case EntryOp::kCreate:
        files_.erase(op.path);
        return base_->FileExists(op.path) ? base_->RemoveFile(op.path) : Status::OK();
      case EntryOp::kRemove:
        return Restore(op.path, op.contents);
      case EntryOp::kRename:
        CELL_RETURN_IF_ERROR(base_->RenameFile(op.path, op.from));
        if (auto it = files_.find(op.path); it != files_.end()) {
          files_[op.from] = it->second;
          files_.erase(it);
        }
        return op.replaced ? Restore(op.path, op.contents) : Status::OK();
    }
    return Status::OK();
  }
  class File final : public WritableFile {
   public:
    File(FaultEnv* env, std::string path, std::unique_ptr<WritableFile> base)
        : env_(env), path_(std::move(path)), base_(std::move(base)) {}
    Status Append(std::string_view data) override {
      std::lock_guard lock(env_->mu_);
      if (env_->fail_writes_) return Status::Unavailable("writing " + path_ + ": injected failure");
      CELL_RETURN_IF_ERROR(base_->Append(data));
      env_->files_[path_].size += data.size();
      return Status::OK();
    }
    Status Sync() override {
      std::function<void()> hook;
      {
        std::lock_guard lock(env_->mu_);
        hook = env_->sync_hook_;
      }
      if (hook) hook();
      std::lock_guard lock(env_->mu_);
      if (env_->fail_syncs_) return Status::Unavailable("syncing " + path_ + ": injected failure");
      CELL_RETURN_IF_ERROR(base_->Sync());
      Tracked& t = env_->files_[path_];
      t.synced = t.size;
      return Status::OK();
    }
    Status Close() override { return base_->Close(); }  // a close writes nothing (appends go straight to the file)

   private:
    FaultEnv* const env_;
    const std::string path_;
    std::unique_ptr<WritableFile> base_;
  };

  Env* const base_;
  std::mutex mu_;
  bool fail_writes_ = false, fail_syncs_ = false, dead_ = false;
  std::function<void()> sync_hook_;
  std::map<std::string, Tracked> files_;
  std::vector<EntryOp> entries_;  // in the order they were made
};

}  // namespace cell::logging
