#!/usr/bin/env bash
# The store issue's two ratios, in one run, alternating the peers each round:
#   server_vs_redis   Cell get/s by server-side search / Redis GET/s
#   client_vs_redis   Cell get/s by client-side search (one-sided reads over shm) / Redis GET/s
# Cell: one cell-server with --workers=1 pinned to CPU 0 (embedded membership, regions on 2 MiB pages when they can
# be had), 1M keys of 16 bytes with 100-byte values loaded once; cell-bench pinned to CPU 1, one thread, 50 gets in
# flight for server-side search. Redis: redis-server on CPU 0, redis-benchmark -c 1 -P 50 -d 100 on CPU 1 (the same
# 50 in flight on one connection; bench/peers/redis-baseline.sh). Experiment 6 (bench/experiments/6-redis.sh) makes
# the same comparison through one harness for both, on YCSB workloads. Prints each round, then one JSON line with the medians.
#
#   bench/cell_vs_redis.sh [--rounds=3] [--keys=1000000] [--seconds=3] [--build=build]
#
# Huge pages: if fewer than 700 are free and we are root, they are reserved (vm.nr_hugepages) for the run and the
# old setting restored at exit; otherwise the server runs on 4 KiB pages and the JSON says so.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 keys=1000000 seconds=3 build=build
for arg in "$@"; do
  case "$arg" in
    --rounds=*) rounds=${arg#*=} ;;
    --keys=*) keys=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --build=*) build=${arg#*=} ;;
    *) echo "cell_vs_redis.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
for b in cell-server cell-bench; do
  [ -x "$build/bin/$b" ] || { echo "cell_vs_redis.sh: $build/bin/$b not built (cmake --build $build)" >&2; exit 1; }
done

dir=$(mktemp -d)
old_hugepages=$(cat /proc/sys/vm/nr_hugepages)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  if [ "$(cat /proc/sys/vm/nr_hugepages)" != "$old_hugepages" ]; then echo "$old_hugepages" >/proc/sys/vm/nr_hugepages; fi
  rm -rf "$dir"
}
trap cleanup EXIT

huge=()
pages=4k
free_pages=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
if [ "${free_pages:-0}" -lt 700 ] && [ "$(id -u)" -eq 0 ]; then
  echo $((old_hugepages + 700)) >/proc/sys/vm/nr_hugepages || true
  free_pages=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
fi
if [ "${free_pages:-0}" -ge 700 ]; then huge=(--huge-pages); pages=2m; fi

taskset -c 0 "$build/bin/cell-server" --listen=tcp://127.0.0.1:0 --listen="shm://$dir/cell.sock" --workers=1 \
  --meganode-size=128MiB --meganodes=2 --region-size=1GiB ${huge[@]+"${huge[@]}"} >"$dir/server.out" 2>"$dir/server.log" &
server_pid=$!
for _ in $(seq 300); do grep -q '^ready ' "$dir/server.out" && break; kill -0 "$server_pid" || break; sleep 0.1; done
grep -q '^ready ' "$dir/server.out" || { echo "cell_vs_redis.sh: cell-server did not start:" >&2; cat "$dir/server.log" >&2; exit 1; }
cluster=$(sed -n 's/^listening \(tcp:.*\)/\1/p' "$dir/server.out")
# Gets of uniformly random keys of 16 bytes with 100-byte values (what redis-benchmark -d 100 reads).
bench=(taskset -c 1 "$build/bin/cell-bench" --cluster="$cluster" --transport=shm --keys="$keys" --workload=c
       --distribution=uniform --shape=fixed --key-bytes=16 --value-bytes=100)
"${bench[@]}" --search=server --seconds=0.5 >/dev/null  # loads the keys

results="$dir/results"
for round in $(seq 1 "$rounds"); do
  redis=$(bench/peers/redis-baseline.sh --server-cpu=0 --client-cpu=1 | tail -1)
  server=$("${bench[@]}" --no-load --seconds="$seconds" --search=server --depth=50 | tail -1)
  client=$("${bench[@]}" --no-load --seconds="$seconds" --search=client | tail -1)
  echo "round $round: redis $redis" >&2
  echo "round $round: server-side $server" >&2
  echo "round $round: client-side $client" >&2
  python3 - "$redis" "$server" "$client" >>"$results" <<'PY'
import json, sys
redis, server, client = (json.loads(a) for a in sys.argv[1:])
assert server["errors"] == 0 and client["errors"] == 0, "wrong answers"
print(json.dumps({"redis": redis["get_per_s"], "server": server["ops_per_s"], "client": client["ops_per_s"],
                  "server_p50_us": server["p50_us"], "client_p50_us": client["p50_us"]}))
PY
done
python3 - "$results" "$keys" "$pages" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda k: statistics.median(r[k] for r in rows)
sv = [r["server"] / r["redis"] for r in rows]
cv = [r["client"] / r["redis"] for r in rows]
print(json.dumps({"bench": "cell_vs_redis", "rounds": len(rows), "keys": int(sys.argv[2]), "pages": sys.argv[3],
                  "redis_get_per_s": med("redis"), "cell_server_get_per_s": med("server"),
                  "cell_client_get_per_s": med("client"), "server_p50_us": med("server_p50_us"),
                  "client_p50_us": med("client_p50_us"),
                  "server_vs_redis_median": round(statistics.median(sv), 2), "server_vs_redis_min": round(min(sv), 2),
                  "client_vs_redis_median": round(statistics.median(cv), 2), "client_vs_redis_min": round(min(cv), 2)}))
PY
