// The lock a transaction holds on a key while it commits: what a locked leaf entry's lock record holds
// (btree/record_format.h), so that the lock, the values on both sides of it and the transaction's decision live in
// the regions, are logged like every other write, move with their entry in a meganode split and are recovered by a
// restart or a takeover.
//
// A transaction's first written key is its *primary*: its lock names every other key written (the *secondaries*),
// and its state is the transaction's decision. The decision is made by turning the primary's lock from prepared to
// committed; a secondary's lock names the primary, where whoever finds it (its server's resolver, after it expires)
// learns the outcome: the primary locked by the transaction and committed means committed; locked and prepared
// means undecided; not locked by it means aborted, because a committed primary is released only after every
// secondary has been applied durably (docs/DESIGN.md, "Transactions").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "btree/node_format.h"
#include "cell/status.h"
#include "common/global_ptr.h"

namespace cell::meganode {

enum class TxnState : uint8_t { kPrepared = 0, kCommitted = 1 };

struct TxnLock {
  uint64_t txid = 0;        // the transaction (random, nonzero)
  uint64_t expires_us = 0;  // wall clock: after it, the key's server resolves the lock itself
  TxnState state = TxnState::kPrepared;
  // The key's entry before the transaction (its record stays allocated while locked): put back as it was, same
  // version and checksum, if the transaction aborts; freed if it commits.
  bool old_present = false;
  btree::LeafValue old;
  // What the transaction writes: a put of new_value (into new_block, reserved when the lock was taken, so that
  // applying a decided commit never needs memory), or a delete.
  bool put = false;
  std::string new_value;
  GlobalPtr new_block;
  std::string primary;                   // the primary key (this key, for the primary itself)
  std::vector<std::string> secondaries;  // the primary only: every other key the transaction writes
  // Only while the lock moves to another server with its entry (a meganode split): the old record's contents, which
  // the receiving server writes into its own extents (then old and new_block name its blocks).
  bool old_inline = false;
  uint64_t old_version = 0;
  std::string old_value;
};

std::string EncodeTxnLock(const TxnLock& lock);
// Corruption if the bytes are not a lock (a lock record is checksummed: this means a bug or a format change).
Status DecodeTxnLock(std::string_view bytes, TxnLock* lock);

}  // namespace cell::meganode
