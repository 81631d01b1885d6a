// The search selector: for each operation, whether a client searches a meganode on its server (one RPC, server CPU)
// or itself with one-sided reads (several round trips, no server CPU). Pure logic: callers report the latencies
// they measured and pass the time; the selector knows nothing of the network or the tree.
//
// Policies (MakeSelector):
//   server, client   always one way
//   fixed:<x>        server-side with probability x
//   adaptive         Cell's model (ATC'16 section 2.5), join-the-shortest-queue on measured latencies, with each
//                    side costed at its marginal cost (SelectorOptions::floor, kMarginal by default): search on the
//                    server when  l_s^2 / S_s < m * l_r^2 / S_r,  where l_s is the mean server-side search latency
//                    to that server, l_r the mean one-sided read latency from it, S_s and S_r the lowest of each seen
//                    (what a request costs with no queue), and m the reads a client-side traversal of that meganode
//                    takes (the height estimate at first, then the running mean of observed traversals).
//                    l^2 / S is what one more search adds to the waiting of every search on that side, exact for
//                    an M/M/1 queue (L = 1/(mu - lambda), S = 1/mu: d(lambda L)/d lambda = L^2 / S). While a side
//                    is idle its cost is its whole latency, so a server whose search costs less than m reads keeps
//                    its searches; as its queue grows its cost grows as the square, so it sheds them well before its
//                    latency reaches m reads' (where whole latencies settle). Where part of a floor is wire time
//                    rather than service, it undercounts that queue's growth. The other forms: kRead, the paper's
//                    (l_s - RTT) < m * (l_r - RTT) with RTT the lowest read (queueing against queueing, one floor:
//                    right where an RPC's round trip costs what a read's does and a read's latency is mostly queue;
//                    where a read's latency is mostly fixed cost, a small server queue outweighs m reads' jitter,
//                    however much longer the reads take in all); kPerSide, each side less its own lowest latency;
//                    kNone, whole latencies.
//                    Each mean is over a LatencyWindow (last n samples, outliers beyond K sigma dropped, history
//                    dropped when outliers win a window, after an idle gap, or past max_age). Exploration keeps both
//                    estimates current at a bounded cost: the side estimated worse is taken with probability p times
//                    the ratio of the better side's expected latency to the worse side's (whole latencies: l_s
//                    against m x l_r), so that exploring takes about a fraction p of the time whatever the ratio
//                    (where one side costs many times the other, a fraction p of the searches would cost far more).
//                    Steering (steer_per_s): rather than applying the rule to each operation, which makes the threads
//                    sharing a selector stampede to one side together, each server has a split (the fraction of
//                    searches sent to it) that moves toward the side the rule prefers at steer_per_s per second,
//                    starting at one half, and each search draws from it; it settles where the rule's two sides are
//                    equal. 0: per operation, as the paper has it. The split starts, once both sides are measured,
//                    where the two sides' whole latencies would share the time evenly (the server's fraction is
//                    m x l_r / (l_s + m x l_r)), and follows that point as the estimates fill, until either window is
//                    full or a second has passed (the first samples include each side's cold start), or a load step
//                    rescales it: far from the side that is many times dearer, so steering does not spend its first
//                    half second sending half the searches there. The start happens once per server (an idle gap
//                    that drops the windows does not begin another).
//                    Load steps (load_step): a step in this client's own rate of searches to a server (x1.5 either
//                    way, its last 50 ms against its last second) rescales the split at once, so that the rate sent
//                    to the server stays what it was: the server's capacity has not changed, and steering alone would
//                    take too long to move a spike's extra while the server's queue grows.
//   dex              DEX's heuristic (VLDB'24): search on the server when  mean(l_s) < m * (mean(l_r) + 40 ns) * 1.2,
//                    over windows of 50 samples without outlier filtering, with 1% random flips.
// While one of the two latencies of a server has no sample yet, the adaptive policies choose the side not measured.
// docs/BENCHMARKS.md ("Why the selector steers") records the measurements behind steering, load steps and max_age.
// Thread-safe: one mutex guards the estimates (taken once per sample). A steered (adaptive) decision takes it only to
// refresh what the decisions draw from (the split, the rule's side, the exploration odds) once kRefreshUs has passed
// since the last refresh (by the caller's clock: the client's is the coarse one, so once per tick of it), or always
// while a server is unmeasured or in a load step; between refreshes a decision is a draw from those published values,
// without the lock (what a lock per decision costs threads that share a CPU: docs/BENCHMARKS.md). The refresh counts
// the decisions made since, so the load estimates see every search; the split moves by the time passed, so steering
// keeps its speed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cell/status.h"
#include "selector/latency_window.h"

namespace cell::selector {

struct SelectorOptions {
  size_t window = 100;                 // n: samples per latency window
  double outlier_sigmas = 3.0;         // K
  double explore = 0.01;               // p: probability of taking the option estimated worse
  uint64_t idle_reset_us = 3'000'000;  // history older than this, with no sample since, is dropped
  uint64_t max_age_us = 1'000'000;     // samples older than this leave their window (0: never; see latency_window.h)
  double initial_reads = 4;            // m for a meganode no traversal has been seen of (its height estimate)
  uint64_t seed = 0;                   // 0: random
  // How each side's mean is costed: kMarginal, or less what a request costs with no queue (see "adaptive" above).
  enum class Floor { kRead, kPerSide, kNone, kMarginal } floor = Floor::kMarginal;
  // How fast the split of searches between the sides follows the rule, in fraction per second (0: no split, the
  // rule decides each search; see "adaptive" above). Adaptive only; DEX's heuristic decides each search.
  double steer_per_s = 1.0;
  // Load steps (adaptive, with steering): when this client's rate of searches to a server, over the last
  // ~load_fast_us, is load_step times or more (or 1/load_step or less) its rate over the last ~load_slow_us, the
  // split is rescaled, for the next 3 x load_fast_us, so that the rate sent to the server stays the same, and the
  // slow estimate restarts from the fast one (see "adaptive" above). 0: never. The rates are trusted once both
  // are at least load_min_searches per load_fast_us (400/s by default: below it a 50 ms estimate is too noisy to
  // tell a step) and load_slow_us has passed since the first search. Both time constants must be > 0.
  double load_step = 1.5;
  uint64_t load_fast_us = 50'000;
  uint64_t load_slow_us = 1'000'000;
  double load_min_searches = 20;
};

enum class Side { kServer, kClient };

// What a selector has decided and believes, for client stats: the windows as of the last decision or sample (samples
// past max_age leave them then, not when stats are read).
struct SelectorStats {
  uint64_t server_decisions = 0;
  uint64_t client_decisions = 0;
  uint64_t explorations = 0;    // decisions that took the option estimated worse (exploration or random flip)
  uint64_t outliers = 0;        // samples discarded as outliers
  uint64_t history_resets = 0;  // windows dropped (outliers won, or idle)
  uint64_t load_steps = 0;      // steps in the client's load that rescaled a split (load_step)
  double reads_per_search = 0;  // m: the mean reads of the client-side traversals kept, over all meganodes
  struct Server {
    uint64_t server = 0;
    double server_search_us = 0;  // l_s (mean)
    double read_us = 0;           // l_r (mean)
    double rtt_us = 0;            // lowest read latency seen (RTT_r)
    double server_rtt_us = 0;     // lowest server-side search latency seen (RTT_s under Floor::kPerSide)
    double split = 0;             // the fraction of searches steered to the server (steer_per_s > 0)
    size_t server_samples = 0, read_samples = 0;
  };
  std::vector<Server> servers;
};

class Selector {
 public:
  virtual ~Selector() = default;
  // The side to search `meganode` (a packed pointer; 0 if not known) of server `server` on, at `now_us`.
  virtual Side Choose(uint64_t server, uint64_t meganode, uint64_t now_us) = 0;
  // The side for an operation that will report no latency (a scan, a MultiGet: their costs are not a get's): it
  // follows what the gets have decided, and neither explores nor asks for the measurement a side lacks (the answer
  // would never come, and the operation would be sent to the unmeasured side for as long as no get ran).
  virtual Side Follow(uint64_t server, uint64_t meganode, uint64_t now_us) { return Choose(server, meganode, now_us); }
  // A server-side search to `server` took `us`.
  virtual void OnServerSearch(uint64_t server, double us, uint64_t now_us) = 0;
  // A one-sided read from `server` took `us`.
  virtual void OnRead(uint64_t server, double us, uint64_t now_us) = 0;
  // `n` reads from `server` (one traversal's), at once.
  virtual void OnReads(uint64_t server, const double* us, size_t n, uint64_t now_us) {
    for (size_t i = 0; i < n; ++i) OnRead(server, us[i], now_us);
  }
  // A client-side traversal starting at `meganode` took `reads` one-sided reads.
  virtual void OnTraversal(uint64_t meganode, int reads) = 0;
  // Whether it uses the latencies at all (fixed policies do not: callers need not measure).
  virtual bool Measures() const = 0;
  virtual SelectorStats stats() const = 0;
};

// "server", "client", "fixed:<x>" (x in 0..1), "adaptive" or "dex"; InvalidArgument for anything else.
StatusOr<std::unique_ptr<Selector>> MakeSelector(std::string_view mode, const SelectorOptions& options = {});
// "read", "per-side" or "none"; InvalidArgument for anything else.
StatusOr<SelectorOptions::Floor> ParseFloor(std::string_view name);

// server, client and fixed:<x>.
class FixedSelector final : public Selector {
 public:
  FixedSelector(double server_fraction, uint64_t seed);
  Side Choose(uint64_t server, uint64_t meganode, uint64_t now_us) override;
  void OnServerSearch(uint64_t, double, uint64_t) override {}
  void OnRead(uint64_t, double, uint64_t) override {}
  void OnTraversal(uint64_t, int) override {}
  bool Measures() const override { return false; }
  SelectorStats stats() const override;

 private:
  const double fraction_;
  const uint64_t seed_;
  std::atomic<uint64_t> server_{0}, client_{0};
};

// adaptive (Cell's model) and dex (DEX's heuristic): the same estimates, two rules.
class ModelSelector final : public Selector {
 public:
  enum class Rule { kCell, kDex };
  ModelSelector(Rule rule, const SelectorOptions& options);
  Side Choose(uint64_t server, uint64_t meganode, uint64_t now_us) override;
  // Steered (adaptive): drawn from the server's split as the gets left it. Otherwise the rule's side once both are
  // measured, and the server's side before (as an unknown server's operation goes).
  Side Follow(uint64_t server, uint64_t meganode, uint64_t now_us) override;
  void OnServerSearch(uint64_t server, double us, uint64_t now_us) override;
  void OnRead(uint64_t server, double us, uint64_t now_us) override;
  void OnReads(uint64_t server, const double* us, size_t n, uint64_t now_us) override;
  void OnTraversal(uint64_t meganode, int reads) override;
  bool Measures() const override { return true; }
  SelectorStats stats() const override;

  // The side the rule prefers now, without exploration (for tests and stats).
  Side Preferred(uint64_t server, uint64_t meganode, uint64_t now_us);

  // How long a steered decision draws from the values the last refresh published (see the top of this file).
  static constexpr uint64_t kRefreshUs = 250;
  // How long a split's start lasts at most (see "adaptive" at the top of this file): the default max_age, after which
  // the first samples have left the windows.
  static constexpr uint64_t kStartUs = 1'000'000;

 private:
  // What steered decisions draw from between refreshes, published under mu_ and read without it.
  struct Published {
    std::atomic<double> split{0.5};  // ServerState::split as of the refresh
    std::atomic<double> explore{0};  // the odds of taking the side the rule estimates worse
    std::atomic<bool> server_preferred{false};
    std::atomic<uint64_t> until_us{0};  // decisions before this draw without the lock (0: none may)
    // The decisions drawn so, server-side and client-side: one counter per decision serves both the stats and
    // CountSearch (which counts what they grew by since it last looked).
    std::atomic<uint64_t> drawn_server{0}, drawn_client{0};
  };
  struct ServerState {
    explicit ServerState(const WindowOptions& w) : search(w), read(w) {}
    Published published;
    LatencyWindow search, read;
    bool next_unmeasured_server = true;  // while unmeasured: alternate, so both sides get samples
    double split = 0.5;                  // steering: the fraction of searches sent to the server
    uint64_t split_at_us = 0;            // when the split last moved
    bool split_timed = false;            // split_at_us is set
    bool starting = true;                // the split is set at the estimates' even share at each refresh (Steer)
    uint64_t start_us = 0;               // when the start began
    // This client's rate of searches to the server: estimates over ~load_fast_us and ~load_slow_us.
    double fast_per_s = 0, slow_per_s = 0;
    uint64_t rate_since_us = 0, rate_at_us = 0;     // the first search counted, the last
    bool rate_timed = false, rate_settled = false;  // rate_settled: load_slow_us since the first
    uint64_t load_step_until_us = 0;                // a load step: the split follows the load until then
    double load_ref_per_s = 0;                      // the load the split was last rescaled for
    uint64_t drawn_counted = 0;                     // the published drawn decisions CountSearch has counted
  };
  struct Reads {  // the last n traversals' read counts of one meganode
    std::vector<int> ring;
    size_t next = 0;
    double sum = 0;
  };
  ServerState& StateOf(uint64_t server);  // under mu_
  // The server's state if it has one, without the lock (states are never removed; the index is copied on insert).
  ServerState* Find(uint64_t server) const;
  // A decision drawn from what the last refresh published, or false if it may not be (see the top of this file).
  bool ChooseWithoutLock(ServerState& st, uint64_t now_us, Side* side);
  void CountSearch(ServerState& st, uint64_t now_us, uint64_t searches) const;  // under mu_
  double ReadsOf(uint64_t meganode) const;                                      // under mu_
  // The rule's side; when *measured, *costs holds each side's whole expected latency (l_s, and m x l_r).
  struct Costs {
    double server = 0, client = 0;
  };
  Side PreferredLocked(uint64_t server, uint64_t meganode, uint64_t now_us, bool* measured, Costs* costs = nullptr);
  // A measured server's steering (under mu_): the split's start, load steps, its move toward `preferred`; the draw.
  Side Steer(ServerState& st, Side preferred, const Costs& costs, uint64_t now_us);

  const Rule rule_;
  SelectorOptions options_;  // as given, with the rates' time constants at least 1 us
  WindowOptions window_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, ServerState> servers_;
  using Index = std::vector<std::pair<uint64_t, ServerState*>>;  // sorted by server
  std::atomic<const Index*> index_{nullptr};
  std::vector<std::unique_ptr<Index>> indexes_;  // every index published (readers may hold an old one)
  std::unordered_map<uint64_t, Reads> reads_;
  std::mt19937_64 rng_;
  // Decisions made under the lock and by Follow (those drawn without it are counted in each server's Published).
  std::atomic<uint64_t> server_decisions_{0}, client_decisions_{0}, explorations_{0};
  uint64_t load_steps_ = 0;
};

}  // namespace cell::selector
