// Extent record encoding and checking (layout in record_format.h).
#include "btree/record_format.h"

#include <cstring>

#include "btree/checksum.h"

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

bool CheckRecordFields(const uint64_t* words, const LeafValue& entry, std::string_view key, RecordFields* out) {
  if (entry.length < kRecordHeaderBytesV1 || entry.length > kMaxLockRecordBytes) return false;
  const char* bytes = reinterpret_cast<const char*>(words);
  const uint64_t header = words[0];
  const uint64_t magic = header >> 40;
  const size_t body_len = static_cast<uint32_t>(header);
  const size_t key_len = (header >> 32) & 0xff;
  size_t header_bytes = kRecordHeaderBytes;
  if (entry.locked) {
    if (magic != kLockRecordMagic) return false;
  } else if (magic == kRecordMagicV1) {
    header_bytes = kRecordHeaderBytesV1;
  } else if (magic != kRecordMagic || body_len > kMaxValueSize) {
    return false;
  }
  if (header_bytes + key_len + body_len != entry.length || entry.length < header_bytes) return false;
  if (std::string_view(bytes + header_bytes, key_len) != key) return false;
  out->version = header_bytes == kRecordHeaderBytes ? words[1] : 0;
  out->value = std::string_view(bytes + header_bytes + key_len, body_len);
  return true;
}

}  // namespace cell::btree
