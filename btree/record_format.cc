// Extent record encoding and checking (layout in record_format.h).
#include "btree/record_format.h"

#include <cstring>

#include "btree/checksum.h"
#include "common/shared_words.h"

namespace cell::btree {

namespace {
// Lays out a record; returns its length in bytes.
size_t LayOut(uint64_t magic, std::string_view key, std::string_view body, uint64_t word1,
              std::vector<uint64_t>* words) {
  const size_t length = kRecordHeaderBytes + key.size() + body.size();
  words->assign(WordsFor(length), 0);
  (*words)[0] = uint64_t(body.size()) | (uint64_t(key.size()) << 32) | (magic << 40);
  (*words)[1] = word1;
  char* bytes = reinterpret_cast<char*>(words->data());
  std::memcpy(bytes + kRecordHeaderBytes, key.data(), key.size());
  if (!body.empty()) std::memcpy(bytes + kRecordHeaderBytes + key.size(), body.data(), body.size());
  return length;
}

uint64_t Encode(uint64_t magic, std::string_view key, std::string_view body, uint64_t word1,
                std::vector<uint64_t>* words) {
  const size_t length = LayOut(magic, key, body, word1, words);
  return Checksum64(reinterpret_cast<const char*>(words->data()), length);
}
}  // namespace

uint64_t EncodeRecord(std::string_view key, std::string_view value, uint64_t version, std::vector<uint64_t>* words) {
  return Encode(kRecordMagic, key, value, version, words);
}

void LayOutRecord(std::string_view key, std::string_view value, std::vector<uint64_t>* words) {
  LayOut(kRecordMagic, key, value, 0, words);
}

uint64_t SetRecordVersion(std::vector<uint64_t>* words, size_t length, uint64_t version) {
  (*words)[1] = version;
  return Checksum64(reinterpret_cast<const char*>(words->data()), length);
}

uint64_t EncodeLockRecord(std::string_view key, std::string_view payload, std::vector<uint64_t>* words) {
  return Encode(kLockRecordMagic, key, payload, 0, words);
}

bool CheckRecord(const uint64_t* words, const LeafValue& entry, std::string_view key, RecordFields* out) {
  if (entry.length < kRecordHeaderBytesV1 || entry.length > kMaxLockRecordBytes) return false;
  const char* bytes = reinterpret_cast<const char*>(words);
  if (Checksum64(bytes, entry.length) != entry.checksum) return false;
  return CheckRecordFields(words, entry, key, out);
}

namespace {
// The header word's layout checked against the entry: *header_bytes, *key_len and *value_size describe the record.
bool CheckHeader(uint64_t header, const LeafValue& entry, size_t* header_bytes, size_t* key_len, size_t* value_size) {
  if (entry.length < kRecordHeaderBytesV1 || entry.length > kMaxLockRecordBytes) return false;
  const uint64_t magic = header >> 40;
  *value_size = static_cast<uint32_t>(header);
  *key_len = (header >> 32) & 0xff;
  *header_bytes = kRecordHeaderBytes;
  if (entry.locked) {
    if (magic != kLockRecordMagic) return false;
  } else if (magic == kRecordMagicV1) {
    *header_bytes = kRecordHeaderBytesV1;
  } else if (magic != kRecordMagic || *value_size > kMaxValueSize) {
    return false;
  }
  return *header_bytes + *key_len + *value_size == entry.length && entry.length >= *header_bytes;
}
}  // namespace

bool CheckRecordFields(const uint64_t* words, const LeafValue& entry, std::string_view key, RecordFields* out) {
  size_t header_bytes = 0, key_len = 0, value_size = 0;
  if (!CheckHeader(words[0], entry, &header_bytes, &key_len, &value_size)) return false;
  const char* bytes = reinterpret_cast<const char*>(words);
  if (std::string_view(bytes + header_bytes, key_len) != key) return false;
  out->version = header_bytes == kRecordHeaderBytes ? words[1] : 0;
  out->value = std::string_view(bytes + header_bytes + key_len, value_size);
  return true;
}

bool CheckRecordInPlace(const uint64_t* shared, const LeafValue& entry, std::string_view key, RecordInPlace* out) {
  size_t header_bytes = 0, key_len = 0, value_size = 0;
  if (!CheckHeader(LoadSharedWord(shared), entry, &header_bytes, &key_len, &value_size)) return false;
  if (key_len != key.size() || !SharedBytesEqual(shared + header_bytes / 8, key)) return false;  // (header: 8 or 16)
  out->version = header_bytes == kRecordHeaderBytes ? LoadSharedWord(shared + 1) : 0;
  out->value_at = header_bytes + key_len;
  out->value_size = value_size;
  return true;
}

}  // namespace cell::btree
