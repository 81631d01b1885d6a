// A fresh directory for the running test: under the system's temporary directory, named for the test and this
// process, emptied first. The test removes it when done.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>

namespace cell::logging {

inline std::string FreshTestDir(std::string_view prefix) {
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::replace(name.begin(), name.end(), '/', '_');  // parameterised tests' names hold a slash
  const std::string dir =
      std::filesystem::temp_directory_path() / (std::string(prefix) + "_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace cell::logging
