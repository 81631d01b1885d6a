#!/usr/bin/env bash
# Experiment 5 (Cell's figure 9): workload mixes, from 100% gets to 100% updates (mix:<read fraction>), and YCSB A
# (50% updates) and B (5% updates), for server-side, client-side and adaptive search. Puts always run on the server,
# so as updates grow the server's CPU is busier and gets should move to one-sided reads. Closed loop, CLIENTS bench
# threads with one operation in flight; the NIC and CPU models of lib.sh; uniform keys.
#
#   bench/experiments/5-mixes.sh [--clients=32] [--seconds=2]
# Writes OUT_DIR/<mode>.dat (read fraction, ops/s), OUT_DIR/mixes.png; prints a JSON summary.
source "$(dirname "$0")/lib.sh"
clients=32 seconds=${SECONDS_PER_RUN:-2}
for arg in "$@"; do
  case "$arg" in
    --clients=*) clients=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    *) die "unknown argument $arg" ;;
  esac
done
exp_init 5-mixes
start_server
load
modes="server client adaptive"
: >"$OUT_DIR/runs.jsonl"
for mode in $modes; do : >"$OUT_DIR/$mode.dat"; done
for w in mix:1 mix:0.9 mix:0.75 mix:0.5 mix:0.25 mix:0 a b; do
  for mode in $modes; do
    line=$(bench --no-load --workload="$w" --search="$mode" --threads="$clients" --inflight=1 --duration="$seconds")
    echo "{\"workload\":\"$w\",\"mode\":\"$mode\",\"run\":$line}" >>"$OUT_DIR/runs.jsonl"
    case "$w" in mix:*) echo "${w#mix:} $(json ops_per_s <<<"$line")" >>"$OUT_DIR/$mode.dat" ;; esac
    log "$w $mode: $(json ops_per_s <<<"$line") ops/s, server-side $(json server_fraction <<<"$line")"
  done
done
"$root/bench/plot.sh" lines "$OUT_DIR/mixes.png" "Throughput by read fraction (the rest updates), $clients clients" \
  "fraction of operations that are gets" "ops/s" \
  server="$OUT_DIR/server.dat" client="$OUT_DIR/client.dat" adaptive="$OUT_DIR/adaptive.dat" >&2 || log "plot failed"
python3 - "$OUT_DIR" >"$OUT_DIR/summary.json" <<'PY'
import json, sys
out = sys.argv[1]
summary = {"experiment": "5-mixes"}
for l in open(f"{out}/runs.jsonl"):
    r = json.loads(l)
    assert r["run"]["errors"] == 0, f"errors in {r['workload']} {r['mode']}"
    summary.setdefault(r["workload"], {})[r["mode"]] = {
        "ops_per_s": r["run"]["ops_per_s"], "server_fraction": r["run"]["server_fraction"]}
for w, modes in summary.items():
    if isinstance(modes, dict) and "adaptive" in modes:
        best = max(modes[m]["ops_per_s"] for m in ("server", "client"))
        modes["adaptive_vs_best_pure"] = round(modes["adaptive"]["ops_per_s"] / best, 3) if best else None
print(json.dumps(summary))
PY
cat "$OUT_DIR/summary.json"
