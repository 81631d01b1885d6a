// Appends records to a log file in the format of log_format.h. Not thread-safe: the region log serialises writers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cell/status.h"
#include "logging/env.h"
#include "logging/log_format.h"

namespace cell::logging::log {

class Writer {
 public:
  // Appends to `file`, which already holds `file_size` bytes of log (0: a new file). The file is not owned.
  explicit Writer(WritableFile* file, uint64_t file_size = 0);

  // Appends one record (not yet durable: see WritableFile::Sync). An error leaves the file's tail undefined: the
  // reader stops there, so the caller must treat the log as failed (no later record may be acknowledged).
  Status AddRecord(std::string_view record);

  uint64_t size() const { return size_; }  // bytes of log in the file

 private:
  Status AddFragment(RecordType type, std::string_view payload);

  WritableFile* const file_;
  uint64_t size_;
  size_t block_offset_;   // where the next fragment starts, in its block
  std::string fragment_;  // the fragment being appended: its header and payload
};

}  // namespace cell::logging::log
