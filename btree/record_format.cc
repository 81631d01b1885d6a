// Extent record encoding and checking (layout in record_format.h).
#include "btree/record_format.h"

#include <cstring>

#include "btree/checksum.h"

namespace cell::btree {

uint64_t EncodeRecord(std::string_view key, std::string_view value, std::vector<uint64_t>* words) {
  size_t length = RecordLength(key.size(), value.size());
  words->assign(WordsFor(length), 0);
  (*words)[0] = uint64_t(value.size()) | (uint64_t(key.size()) << 32) | (kRecordMagic << 40);
  char* bytes = reinterpret_cast<char*>(words->data());
  std::memcpy(bytes + kRecordHeaderBytes, key.data(), key.size());
  if (!value.empty()) std::memcpy(bytes + kRecordHeaderBytes + key.size(), value.data(), value.size());
  return Checksum64(bytes, length);
}

bool CheckRecord(const uint64_t* words, const LeafValue& entry, std::string_view key, std::string_view* value) {
  if (entry.length < kRecordHeaderBytes || entry.length > kMaxRecordBytes) return false;
  const char* bytes = reinterpret_cast<const char*>(words);
  if (Checksum64(bytes, entry.length) != entry.checksum) return false;
  return CheckRecordFields(words, entry, key, value);
}

bool CheckRecordFields(const uint64_t* words, const LeafValue& entry, std::string_view key, std::string_view* value) {
  if (entry.length < kRecordHeaderBytes || entry.length > kMaxRecordBytes) return false;
  const char* bytes = reinterpret_cast<const char*>(words);
  uint64_t header = words[0];
  size_t value_len = static_cast<uint32_t>(header);
  size_t key_len = (header >> 32) & 0xff;
  if ((header >> 40) != kRecordMagic || RecordLength(key_len, value_len) != entry.length) return false;
  if (std::string_view(bytes + kRecordHeaderBytes, key_len) != key) return false;
  *value = std::string_view(bytes + kRecordHeaderBytes + key_len, value_len);
  return true;
}

}  // namespace cell::btree
