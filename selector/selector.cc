// The search selector's policies (see selector.h).
#include "selector/selector.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace cell::selector {

namespace {
uint64_t SeedOf(uint64_t seed) { return seed != 0 ? seed : std::random_device{}(); }

// A uniform draw in [0, 1) from this thread's own generator (splitmix64), for decisions made without the lock.
double ThreadUniform() {
  thread_local uint64_t state = SeedOf(0);
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}
}  // namespace

StatusOr<std::unique_ptr<Selector>> MakeSelector(std::string_view mode, const SelectorOptions& options) {
  if (mode == "server") return std::unique_ptr<Selector>(new FixedSelector(1.0, options.seed));
  if (mode == "client") return std::unique_ptr<Selector>(new FixedSelector(0.0, options.seed));
  if (mode == "adaptive") return std::unique_ptr<Selector>(new ModelSelector(ModelSelector::Rule::kCell, options));
  if (mode == "dex") return std::unique_ptr<Selector>(new ModelSelector(ModelSelector::Rule::kDex, options));
  if (mode.substr(0, 6) == "fixed:") {
    const std::string number(mode.substr(6));
    char* end = nullptr;
    const double x = std::strtod(number.c_str(), &end);
    if (!number.empty() && end == number.c_str() + number.size() && x >= 0 && x <= 1) {
      return std::unique_ptr<Selector>(new FixedSelector(x, options.seed));
    }
  }
  return Status::InvalidArgument(fmt::format(
      "search mode '{}' is not one of adaptive, server, client, dex, fixed:<fraction of server-side searches, 0..1>",
      mode));
}

StatusOr<SelectorOptions::Floor> ParseFloor(std::string_view name) {
  if (name == "per-side") return SelectorOptions::Floor::kPerSide;
  if (name == "read") return SelectorOptions::Floor::kRead;
  if (name == "none") return SelectorOptions::Floor::kNone;
  if (name == "marginal") return SelectorOptions::Floor::kMarginal;
  return Status::InvalidArgument(fmt::format(
      "selector floor '{}' is not one of read (the lowest read's, for both sides: Cell's rule), per-side (each "
      "side's lowest latency), none (whole latencies compared), marginal (each side's latency squared over its lowest: "
      "what one more search adds to every search's wait)",
      name));
}

FixedSelector::FixedSelector(double server_fraction, uint64_t seed) : fraction_(server_fraction), seed_(seed) {}

Side FixedSelector::Choose(uint64_t, uint64_t, uint64_t) {
  bool server = fraction_ >= 1;
  if (fraction_ > 0 && fraction_ < 1) {
    thread_local std::mt19937_64 rng(SeedOf(seed_));
    server = std::uniform_real_distribution<double>(0, 1)(rng) < fraction_;
  }
  (server ? server_ : client_).fetch_add(1, std::memory_order_relaxed);
  return server ? Side::kServer : Side::kClient;
}

SelectorStats FixedSelector::stats() const {
  SelectorStats s;
  s.server_decisions = server_.load(std::memory_order_relaxed);
  s.client_decisions = client_.load(std::memory_order_relaxed);
  return s;
}

ModelSelector::ModelSelector(Rule rule, const SelectorOptions& options)
    : rule_(rule), options_(options), rng_(SeedOf(options.seed)) {
  window_.capacity = rule == Rule::kDex ? 50 : options.window;
  window_.outlier_sigmas = rule == Rule::kDex ? 0 : options.outlier_sigmas;
  window_.idle_reset_us = options.idle_reset_us;
  window_.max_age_us = rule == Rule::kDex ? 0 : options.max_age_us;
  options_.load_fast_us = std::max<uint64_t>(options_.load_fast_us, 1);  // rates over 0 us would be 0/0
  options_.load_slow_us = std::max<uint64_t>(options_.load_slow_us, 1);
}

ModelSelector::ServerState& ModelSelector::StateOf(uint64_t server) {
  auto [it, inserted] = servers_.try_emplace(server, window_);
  if (inserted) {
    const Index* old = index_.load(std::memory_order_relaxed);
    auto next = std::make_unique<Index>(old != nullptr ? *old : Index());
    next->insert(
        std::lower_bound(next->begin(), next->end(), std::make_pair(server, static_cast<ServerState*>(nullptr))),
        {server, &it->second});
    index_.store(next.get(), std::memory_order_release);
    indexes_.push_back(std::move(next));
  }
  return it->second;
}

ModelSelector::ServerState* ModelSelector::Find(uint64_t server) const {
  const Index* index = index_.load(std::memory_order_acquire);
  if (index == nullptr) return nullptr;
  auto it = std::lower_bound(index->begin(), index->end(), server,
                             [](const auto& entry, uint64_t id) { return entry.first < id; });
  return it != index->end() && it->first == server ? it->second : nullptr;
}

bool ModelSelector::ChooseWithoutLock(ServerState& st, uint64_t now_us, Side* side) {
  Published& p = st.published;
  if (now_us >= p.until_us.load(std::memory_order_acquire)) return false;
  const bool preferred_server = p.server_preferred.load(std::memory_order_relaxed);
  // One draw decides both: below `explore` it explores (the side the rule estimates worse); above, rescaled to
  // [0, 1), it is the split's draw.
  const double u = ThreadUniform(), explore = p.explore.load(std::memory_order_relaxed);
  bool server;
  if (u < explore) {
    server = !preferred_server;
    explorations_.fetch_add(1, std::memory_order_relaxed);
  } else {
    server = (u - explore) < p.split.load(std::memory_order_relaxed) * (1 - explore);
  }
  (server ? p.drawn_server : p.drawn_client).fetch_add(1, std::memory_order_relaxed);
  *side = server ? Side::kServer : Side::kClient;
  return true;
}

double ModelSelector::ReadsOf(uint64_t meganode) const {
  auto it = reads_.find(meganode);
  if (it == reads_.end() || it->second.ring.empty()) return options_.initial_reads;
  return it->second.sum / static_cast<double>(it->second.ring.size());
}

Side ModelSelector::PreferredLocked(uint64_t server, uint64_t meganode, uint64_t now_us, bool* measured, Costs* costs) {
  ServerState& st = StateOf(server);
  st.search.Expire(now_us);
  st.read.Expire(now_us);
  *measured = !st.search.empty() && !st.read.empty();
  if (!*measured) {
    // Measure what is not measured yet; while neither is, alternate.
    if (st.search.empty() && st.read.empty()) {
      st.next_unmeasured_server = !st.next_unmeasured_server;
      return st.next_unmeasured_server ? Side::kClient : Side::kServer;
    }
    return st.search.empty() ? Side::kServer : Side::kClient;
  }
  const double m = ReadsOf(meganode);
  const double ls = st.search.mean(), lr = st.read.mean();
  if (costs != nullptr) *costs = Costs{ls, m * lr};
  if (rule_ == Rule::kDex) return ls < m * (lr + 0.040) * 1.2 ? Side::kServer : Side::kClient;
  if (options_.floor == SelectorOptions::Floor::kMarginal) {
    // What one more search adds to all searches' waiting on each side: l^2 / floor (see selector.h).
    const double fs = st.search.floor(), fr = st.read.floor();
    const double server = fs > 0 ? ls * ls / fs : ls, client = m * (fr > 0 ? lr * lr / fr : lr);
    return server < client ? Side::kServer : Side::kClient;
  }
  const double rtt_r = options_.floor == SelectorOptions::Floor::kNone ? 0 : st.read.floor();
  const double rtt_s = options_.floor == SelectorOptions::Floor::kPerSide ? st.search.floor() : rtt_r;
  return (ls - rtt_s) < m * (lr - rtt_r) ? Side::kServer : Side::kClient;
}

Side ModelSelector::Preferred(uint64_t server, uint64_t meganode, uint64_t now_us) {
  std::lock_guard lock(mu_);
  bool measured = false;
  return PreferredLocked(server, meganode, now_us, &measured);
}

void ModelSelector::CountSearch(ServerState& st, uint64_t now_us, uint64_t searches) const {
  // Event-rate estimates with exponential decay: each search adds 1/tau, and the estimate decays by e^(-dt/tau)
  // (the searches decided without the lock since the last count are counted now, as if made now).
  // After a pause longer than load_slow_us they start afresh, as the latency windows do after an idle gap.
  if (st.rate_timed && now_us > st.rate_at_us && now_us - st.rate_at_us > options_.load_slow_us) {
    st.rate_timed = st.rate_settled = false;
    st.fast_per_s = st.slow_per_s = 0;
  }
  if (!st.rate_timed) {
    st.rate_timed = true;
    st.rate_since_us = st.rate_at_us = now_us;
  }
  const double dt = now_us > st.rate_at_us ? static_cast<double>(now_us - st.rate_at_us) : 0.0;
  st.rate_at_us = std::max(st.rate_at_us, now_us);
  const double fast = static_cast<double>(options_.load_fast_us), slow = static_cast<double>(options_.load_slow_us);
  const double n = static_cast<double>(searches);
  st.fast_per_s = st.fast_per_s * std::exp(-dt / fast) + n * 1e6 / fast;
  st.slow_per_s = st.slow_per_s * std::exp(-dt / slow) + n * 1e6 / slow;
  if (!st.rate_settled && st.rate_at_us - st.rate_since_us >= options_.load_slow_us) {
    // Both started from 0, so each is low by e^(-age/tau) until then: correct that once, and trust them from now.
    const double age = static_cast<double>(st.rate_at_us - st.rate_since_us);
    st.fast_per_s /= 1 - std::exp(-age / fast);
    st.slow_per_s /= 1 - std::exp(-age / slow);
    st.rate_settled = true;
  }
}

Side ModelSelector::Choose(uint64_t server, uint64_t meganode, uint64_t now_us) {
  const bool steered = rule_ == Rule::kCell && options_.steer_per_s > 0;
  if (steered) {
    Side side;
    if (ServerState* st = Find(server); st != nullptr && ChooseWithoutLock(*st, now_us, &side)) return side;
  }
  std::lock_guard lock(mu_);
  bool measured = false;
  Costs costs;
  const Side preferred = PreferredLocked(server, meganode, now_us, &measured, &costs);
  Side side = preferred;
  if (steered) {
    ServerState& st = StateOf(server);
    const uint64_t drawn = st.published.drawn_server.load(std::memory_order_relaxed) +
                           st.published.drawn_client.load(std::memory_order_relaxed);
    CountSearch(st, now_us, 1 + (drawn - st.drawn_counted));
    st.drawn_counted = drawn;
    if (measured) side = Steer(st, preferred, costs, now_us);
  }
  // Exploration: about a fraction `explore` of the time on the side estimated worse, not of the searches.
  double explore = options_.explore;
  if (rule_ == Rule::kCell && measured) {
    const double better = preferred == Side::kServer ? costs.server : costs.client;
    const double worse = preferred == Side::kServer ? costs.client : costs.server;
    if (worse > better && worse > 0) explore *= better / worse;
  }
  if (measured && explore > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < explore) {
    side = preferred == Side::kServer ? Side::kClient : Side::kServer;  // the side the rule estimates worse
    explorations_.fetch_add(1, std::memory_order_relaxed);
  }
  (side == Side::kServer ? server_decisions_ : client_decisions_).fetch_add(1, std::memory_order_relaxed);
  if (steered) {
    // What the decisions until the next refresh draw from: none while unmeasured (each must ask for its
    // measurement) or in a load step (the split follows each search's load).
    ServerState& st = StateOf(server);
    Published& p = st.published;
    p.split.store(st.split, std::memory_order_relaxed);
    p.explore.store(measured ? explore : 0, std::memory_order_relaxed);
    p.server_preferred.store(preferred == Side::kServer, std::memory_order_relaxed);
    p.until_us.store(measured && now_us >= st.load_step_until_us ? now_us + kRefreshUs : 0, std::memory_order_release);
  }
  return side;
}

Side ModelSelector::Steer(ServerState& st, Side preferred, const Costs& costs, uint64_t now_us) {
  if (st.starting) {
    // The start: where the whole latencies share the time evenly, from the estimates as they fill. The first samples
    // of each side include its cold start (a first scan's page faults: hundreds of microseconds), so a start fixed at
    // the first measurement may lie near one half whatever the sides cost, and steering would take most of a second
    // to leave it. Steering takes over once either window is full (the cold sample is then one of a window's), or
    // kStartUs after the start began, whichever comes first: a client too slow to fill a window would otherwise stay
    // at the even share, which gives the dearer side half the time, whatever the rule prefers.
    if (!st.split_timed) st.start_us = now_us;
    if (costs.server + costs.client > 0) st.split = costs.client / (costs.server + costs.client);
    st.starting =
        st.search.size() < window_.capacity && st.read.size() < window_.capacity && now_us < st.start_us + kStartUs;
  }
  // A step in this client's own load on the server (its searches per second over the last ~load_fast_us against
  // the last ~load_slow_us, by load_step or more either way) rescales the split, for the next 3 x load_fast_us while
  // the fast estimate settles on the new load, so that the rate of searches sent to the server stays what it was:
  // the server's capacity has not changed with the client's load, and steering would take most of a second to move
  // the difference, while the server's queue grows (a load spike) or it idles (the spike's end). Only once the
  // estimates rest on enough searches to tell a step from noise (load_min_searches within load_fast_us, and
  // load_slow_us since the first).
  const double min_per_s = options_.load_min_searches * 1e6 / static_cast<double>(options_.load_fast_us);
  if (options_.load_step > 1 && st.rate_settled && now_us >= st.load_step_until_us && st.fast_per_s >= min_per_s &&
      st.slow_per_s >= min_per_s &&
      (st.fast_per_s >= options_.load_step * st.slow_per_s || st.fast_per_s * options_.load_step <= st.slow_per_s)) {
    st.load_step_until_us = now_us + 3 * options_.load_fast_us;
    st.load_ref_per_s = st.slow_per_s;
    st.starting = false;  // the rescaled split is kept, not set at the even share again
    ++load_steps_;
  }
  if (now_us < st.load_step_until_us) {
    st.split = std::clamp(st.split * st.load_ref_per_s / st.fast_per_s, 0.0, 1.0);
    st.load_ref_per_s = st.slow_per_s = st.fast_per_s;  // the new load is the reference now
  }
  // The split moves toward the preferred side for the time since it last moved (at most 100 ms' worth: a server not
  // searched for a while starts again from where it was, not from a jump). Threads read the clock before taking the
  // lock, so a call may come with an earlier time than the last: it moves nothing.
  const uint64_t since_us = !st.split_timed || now_us < st.split_at_us ? 0 : now_us - st.split_at_us;
  const double step = options_.steer_per_s * static_cast<double>(std::min<uint64_t>(since_us, 100'000)) / 1e6;
  st.split = std::clamp(st.split + (preferred == Side::kServer ? step : -step), 0.0, 1.0);
  st.split_at_us = st.split_timed ? std::max(st.split_at_us, now_us) : now_us;
  st.split_timed = true;
  return std::uniform_real_distribution<double>(0, 1)(rng_) < st.split ? Side::kServer : Side::kClient;
}

Side ModelSelector::Follow(uint64_t server, uint64_t meganode, uint64_t now_us) {
  Side side = Side::kServer;
  if (rule_ == Rule::kCell && options_.steer_per_s > 0) {
    // The split as the gets' last refresh published it (one half for a server no get has been decided for).
    const ServerState* st = Find(server);
    const double split = st != nullptr ? st->published.split.load(std::memory_order_relaxed) : 0.5;
    side = ThreadUniform() < split ? Side::kServer : Side::kClient;
  } else {
    std::lock_guard lock(mu_);
    bool measured = false;
    const Side preferred = PreferredLocked(server, meganode, now_us, &measured);
    if (measured) side = preferred;
  }
  (side == Side::kServer ? server_decisions_ : client_decisions_).fetch_add(1, std::memory_order_relaxed);
  return side;
}

void ModelSelector::OnServerSearch(uint64_t server, double us, uint64_t now_us) {
  std::lock_guard lock(mu_);
  StateOf(server).search.Add(us, now_us);
}

void ModelSelector::OnRead(uint64_t server, double us, uint64_t now_us) {
  std::lock_guard lock(mu_);
  StateOf(server).read.Add(us, now_us);
}

void ModelSelector::OnReads(uint64_t server, const double* us, size_t n, uint64_t now_us) {
  std::lock_guard lock(mu_);
  ServerState& st = StateOf(server);
  for (size_t i = 0; i < n; ++i) st.read.Add(us[i], now_us);
}

void ModelSelector::OnTraversal(uint64_t meganode, int reads) {
  if (reads <= 0) return;
  std::lock_guard lock(mu_);
  Reads& r = reads_[meganode];
  if (r.ring.size() < options_.window) {
    r.ring.push_back(reads);
  } else {
    r.sum -= r.ring[r.next];
    r.ring[r.next] = reads;
    r.next = (r.next + 1) % r.ring.size();
  }
  r.sum += reads;
}

SelectorStats ModelSelector::stats() const {
  std::lock_guard lock(mu_);
  SelectorStats s;
  s.server_decisions = server_decisions_.load(std::memory_order_relaxed);
  s.client_decisions = client_decisions_.load(std::memory_order_relaxed);
  for (const auto& [id, st] : servers_) {
    s.server_decisions += st.published.drawn_server.load(std::memory_order_relaxed);
    s.client_decisions += st.published.drawn_client.load(std::memory_order_relaxed);
  }
  s.explorations = explorations_.load(std::memory_order_relaxed);
  s.load_steps = load_steps_;
  double reads = 0, traversals = 0;
  for (const auto& [meganode, r] : reads_) {
    reads += r.sum;
    traversals += static_cast<double>(r.ring.size());
  }
  s.reads_per_search = traversals > 0 ? reads / traversals : 0;
  for (const auto& [id, st] : servers_) {
    s.outliers += st.search.discarded() + st.read.discarded();
    s.history_resets += st.search.resets() + st.read.resets();
    s.servers.push_back({.server = id,
                         .server_search_us = st.search.mean(),
                         .read_us = st.read.mean(),
                         .rtt_us = st.read.floor(),
                         .server_rtt_us = st.search.floor(),
                         .split = st.split,
                         .server_samples = st.search.size(),
                         .read_samples = st.read.size()});
  }
  std::sort(s.servers.begin(), s.servers.end(), [](const auto& a, const auto& b) { return a.server < b.server; });
  return s;
}

}  // namespace cell::selector
