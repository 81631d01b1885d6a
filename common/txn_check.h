// The one rule by which a transaction's scanned range is validated, at the client (client/transaction.cc) and at a
// server committing a transaction whose keys are all its own (meganode/transactions.cc): the range holds now exactly
// the keys the scan saw, with the same checksums (a record's checksum changes with every write of its key), none of
// them locked, leaving out the keys the transaction writes itself (those are checked as they are locked).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace cell {

struct RangeConflict {
  std::string key;
  const char* why;
};

// `now`: the pairs in the range now (each with .key, .checksum and .locked), in key order; `own(key)`: true for a key
// the transaction writes. Nothing if the range is unchanged.
template <typename Pairs, typename Own>
std::optional<RangeConflict> RangeChanged(const std::map<std::string, uint64_t>& seen, const Pairs& now,
                                          const Own& own) {
  size_t matched = 0;
  for (const auto& kv : now) {
    if (own(kv.key)) continue;
    const auto it = seen.find(std::string(kv.key));
    if (it == seen.end())
      return RangeConflict{std::string(kv.key), "was inserted into a range the transaction scanned"};
    if (kv.locked) return RangeConflict{std::string(kv.key), "is locked by another transaction"};
    if (kv.checksum != it->second) return RangeConflict{std::string(kv.key), "was written since it was scanned"};
    ++matched;
  }
  size_t expected = 0;
  for (const auto& [key, checksum] : seen) expected += own(key) ? 0 : 1;
  if (matched == expected) return std::nullopt;
  for (const auto& [key, checksum] : seen) {
    if (own(key)) continue;
    bool still = false;
    for (const auto& kv : now) still = still || kv.key == key;
    if (!still) return RangeConflict{key, "was deleted from a range the transaction scanned"};
  }
  return RangeConflict{seen.begin()->first, "changed since it was scanned"};
}

}  // namespace cell
