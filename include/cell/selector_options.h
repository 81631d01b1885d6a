// The constants of the adaptive selector (ClientOptions::selector), which picks for each get whether the server
// searches (an RPC) or the client does (one-sided reads). Research knobs: the defaults (Cell's model, with each side
// costed at its marginal cost) suit a database layer; the bench harness varies them (docs/BENCHMARKS.md says what
// each one measured).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace cell {

// For search "adaptive". "dex" uses its own (50-sample windows, no outlier filter, per-operation decisions) and
// ignores floor, max_age, steer_per_s and load_step.
struct SelectorOptions {
  size_t window = 100;                         // latency samples kept per server and measure
  double outlier_sigmas = 3.0;                 // samples this many standard deviations off are dropped
  double explore = 0.01;                       // probability of taking the side estimated slower
  std::chrono::milliseconds idle_reset{3000};  // estimates with no sample for this long are dropped
  std::chrono::milliseconds max_age{1000};     // samples older than this are dropped (0: kept)
  double initial_reads = 4;                    // reads per client-side search before any is measured
  int sample_one_in = 8;  // client-side searches whose reads are timed: one in this many (timing costs CPU)
  // How the two sides' latencies are costed before they are compared (l_s: a server-side get's; l_r: a read's, m
  // reads per client-side get):
  //   "marginal"  l_s^2 / fastest l_s against m x l_r^2 / fastest l_r: what one more get adds to the waiting of
  //               every get on that side (a queue's marginal cost). Idle, whole latencies; a queue that grows
  //               costs as its square, so a server is left well before its latency equals m reads'
  //   "read"      l_s - RTT against m x (l_r - RTT), RTT the fastest read (Cell's rule as the paper has it; right
  //               where an RPC's round trip costs what a read's does and a read's latency is mostly queue)
  //   "per-side"  each side less its own fastest (queueing against queueing; indifferent while both sides are idle)
  //   "none"      whole latencies, l_s against m x l_r
  std::string floor = "marginal";
  // How fast the fraction of gets searched on each server follows the rule, per second (0: the rule decides each
  // get alone, as the paper; a client's threads then take the same side together, in bursts).
  double steer_per_s = 1.0;
  // A step in this client's own load on a server (its gets to it per second over the last 50 ms, against the last
  // second, by this factor or more either way: a load spike, its end) rescales that server's fraction at once so
  // that the rate of gets searched there stays what it was (0: never; steering alone then follows at steer_per_s).
  // Only at 400 gets/s to that server or more, before and after: below it, 50 ms of gets are too few to tell a
  // step from noise.
  double load_step = 1.5;
};

}  // namespace cell
