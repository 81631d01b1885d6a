// cell-bench --workload=walk: full walks of the key space, the read a database layer makes of a whole table (issue
// 21's iterator benchmark). After the usual load of --keys keys, each of --threads threads walks every key forward,
// from the first to the last, then backward, from the last to the first, in pages of --scan-length pairs, and again
// while --seconds have not passed (the pair of walks under way at the end is finished, so every walk measured is whole
// and checked; a run lasts at least one forward and one backward walk). Two ways to read a page:
//   pages     StoreSession::Scan from after the last key seen (forward; the first page from "") and
//             StoreSession::ScanReverse from below it (backward): Cell's Client::Scan and ScanReverse, Redis's
//             ZRANGEBYLEX or ZREVRANGEBYLEX then MGET, PostgreSQL's ORDER BY k [DESC] LIMIT
//   iterator  Cell only: one cell::Client::NewIterator per walk, read-ahead fixed at one page size (initial_pairs =
//             max_pairs = --scan-length, so it asks for what the peers' pages hold), SeekToFirst then Next, or
//             SeekToLast then Prev
// Either way a page's pairs are taken one at a time, and each walk is checked, cheaply: exactly --keys pairs, each key
// strictly after (forward) or before (backward) the last, the first and last the loaded keys' first and last (so the
// walk saw every loaded key once, in order: the keys loaded are the only ones, and `keys` distinct keys between
// the two ends are all of them), and every 16th value belongs to its key. A walk that fails its check, or a read that
// fails, fails the run (exit status 1, the first error on stderr, "walk_ok":false).
//
// Measures (JSON summary): "walk_forward_pairs_per_s" and "walk_backward_pairs_per_s" (each thread's pairs over the
// time it spent walking that way, summed over threads: what that many threads walking that way at once would read),
// "pairs_per_s" (all pairs over the run), "walks" (whole walks, both ways), "walks_forward", "walks_backward",
// "walk_ok", page latency ("page_p50_us", "page_p90_us", "page_p99_us", and "forward_page_p50_us" and
// "backward_page_p50_us" of whole walks: the time each --scan-length pairs took, read and check included; a median
// page is what a rate would be without the stalls a busy machine adds).
// The time series (--csv) is the other workloads' (bench/series.h) with ops = pairs taken in the interval and latency
// = pages', plus two columns, forward_pairs and backward_pairs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/hogs.h"
#include "bench/store.h"
#include "cell/client.h"

namespace cell::bench {

// How a walk reads its pages.
enum class WalkReader { kPages, kIterator };

// "pages" or "iterator"; InvalidArgument naming them otherwise.
StatusOr<WalkReader> ParseWalkReader(std::string_view name);
std::string_view WalkReaderName(WalkReader reader);

struct WalkOptions {
  uint64_t keys = 0;        // the keys loaded: key_of(0) .. key_of(keys - 1), in key order
  size_t page_pairs = 100;  // --scan-length
  WalkReader reader = WalkReader::kPages;
  Client* client = nullptr;  // kIterator: the Cell client whose iterators walk
  int threads = 1;
  double seconds = 3;
  int interval_ms = 100;
  std::vector<std::pair<double, double>> windows;  // from_s, to_s: exact summaries of parts of the run
  std::function<std::string(uint64_t i)> key_of;
  std::function<bool(std::string_view value, std::string_view key)> belongs;
};

// The time series' header: bench/series.h's columns and the walk's two.
std::string WalkCsvHeader();

// Runs the walks (see the file comment) with sessions[t] on thread t, writes the time series to *csv (if not null)
// and prints the JSON summary line: `json_head` (the harness's fields, without braces) followed by the walk's.
// Returns the process's exit status: 0, 1 if a walk failed (or a session did), 2 for options it cannot run.
int RunWalkBench(const WalkOptions& options, Store& store, std::vector<std::unique_ptr<StoreSession>>& sessions,
                 Hogs& hogs, std::ostream* csv, const std::string& json_head);

}  // namespace cell::bench
