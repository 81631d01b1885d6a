#!/usr/bin/env bash
# Experiment 4 (Nessie's figure 4): CPU contention. Open loop at RATE gets/s for 20 s; from t = 8 s to 13 s busy
# "hog" processes are pinned to the server's CPU (cell-bench --hog), so the server's worker gets about half of it.
# Server-side search against adaptive; the NIC and CPU models of lib.sh; YCSB C, uniform keys.
#
#   bench/experiments/4-hogs.sh [--rate=2000] [--clients=32] [--inflight=8] [--hogs=1]
# Writes OUT_DIR/runs.jsonl, OUT_DIR/<mode>.csv, OUT_DIR/hogs.png and OUT_DIR/summary.json; prints the summary
# (exact p99s before, during and after the hogs, throughput, the adaptive selector's server-side fraction). No
# acceptance bound: the issue asks for the picture.
source "$(dirname "$0")/lib.sh"
rate=2000 clients=32 inflight=8 hogs=1
for arg in "$@"; do
  case "$arg" in
    --rate=*) rate=${arg#*=} ;;
    --clients=*) clients=${arg#*=} ;;
    --inflight=*) inflight=${arg#*=} ;;
    --hogs=*) hogs=${arg#*=} ;;
    *) die "unknown argument $arg" ;;
  esac
done
exp_init 4-hogs
start_server
load
hog_flags=()
for _ in $(seq "$hogs"); do hog_flags+=(--hog="8:5:$SERVER_CPU"); done
: >"$OUT_DIR/runs.jsonl"
for mode in server adaptive; do
  line=$(bench --no-load --workload=c --search="$mode" --threads="$clients" --inflight="$inflight" --rate="$rate" \
    --duration=20 --window=3:8 --window=8:13 --window=15:20 --csv="$OUT_DIR/$mode.csv" "${hog_flags[@]}")
  echo "{\"mode\":\"$mode\",\"run\":$line}" >>"$OUT_DIR/runs.jsonl"
  log "$mode: $(json ops_per_s <<<"$line") ops/s, p99 $(json p99_us <<<"$line") us"
done
python3 "$root/bench/experiments/phases.py" hogs "$OUT_DIR" 8 5 >"$OUT_DIR/summary.json"
"$root/bench/plot.sh" series "$OUT_DIR/hogs.png" "CPU contention: $hogs hog(s) on the server's CPU from 8 s to 13 s, $rate gets/s" \
  --mark=8:5:hogs server-only="$OUT_DIR/server.csv" adaptive="$OUT_DIR/adaptive.csv" >&2 || log "plot failed"
cat "$OUT_DIR/summary.json"
