// The records stored in extents, and how a reader proves it got the right one.
//
// A value record (what a leaf entry points to):
//   word 0     bits 0-31 value length | 32-39 key length | 40-63 magic 0xCE11D2
//   word 1     version: the key's version, which grows with every write of the key (GlobalTree assigns it under the
//              leaf's lock, from a clock that only moves forward; transactions validate what they read by it)
//   bytes 16.. key bytes, then value bytes; the record is padded with zeros to whole words.
// A lock record (what a *locked* leaf entry points to while a transaction commits the key; meganode/txn_lock.h):
//   the same layout with magic 0xCE11D3, word 1 zero, and the lock's payload in place of the value.
// Records written before versions existed (magic 0xCE11D0, no word 1, bytes 8.. key then value) are still read, as
// version 0.
//
// The record's length and its XXH3-64 checksum are kept in the leaf entry that points to it. The checksum covers the
// version, so it changes with every write of the key: comparing checksums is comparing versions (transactions
// validate their reads this way, from the leaf alone). A reader that copies the record (by a one-sided read)
// recomputes the checksum over `length` bytes and compares: a record that was freed and reused, or torn while being
// written, does not match, and the reader re-reads the leaf. An in-place (server) reader instead re-checks the leaf's
// version after its copy and uses the checksum only if the version moved (TreeReader::ReadRecord). The key is checked
// too, so a match also proves the record belongs to the key asked for.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "btree/node_format.h"

namespace cell::btree {

inline constexpr uint64_t kRecordMagicV1 = 0xCE11D0;  // no version word (read only)
inline constexpr uint64_t kRecordMagic = 0xCE11D2;
inline constexpr uint64_t kLockRecordMagic = 0xCE11D3;
inline constexpr size_t kRecordHeaderBytes = 16;
inline constexpr size_t kRecordHeaderBytesV1 = 8;
// A value record, or a lock record (which holds the value before and after its transaction, and the transaction's
// keys: meganode/txn_lock.h bounds it).
inline constexpr size_t kMaxRecordBytes = kRecordHeaderBytes + kMaxKeySize + kMaxValueSize;
inline constexpr size_t kMaxLockRecordBytes = size_t{8} << 20;

inline size_t RecordLength(size_t key_size, size_t value_size) { return kRecordHeaderBytes + key_size + value_size; }

// Writes the value record for (key, value, version) into `words` (resized to whole words); returns its checksum.
uint64_t EncodeRecord(std::string_view key, std::string_view value, uint64_t version, std::vector<uint64_t>* words);
// EncodeRecord without the checksum, for a record whose version (and so its checksum) SetRecordVersion sets later, as
// a writer does under the leaf's lock: one checksum per write instead of two.
void LayOutRecord(std::string_view key, std::string_view value, std::vector<uint64_t>* words);
// Sets the version of a record EncodeRecord or LayOutRecord wrote (of `length` bytes); returns its new checksum.
uint64_t SetRecordVersion(std::vector<uint64_t>* words, size_t length, uint64_t version);
// Writes the lock record for `key` with `payload` into `words`; returns its checksum.
uint64_t EncodeLockRecord(std::string_view key, std::string_view payload, std::vector<uint64_t>* words);

// What a record says: a value record's version and value, or a lock record's payload (in `value`).
struct RecordFields {
  uint64_t version = 0;
  std::string_view value;  // views the record's words
};

// Checks a copied record against the leaf entry that pointed to it (a lock record if entry.locked); on success fills
// *out. False means the record is not (or no longer) the one the entry describes.
bool CheckRecord(const uint64_t* words, const LeafValue& entry, std::string_view key, RecordFields* out);
// CheckRecord without the checksum: header, length and key only. Proves nothing about tearing or reuse by itself;
// only for a reader that has proven by other means that it copied the record the entry describes (see
// TreeReader::ReadRecord), or for a writer holding the leaf's lock.
bool CheckRecordFields(const uint64_t* words, const LeafValue& entry, std::string_view key, RecordFields* out);

// Where a record read in place keeps its value: [value_at, value_at + value_size) bytes from its start.
struct RecordInPlace {
  uint64_t version = 0;
  size_t value_at = 0;
  size_t value_size = 0;
};
// CheckRecordFields on the record where it lies, in shared memory that may change meanwhile (word loads only), for a
// reader that copies the value out itself and then proves, as TreeReader::ReadRecord does, that it read the record
// the entry describes. `shared` must hold entry.length bytes.
bool CheckRecordInPlace(const uint64_t* shared, const LeafValue& entry, std::string_view key, RecordInPlace* out);

}  // namespace cell::btree
