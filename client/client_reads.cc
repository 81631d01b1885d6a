// Client's reads for a database layer (include/cell/iterator.h): per-call options, reverse and key-only scans in pages
// with continuation tokens, asynchronous scans, MultiGet, DeleteRange and iterators.
#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "btree/key.h"
#include "cell/client.h"
#include "client/client_impl.h"
#include "client/paged_iterator.h"

namespace cell {

namespace {

using Side = client::StoreClient::Side;

// A continuation token (ScanPage::continuation): what is left of a scan and how to read it.
//   byte 0     version (1)
//   byte 1     bit 0 reverse | bit 1 keys only | bits 2-3 search (0 the client's, 1 server, 2 client)
//   bytes 2-5  timeout in milliseconds, little-endian (0: the client's)
//   then       [length byte][start] [length byte][end]: what is left is [start, end), an empty end meaning no bound
struct Continuation {
  std::string start, end;
  bool reverse = false;
  bool keys_only = false;
  Side side = Side::kSelector;
  uint32_t timeout_ms = 0;

  std::string Encode() const {
    std::string out(6, '\0');
    out[0] = 1;
    out[1] = static_cast<char>((reverse ? 1 : 0) | (keys_only ? 2 : 0) | (static_cast<int>(side) << 2));
    for (int i = 0; i < 4; ++i) out[2 + i] = static_cast<char>((timeout_ms >> (8 * i)) & 0xff);
    for (const std::string* key : {&start, &end}) {
      out.push_back(static_cast<char>(key->size()));
      out += *key;
    }
    return out;
  }
  static StatusOr<Continuation> Decode(std::string_view token) {
    const auto bad = [](const char* why) {
      return Status::InvalidArgument(fmt::format("not a scan continuation token ({})", why));
    };
    if (token.size() < 8) return bad("too short");
    if (token[0] != 1) return bad("unknown version");
    const auto flags = static_cast<uint8_t>(token[1]);
    if ((flags >> 2) > 2 || (flags >> 4) != 0) return bad("unknown flags");
    Continuation c;
    c.reverse = flags & 1;
    c.keys_only = flags & 2;
    c.side = static_cast<Side>(flags >> 2);
    for (int i = 0; i < 4; ++i) c.timeout_ms |= uint32_t{static_cast<uint8_t>(token[2 + i])} << (8 * i);
    size_t at = 6;
    for (std::string* key : {&c.start, &c.end}) {
      if (at >= token.size()) return bad("truncated");
      const size_t n = static_cast<uint8_t>(token[at++]);
      if (token.size() - at < n) return bad("truncated");
      key->assign(token.substr(at, n));
      at += n;
    }
    if (at != token.size()) return bad("trailing bytes");
    return c;
  }
};

StatusOr<Side> SideOf(const ReadOptions& options) {
  if (options.timeout.count() < 0) return Status::InvalidArgument("a read's timeout is >= 0 (0: the client's)");
  return client::StoreClient::SideFor(options.search);
}

// Reads one page of what `c` names, and leaves in `c` what is left (c->start > c->end or `done` when nothing is).
Status ReadPage(client::StoreClient& store, size_t limit, Continuation* c, ScanPage* page, bool* done) {
  page->pairs.clear();
  page->continuation.clear();
  *done = true;
  if (limit == 0) return Status::InvalidArgument("a scan page needs a limit > 0");
  std::vector<btree::KeyValue> pairs;
  const btree::ScanMode mode{.keys_only = c->keys_only, .reverse = c->reverse};
  CELL_RETURN_IF_ERROR(store.ScanRange(c->start, c->end, limit, mode, c->side,
                                       store.DeadlineFor(std::chrono::milliseconds(c->timeout_ms)), &pairs));
  for (auto& kv : pairs) page->pairs.emplace_back(std::move(kv.key), std::move(kv.value));
  if (page->pairs.size() < limit) return Status::OK();  // the range ran out
  const std::string& last = page->pairs.back().first;
  if (c->reverse) {
    c->end = last;
  } else if (!btree::Successor(last, &c->start)) {
    return Status::OK();  // the last possible key
  }
  *done = false;
  page->continuation = c->Encode();
  return Status::OK();
}

}  // namespace

Status Client::Get(std::string_view key, std::string* value, const ReadOptions& options) {
  CELL_ASSIGN_OR_RETURN(const Side side, SideOf(options));
  return impl_->store->Get(key, value, side, impl_->store->DeadlineFor(options.timeout));
}

Status Client::ScanReverse(std::string_view start, std::string_view end, size_t limit,
                           std::vector<std::pair<std::string, std::string>>* out) {
  std::vector<btree::KeyValue> pairs;
  CELL_RETURN_IF_ERROR(impl_->store->ScanRange(start, end, limit, btree::ScanMode{.reverse = true}, Side::kSelector,
                                               impl_->store->DeadlineFor({}), &pairs));
  for (auto& kv : pairs) out->emplace_back(std::move(kv.key), std::move(kv.value));
  return Status::OK();
}

Status Client::Scan(std::string_view start, std::string_view end, size_t limit, const ScanOptions& options,
                    ScanPage* page) {
  CELL_ASSIGN_OR_RETURN(const Side side, SideOf(options.read));  // the bounds are checked by the scan
  Continuation c{std::string(start),
                 std::string(end),
                 options.reverse,
                 options.keys_only,
                 side,
                 static_cast<uint32_t>(std::min<int64_t>(options.read.timeout.count(), UINT32_MAX))};
  bool done = false;
  return ReadPage(*impl_->store, limit, &c, page, &done);
}

Status Client::ScanContinue(std::string_view continuation, size_t limit, ScanPage* page) {
  CELL_ASSIGN_OR_RETURN(Continuation c, Continuation::Decode(continuation));
  if (c.start.size() > kMaxKeySize || c.end.size() > kMaxKeySize) {
    return Status::InvalidArgument("not a scan continuation token (a bound is too long)");
  }
  bool done = false;
  return ReadPage(*impl_->store, limit, &c, page, &done);
}

void Client::ScanAsync(std::string_view start, std::string_view end, const ScanOptions& options, size_t page_pairs,
                       std::function<bool(const Status& status, ScanPage& page)> on_page) {
  ScanPage first;
  StatusOr<Side> side = SideOf(options.read);
  Status bad = side.status();
  if (bad.ok() && (start.size() > kMaxKeySize || end.size() > kMaxKeySize)) {
    bad = Status::InvalidArgument(fmt::format("scan bounds are at most {} bytes", kMaxKeySize));
  }
  if (bad.ok() && page_pairs == 0) bad = Status::InvalidArgument("ScanAsync needs page_pairs > 0");
  if (!bad.ok()) {
    on_page(bad, first);
    return;
  }
  Continuation c{std::string(start),
                 std::string(end),
                 options.reverse,
                 options.keys_only,
                 *side,
                 static_cast<uint32_t>(std::min<int64_t>(options.read.timeout.count(), UINT32_MAX))};
  auto done = std::make_shared<std::atomic<bool>>(false);
  Impl* impl = impl_.get();
  std::lock_guard lock(impl->scans_mu);
  // Join the scans that have ended, so that threads do not pile up.
  std::erase_if(impl->scans, [](Impl::AsyncScan& s) {
    if (!s.done->load()) return false;
    s.thread.join();
    return true;
  });
  impl->scans.push_back({std::thread([impl, c, page_pairs, on_page = std::move(on_page), done]() mutable {
                           while (true) {
                             ScanPage page;
                             bool finished = false;
                             Status s;
                             {
                               std::lock_guard lock(impl->scans_mu);
                               if (impl->closing) s = Status::Unavailable("the client is closing");
                             }
                             if (s.ok()) s = ReadPage(*impl->store, page_pairs, &c, &page, &finished);
                             if (!on_page(s, page) || !s.ok() || finished) break;
                           }
                           done->store(true);
                         }),
                         done});
}

std::vector<Status> Client::MultiGet(const std::vector<std::string>& keys, std::vector<std::string>* values,
                                     const ReadOptions& options) {
  values->assign(keys.size(), std::string());
  StatusOr<Side> side = SideOf(options);
  if (!side.ok()) return std::vector<Status>(keys.size(), side.status());
  return impl_->store->MultiGet(keys, values, *side, impl_->store->DeadlineFor(options.timeout));
}

StatusOr<SizeEstimate> Client::ApproximateSize(std::string_view start, std::string_view end,
                                               const ReadOptions& options) {
  CELL_ASSIGN_OR_RETURN(const Side side, SideOf(options));
  btree::SizeEstimate estimate;
  CELL_RETURN_IF_ERROR(
      impl_->store->ApproximateSize(start, end, side, impl_->store->DeadlineFor(options.timeout), &estimate));
  return SizeEstimate{estimate.keys, estimate.bytes};
}

Status Client::DeleteRange(std::string_view start, std::string_view end, size_t* deleted) {
  if (start.size() > kMaxKeySize || end.size() > kMaxKeySize) {
    return Status::InvalidArgument(fmt::format("DeleteRange's bounds are at most {} bytes", kMaxKeySize));
  }
  size_t count = 0;
  Status s = RunTransaction(*this, [&](Transaction& txn) -> Status {
    std::vector<std::pair<std::string, std::string>> pairs;
    // One more than may be deleted: a range holding more is refused whole.
    CELL_RETURN_IF_ERROR(txn.Scan(start, end, kMaxTransactionWrites + 1, &pairs));
    if (pairs.size() > kMaxTransactionWrites) {
      return Status::InvalidArgument(fmt::format(
          "DeleteRange deletes at most {} keys at once, and the range holds more: nothing was deleted (delete it in "
          "smaller ranges)",
          kMaxTransactionWrites));
    }
    for (const auto& kv : pairs) CELL_RETURN_IF_ERROR(txn.Delete(kv.first));
    count = pairs.size();
    return Status::OK();
  });
  if (s.ok() && deleted != nullptr) *deleted = count;
  return s;
}

std::unique_ptr<Iterator> Client::NewIterator(const IteratorOptions& options) {
  StatusOr<Side> side = SideOf(options.read);
  client::StoreClient* store = impl_->store.get();
  const auto timeout = options.read.timeout;
  const bool keys_only = options.keys_only;
  const Side s = side.ok() ? *side : Side::kSelector;
  return client::NewPagedIterator(
      options,
      [store, timeout, keys_only, s](std::string_view start, std::string_view end, size_t limit, bool reverse,
                                     client::Pairs* out) {
        std::vector<btree::KeyValue> pairs;
        CELL_RETURN_IF_ERROR(store->ScanRange(start, end, limit,
                                              btree::ScanMode{.keys_only = keys_only, .reverse = reverse}, s,
                                              store->DeadlineFor(timeout), &pairs));
        for (auto& kv : pairs) out->emplace_back(std::move(kv.key), std::move(kv.value));
        return Status::OK();
      },
      side.status());
}

}  // namespace cell
