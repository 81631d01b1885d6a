// A directory of one test process's own files (servers' sockets, key files, scripts), made on first use in the test's
// temporary directory and removed with what it holds when the process exits, so that test runs leave nothing behind.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace cell::testing {

inline const std::string& ProcessDir() {
  struct Dir {
    std::string path = fmt::format("{}/cell-{}", ::testing::TempDir(), getpid());
    Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);  // a dead process's of the same pid
      mkdir(path.c_str(), 0700);
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

}  // namespace cell::testing
