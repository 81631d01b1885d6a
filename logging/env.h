// Env: the file operations the write-ahead logs and checkpoints need, behind an interface, so that tests can fail a
// write or an fsync and simulate a power loss (bytes not yet synced are lost) without special builds: LevelDB's Env
// seam. Env::Posix() is the real one. Errors: a missing file is NotFound, a full disk ResourceExhausted, any other
// failure of the operating system Unavailable (the storage cannot take or give the bytes now); each message names
// the path and the system's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cell/status.h"

namespace cell::logging {

// A file written from its end.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::string_view data) = 0;
  // Makes everything appended so far durable (fdatasync): it survives a power loss once this returns OK.
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
};

// A file read from its start.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Up to n bytes into scratch; fewer only at the end of the file (0: at the end).
  virtual StatusOr<size_t> Read(size_t n, char* scratch) = 0;
};

class Env {
 public:
  virtual ~Env() = default;
  // Creates the file, or empties it if it exists.
  virtual StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // Opens the file to append to it, creating it if it does not exist.
  virtual StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) = 0;
  virtual StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) = 0;
  // The names in a directory, without "." and "..", in no particular order.
  virtual StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) = 0;
  virtual StatusOr<uint64_t> FileSize(const std::string& path) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  // Creates a directory and its missing parents; OK if it exists.
  virtual Status CreateDirs(const std::string& dir) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  // Replaces `to` atomically if it exists (rename(2)); durable once the directory is synced.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Cuts a file to `size` bytes (dropping a torn tail before appending after it).
  virtual Status Truncate(const std::string& path, uint64_t size) = 0;
  // Makes the directory's entries (files created, renamed, removed in it) durable.
  virtual Status SyncDir(const std::string& dir) = 0;

  // The operating system's files. Never deleted.
  static Env* Posix();
};

// Reads a whole file.
StatusOr<std::string> ReadFileToString(Env* env, const std::string& path);
// Writes a whole file durably and atomically: to path + ".tmp", synced, renamed over path, directory synced. After a
// crash, path holds either the old contents or the new, never a mix.
Status WriteFileAtomically(Env* env, const std::string& path, std::string_view contents);

}  // namespace cell::logging
