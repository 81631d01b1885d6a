#!/usr/bin/env bash
# Experiment 8 (issue 21): full walks of the key space, forward and backward, in pages of SCAN_LENGTH pairs, Cell's
# iterator and its scans in pages against Redis's ZRANGEBYLEX/ZREVRANGEBYLEX + MGET paging, pairs/s each way
# (cell-bench --workload=walk, bench/walk_workload.h). No models: the real machine. One cell-server (one worker,
# CPU 0, tcp and shm listeners, embedded membership) and one redis-server (CPU 0, no persistence, a Unix socket),
# each loaded once with the same KEYS keys of the same shapes; cell-bench on CPU 1, one thread, every walk checked.
# Each round runs, interleaved, with the same page size:
#   iter-client   Cell, cell::Client::NewIterator (read-ahead fixed at one page), client-side search over shm
#   iter-server   Cell, the same iterator, server-side search (an RPC per page over the shm transport)
#   pages-client  Cell, Client::Scan / Client::ScanReverse pages, client-side search
#   pages-server  Cell, the same pages, server-side search
#   redis         Redis, ZRANGEBYLEX (forward) or ZREVRANGEBYLEX (backward) then MGET per page
# Acceptance (issue 21): iter-client >= 2x redis, forward and backward, in the same round.
#
#   bench/experiments/8-walk.sh [--keys=1000000] [--rounds=3] [--seconds=4] [--scan-length=100]
#                               [--shape=cell|fixed] (fixed: 16-byte keys, 100-byte values)
# Writes OUT_DIR/runs.jsonl (every run's JSON line) and OUT_DIR/summary.json; prints a table of the medians and the
# per-round ratios to Redis on stderr, and the summary last on stdout.
KEYS=${KEYS:-1000000}  # before lib.sh, whose default is 200,000
source "$(dirname "$0")/lib.sh"
rounds=3 seconds=${SECONDS_PER_RUN:-4} scan_length=100 shape=cell
for arg in "$@"; do
  case "$arg" in
    --keys=*) KEYS=${arg#*=} ;;
    --rounds=*) rounds=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --scan-length=*) scan_length=${arg#*=} ;;
    --shape=*) shape=${arg#*=} ;;
    *) die "unknown argument $arg" ;;
  esac
done
case "$shape" in
  cell) shape_flags=(--shape=cell) ;;
  fixed) shape_flags=(--shape=fixed --key-bytes=16 --value-bytes=100) ;;
  *) die "--shape is cell or fixed" ;;
esac
for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || die "$tool not found (deploy/install-deps.sh installs it)"
done
exp_init 8-walk
NIC="" CPU=0  # the real machine: no models
redis_pid=""
stop_redis() {
  if [ -n "$redis_pid" ]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    redis_pid=""
  fi
}
trap 'stop_redis; exp_cleanup' EXIT
trap 'exit 130' INT TERM  # through the EXIT trap: the servers are stopped

# Regions on 2 MiB pages when enough are free already (this script reserves none).
huge=()
free_pages=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
[ "${free_pages:-0}" -lt 700 ] || huge=(--huge-pages)
start_server ${huge[@]+"${huge[@]}"}  # lib.sh: 8 meganodes of 64 MiB, 1 GiB of records
start_redis  # lib.sh: sets redis_dir and redis_pid

walk=(--workload=walk --scan-length="$scan_length" --threads=1 "${shape_flags[@]}")
# The load phase of a first, short walk of each store (its walks are checked too, not kept).
log "loading $KEYS keys into each store (${huge[*]:-4 KiB pages})"
bench "${walk[@]}" --search=server --walk=pages --seconds=0.01 >"$OUT_DIR/load-cell.json" || die "cell load failed"
bench_redis "$redis_dir/redis.sock" "${walk[@]}" --seconds=0.01 >"$OUT_DIR/load-redis.json" || die "redis load failed"
log "loaded: cell $(json load_s <"$OUT_DIR/load-cell.json") s, redis $(json load_s <"$OUT_DIR/load-redis.json") s"

# Redis's own time per command over the rounds (INFO commandstats), and the machine's CPU pressure: on a busy
# machine Redis's two round trips per page wait for CPU 0, which is what its usec_per_call then shows.
redis-cli -s "$redis_dir/redis.sock" config resetstat >/dev/null
pressure() {
  local p
  p=$(sed -n 's/^some avg10=\([0-9.]*\) avg60=\([0-9.]*\).*/\2/p' /proc/pressure/cpu 2>/dev/null || true)
  echo "${p:--1}"  # -1: no PSI on this kernel
}
pressure_before=$(pressure)
: >"$OUT_DIR/runs.jsonl"
for round in $(seq "$rounds"); do
  for run in iter-client iter-server pages-client pages-server redis; do
    status=0
    case "$run" in
      redis) line=$(bench_redis "$redis_dir/redis.sock" "${walk[@]}" --no-load --seconds="$seconds") ;;
      iter-*) line=$(bench "${walk[@]}" --no-load --seconds="$seconds" --walk=iterator --search="${run#*-}") ;;
      pages-*) line=$(bench "${walk[@]}" --no-load --seconds="$seconds" --walk=pages --search="${run#*-}") ;;
    esac || status=$?
    # A walk that failed its check still prints its summary ("walk_ok":false): kept, then the script stops.
    [ -z "$line" ] || echo "{\"round\":$round,\"run\":\"$run\",\"result\":$line}" >>"$OUT_DIR/runs.jsonl"
    [ "$status" = 0 ] || die "round $round $run failed (exit status $status; see $OUT_DIR/bench.log and runs.jsonl)"
    log "round $round $run: forward $(json walk_forward_pairs_per_s <<<"$line"), backward" \
      "$(json walk_backward_pairs_per_s <<<"$line") pairs/s, $(json walks <<<"$line") walks"
  done
done
pressure_after=$(pressure)
redis-cli -s "$redis_dir/redis.sock" info commandstats | tr -d '\r' >"$OUT_DIR/redis-commandstats.txt"
stop_redis
stop_server

python3 - "$OUT_DIR" "$KEYS" "$scan_length" "$shape" "${huge[*]:-4k}" "$pressure_before" "$pressure_after" \
  >"$OUT_DIR/summary.json" <<'PY'
import json, re, statistics, sys
out, keys, scan_length, shape, pages = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
pressure = [float(sys.argv[6]), float(sys.argv[7])]
runs = [json.loads(l) for l in open(f"{out}/runs.jsonl")]
for r in runs:
    assert r["result"]["walk_ok"] and r["result"]["errors"] == 0, f"round {r['round']} {r['run']}: a walk failed"
names = ["iter-client", "iter-server", "pages-client", "pages-server", "redis"]
rounds = sorted({r["round"] for r in runs})
at = {(r["round"], r["run"]): r["result"] for r in runs}
ways = {"forward": "walk_forward_pairs_per_s", "backward": "walk_backward_pairs_per_s"}
summary = {"experiment": "8-walk", "keys": keys, "scan_length": scan_length, "shape": shape, "pages": pages,
           "rounds": len(rounds), "cpu_pressure_some_avg60": pressure, "median_pairs_per_s": {}, "vs_redis": {},
           "median_page_p50_us": {}, "vs_redis_by_page_p50": {}, "redis_usec_per_call": {}}
for line in open(f"{out}/redis-commandstats.txt"):
    m = re.match(r"cmdstat_(zrangebylex|zrevrangebylex|mget):.*usec_per_call=([0-9.]+)", line)
    if m:
        summary["redis_usec_per_call"][m.group(1)] = float(m.group(2))
for n in names:
    summary["median_pairs_per_s"][n] = {w: round(statistics.median(at[(k, n)][f] for k in rounds))
                                        for w, f in ways.items()}
    summary["median_page_p50_us"][n] = {w: statistics.median(at[(k, n)][f"{w}_page_p50_us"] for k in rounds)
                                        for w in ways}
for n in names[:-1]:
    summary["vs_redis"][n] = {w: [round(at[(k, n)][f] / at[(k, "redis")][f], 2) for k in rounds]
                              for w, f in ways.items()}
    # The same ratio by the median page (SCAN_LENGTH pairs each way, so pairs/s are in the inverse ratio of the
    # pages' times): what the rates' ratio would be without the stalls of a busy machine, which hit Redis's four
    # thread wake-ups a page more than a client-side walk's none.
    summary["vs_redis_by_page_p50"][n] = {
        w: [round(at[(k, "redis")][f"{w}_page_p50_us"] / at[(k, n)][f"{w}_page_p50_us"], 2) for k in rounds]
        for w in ways}
worst = {w: min(summary["vs_redis"]["iter-client"][w]) for w in ways}
summary["acceptance"] = {"iter_client_vs_redis_min": worst, "pass": all(v >= 2.0 for v in worst.values())}
# The table, on stderr.
lines = [f"8-walk: {keys} keys ({shape} shape), pages of {scan_length} pairs, one thread, {len(rounds)} rounds",
         f"{'':14} {'forward pairs/s':>16} {'backward pairs/s':>17}   page p50 us, forward / backward"]
for n in names:
    m, p = summary["median_pairs_per_s"][n], summary["median_page_p50_us"][n]
    lines.append(f"{n:14} {m['forward']:>16,} {m['backward']:>17,}   {p['forward']:.1f} / {p['backward']:.1f}")
for title, key in (("pairs/s", "vs_redis"), ("the median page", "vs_redis_by_page_p50")):
    lines.append(f"vs redis by {title}, each round (forward | backward):")
    for n in names[:-1]:
        v = summary[key][n]
        lines.append(f"  {n:14} " + " ".join(f"{x:.2f}x" for x in v["forward"]) + " | " +
                     " ".join(f"{x:.2f}x" for x in v["backward"]))
lines.append(f"redis usec per call: {summary['redis_usec_per_call']}; CPU pressure (some, avg60) before/after: "
             f"{pressure[0]}% / {pressure[1]}%")
lines.append("acceptance (iter-client >= 2x redis both ways, every round): "
             f"{'pass' if summary['acceptance']['pass'] else 'FAIL'}")
print("\n".join(lines), file=sys.stderr)
print(json.dumps(summary))
PY
cat "$OUT_DIR/summary.json"
