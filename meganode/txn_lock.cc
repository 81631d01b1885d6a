// The lock record's payload (txn_lock.h): format 1, little-endian fields and length-prefixed strings.
#include "meganode/txn_lock.h"

#include "common/little_endian.h"

namespace cell::meganode {

namespace {
constexpr uint8_t kFormat = 1;
constexpr uint8_t kOldPresent = 1, kPut = 2, kOldInline = 4;

void PutString(std::string* out, std::string_view s) {
  PutFixed32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}
bool ReadString(LittleEndianReader* r, std::string* s) {
  uint32_t n = 0;
  return r->ReadFixed32(&n) && r->ReadBytes(n, s);
}
}  // namespace

std::string EncodeTxnLock(const TxnLock& lock) {
  std::string out;
  out.push_back(static_cast<char>(kFormat));
  PutFixed64(&out, lock.txid);
  PutFixed64(&out, lock.expires_us);
  out.push_back(static_cast<char>(lock.state));
  out.push_back(static_cast<char>((lock.old_present ? kOldPresent : 0) | (lock.put ? kPut : 0) |
                                  (lock.old_inline ? kOldInline : 0)));
  PutFixed64(&out, lock.old.ptr.Pack());
  PutFixed32(&out, lock.old.length);
  PutFixed64(&out, lock.old.checksum);
  PutFixed64(&out, lock.new_block.Pack());
  PutString(&out, lock.new_value);
  PutString(&out, lock.primary);
  PutFixed32(&out, static_cast<uint32_t>(lock.secondaries.size()));
  for (const std::string& k : lock.secondaries) PutString(&out, k);
  if (lock.old_inline) {
    PutFixed64(&out, lock.old_version);
    PutString(&out, lock.old_value);
  }
  return out;
}

Status DecodeTxnLock(std::string_view bytes, TxnLock* lock) {
  LittleEndianReader r(bytes);
  uint8_t format = 0, state = 0, flags = 0;
  uint64_t old_ptr = 0, new_block = 0;
  uint32_t n = 0;
  bool ok = r.ReadU8(&format) && format == kFormat && r.ReadFixed64(&lock->txid) && r.ReadFixed64(&lock->expires_us) &&
            r.ReadU8(&state) && state <= 1 && r.ReadU8(&flags) && r.ReadFixed64(&old_ptr) &&
            r.ReadFixed32(&lock->old.length) && r.ReadFixed64(&lock->old.checksum) && r.ReadFixed64(&new_block) &&
            ReadString(&r, &lock->new_value) && ReadString(&r, &lock->primary) && r.ReadFixed32(&n) &&
            n <= r.rest().size() / 4;
  if (ok) {
    lock->state = static_cast<TxnState>(state);
    lock->old_present = (flags & kOldPresent) != 0;
    lock->put = (flags & kPut) != 0;
    lock->old_inline = (flags & kOldInline) != 0;
    lock->old.ptr = GlobalPtr::Unpack(old_ptr);
    lock->old.locked = false;
    lock->new_block = GlobalPtr::Unpack(new_block);
    lock->secondaries.resize(n);
    for (uint32_t i = 0; ok && i < n; ++i) ok = ReadString(&r, &lock->secondaries[i]);
    if (ok && lock->old_inline) ok = r.ReadFixed64(&lock->old_version) && ReadString(&r, &lock->old_value);
  }
  if (!ok || !r.rest().empty()) return Status::Corruption("a transaction's lock record does not parse");
  return Status::OK();
}

}  // namespace cell::meganode
