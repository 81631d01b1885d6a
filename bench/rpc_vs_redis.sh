#!/usr/bin/env bash
# The rpc issue's two ratios, measured in one run, alternating peers each round:
#   tcp_vs_redis     Cell TCP RPC GET/s (server workers=1 on CPU 0, client on CPU 1, 50 outstanding on one
#                    connection) / redis GET/s (redis-server on CPU 0, redis-benchmark -c 1 -P 50 -d 100 on CPU 1:
#                    the same 50 requests in flight on one connection; bench/peers/redis-baseline.sh)
#   shm_read_vs_tcp  shm 1 KB one-sided reads/s from one client thread / the Cell TCP RPC GET/s above, with the
#                    64 MB region on 2 MiB pages (a hugetlb memfd); shm_read_vs_tcp_4k is the same on 4 KiB pages
# Prints each round's numbers, then one JSON line with the medians.
#
#   bench/rpc_vs_redis.sh [--rounds=5] [--build=build]
#
# Huge pages: if fewer than 40 are free and we are root, 40 more are reserved (vm.nr_hugepages) for the run and the
# old setting is restored at exit; otherwise the hugetlb rows fail with a message saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5 build=build
for arg in "$@"; do
  case "$arg" in
    --rounds=*) rounds=${arg#*=} ;;
    --build=*) build=${arg#*=} ;;
    *) echo "rpc_vs_redis.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
bench="$build/bin/cell-rpc-bench"
[ -x "$bench" ] || { echo "rpc_vs_redis.sh: $bench not built (deploy/test.sh or cmake --build $build)" >&2; exit 1; }

results=$(mktemp)
old_hugepages=$(cat /proc/sys/vm/nr_hugepages)
restore() {
  rm -f "$results"
  if [ "$(cat /proc/sys/vm/nr_hugepages)" != "$old_hugepages" ]; then echo "$old_hugepages" >/proc/sys/vm/nr_hugepages; fi
}
trap restore EXIT
free_pages=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
if [ "${free_pages:-0}" -lt 40 ] && [ "$(id -u)" -eq 0 ]; then
  echo $((old_hugepages + 40)) >/proc/sys/vm/nr_hugepages
fi
for round in $(seq 1 "$rounds"); do
  redis=$(bench/peers/redis-baseline.sh --server-cpu=0 --client-cpu=1 | tail -1)
  tcp=$("$bench" --transport=tcp --workers=1 --server-cpu=0 --client-cpu=1 --outstanding=50 --seconds=2 | tail -1)
  shm=$("$bench" --transport=shm --workers=1 --server-cpu=0 --client-cpu=1 --outstanding=50 --seconds=2 \
        --backing=hugetlb | tail -1)
  shm4k=$("$bench" --transport=shm --workers=1 --server-cpu=0 --client-cpu=1 --outstanding=50 --seconds=2 \
          --backing=memfd | tail -1)
  echo "round $round: redis $redis" >&2
  echo "round $round: tcp $tcp" >&2
  echo "round $round: shm $shm" >&2
  echo "round $round: shm4k $shm4k" >&2
  python3 - "$redis" "$tcp" "$shm" "$shm4k" >>"$results" <<'PY'
import json, sys
redis, tcp, shm, shm4k = (json.loads(a) for a in sys.argv[1:])
print(json.dumps({"redis_get_per_s": redis["get_per_s"], "tcp_rpc_per_s": tcp["rpc"][0]["ops_per_s"],
                  "tcp_p50_us": tcp["rpc"][0]["p50_us"], "shm_read_per_s": shm["read"]["ops_per_s"],
                  "shm_read_p50_us": shm["read"]["p50_us"], "shm_read_4k_per_s": shm4k["read"]["ops_per_s"],
                  "tcp_read_per_s": tcp["read"]["ops_per_s"]}))
PY
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda k: statistics.median(r[k] for r in rows)
tcp_vs_redis = [r["tcp_rpc_per_s"] / r["redis_get_per_s"] for r in rows]
shm_vs_tcp = [r["shm_read_per_s"] / r["tcp_rpc_per_s"] for r in rows]
shm4k_vs_tcp = [r["shm_read_4k_per_s"] / r["tcp_rpc_per_s"] for r in rows]
print(json.dumps({"bench": "rpc_vs_redis", "rounds": len(rows),
                  "redis_get_per_s": med("redis_get_per_s"), "tcp_rpc_per_s": med("tcp_rpc_per_s"),
                  "shm_read_per_s": med("shm_read_per_s"), "shm_read_4k_per_s": med("shm_read_4k_per_s"),
                  "tcp_read_per_s": med("tcp_read_per_s"),
                  "tcp_vs_redis_median": round(statistics.median(tcp_vs_redis), 2),
                  "tcp_vs_redis_min": round(min(tcp_vs_redis), 2),
                  "shm_read_vs_tcp_median": round(statistics.median(shm_vs_tcp), 1),
                  "shm_read_vs_tcp_min": round(min(shm_vs_tcp), 1),
                  "shm_read_vs_tcp_4k_median": round(statistics.median(shm4k_vs_tcp), 1)}))
PY
