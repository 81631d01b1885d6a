// The key-value record stored in an extent, and how a reader proves it got the right one.
//
//   word 0     bits 0-31 value length | 32-39 key length | 40-63 magic 0xCE11D0
//   bytes 8..  key bytes, then value bytes; the record is padded with zeros to whole words.
//
// The record's length (8 + key + value bytes) and its XXH3-64 checksum are kept in the leaf entry that points to it.
// A reader that copies the record (by a one-sided read) recomputes the checksum over `length` bytes and compares: a
// record that was freed and reused, or torn while being written, does not match, and the reader re-reads the leaf.
// An in-place (server) reader instead re-checks the leaf's version after its copy and uses the checksum only if the
// version moved (TreeReader::ReadRecord). The key is checked too, so a match also proves the record belongs to the
// key asked for.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "btree/node_format.h"

namespace cell::btree {

inline constexpr uint64_t kRecordMagic = 0xCE11D0;
inline constexpr size_t kRecordHeaderBytes = 8;
inline constexpr size_t kMaxRecordBytes = kRecordHeaderBytes + kMaxKeySize + kMaxValueSize;

inline size_t RecordLength(size_t key_size, size_t value_size) { return kRecordHeaderBytes + key_size + value_size; }

// Writes the record for (key, value) into `words` (resized to whole words) and returns its checksum.
uint64_t EncodeRecord(std::string_view key, std::string_view value, std::vector<uint64_t>* words);

// Checks a copied record against the leaf entry that pointed to it; on success sets *value to view the value bytes
// inside `words`. False means the record is not (or no longer) the one the entry describes.
bool CheckRecord(const uint64_t* words, const LeafValue& entry, std::string_view key, std::string_view* value);
// CheckRecord without the checksum: header, length and key only. Proves nothing about tearing or reuse by itself;
// only for a reader that has proven by other means that it copied the record the entry describes (see
// TreeReader::ReadRecord).
bool CheckRecordFields(const uint64_t* words, const LeafValue& entry, std::string_view key, std::string_view* value);

}  // namespace cell::btree
