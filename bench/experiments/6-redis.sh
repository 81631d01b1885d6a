#!/usr/bin/env bash
# Experiment 6: Cell against Redis on YCSB B (95% gets, 5% updates), C (gets) and E (scans of 1..100 pairs, 5%
# inserts), the same workload from the same harness (cell-bench --store=cell|redis). No models here: the real
# machine. Cell: one server with one worker pinned to CPU 0, searched server-side, client-side and adaptively over shm.
# Redis: Debian's redis-server pinned to CPU 0 (no persistence), GET/SET, a sorted set for scans, over a Unix
# socket. cell-bench on CPU 1: CLIENTS threads with up to INFLIGHT operations each (a Redis connection per thread,
# pipelined). Rounds interleave the stores, each round in another order (rotated), so that no store always runs
# first or last. The rates are medians over rounds. The ratios are medians of each round's own ratios: the stores of
# one round ran seconds apart, while this VM's speed drifts by as much as 2x between rounds (Redis and Cell alike),
# which a ratio of medians would carry.
#
#   bench/experiments/6-redis.sh [--rounds=3] [--seconds=3] [--clients=4] [--inflight=16]
# Writes OUT_DIR/runs.jsonl and OUT_DIR/redis.png (bars grouped by workload, coloured by store and search); prints a
# JSON summary (ops/s; each side's ratio to Redis and adaptive's to the better side, medians of per-round ratios).
source "$(dirname "$0")/lib.sh"
rounds=3 seconds=${SECONDS_PER_RUN:-3} clients=4 inflight=16
for arg in "$@"; do
  case "$arg" in
    --rounds=*) rounds=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --clients=*) clients=${arg#*=} ;;
    --inflight=*) inflight=${arg#*=} ;;
    *) die "unknown argument $arg" ;;
  esac
done
for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || die "$tool not found (deploy/install-deps.sh installs it)"
done
exp_init 6-redis
NIC="" CPU=0  # the real machine: no models
redis_pid=""
trap '[ -z "$redis_pid" ] || { kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; }; exp_cleanup' EXIT
start_server
start_redis  # lib.sh: sets redis_dir and redis_pid
pages=$(shm_pages)
log "Cell's regions on $pages"
log "loading $KEYS keys into each store"
bench --workload=c --search=server --duration=0.2 >/dev/null
bench_redis "$redis_dir/redis.sock" --workload=c --duration=0.2 >/dev/null
: >"$OUT_DIR/runs.jsonl"
stores=(redis server client adaptive)
for round in $(seq "$rounds"); do
  for w in b c e; do
    for i in 0 1 2 3; do
      store=${stores[$(((i + round - 1) % 4))]}
      if [ "$store" = redis ]; then
        line=$(bench_redis "$redis_dir/redis.sock" --no-load --workload="$w" --threads="$clients" \
          --inflight="$inflight" --duration="$seconds")
      else
        line=$(bench --no-load --workload="$w" --search="$store" --threads="$clients" --inflight="$inflight" \
          --duration="$seconds")
      fi
      echo "{\"round\":$round,\"workload\":\"$w\",\"store\":\"$store\",\"run\":$line}" >>"$OUT_DIR/runs.jsonl"
      log "round $round $w $store: $(json ops_per_s <<<"$line") ops/s, p99 $(json p99_us <<<"$line") us"
    done
  done
done
python3 - "$OUT_DIR" "$pages" >"$OUT_DIR/summary.json" <<'PY'
import json, statistics, sys
out = sys.argv[1]
runs = [json.loads(l) for l in open(f"{out}/runs.jsonl")]
by = {}
for r in runs:
    assert r["run"]["errors"] == 0, f"errors in {r['workload']} {r['store']}"
    by.setdefault((r["workload"], r["store"]), []).append(r["run"])
summary = {"experiment": "6-redis", "rounds": max(r["round"] for r in runs), "cell_pages": sys.argv[2]}
for (w, store), rs in by.items():
    ops = statistics.median(x["ops_per_s"] for x in rs)
    p99 = statistics.median(x["p99_us"] for x in rs)
    summary.setdefault(w, {})[store] = {"ops_per_s": round(ops), "p99_us": p99}
# The plot's panels (bench/plot.sh groups): gets and updates (B, C), then scans (E), whose rates are ~10x lower.
columns = [("redis", "Redis"), ("server", "Cell server-side"), ("client", "Cell client-side"),
           ("adaptive", "Cell adaptive")]
for name, workloads in (("gets", "bc"), ("scans", "e")):
    with open(f"{out}/redis-{name}.dat", "w") as f:
        f.write("workload " + " ".join(f'"{title}"' for _, title in columns) + "\n")
        for w in workloads:
            if w in summary:
                f.write(f"YCSB-{w.upper()} " + " ".join(str(summary[w][s]["ops_per_s"]) for s, _ in columns) + "\n")
# Per round: each side against Redis, and adaptive against the better of server-side and client-side; the medians.
rounds = {}
for r in runs:
    rounds.setdefault((r["workload"], r["round"]), {})[r["store"]] = r["run"]["ops_per_s"]
for w, stores in summary.items():
    if not isinstance(stores, dict) or "redis" not in stores:
        continue
    mine = [rates for (rw, _), rates in rounds.items()
            if rw == w and len(rates) == 4 and rates["redis"] > 0 and max(rates["server"], rates["client"]) > 0]
    for s in ("server", "client", "adaptive"):
        stores[s]["vs_redis"] = round(statistics.median(x[s] / x["redis"] for x in mine), 3) if mine else None
    stores["adaptive"]["vs_better_side"] = round(
        statistics.median(x["adaptive"] / max(x["server"], x["client"]) for x in mine), 3) if mine else None
print(json.dumps(summary))
PY
"$root/bench/plot.sh" groups "$OUT_DIR/redis.png" "Cell and Redis, YCSB B, C, E (medians of $rounds rounds)" \
  "ops/s (B: 95% gets, C: gets)=$OUT_DIR/redis-gets.dat" "ops/s (E: scans)=$OUT_DIR/redis-scans.dat" >&2 ||
  log "plot failed"
cat "$OUT_DIR/summary.json"
