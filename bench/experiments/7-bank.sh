#!/usr/bin/env bash
# Experiment 7 (issue 20): bank transactions (cell-bench --workload=bank: transfers that read and write two random
# accounts, 5% read-only audits of 100 accounts) against Cell, PostgreSQL and Redis, from the same harness in the same
# run, medians over interleaved rounds.
#   A. One server: Cell (one worker) or PostgreSQL (a private server) or Redis, pinned to CPU 0; cell-bench on CPU 1
#      with CLIENTS closed-loop threads (a connection each for PostgreSQL and Redis). Durability matched: Cell
#      off (no --data-dir), async, sync; PostgreSQL off (fsync off), async (synchronous_commit off), sync (both on);
#      Redis without persistence. Uniform and Zipfian (0.99) account choice.
#   B. Three Cell servers (ZooKeeper, all on CPU 0, 1 MiB meganodes so that the accounts spread over the three),
#      durability off and sync: the same workload, most transfers across servers.
#   C. The cost to plain gets (YCSB C, 4 threads, 16 in flight, server-side) of bank transactions running alongside
#      (a second cell-bench, 8 threads), on the one-server Cell, durability sync: gets/s and p99 alone and together.
#
#   bench/experiments/7-bank.sh [--rounds=3] [--seconds=5] [--clients=16] [--accounts=100000] [--parts=ABC]
# Writes OUT_DIR/runs.jsonl; prints a JSON summary (medians; Cell's ratios to PostgreSQL and Redis).
source "$(dirname "$0")/lib.sh"
rounds=3 seconds=${SECONDS_PER_RUN:-5} clients=16 accounts=100000 parts=ABC
for arg in "$@"; do
  case "$arg" in
    --rounds=*) rounds=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --clients=*) clients=${arg#*=} ;;
    --accounts=*) accounts=${arg#*=} ;;
    --parts=*) parts=${arg#*=} ;;
    *) die "unknown argument $arg" ;;
  esac
done
command -v redis-server >/dev/null || die "redis-server not found (deploy/install-deps.sh installs it)"
exp_init 7-bank
NIC="" CPU=0
redis_pid="" zk_dir="" cluster_pids=()
cleanup() {
  [ -z "$redis_pid" ] || { kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; }
  for p in "${cluster_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  [ -z "$zk_dir" ] || "$root/deploy/zookeeper/zk-stop.sh" --dir="$zk_dir" >/dev/null 2>&1
  exp_cleanup
}
trap cleanup EXIT
: >"$OUT_DIR/runs.jsonl"
record() {  # record PART STORE DISTRIBUTION JSON
  echo "{\"part\":\"$1\",\"store\":\"$2\",\"distribution\":\"$3\",\"run\":$4}" >>"$OUT_DIR/runs.jsonl"
  log "$1 $2 $3: $(json transactions_per_s <<<"$4") txn/s, aborts $(json abort_rate <<<"$4"), p99 $(json p99_us <<<"$4") us, invariant $(json invariant_ok <<<"$4")"
}
KEYS=$accounts  # the accounts (and, in C, the YCSB keys): bench and bench_redis pass --keys=$KEYS
bank_flags=(--workload=bank --threads="$clients")

# A. One server.
if [[ $parts == *A* ]]; then
redis_dir="$work/redis"
mkdir -p "$redis_dir"
taskset -c "$SERVER_CPU" redis-server --port 0 --unixsocket "$redis_dir/redis.sock" --save "" --appendonly no \
  --daemonize no --dir "$redis_dir" --logfile "$redis_dir/redis.log" &
redis_pid=$!
for _ in $(seq 200); do
  redis-cli -s "$redis_dir/redis.sock" ping 2>/dev/null | grep -q PONG && break
  sleep 0.05  # polling redis-server's readiness, bounded (10 s)
done
for round in $(seq "$rounds"); do
  for mode in off async sync; do
    dir="$work/data-$mode"
    rm -rf "$dir" && mkdir -p "$dir"
    if [ "$mode" = off ]; then start_server; else start_server --data-dir="$dir" --durability="$mode"; fi
    first=1
    for dist in uniform zipfian; do
      load_flag=()
      [ -n "$first" ] || load_flag=(--no-load)
      first=""
      record A "cell-$mode" "$dist" "$(bench "${bank_flags[@]}" --duration="$seconds" "${load_flag[@]}" --distribution="$dist" \
        --durability="$mode")"
    done
    stop_server
    for dist in uniform zipfian; do
      line=$(taskset -c "$CLIENT_CPU" "$bin/cell-bench" --store=postgres --postgres-cpus="$SERVER_CPU" \
        --durability="$mode" --keys="$KEYS" "${bank_flags[@]}" --duration="$seconds" --distribution="$dist" 2>>"$OUT_DIR/bench.log" | tail -1)
      record A "postgres-$mode" "$dist" "$line"
    done
  done
  for dist in uniform zipfian; do
    redis-cli -s "$redis_dir/redis.sock" flushall >/dev/null
    record A redis "$dist" "$(bench_redis "$redis_dir/redis.sock" "${bank_flags[@]}" --duration="$seconds" --distribution="$dist" \
      --durability=off)"
  done
done

fi

# C. Plain gets alone, and with bank transactions alongside (one-server Cell, sync).
if [[ $parts == *C* ]]; then
mkdir -p "$work/data-c"
start_server --data-dir="$work/data-c" --durability=sync
bench --workload=c --search=server --duration=0.2 >/dev/null  # loads the YCSB keys
bench "${bank_flags[@]}" --duration=0.2 >/dev/null            # loads the accounts
for round in $(seq "$rounds"); do
  record C gets-alone uniform "$(bench --no-load --workload=c --search=server --threads=4 --inflight=16 \
    --duration="$seconds" --distribution=uniform)"
  bench --no-load --workload=bank --threads=8 --duration="$((seconds + 2))" >"$work/bank-alongside.json" &
  bank_pid=$!
  sleep 1  # the bank run under way before the gets begin (its start, not synchronisation)
  record C gets-with-bank uniform "$(bench --no-load --workload=c --search=server --threads=4 --inflight=16 \
    --duration="$seconds" --distribution=uniform)"
  wait "$bank_pid"
  record C bank-alongside uniform "$(tail -1 "$work/bank-alongside.json")"
done
stop_server
fi

# B. Three servers.
if [[ $parts == *B* ]]; then
eval "$("$root/deploy/zookeeper/zk-start.sh" --nodes=1)"
zk_dir=$ZK_DIR
zk="zk://127.0.0.1:${ZK_NODE_1_PORT}/cell/bank-$$"
for round in $(seq "$rounds"); do
  for mode in off sync; do
    cluster_pids=()
    for id in 1 2 3; do
      dir="$work/cluster-$mode-$id"
      rm -rf "$dir" && mkdir -p "$dir"
      extra=()
      [ "$mode" = off ] || extra=(--data-dir="$dir" --durability=sync)
      taskset -c "$SERVER_CPU" "$bin/cell-server" --listen=tcp://127.0.0.1:0 --listen="shm://$work/c$id.sock" \
        --membership="$zk-$round-$mode" --id="$id" --workers=1 --meganode-size=1MiB --meganodes=256 \
        --region-size=1GiB "${extra[@]}" >"$work/c$id.out" 2>"$work/c$id.log" &
      cluster_pids+=($!)
    done
    for id in 1 2 3; do
      for _ in $(seq 300); do
        grep -q '^ready ' "$work/c$id.out" 2>/dev/null && break
        sleep 0.1  # polling each server's readiness line, bounded (30 s)
      done
      grep -q '^ready ' "$work/c$id.out" || { cat "$work/c$id.log" >&2; die "cell-server $id did not start"; }
    done
    first=1
    for dist in uniform zipfian; do
      load_flag=()
      [ -n "$first" ] || load_flag=(--no-load)
      first=""
      line=$(taskset -c "$CLIENT_CPU" "$bin/cell-bench" --cluster="$zk-$round-$mode" --transport=shm --keys="$KEYS" \
        "${bank_flags[@]}" --duration="$seconds" "${load_flag[@]}" --distribution="$dist" --durability="$mode" \
        2>>"$OUT_DIR/bench.log" | tail -1)
      record B "cell3-$mode" "$dist" "$line"
    done
    for p in "${cluster_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    cluster_pids=()
  done
done
fi

python3 - "$OUT_DIR/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
med = {}
for key in sorted({(r["part"], r["store"], r["distribution"]) for r in runs}):
    rs = [r["run"] for r in runs if (r["part"], r["store"], r["distribution"]) == key]
    field = "ops_per_s" if key[1].startswith("gets") else "transactions_per_s"
    med["/".join(key)] = {
        "per_s": statistics.median(x[field] for x in rs),
        "abort_rate": statistics.median(x.get("abort_rate", 0) for x in rs),
        "p50_us": statistics.median(x["p50_us"] for x in rs),
        "p99_us": statistics.median(x["p99_us"] for x in rs),
        "invariant_ok": all(x.get("invariant_ok", True) for x in rs),
        "runs": len(rs)}
ratios = {}
for dist in ("uniform", "zipfian"):
    for mode in ("off", "async", "sync"):
        c, p = med.get(f"A/cell-{mode}/{dist}"), med.get(f"A/postgres-{mode}/{dist}")
        if c and p: ratios[f"cell-{mode}/postgres-{mode}/{dist}"] = round(c["per_s"] / p["per_s"], 2)
    c, r = med.get(f"A/cell-off/{dist}"), med.get(f"A/redis/{dist}")
    if c and r: ratios[f"cell-off/redis/{dist}"] = round(c["per_s"] / r["per_s"], 2)
print(json.dumps({"medians": med, "ratios": ratios}, indent=1))
PY
