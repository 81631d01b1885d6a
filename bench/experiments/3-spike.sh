#!/usr/bin/env bash
# Experiment 3 (Cell's figure 7): a load spike. Open loop (Poisson arrivals, latency from each arrival's due time):
# RATE gets/s (about 40% of what one server worker serves under lib.sh's CPU model), then RATE x 2.5 for 5 s from
# t = 8 s (more than the server alone can serve, less than server and NIC together), then back, 20 s in all;
# server-side search against adaptive. The NIC and CPU models of lib.sh; YCSB C, uniform keys; CLIENTS bench
# threads, up to INFLIGHT gets each.
#
#   bench/experiments/3-spike.sh [--rate=2000] [--clients=32] [--inflight=8]
# Acceptance (issue 6): during the spike adaptive's p99 stays within 3x of its p99 before it, while server-only's
# grows 10x or more; adaptive's server-side fraction drops within 1 s of the spike's start and recovers after it.
# The p99s are exact over the operations completed in [3, 8) s (before), [8, 13) s (during) and [15, 20) s
# (after) (cell-bench --window); phases.py computes the rest. Writes OUT_DIR/runs.jsonl, OUT_DIR/<mode>.csv,
# OUT_DIR/spike.png and OUT_DIR/summary.json; prints the summary, with "pass".
source "$(dirname "$0")/lib.sh"
rate=2000 clients=32 inflight=8
for arg in "$@"; do
  case "$arg" in
    --rate=*) rate=${arg#*=} ;;
    --clients=*) clients=${arg#*=} ;;
    --inflight=*) inflight=${arg#*=} ;;
    *) die "unknown argument $arg" ;;
  esac
done
exp_init 3-spike
start_server
load
: >"$OUT_DIR/runs.jsonl"
for mode in server adaptive; do
  line=$(bench --no-load --workload=c --search="$mode" --threads="$clients" --inflight="$inflight" --rate="$rate" \
    --spike=8:5:2.5 --duration=20 --window=3:8 --window=8:13 --window=15:20 --csv="$OUT_DIR/$mode.csv")
  echo "{\"mode\":\"$mode\",\"run\":$line}" >>"$OUT_DIR/runs.jsonl"
  log "$mode: $(json ops_per_s <<<"$line") ops/s, p99 $(json p99_us <<<"$line") us"
done
python3 "$root/bench/experiments/phases.py" spike "$OUT_DIR" 8 5 >"$OUT_DIR/summary.json"
"$root/bench/plot.sh" series "$OUT_DIR/spike.png" "Load spike: $rate gets/s, x2.5 from 8 s to 13 s" \
  --mark=8:5:spike server-only="$OUT_DIR/server.csv" adaptive="$OUT_DIR/adaptive.csv" >&2 || log "plot failed"
cat "$OUT_DIR/summary.json"
