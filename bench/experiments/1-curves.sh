#!/usr/bin/env bash
# Experiment 1 (Cell's figure 4): throughput-latency curves of server-side, client-side and adaptive search as the
# number of clients grows. One meganode-sized tree (KEYS keys in 64 MiB meganodes), one server worker, the NIC and
# CPU models of lib.sh (so that neither the server's CPU nor the "network" dominates). Each client is a bench thread
# with one get in flight (closed loop, YCSB C, uniform keys).
#
#   bench/experiments/1-curves.sh [--clients="1 2 4 8 16 32 64"] [--seconds=2]
# Writes OUT_DIR/<mode>.dat (clients ops_per_s p50_us p99_us server_fraction), OUT_DIR/curves.png; prints a JSON
# summary (each mode's peak throughput and the client count it came at; also OUT_DIR/summary.json).
source "$(dirname "$0")/lib.sh"
clients="1 2 4 8 16 32 64" seconds=${SECONDS_PER_RUN:-2}
for arg in "$@"; do
  case "$arg" in
    --clients=*) clients=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    *) die "unknown argument $arg" ;;
  esac
done
exp_init 1-curves
start_server
load
modes="server client adaptive"
for mode in $modes; do : >"$OUT_DIR/$mode.dat"; done
: >"$OUT_DIR/runs.jsonl"
for n in $clients; do
  for mode in $modes; do  # interleaved, so that the machine's drift touches every mode alike
    line=$(bench --no-load --workload=c --search="$mode" --threads="$n" --inflight=1 --duration="$seconds")
    echo "$line" >>"$OUT_DIR/runs.jsonl"
    echo "$n $(json ops_per_s <<<"$line") $(json p50_us <<<"$line") $(json p99_us <<<"$line") $(json server_fraction <<<"$line")" \
      >>"$OUT_DIR/$mode.dat"
    log "clients=$n $mode: $(json ops_per_s <<<"$line") ops/s, p99 $(json p99_us <<<"$line") us"
  done
done
# The plot wants "ops p50 p99" columns.
for mode in $modes; do awk '{print $2, $3, $4}' "$OUT_DIR/$mode.dat" >"$work/$mode.curve"; done
"$root/bench/plot.sh" curve "$OUT_DIR/curves.png" "Cell fig. 4 shape: gets, 1 server worker, clients $clients" \
  server="$work/server.curve" client="$work/client.curve" adaptive="$work/adaptive.curve" >&2 || log "plot failed"
python3 - "$OUT_DIR" $modes >"$OUT_DIR/summary.json" <<'PY'
import json, sys
out, modes = sys.argv[1], sys.argv[2:]
summary = {"experiment": "1-curves"}
for m in modes:
    rows = [list(map(float, l.split())) for l in open(f"{out}/{m}.dat") if l.strip()]
    best = max(rows, key=lambda r: r[1])
    summary[m] = {"peak_ops_per_s": round(best[1]), "at_clients": int(best[0]), "p99_us_at_peak": best[3]}
print(json.dumps(summary))
PY
cat "$OUT_DIR/summary.json"
