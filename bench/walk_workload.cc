// cell-bench's walk workload (see walk_workload.h).
#include "bench/walk_workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <limits>
#include <mutex>
#include <thread>

#include "bench/series.h"
#include "cell/iterator.h"

namespace cell::bench {

namespace {

using Clock = std::chrono::steady_clock;
using Pairs = std::vector<std::pair<std::string, std::string>>;

// Values checked per walk: one pair in this many (the keys are all checked).
constexpr uint64_t kValueCheckEvery = 16;

// One walk's pairs, one at a time, whichever way they are read.
class PairSource {
 public:
  virtual ~PairSource() = default;
  // At the first key (forward) or the last (reverse), or not Valid() if there is none or the read failed.
  virtual void Start(bool reverse) = 0;
  virtual bool Valid() const = 0;
  // To the next pair in the walk's direction. Requires Valid().
  virtual void Step() = 0;
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  // Why the walk stopped early, if a read failed.
  virtual Status status() const = 0;
};

// Pages read by the session: Scan from the least key after the last one seen, or ScanReverse from below it.
class PageSource final : public PairSource {
 public:
  PageSource(StoreSession& session, size_t page_pairs) : session_(session), page_pairs_(page_pairs) {}

  void Start(bool reverse) override {
    reverse_ = reverse;
    status_ = Status::OK();
    Read("");
  }
  bool Valid() const override { return pos_ < page_.size(); }
  void Step() override {
    if (++pos_ < page_.size()) return;
    if (page_.size() < page_pairs_) return page_.clear();  // a short page: the key space ran out
    std::string bound = std::move(page_.back().first);
    if (!reverse_) bound.push_back('\0');  // the least key after it (Scan's start is inclusive, ScanReverse's not)
    Read(bound);
  }
  std::string_view key() const override { return page_[pos_].first; }
  std::string_view value() const override { return page_[pos_].second; }
  Status status() const override { return status_; }

 private:
  void Read(std::string_view bound) {
    page_.clear();
    pos_ = 0;
    Status s = reverse_ ? session_.ScanReverse(bound, page_pairs_, &page_) : session_.Scan(bound, page_pairs_, &page_);
    if (!s.ok()) {
      page_.clear();
      status_ = std::move(s);
    }
  }

  StoreSession& session_;
  const size_t page_pairs_;
  bool reverse_ = false;
  Pairs page_;  // in the walk's order
  size_t pos_ = 0;
  Status status_;
};

// A Cell iterator per walk, reading pages of exactly `page_pairs` (no growth, no byte cap).
class IteratorSource final : public PairSource {
 public:
  IteratorSource(Client& client, size_t page_pairs) : client_(client) {
    options_.initial_pairs = options_.max_pairs = page_pairs;
    options_.max_bytes = std::numeric_limits<size_t>::max();
  }

  void Start(bool reverse) override {
    reverse_ = reverse;
    it_ = client_.NewIterator(options_);
    if (reverse) {
      it_->SeekToLast();
    } else {
      it_->SeekToFirst();
    }
  }
  bool Valid() const override { return it_->Valid(); }
  void Step() override {
    if (reverse_) {
      it_->Prev();
    } else {
      it_->Next();
    }
  }
  std::string_view key() const override { return it_->key(); }
  std::string_view value() const override { return it_->value(); }
  Status status() const override { return it_->status(); }

 private:
  Client& client_;
  IteratorOptions options_;
  bool reverse_ = false;
  std::unique_ptr<Iterator> it_;
};

// One direction's whole walks of one thread.
struct WayTotals {
  uint64_t walks = 0, pairs = 0;
  double seconds = 0;
  std::vector<float> page_us;  // each page's latency
};

// The state one run shares between its threads.
struct WalkRun {
  explicit WalkRun(const WalkOptions& options)
      : o(options),
        first_key(options.key_of(0)),
        last_key(options.key_of(options.keys - 1)),
        recorders(options.threads),
        totals(options.threads),
        finished(options.threads) {}

  void Fail(const std::string& what) {
    std::lock_guard lock(mu);
    if (failures++ == 0) first_failure = what;
    stop = true;
  }

  const WalkOptions& o;
  const std::string first_key, last_key;
  std::vector<LatencyRecorder> recorders;        // pages' latencies, per thread
  std::vector<std::array<WayTotals, 2>> totals;  // per thread: [0] forward, [1] backward
  std::vector<Clock::time_point> finished;       // per thread: when its last walk ended
  std::atomic<uint64_t> pairs[2] = {};           // taken so far, per direction, for the time series
  std::atomic<bool> stop{false};                 // a walk failed: the others give up at their next page
  std::atomic<int> running{0};
  std::mutex mu;
  uint64_t failures = 0;
  std::string first_failure;
};

// One walk, checked (see walk_workload.h). Whether it was whole: false if it failed (noted in `run`) or gave up
// because another one had.
bool Walk(WalkRun& run, PairSource& source, bool reverse, LatencyRecorder& recorder, WayTotals* totals) {
  const std::string_view way = reverse ? "backward" : "forward";
  const std::string& first = reverse ? run.last_key : run.first_key;
  const std::string& last = reverse ? run.first_key : run.last_key;
  const size_t page = run.o.page_pairs;
  std::atomic<uint64_t>& shown = run.pairs[reverse ? 1 : 0];
  const auto start = Clock::now();
  auto page_start = start;
  uint64_t n = 0, counted = 0;  // counted: pairs already added to `shown`
  std::string previous, error;
  std::vector<float> page_us;
  page_us.reserve(run.o.keys / page + 1);
  for (source.Start(reverse); source.Valid(); source.Step()) {
    const std::string_view key = source.key();
    if (n == 0 ? key != first : (reverse ? !(key < previous) : !(previous < key))) {
      error = n == 0 ? fmt::format("began at '{}', not at the {} key '{}'", key, reverse ? "last" : "first", first)
                     : fmt::format("pair {}: key '{}' is not {} '{}' (a key missed, repeated or out of order)", n, key,
                                   reverse ? "before" : "after", previous);
      break;
    }
    if (n % kValueCheckEvery == 0 && !run.o.belongs(source.value(), key)) {
      error = fmt::format("pair {}: key '{}' has a value that is not its own", n, key);
      break;
    }
    previous.assign(key);
    if (++n % page == 0) {
      const auto now = Clock::now();
      page_us.push_back(static_cast<float>(std::chrono::duration<double, std::micro>(now - page_start).count()));
      recorder.Record(page_us.back());
      page_start = now;
      shown.fetch_add(n - counted, std::memory_order_relaxed);
      counted = n;
      if (run.stop.load(std::memory_order_relaxed)) return false;
    }
  }
  const auto end = Clock::now();
  if (error.empty() && !source.status().ok()) error = "a read failed: " + source.status().ToString();
  if (error.empty() && n != run.o.keys) error = fmt::format("saw {} pairs, not the {} loaded", n, run.o.keys);
  if (error.empty() && previous != last) error = fmt::format("ended at '{}', not at '{}'", previous, last);
  if (!error.empty()) {
    run.Fail(fmt::format("walk {}: {}", way, error));
    return false;
  }
  if (n > counted) {  // the last, short page
    page_us.push_back(static_cast<float>(std::chrono::duration<double, std::micro>(end - page_start).count()));
    recorder.Record(page_us.back());
    shown.fetch_add(n - counted, std::memory_order_relaxed);
  }
  totals->page_us.insert(totals->page_us.end(), page_us.begin(), page_us.end());
  ++totals->walks;
  totals->pairs += n;
  totals->seconds += std::chrono::duration<double>(end - start).count();
  return true;
}

// Writes the time series of `run` (started at `run_start`) to *csv, every interval until its threads are done, and
// keeps the pages' latencies in *all and where each interval's end in *interval_ends (for the windows).
void Sample(WalkRun& run, Store& store, Hogs& hogs, std::ostream* csv, Clock::time_point run_start,
            std::vector<float>* all, std::vector<std::pair<double, size_t>>* interval_ends) {
  Client::Stats last = store.stats();
  uint64_t last_pairs[2] = {0, 0};
  std::vector<float> interval;
  for (auto tick = run_start; run.running.load() > 0;) {
    const auto from = tick;
    tick += std::chrono::milliseconds(run.o.interval_ms);
    std::this_thread::sleep_until(tick);  // the sampling period, not synchronisation
    interval.clear();
    for (auto& r : run.recorders) r.Drain(&interval);
    all->insert(all->end(), interval.begin(), interval.end());
    IntervalRow row;
    row.t_s = std::chrono::duration<double>(tick - run_start).count();
    interval_ends->emplace_back(row.t_s, all->size());
    row.interval_s = std::chrono::duration<double>(tick - from).count();
    row.latency = Summarize(&interval);
    uint64_t ways[2];
    for (int w = 0; w < 2; ++w) {
      const uint64_t now = run.pairs[w].load(std::memory_order_relaxed);
      ways[w] = now - last_pairs[w];
      last_pairs[w] = now;
    }
    row.ops = ways[0] + ways[1];
    const Client::Stats now = store.stats();
    const double server = static_cast<double>(now.server_searches - last.server_searches);
    const double client_side = static_cast<double>(now.client_searches - last.client_searches);
    row.server_fraction = server + client_side > 0 ? server / (server + client_side) : 0;
    row.retries = now.retries - last.retries;
    if (Status s = hogs.Update(row.t_s); !s.ok()) run.Fail("hogs: " + s.ToString());
    row.hogs = hogs.running();
    last = now;
    if (csv != nullptr) *csv << CsvRow(row) << fmt::format(",{},{}", ways[0], ways[1]) << "\n";
  }
}

}  // namespace

StatusOr<WalkReader> ParseWalkReader(std::string_view name) {
  if (name == "pages") return WalkReader::kPages;
  if (name == "iterator") return WalkReader::kIterator;
  return Status::InvalidArgument(fmt::format("walk reader '{}' is not one of iterator, pages", name));
}

std::string_view WalkReaderName(WalkReader reader) { return reader == WalkReader::kIterator ? "iterator" : "pages"; }

std::string WalkCsvHeader() { return CsvHeader() + ",forward_pairs,backward_pairs"; }

int RunWalkBench(const WalkOptions& options, Store& store, std::vector<std::unique_ptr<StoreSession>>& sessions,
                 Hogs& hogs, std::ostream* csv, const std::string& json_head) {
  if (options.keys == 0 || options.page_pairs == 0 || options.threads < 1 ||
      static_cast<size_t>(options.threads) > sessions.size() ||
      (options.reader == WalkReader::kIterator && options.client == nullptr)) {
    std::fprintf(stderr,
                 "cell-bench: the walk needs keys, a page size, a session per thread (and a Cell client for "
                 "iterators)\n");
    return 2;
  }
  WalkRun run(options);
  const Client::Stats before = store.stats();
  const auto run_start = Clock::now();
  const auto end =
      run_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.seconds));
  if (Status s = hogs.Update(0); !s.ok()) {
    std::fprintf(stderr, "cell-bench: %s\n", s.ToString().c_str());
    return 2;
  }
  run.running = options.threads;
  std::vector<std::thread> pool;
  for (int t = 0; t < options.threads; ++t) {
    pool.emplace_back([&run, &sessions, &options, end, t] {
      std::unique_ptr<PairSource> source;
      if (options.reader == WalkReader::kIterator) {
        source = std::make_unique<IteratorSource>(*options.client, options.page_pairs);
      } else {
        source = std::make_unique<PageSource>(*sessions[t], options.page_pairs);
      }
      auto& totals = run.totals[t];
      // Forward, then backward, while time is left: every run ends with whole walks both ways.
      do {
        if (!Walk(run, *source, /*reverse=*/false, run.recorders[t], &totals[0])) break;
        if (!Walk(run, *source, /*reverse=*/true, run.recorders[t], &totals[1])) break;
      } while (Clock::now() < end && !run.stop.load());
      run.finished[t] = Clock::now();
      run.running.fetch_sub(1);
    });
  }

  // The time series, every interval until the last thread's walks end.
  std::vector<float> all;
  std::vector<std::pair<double, size_t>> interval_ends;
  Sample(run, store, hogs, csv, run_start, &all, &interval_ends);
  hogs.StopAll();
  for (auto& th : pool) th.join();
  for (auto& r : run.recorders) r.Drain(&all);
  if (csv != nullptr) csv->flush();
  const Client::Stats after = store.stats();
  const double elapsed =
      std::chrono::duration<double>(*std::max_element(run.finished.begin(), run.finished.end()) - run_start).count();

  WayTotals ways[2];
  double rates[2] = {0, 0};  // each thread's pairs over its time that way, summed
  for (const auto& thread : run.totals) {
    for (int w = 0; w < 2; ++w) {
      ways[w].walks += thread[w].walks;
      ways[w].pairs += thread[w].pairs;
      ways[w].page_us.insert(ways[w].page_us.end(), thread[w].page_us.begin(), thread[w].page_us.end());
      if (thread[w].seconds > 0) rates[w] += static_cast<double>(thread[w].pairs) / thread[w].seconds;
    }
  }
  const std::string windows = WindowsJson(all, interval_ends, options.windows);  // before `all` is reordered
  const LatencySummary pages = Summarize(&all);
  const LatencySummary forward_pages = Summarize(&ways[0].page_us), backward_pages = Summarize(&ways[1].page_us);
  const bool ok = run.failures == 0;
  if (!ok) {
    std::fprintf(stderr, "cell-bench: %llu walks failed, the first: %s\n",
                 static_cast<unsigned long long>(run.failures), run.first_failure.c_str());
  }
  const double server = static_cast<double>(after.server_searches - before.server_searches);
  const double client_side = static_cast<double>(after.client_searches - before.client_searches);
  const uint64_t pairs = ways[0].pairs + ways[1].pairs;
  std::printf(
      "{%s,%s}\n", json_head.c_str(),
      fmt::format("\"walk\":\"{}\",\"scan_length\":{},\"walks\":{},\"walks_forward\":{},\"walks_backward\":{},"
                  "\"walk_ok\":{},\"walk_forward_pairs_per_s\":{:.0f},\"walk_backward_pairs_per_s\":{:.0f},"
                  "\"pairs\":{},\"pairs_per_s\":{:.0f},\"elapsed_s\":{:.2f},\"pages\":{},\"page_p50_us\":{:.1f},"
                  "\"page_p90_us\":{:.1f},\"page_p99_us\":{:.1f},\"forward_page_p50_us\":{:.1f},"
                  "\"backward_page_p50_us\":{:.1f},\"server_fraction\":{:.3f},\"retries\":{},"
                  "\"node_cache_hits\":{},\"node_cache_misses\":{},\"windows\":[{}],\"errors\":{}",
                  WalkReaderName(options.reader), options.page_pairs, ways[0].walks + ways[1].walks, ways[0].walks,
                  ways[1].walks, ok, rates[0], rates[1], pairs,
                  elapsed > 0 ? static_cast<double>(pairs) / elapsed : 0.0, elapsed, pages.count, pages.p50_us,
                  pages.p90_us, pages.p99_us, forward_pages.p50_us, backward_pages.p50_us,
                  server + client_side > 0 ? server / (server + client_side) : 0.0, after.retries - before.retries,
                  after.node_cache_hits - before.node_cache_hits, after.node_cache_misses - before.node_cache_misses,
                  windows, run.failures)
          .c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

}  // namespace cell::bench
