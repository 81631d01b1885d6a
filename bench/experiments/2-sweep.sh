#!/usr/bin/env bash
# Experiment 2: the fixed-ratio sweep (0%, 10%, ..., 100% of gets searched on the server) beside adaptive and DEX's
# heuristic, in one run. Closed loop, YCSB C, uniform keys, CLIENTS bench threads with one get in flight each; the
# NIC and CPU models of lib.sh. Rounds interleave every policy; each policy's throughput is its median over rounds.
#
#   bench/experiments/2-sweep.sh [--rounds=3] [--seconds=3] [--clients=32]
# Acceptance (issue 6): adaptive >= both pure modes (fixed:0 and fixed:1) and >= 0.95x the best fixed ratio.
# Writes OUT_DIR/runs.jsonl, OUT_DIR/sweep.dat, OUT_DIR/sweep.png; prints a JSON summary with "pass".
source "$(dirname "$0")/lib.sh"
rounds=3 seconds=${SECONDS_PER_RUN:-3} clients=32
for arg in "$@"; do
  case "$arg" in
    --rounds=*) rounds=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --clients=*) clients=${arg#*=} ;;
    *) die "unknown argument $arg" ;;
  esac
done
exp_init 2-sweep
start_server
load
policies="fixed:0 fixed:0.1 fixed:0.2 fixed:0.3 fixed:0.4 fixed:0.5 fixed:0.6 fixed:0.7 fixed:0.8 fixed:0.9 fixed:1 adaptive dex"
: >"$OUT_DIR/runs.jsonl"
for round in $(seq "$rounds"); do
  for p in $policies; do
    line=$(bench --no-load --workload=c --search="$p" --threads="$clients" --inflight=1 --duration="$seconds")
    echo "{\"round\":$round,\"policy\":\"$p\",\"run\":$line}" >>"$OUT_DIR/runs.jsonl"
    log "round $round $p: $(json ops_per_s <<<"$line") ops/s, server-side $(json server_fraction <<<"$line")"
  done
done
python3 - "$OUT_DIR" >"$OUT_DIR/summary.json" <<'PY'
import json, statistics, sys
out = sys.argv[1]
runs = [json.loads(l) for l in open(f"{out}/runs.jsonl")]
by = {}
for r in runs:
    assert r["run"]["errors"] == 0, f"errors in {r['policy']}"
    by.setdefault(r["policy"], []).append(r["run"])
med = {p: statistics.median(x["ops_per_s"] for x in rs) for p, rs in by.items()}
frac = {p: statistics.median(x["server_fraction"] for x in rs) for p, rs in by.items()}
fixed = {p: v for p, v in med.items() if p.startswith("fixed:")}
best = max(fixed, key=fixed.get)
a = med["adaptive"]
with open(f"{out}/sweep.dat", "w") as f:
    for p in by:
        f.write(f"{p.replace('fixed:', '')} {med[p]:.0f}\n")
summary = {
    "experiment": "2-sweep", "rounds": len(next(iter(by.values()))),
    "ops_per_s_median": {p: round(v) for p, v in med.items()},
    "server_fraction_median": {p: round(v, 3) for p, v in frac.items()},
    "best_fixed": best, "adaptive_vs_best_fixed": round(a / fixed[best], 3),
    "adaptive_vs_server_only": round(a / med["fixed:1"], 3), "adaptive_vs_client_only": round(a / med["fixed:0"], 3),
    "dex_vs_best_fixed": round(med["dex"] / fixed[best], 3),
}
summary["pass"] = a >= med["fixed:0"] and a >= med["fixed:1"] and a >= 0.95 * fixed[best]
print(json.dumps(summary))
PY
"$root/bench/plot.sh" bars "$OUT_DIR/sweep.png" \
  "gets/s by the fraction searched on the server (medians of $rounds rounds, $clients clients)" "gets/s" \
  "$OUT_DIR/sweep.dat" >&2 || log "plot failed"
cat "$OUT_DIR/summary.json"
