// Reading ranges: per-call read options, scan options and continuation tokens, and the Iterator a database layer
// walks ranges with (both directions, bounds, read-ahead), as RocksDB's Iterator and FoundationDB's get_range do.
//
//   cell::IteratorOptions o;
//   o.lower = "user/";  o.upper = "user0";            // [lower, upper)
//   auto it = client->NewIterator(o);
//   for (it->SeekToFirst(); it->Valid(); it->Next()) use(it->key(), it->value());
//   for (it->SeekToLast(); it->Valid(); it->Prev()) ...   // the same range, backwards
//   if (!it->status().ok()) ...                           // why it stopped early, if it did
//
// What an iterator outside a transaction sees: every key present in its range for the whole walk exactly once, in
// order, in either direction, whatever splits and moves of meganodes happen meanwhile; a key written or deleted
// during the walk may or may not be seen (each page of pairs is one linearizable scan, the walk as a whole is not a
// snapshot). Inside a transaction (Transaction::NewIterator) it sees the transaction's own writes, and the ranges it
// read are validated at Commit like Transaction::Scan's (a key inserted into them by another commit is a conflict).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cell/status.h"

namespace cell {

// Options of one read: a get, a scan, an iterator's fetches.
struct ReadOptions {
  // How long the call may take, retries included (an iterator: each fetch). 0: ClientOptions::timeout.
  std::chrono::milliseconds timeout{0};
  // How it searches: "" (ClientOptions::search), "server", "client", or any other ClientOptions::search value.
  std::string search;
};

struct ScanOptions {
  ReadOptions read;
  // Descending key order: the pairs nearest `end` first (the last `limit` pairs of [start, end)).
  bool reverse = false;
  // Keys only: values come back empty and are not read (a key-only scan costs no record reads).
  bool keys_only = false;
};

// One page of a scan, and where the next page begins.
struct ScanPage {
  std::vector<std::pair<std::string, std::string>> pairs;
  // Empty: the range is done. Otherwise an opaque token naming what is left of the range, its direction and options:
  // Client::ScanContinue(token, ...) returns the next page. A token is valid across clients and servers and for as
  // long as the caller likes (it holds no server state); it is at most about 520 bytes.
  std::string continuation;
};

// What Client::ApproximateSize estimates a range holds: its keys, and their keys' and values' bytes.
struct SizeEstimate {
  uint64_t keys = 0;
  uint64_t bytes = 0;
};

struct IteratorOptions {
  // Bounds: the iterator sees keys with lower <= key < upper (empty: no bound).
  std::string lower;
  std::string upper;
  // Read-ahead: the first fetch after a seek asks for `initial_pairs` pairs, and each next fetch in the same
  // direction for twice as many, up to `max_pairs` pairs and `max_bytes` bytes (keys and values), as FoundationDB's
  // iterator mode does: a caller that stops after a few pairs reads little, one that walks far reads in large pages.
  size_t initial_pairs = 16;
  size_t max_pairs = 4096;
  size_t max_bytes = size_t{1} << 20;
  bool keys_only = false;  // value() is empty
  ReadOptions read;
};

// A position in a range of keys. Not thread-safe; use it from one thread at a time, and destroy it before its Client
// (or Transaction). An operation that fails leaves the iterator not Valid() with the error in status(); a seek clears
// the error and tries again.
class Iterator {
 public:
  virtual ~Iterator() = default;

  // True while the iterator is at a pair (within the bounds).
  virtual bool Valid() const = 0;
  // At the first key >= `key` (the lower bound if `key` is below it).
  virtual void Seek(std::string_view key) = 0;
  // At the last key <= `key` (the last key below the upper bound if `key` is at or above it).
  virtual void SeekForPrev(std::string_view key) = 0;
  virtual void SeekToFirst() = 0;
  virtual void SeekToLast() = 0;
  // To the next (previous) key. Requires Valid().
  virtual void Next() = 0;
  virtual void Prev() = 0;
  // The pair it is at; valid until the iterator moves. Requires Valid().
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  // OK, or why the iterator stopped (InvalidArgument for bad options or keys, DeadlineExceeded, Unavailable, ...).
  virtual Status status() const = 0;
};

}  // namespace cell
