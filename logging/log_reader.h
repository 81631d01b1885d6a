// Reads the records of a log file (log_format.h) in order, and stops at the first damage: it never skips over
// damage to records after it, since replaying a later write without an earlier one could rebuild a state that
// never was. What it stopped at is told apart:
//   kClean     the file ends after a whole record (or is empty);
//   kTornTail  the file ends inside a record, or in zeros to its end: what a crash leaves of writes that were not
//              synced, so none of it was acknowledged under sync durability;
//   kCorrupt   bytes that fail their checksum or make no sense, with more log after them: lost data, reported.
#pragma once

#include <cstdint>
#include <string>

#include "cell/status.h"
#include "logging/env.h"
#include "logging/log_format.h"

namespace cell::logging::log {

class Reader {
 public:
  enum class End { kNotYet, kClean, kTornTail, kCorrupt };

  // Reads `file` from its start; not owned.
  explicit Reader(SequentialFile* file);

  // The next record into *record. false at the end of the log or at the first damage: end() and status() say which.
  bool ReadRecord(std::string* record);

  End end() const { return end_; }
  // OK while reading and at a clean end; for a torn tail or corruption, a Corruption whose message says where and
  // what (or the file's own read error).
  const Status& status() const { return status_; }
  // The offset just past the last whole record read: the log's valid length, where appending may resume.
  uint64_t valid_length() const { return valid_length_; }

 private:
  enum class Fragment { kOk, kEnd };
  // The next fragment, or kEnd with end_ and status_ set.
  Fragment ReadFragment(RecordType* type, std::string_view* payload);
  bool FillBlock();               // reads the next block; false at the end of the file or on a read error (status_ set)
  bool RestIsZeros(size_t from);  // whether the file holds only zeros from buffer offset `from` to its end
  bool Stop(End end, std::string message);

  SequentialFile* const file_;
  std::string block_;         // the current block's bytes
  size_t pos_ = 0;            // the next fragment's offset in block_
  uint64_t block_start_ = 0;  // block_'s offset in the file
  bool eof_ = false;          // block_ is the file's last (short) block
  End end_ = End::kNotYet;
  Status status_;
  uint64_t valid_length_ = 0;
};

}  // namespace cell::logging::log
