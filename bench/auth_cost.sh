#!/usr/bin/env bash
# What authentication costs: the same server and the same gets, without keys and with keys, in one run, the order of
# the two configurations alternating each round.
#   off   cell-server with no keys (it accepts anyone on loopback); clients give no key
#   keys  cell-server --client-key-file --peer-key-file (fresh keys from `cellctl keygen` for each start); clients
#         give the client key (cell-bench --key-file): every connection proves it (HMAC-SHA256 challenge-response)
# Each configuration starts ONE cell-server --workers=1 pinned to CPU 0 (embedded membership, listening on
# tcp://127.0.0.1 and shm://DIR/s.sock, regions on 4 KiB pages), loads the same KEYS keys of Cell's shapes (keys
# 8..64 bytes, values 8..256; cell-bench's load, deterministic), then runs cell-bench pinned to CPU 1, YCSB C (gets
# only, uniform keys), THREADS threads x DEPTH in flight, SECONDS each, seed 1:
#   tcp/server   --transport=tcp --search=server  (every get an RPC on the authenticated connection)
#   shm/server   --transport=shm --search=server
#   shm/client   --transport=shm --search=client  (one-sided reads; the region descriptors' handshake is keyed too)
# and then times CONNECTS runs of `cellctl --cluster=URI servers` over tcp and over shm (one process that connects,
# with the key's handshake when keyed, reads the region table and exits): the one-time cost, process start included.
# The server is stopped (SIGTERM, then wait) before the other configuration starts. Every value read is checked
# (errors must be 0); a keyed server is checked to refuse a client without the key.
# Prints each run to stderr, then a table of medians over rounds (gets/s, the ratio keys/off, p50 and p99), and one
# JSON line with the same last.
#
#   bench/auth_cost.sh [--rounds=3] [--seconds=5] [--keys=200000] [--threads=1] [--depth=16] [--connects=200]
#                      [--build=build] [--out=FILE (every run as JSON lines)]
set -euo pipefail
rounds=3 seconds=5 keys=200000 threads=1 depth=16 connects=200 build=build out=""
for arg in "$@"; do
  case "$arg" in
    --rounds=*) rounds=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --keys=*) keys=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --depth=*) depth=${arg#*=} ;;
    --connects=*) connects=${arg#*=} ;;
    --build=*) build=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    *) echo "auth_cost.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
[ -z "$out" ] || out=$(realpath -m "$out")  # --out relative to where the script was run; --build to the repo
cd "$(dirname "$0")/.."
for b in cell-server cell-bench cellctl; do
  [ -x "$build/bin/$b" ] || { echo "auth_cost.sh: $build/bin/$b not built (cmake --build $build)" >&2; exit 1; }
done
for tool in taskset timeout python3; do
  command -v "$tool" >/dev/null || { echo "auth_cost.sh: $tool not found" >&2; exit 1; }
done

dir=$(mktemp -d)
server_pid=""
stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1  # waiting for the server to exit after SIGTERM, bounded (10 s), then SIGKILL
  done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
cleanup() {
  stop_server
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# start_server off|keys: one server, fresh keys when keyed; sets tcp_uri and shm_uri, and key_args for the clients.
start_server() {
  local config=$1 server_keys=()
  key_args=()
  rm -rf "$dir/server" && mkdir "$dir/server"
  if [ "$config" = keys ]; then
    "$build/bin/cellctl" keygen "$dir/server/client.key" >/dev/null
    "$build/bin/cellctl" keygen "$dir/server/peer.key" >/dev/null
    server_keys=(--client-key-file="$dir/server/client.key" --peer-key-file="$dir/server/peer.key")
    key_args=(--key-file="$dir/server/client.key")
  fi
  taskset -c 0 "$build/bin/cell-server" --membership=embedded --workers=1 --listen=tcp://127.0.0.1:0 \
    --listen="shm://$dir/server/s.sock" --meganode-size=64MiB --meganodes=8 --region-size=1GiB \
    ${server_keys[@]+"${server_keys[@]}"} >"$dir/server/out" 2>"$dir/server/log" &
  server_pid=$!
  for _ in $(seq 300); do
    grep -q '^ready ' "$dir/server/out" 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1  # polling the server's readiness line, bounded (30 s)
  done
  grep -q '^ready ' "$dir/server/out" 2>/dev/null || {
    cat "$dir/server/log" >&2; echo "auth_cost.sh: cell-server did not start" >&2; exit 1; }
  tcp_uri=$(sed -n 's/^listening \(tcp:.*\)/\1/p' "$dir/server/out")
  shm_uri=$(sed -n 's/^listening \(shm:.*\)/\1/p' "$dir/server/out")
  if [ "$config" = keys ]; then
    # The configuration is what it says: without the key the server refuses.
    if timeout 30 "$build/bin/cellctl" --cluster="$tcp_uri" servers >/dev/null 2>&1; then
      echo "auth_cost.sh: the keyed server answered a client without the key" >&2; exit 1
    fi
  else
    grep -q 'NO KEYS' "$dir/server/log" || { echo "auth_cost.sh: the server without keys did not say so" >&2; exit 1; }
  fi
}

# bench TRANSPORT SEARCH [flags...]: one cell-bench run on CPU 1 against the running server; prints its JSON line.
bench() {
  local transport=$1 search=$2
  shift 2
  timeout $((${seconds%.*} + 120)) taskset -c 1 "$build/bin/cell-bench" --cluster="$tcp_uri" \
    ${key_args[@]+"${key_args[@]}"} --transport="$transport" --search="$search" --keys="$keys" --workload=c \
    --distribution=uniform --threads="$threads" --depth="$depth" --seed=1 "$@" 2>>"$dir/bench.log" | tail -1
}

# connect_times URI: CONNECTS runs of `cellctl --cluster=URI servers` on CPU 1, each timed alone (wall clock of
# the whole process, start included); prints a JSON list of microseconds. No timeout in subprocess.run: with one,
# Python polls the child with growing sleeps and the times come out in steps of 4 ms; `timeout` bounds it instead.
connect_times() {
  timeout $((connects + 60)) taskset -c 1 python3 - "$connects" "$build/bin/cellctl" "$1" \
    ${key_args[@]+"${key_args[@]}"} <<'PY'
import json, subprocess, sys, time
n, cellctl, uri, extra = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
cmd = [cellctl, f"--cluster={uri}", *extra, "servers"]
times = []
for _ in range(n):
    t0 = time.perf_counter_ns()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    times.append((time.perf_counter_ns() - t0) / 1000)
print(json.dumps(times))
PY
}

runs="$dir/runs.jsonl"
: >"$runs"
started=$(date +%s)
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then order="off keys"; else order="keys off"; fi
  for config in $order; do
    start_server "$config"
    log "round $round $config: server at $tcp_uri and $shm_uri; loading $keys keys"
    bench tcp server --seconds=0.2 >/dev/null  # the load (the same keys and values in both configurations)
    for case in tcp/server shm/server shm/client; do
      line=$(bench "${case%/*}" "${case#*/}" --no-load --seconds="$seconds")
      echo "{\"round\":$round,\"config\":\"$config\",\"case\":\"$case\",\"run\":$line}" >>"$runs"
      log "round $round $config $case: $(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["ops_per_s"], "gets/s, p50", r["p50_us"], "us, p99", r["p99_us"], "us, errors", r["errors"])' "$line")"
    done
    for transport in tcp shm; do
      uri=$tcp_uri
      [ "$transport" = tcp ] || uri=$shm_uri
      times=$(connect_times "$uri")
      echo "{\"round\":$round,\"config\":\"$config\",\"case\":\"connect/$transport\",\"times_us\":$times}" >>"$runs"
      log "round $round $config connect/$transport: median $(python3 -c 'import json,statistics,sys; print(round(statistics.median(json.loads(sys.argv[1])),1))' "$times") us per cellctl run ($connects runs)"
    done
    stop_server
  done
done
log "$rounds rounds in $(( $(date +%s) - started )) s"
[ -z "$out" ] || cp "$runs" "$out"

python3 - "$runs" "$rounds" "$seconds" "$keys" "$threads" "$depth" "$connects" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
rounds, seconds, keys, threads, depth, connects = sys.argv[2:]
med = statistics.median
summary = {"bench": "auth_cost", "rounds": int(rounds), "seconds": float(seconds), "keys": int(keys),
           "threads": int(threads), "depth": int(depth), "connects": int(connects)}
print(f"medians of {rounds} rounds, {seconds} s per run, {keys} keys, {threads} thread(s) x {depth} in flight")
print(f"{'transport/search':<18}{'off gets/s':>12}{'keys gets/s':>13}{'keys/off':>10}"
      f"{'p50 off':>10}{'p50 keys':>10}{'p99 off':>10}{'p99 keys':>10}   per-round keys/off")
for case in ("tcp/server", "shm/server", "shm/client"):
    by = {c: sorted((r for r in runs if r["case"] == case and r["config"] == c), key=lambda r: r["round"])
          for c in ("off", "keys")}
    for c in by:
        for r in by[c]:
            assert r["run"]["errors"] == 0, f"errors in round {r['round']} {c} {case}"
    m = {c: {f: med(r["run"][f] for r in by[c]) for f in ("ops_per_s", "p50_us", "p99_us")} for c in by}
    ratio = m["keys"]["ops_per_s"] / m["off"]["ops_per_s"]
    per_round = [k["run"]["ops_per_s"] / o["run"]["ops_per_s"] for o, k in zip(by["off"], by["keys"])]
    print(f"{case:<18}{m['off']['ops_per_s']:>12,.0f}{m['keys']['ops_per_s']:>13,.0f}{ratio:>10.3f}"
          f"{m['off']['p50_us']:>10.1f}{m['keys']['p50_us']:>10.1f}{m['off']['p99_us']:>10.1f}{m['keys']['p99_us']:>10.1f}"
          f"   {' '.join(f'{x:.3f}' for x in per_round)}")
    summary[case] = {"off": m["off"], "keys": m["keys"], "keys_vs_off": round(ratio, 4),
                     "per_round_keys_vs_off": [round(x, 4) for x in per_round]}
print(f"\none `cellctl servers` (process start, connect, the handshake when keyed, the region table read, exit), "
      f"wall time: median of the per-round medians of {connects} runs")
print(f"{'transport':<18}{'off us':>12}{'keys us':>13}{'keys-off us':>13}")
for t in ("tcp", "shm"):
    m = {c: med(med(r["times_us"]) for r in runs if r["case"] == f"connect/{t}" and r["config"] == c)
         for c in ("off", "keys")}
    print(f"{'connect/' + t:<18}{m['off']:>12.1f}{m['keys']:>13.1f}{m['keys'] - m['off']:>13.1f}")
    summary[f"connect/{t}"] = {"off_us": round(m["off"], 1), "keys_us": round(m["keys"], 1),
                               "keys_minus_off_us": round(m["keys"] - m["off"], 1)}
print(json.dumps(summary))
PY
