// FaultEnv: an Env over the real files that remembers how much of each file it wrote was synced, so a test can
// simulate a power loss (DropUnsyncedData: every file it wrote is cut back to its last synced length, as LevelDB's
// fault-injection test does), and can make the next writes or syncs fail. Test-only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

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
  // A power loss: every file written through this Env loses what was appended after its last sync.
  Status DropUnsyncedData() {
    std::lock_guard lock(mu_);
    for (auto& [path, file] : files_) {
      if (file.size != file.synced) CELL_RETURN_IF_ERROR(base_->Truncate(path, file.synced));
      file.size = file.synced;
    }
    return Status::OK();
  }

  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    CELL_RETURN_IF_ERROR(Alive(path));
    CELL_ASSIGN_OR_RETURN(auto file, base_->NewWritableFile(path));
    std::lock_guard lock(mu_);
    files_[path] = {};
    return std::unique_ptr<WritableFile>(new File(this, path, std::move(file)));
  }
  StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    CELL_RETURN_IF_ERROR(Alive(path));
    const uint64_t size = base_->FileExists(path) ? base_->FileSize(path).value() : 0;
    CELL_ASSIGN_OR_RETURN(auto file, base_->NewAppendableFile(path));
    std::lock_guard lock(mu_);
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
    files_.erase(path);
    return base_->RemoveFile(path);
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    CELL_RETURN_IF_ERROR(Alive(from));
    std::lock_guard lock(mu_);
    CELL_RETURN_IF_ERROR(base_->RenameFile(from, to));
    if (auto it = files_.find(from); it != files_.end()) {
      files_[to] = it->second;
      files_.erase(it);
    }
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
    return base_->SyncDir(dir);
  }

 private:
  Status Alive(const std::string& path) {
    std::lock_guard lock(mu_);
    return dead_ ? Status::Unavailable(path + ": the power is off") : Status::OK();
  }
  struct Tracked {
    uint64_t size = 0, synced = 0;
  };
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
};

}  // namespace cell::logging
