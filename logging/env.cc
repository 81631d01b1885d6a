// The POSIX Env, and the whole-file helpers (see env.h).
#include "logging/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cell::logging {
namespace {

Status ErrnoStatus(std::string_view what, const std::string& path, int err) {
  const std::string msg = fmt::format("{} {}: {}", what, path, std::strerror(err));
  if (err == ENOENT) return Status::NotFound(msg);
  if (err == ENOSPC || err == EDQUOT) return Status::ResourceExhausted(msg);
  return Status::Unavailable(msg);
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Append(std::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("writing", path_, errno);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return Status::OK();
  }
  Status Sync() override {
    if (::fdatasync(fd_) != 0) return ErrnoStatus("syncing", path_, errno);
    return Status::OK();
  }
  Status Close() override {
    const int fd = fd_;
    fd_ = -1;
    if (fd >= 0 && ::close(fd) != 0) return ErrnoStatus("closing", path_, errno);
    return Status::OK();
  }

 private:
  const std::string path_;
  int fd_;
};

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixSequentialFile() override { ::close(fd_); }
  StatusOr<size_t> Read(size_t n, char* scratch) override {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::read(fd_, scratch + got, n - got);
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("reading", path_, errno);
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  }

 private:
  const std::string path_;
  const int fd_;
};

class PosixEnv final : public Env {
 public:
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return Open(path, O_WRONLY | O_CREAT | O_TRUNC);
  }
  StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    return Open(path, O_WRONLY | O_CREAT | O_APPEND);
  }
  StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("opening", path, errno);
    return std::unique_ptr<SequentialFile>(new PosixSequentialFile(path, fd));
  }
  StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus("listing", dir, errno);
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    }
    ::closedir(d);
    return names;
  }
  StatusOr<uint64_t> FileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("sizing", path, errno);
    return static_cast<uint64_t>(st.st_size);
  }
  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }
  Status CreateDirs(const std::string& dir) override {
    for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
      const std::string prefix = dir.substr(0, slash);
      if (!prefix.empty()) {
        if (::mkdir(prefix.c_str(), 0755) == 0) {
          // The new directory's name survives a power loss once its parent is synced.
          const size_t up = prefix.rfind('/');
          CELL_RETURN_IF_ERROR(SyncDir(up == std::string::npos ? "." : up == 0 ? "/" : prefix.substr(0, up)));
        } else if (errno != EEXIST) {
          return ErrnoStatus("creating directory", prefix, errno);
        }
      }
      if (slash == std::string::npos) return Status::OK();
    }
  }
  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("removing", path, errno);
    return Status::OK();
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("renaming to " + to + ":", from, errno);
    return Status::OK();
  }
  Status Truncate(const std::string& path, uint64_t size) override {
    if (::truncate(path.c_str(), static_cast<off_t>(size)) != 0) return ErrnoStatus("truncating", path, errno);
    return Status::OK();
  }
  Status SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("opening directory", dir, errno);
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) return ErrnoStatus("syncing directory", dir, err);
    return Status::OK();
  }

 private:
  static StatusOr<std::unique_ptr<WritableFile>> Open(const std::string& path, int flags) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus("opening", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }
};

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Env* Env::Posix() {
  static PosixEnv* env = new PosixEnv;
  return env;
}

StatusOr<std::string> ReadFileToString(Env* env, const std::string& path) {
  CELL_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, env->NewSequentialFile(path));
  std::string out;
  char buffer[65536];
  for (;;) {
    CELL_ASSIGN_OR_RETURN(const size_t n, file->Read(sizeof(buffer), buffer));
    if (n == 0) return out;
    out.append(buffer, n);
  }
}

Status WriteFileAtomically(Env* env, const std::string& path, std::string_view contents) {
  const std::string tmp = path + ".tmp";
  CELL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(tmp));
  CELL_RETURN_IF_ERROR(file->Append(contents));
  CELL_RETURN_IF_ERROR(file->Sync());
  CELL_RETURN_IF_ERROR(file->Close());
  CELL_RETURN_IF_ERROR(env->RenameFile(tmp, path));
  return env->SyncDir(DirOf(path));
}

}  // namespace cell::logging
