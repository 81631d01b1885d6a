#!/usr/bin/env bash
# Experiment 10: scale (issue 22 calls it "7-scale"; 7 went to 7-bank.sh). One cell-server loaded in turn with 1M, 5M
# and 20M keys of Cell's shapes (cell-bench --shape=cell: keys of 8..64 bytes, values of 8..256), 20M being Cell's
# load per server. The server takes its DEFAULT region sizes (sized to the machine: README "Capacity"), which must
# hold 20M keys on a 24 GiB machine; on 2 MiB huge pages only where enough are reserved already (HugePages_Free; this
# script reserves none), with sizes estimated from the sizes measured before (huge pages are taken at once), else in
# the default memfd regions: on transparent huge pages where shmem THP allows them (as root: echo advise >
# /sys/kernel/mm/transparent_hugepage/shmem_enabled; the script changes no setting), else on 4 KiB pages. No models:
# the real machine. One worker, the server pinned to CPU 0 (tcp and shm listeners, embedded membership, a --data-dir
# in a temporary directory, --durability=async: a put is acknowledged before its log record is on disk, the fastest
# load a logged server offers); cell-bench on CPU 1, over shm. For each size:
#   load      cell-bench's load (one thread, 64 puts in flight, keys in order): seconds and keys/s; the checkpoints
#             the server took meanwhile (on its CPU); then the script waits until no checkpoint is under way (no
#             .img.tmp, no new "checkpoint at" line for 3 s), here and after each restart, before it measures anything
#   memory    `cellctl stats` (meganodes in use x 64 MiB of nodes, record bytes in use) and the server's VmRSS, per key
#   gets      YCSB C (gets), Zipfian (YCSB's) and uniform, server-side, client-side and adaptive search: gets/s, p99
#             (THREADS threads, INFLIGHT in flight each, SECONDS each)
#   scans     YCSB E (95% scans of 1..100 pairs from a Zipfian key, 5% inserts), client-side search: ops/s, p99
#   recovery  SIGTERM, then a restart on the same --data-dir (and the sizes it recorded): the server's "recovered
#             regions ... in X s" (from the newest checkpoint, then the log after it), the wall time until its ready
#             line and until `cellctl stats` answers; then the wait for the checkpoint a restart takes after a replay
# Each round runs gets, scans and a recovery (the next round runs on the recovered server); the load is once per
# size (one server at a time; the next size starts a fresh server). Before each size the script checks MemAvailable
# (and the data directory's disk) against what the size will take, from the bytes per key measured so far.
# Acceptance (issue 22): the 20M client-side get rate >= 0.8x the 1M one (printed for both distributions).
#
#   bench/experiments/10-scale.sh [--sizes=1000000,5000000,20000000] [--rounds=N] [--seconds=3] [--threads=4]
#                                 [--inflight=16] [--durability=async|sync]
#   --rounds: rounds per size (default 3 below 10M keys, 1 from 10M: a 20M load alone takes minutes)
#   bench/experiments/10-scale.sh --replot   the summary, tables and plots again from OUT_DIR's runs.jsonl
# Environment as lib.sh's, and DATA_ROOT: where the data directories go (default a temporary directory; allow
# 2.5 KiB a key: after a 20M load one held 33 GB, and the first restart writes an 11 GB checkpoint beside them).
# The binaries run from copies taken at the start. Writes OUT_DIR/runs.jsonl (every measurement), summary.json,
# server-<keys>.log, scale-gets.png (get and scan rates) and scale-memory.png (bytes per key, load rate, recovery);
# prints the tables on stderr and the summary last on stdout.
KEYS=0 # lib.sh's default is not used: each size sets it
source "$(dirname "$0")/lib.sh"
sizes=1000000,5000000,20000000 rounds="" seconds=${SECONDS_PER_RUN:-3} threads=4 inflight=16 durability=async replot=""
for arg in "$@"; do
  case "$arg" in
    --sizes=*) sizes=${arg#*=} ;;
    --rounds=*) rounds=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --inflight=*) inflight=${arg#*=} ;;
    --durability=*) durability=${arg#*=} ;;
    --replot) replot=1 ;;
    *) die "unknown argument $arg" ;;
  esac
done
[[ $sizes =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--sizes is a comma-separated list of key counts (1000000,5000000)"
[ -z "$rounds" ] || [[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds is a positive number"
case "$durability" in async | sync) ;; *) die "--durability is async or sync" ;; esac
[ -x "$bin/cellctl" ] || die "$bin/cellctl not built (cmake --build build --target cellctl)"
exp_init 10-scale
NIC="" CPU=0 # the real machine: no models
trap 'exit 130' INT TERM # through the EXIT trap: the server is stopped, the data directories removed
# The binaries run from copies: a rebuild of the tree during a run of 20 minutes must not change them under it
# (cell-bench and cellctl find libcell.so through LD_LIBRARY_PATH before their RUNPATH).
mkdir -p "$work/bin"
cp "$bin/cell-server" "$bin/cell-bench" "$bin/cellctl" "$work/bin/"
cp -P "$bin"/../libcell.so* "$work/" || die "no libcell.so next to $bin"
bin=$work/bin
export LD_LIBRARY_PATH=$work${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
changed=$(git -C "$root" status --short --untracked-files=no 2>/dev/null | wc -l)
data_root=${DATA_ROOT:-$work}
mkdir -p "$data_root"
if [ -z "$replot" ]; then
  : >"$OUT_DIR/runs.jsonl"
  : >"$OUT_DIR/bench.log"
fi

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
pressure() { sed -n 's/^some avg10=\([0-9.]*\).*/\1/p' /proc/pressure/cpu 2>/dev/null || echo -1; }
record() { echo "$1" >>"$OUT_DIR/runs.jsonl"; }

# scale_start: cell-server on $data with $durability and size_flags (none: the defaults, or on a restart the sizes
# the directory recorded), its stderr appended to $server_log; waits for its ready line (up to 15 min: a restart
# recovers first). Sets server_pid, CLUSTER, started_at, ready_s.
scale_start() {
  local out="$work/server.out"
  : >"$out"
  started_at=$(now)
  taskset -c "$SERVER_CPU" "$bin/cell-server" --listen=tcp://127.0.0.1:0 --listen="shm://$work/cell.sock" \
    --workers=1 --poll-us="$POLL" --data-dir="$data" --durability="$durability" ${size_flags[@]+"${size_flags[@]}"} \
    >"$out" 2>>"$server_log" &
  server_pid=$!
  local deadline=$((SECONDS + 900))
  until grep -q '^ready ' "$out"; do
    kill -0 "$server_pid" 2>/dev/null || { tail -20 "$server_log" >&2; die "cell-server exited before it was ready"; }
    [ "$SECONDS" -lt "$deadline" ] || die "cell-server not ready after 15 min (see $server_log)"
    sleep 0.05 # polling the server's readiness line, bounded
  done
  ready_s=$(since "$started_at")
  CLUSTER=$(sed -n 's/^listening \(tcp:.*\)/\1/p' "$out")
}

# until_stats: waits until `cellctl stats` answers (up to 60 s); prints the seconds since started_at.
until_stats() {
  local deadline=$((SECONDS + 60))
  until "$bin/cellctl" --cluster="$CLUSTER" stats >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "cellctl stats got no answer within 60 s of the server's ready line"
    sleep 0.05 # polling, bounded
  done
  since "$started_at"
}

# settle: waits until no checkpoint is under way: for 3 s in a row no checkpoint-*.img.tmp under $data and no new
# "checkpoint at lsn" line in $server_log (a checkpoint logs that after its rename, once it has removed the files it
# replaces, which takes seconds at 20M keys), looked for from 1.5 s on (the checkpointer looks each second, from the
# end of the last checkpoint, whether the next is due). Prints the seconds it waited.
settle() {
  local start quiet=0 count last="" deadline=$((SECONDS + 1800))
  start=$(now)
  sleep 1.5
  while [ "$quiet" -lt 15 ]; do
    count=$(grep -c 'checkpoint at lsn [0-9]* in' "$server_log" || true)
    if [ -n "$(find "$data" -name 'checkpoint-*.img.tmp' -print -quit)" ] || [ "$count" != "$last" ]; then
      quiet=0
    else
      quiet=$((quiet + 1))
    fi
    last=$count
    [ "$SECONDS" -lt "$deadline" ] || die "a checkpoint has been under way for 30 min (see $server_log)"
    sleep 0.2 # polling the data directory and the log, bounded
  done
  awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.3f", b - a - 3 }'
}

# memory_json: the server's stats and VmRSS as JSON. Nodes are meganodes in use x 64 MiB (the default meganode
# size; cellctl prints what that makes, rounded); records are what cellctl prints, to 0.1 of its unit.
memory_json() {
  local stats rss
  stats=$("$bin/cellctl" --cluster="$CLUSTER" stats) || die "cellctl stats failed"
  rss=$(awk '/^VmRSS:/ { printf "%.0f\n", $2 * 1024 }' "/proc/$server_pid/status")
  python3 -c '
import json, re, sys
rows = [l.split() for l in sys.stdin.read().splitlines()[1:] if l.strip()]
assert len(rows) == 1, "one server expected, cellctl stats shows %d" % len(rows)
unit = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
r = rows[0]
sizes = [(float(r[i]), r[i + 1]) for i in range(8, 16, 2)]
b = [v * unit[u] for v, u in sizes]
meganodes = int(r[1])
print(json.dumps({"meganodes": meganodes, "node_bytes_used": meganodes << 26, "node_bytes_free": round(b[1]),
                  "record_bytes_used": round(b[2]), "record_bytes_resolution": round(0.1 * unit[sizes[2][1]]),
                  "record_bytes_free": round(b[3]), "rss_bytes": int(sys.argv[1]), "stats": " ".join(r)}))
' "$rss" <<<"$stats"
}

# data_json: the bytes of the data directory's checkpoints (the newest, and all) and log files, as JSON.
data_json() {
  python3 -c '
import json, os, sys
img, logs, newest = 0, 0, (-1, 0)  # (lsn, bytes) of the newest checkpoint
for d, _, files in os.walk(sys.argv[1]):
    for f in files:
        size = os.path.getsize(os.path.join(d, f))
        if f.endswith(".img"):
            img += size
            newest = max(newest, (int(f.split("-")[1].split(".")[0], 16), size))
        elif f.endswith(".log"):
            logs += size
print(json.dumps({"checkpoint_bytes": newest[1], "checkpoints_bytes": img, "log_bytes": logs}))
' "$data"
}

# bench_run [cell-bench flags...]: one run against the loaded keys; prints its JSON line (dies on errors).
bench_run() {
  local line status=0
  line=$(taskset -c "$CLIENT_CPU" "$bin/cell-bench" --cluster="$CLUSTER" --transport=shm --keys="$KEYS" --shape=cell \
    --no-load --threads="$threads" --inflight="$inflight" --duration="$seconds" "$@" 2>>"$OUT_DIR/bench.log" |
    tail -1) || status=$?
  [ "$status" = 0 ] && [ -n "$line" ] ||
    die "cell-bench $* failed at $KEYS keys (status $status; see $OUT_DIR/bench.log)"
  echo "$line"
}

# recover ROUND: SIGTERM, restart on the same data directory, time it; records the recovery.
recover() {
  local round=$1 before files t0 stop_s stats_s line settle_s mem
  before=$(wc -l <"$server_log")
  files=$(data_json)
  t0=$(now)
  kill -TERM "$server_pid"
  wait "$server_pid" || die "cell-server exited with status $? on SIGTERM (see $server_log)"
  server_pid=""
  stop_s=$(since "$t0")
  scale_start # the same size_flags: a restart must give the sizes it gave (or none)
  stats_s=$(until_stats)
  line=$(tail -n +"$((before + 1))" "$server_log" | grep -m1 'recovered regions') ||
    die "the restarted server logged no 'recovered regions' line (see $server_log)"
  mem=$(memory_json)
  settle_s=$(settle)
  record "$(python3 -c '
import json, re, sys
m = re.search(r"in ([0-9.]+) s: checkpoint at lsn (\d+), (\d+) log records replayed.*?; (\d+) meganodes, (\d+) records "
              r"\((\d+) bytes\)", sys.argv[1])
assert m, "cannot read the recovery line: " + sys.argv[1]
r = {"keys": int(sys.argv[2]), "round": int(sys.argv[3]), "run": "recovery", "stop_s": float(sys.argv[4]),
     "recovered_s": float(m.group(1)), "checkpoint_lsn": int(m.group(2)), "records_replayed": int(m.group(3)),
     "meganodes": int(m.group(4)), "records": int(m.group(5)), "record_payload_bytes": int(m.group(6)),
     "ready_s": float(sys.argv[5]), "stats_s": float(sys.argv[6]), "settle_s": float(sys.argv[7]),
     "files": json.loads(sys.argv[8]), "memory_after": json.loads(sys.argv[9]), "line": sys.argv[1]}
print(json.dumps(r))
' "$line" "$KEYS" "$round" "$stop_s" "$ready_s" "$stats_s" "$settle_s" "$files" "$mem")"
  log "$KEYS keys, round $round: recovered in $(tail -1 "$OUT_DIR/runs.jsonl" | json recovered_s) s (server's" \
    "line), ready after $ready_s s, stats after $stats_s s; $(tail -1 "$OUT_DIR/runs.jsonl" | json records_replayed)" \
    "log records replayed; stop took $stop_s s; then $settle_s s of checkpoint"
}

# plan_pages N: huge pages if HugePages_Free covers the sizes N keys need (estimated from the last size measured,
# with margins, else from 320 record bytes and 150,000 keys a meganode), else the defaults (transparent huge pages
# where shmem_enabled allows, else 4 KiB pages). Sets
# size_flags and pages.
plan_pages() {
  local n=$1 free region_gib meganodes need
  free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
  region_gib=$(((n * ${record_per_key:-320} * 5 / 4 + (1 << 30) - 1) >> 30))
  meganodes=$((n * 13 / 10 / ${keys_per_meganode:-150000} + 2))
  need=$((region_gib * 512 + meganodes * 32))
  if [ "${free:-0}" -ge "$need" ]; then
    size_flags=(--huge-pages --region-size="${region_gib}GiB" --meganodes="$meganodes")
    pages="2 MiB huge pages (${region_gib} GiB of records, $meganodes meganodes: $need of $free free pages)"
  else
    size_flags=()
    pages="$(shm_pages), default sizes"
    pages+=" (HugePages_Free ${free:-0} < the $need reserved pages $n keys would need)"
  fi
}

# check_room N: dies unless MemAvailable (and the data directory's disk) hold what N keys will take.
check_room() {
  local n=$1 per_key=${bytes_per_key:-700} basis="a first guess" avail need disk
  [ -z "${bytes_per_key:-}" ] || basis="measured at $bytes_per_key_at keys"
  need=$((n * per_key * 115 / 100))
  avail=$(awk '/^MemAvailable:/ { printf "%.0f\n", $2 * 1024 }' /proc/meminfo)
  if [ "$avail" -lt "$need" ]; then
    free -g >&2
    die "not enough free memory for $n keys: about $((need >> 20)) MiB needed ($per_key bytes a key, $basis, +15%)," \
      "MemAvailable is $((avail >> 20)) MiB (free -g above). Stop what holds the memory, or give smaller --sizes"
  fi
  disk=$(df -B1 --output=avail "$data_root" | tail -1)
  [ "$disk" -ge $((n * 2560)) ] ||
    die "not enough disk for $n keys' data directory under $data_root: $((disk >> 20)) MiB free, about" \
      "$((n * 2560 >> 20)) MiB wanted (2.5 KiB a key); set DATA_ROOT"
}

# load_failed: what the server looked like when the load failed; then dies (issue 22: a defect to report).
load_failed() {
  {
    echo "== cell-bench (the end of $OUT_DIR/bench.log)"
    tail -20 "$OUT_DIR/bench.log"
    echo "== cellctl stats"
    "$bin/cellctl" --cluster="$CLUSTER" stats 2>&1 || true
    echo "== server VmRSS"
    grep VmRSS "/proc/$server_pid/status" 2>&1 || true
    echo "== free -g"
    free -g
    echo "== the end of $server_log"
    tail -20 "$server_log"
  } >"$OUT_DIR/failure-$KEYS.txt" 2>&1
  cat "$OUT_DIR/failure-$KEYS.txt" >&2
  die "$KEYS keys did not load on $pages (exit status $1; the state at the failure is in $OUT_DIR/failure-$KEYS.txt)"
}

# load_size N: a fresh server on a fresh data directory, N keys loaded, its memory; sets the next size's estimates.
load_size() {
  local n=$1 line status=0 checkpoints settle_s files mem
  check_room "$n"
  plan_pages "$n"
  data=$(mktemp -d "$data_root/data-$n.XXXXXX")
  server_log="$OUT_DIR/server-$n.log"
  : >"$server_log"
  scale_start
  log "$n keys: server on $pages, data in $data; loading (cell-bench's progress below)"
  line=$(taskset -c "$CLIENT_CPU" "$bin/cell-bench" --cluster="$CLUSTER" --transport=shm --keys="$n" --shape=cell \
    --workload=c --search=server --duration=0.2 2> >(tee -a "$OUT_DIR/bench.log" >&2) | tail -1) || status=$?
  [ "$status" = 0 ] && [ -n "$line" ] || load_failed "$status"
  checkpoints=$(grep -c 'checkpoint at lsn [0-9]* in' "$server_log" || true)
  settle_s=$(settle)
  files=$(data_json)
  mem=$(memory_json)
  record "{\"keys\":$n,\"round\":0,\"run\":\"load\",\"pages\":\"$pages\",\"durability\":\"$durability\",\
\"checkpoints\":$checkpoints,\"settle_s\":$settle_s,\"files\":$files,\"memory\":$mem,\"result\":$line}"
  log "$n keys: loaded in $(json load_s <<<"$line") s, $checkpoints checkpoints meanwhile, then $settle_s s" \
    "of checkpoint; $(json meganodes <<<"$mem") meganodes, $(json record_bytes_used <<<"$mem") record bytes," \
    "VmRSS $(json rss_bytes <<<"$mem")"
  # For the next size's checks: its bytes per key (the larger of VmRSS and nodes + records) and its shape.
  bytes_per_key=$(python3 -c 'import json, sys; m = json.loads(sys.argv[1])
print(max(m["rss_bytes"], m["node_bytes_used"] + m["record_bytes_used"]) // int(sys.argv[2]) + 1)' "$mem" "$n")
  bytes_per_key_at=$n
  record_per_key=$(($(json record_bytes_used <<<"$mem") / n + 1))
  keys_per_meganode=$((n / $(json meganodes <<<"$mem")))
}

# measure ROUND [cell-bench flags...]: one run; records it with its times and the CPU pressure after it.
measure() {
  local round=$1 t0 line fields
  shift
  t0=$(now)
  line=$(bench_run "$@")
  case "$*" in
    *workload=e*) fields="\"run\":\"scan\",\"search\":\"client\"" ;;
    *) fields="\"run\":\"get\",\"distribution\":\"${2#*=}\",\"search\":\"${3#*=}\"" ;;
  esac
  record "{\"keys\":$KEYS,\"round\":$round,$fields,\"t\":[$t0,$(now)],\"cpu_pressure_avg10\":$(pressure),\
\"result\":$line}"
  log "$KEYS keys, round $round, $*: $(json ops_per_s <<<"$line") ops/s, p99 $(json p99_us <<<"$line") us" \
    "(server fraction $(json server_fraction <<<"$line"))"
}

if [ -n "$replot" ]; then
  [ -s "$OUT_DIR/runs.jsonl" ] || die "--replot: no $OUT_DIR/runs.jsonl (what an earlier run wrote)"
  read -r threads inflight seconds durability < <(python3 -c 'import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
g = next(x for x in r if x["run"] == "get")["result"]
load = next(x for x in r if x["run"] == "load")
print(g["threads"], g["depth"], g["seconds"], load["durability"])' "$OUT_DIR/runs.jsonl")
  commit=$(json commit <"$OUT_DIR/summary.json" 2>/dev/null || echo unknown)
  changed=$(json changed_files <"$OUT_DIR/summary.json" 2>/dev/null || echo -1)
  size_list=()
else
  log "durability $durability; cell-bench $threads threads x $inflight in flight, $seconds s a run; sizes $sizes"
  IFS=, read -r -a size_list <<<"$sizes"
fi
for n in ${size_list[@]+"${size_list[@]}"}; do
  KEYS=$n
  load_size "$n"
  for round in $(seq "${rounds:-$([ "$n" -lt 10000000 ] && echo 3 || echo 1)}"); do
    for dist in zipfian uniform; do
      for side in server client adaptive; do
        measure "$round" --workload=c --distribution="$dist" --search="$side"
      done
    done
    measure "$round" --workload=e --search=client
    recover "$round"
  done
  stop_server
  rm -rf "$data"
done

python3 - "$OUT_DIR" "$threads" "$inflight" "$seconds" "$commit" "$changed" >"$OUT_DIR/summary.json.new" <<'PY'
import datetime, json, re, statistics, sys
out, threads, inflight, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
runs = [json.loads(l) for l in open(f"{out}/runs.jsonl")]
for r in runs:
    if "result" in r:
        assert r["result"]["errors"] == 0, f"{r['keys']} keys, {r['run']}: errors"
sizes = sorted({r["keys"] for r in runs})
med = statistics.median
sides = ["server", "client", "adaptive"]
dists = ["zipfian", "uniform"]


def label(n):
    return f"{n // 1000000}M" if n % 1000000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def checkpoints(n):
    """(start, end, seconds) of each checkpoint in the server's log (its times are UTC)."""
    found = []
    for line in open(f"{out}/server-{n}.log"):
        m = re.match(r"I (\S+ \S+) server \d+: checkpoint at lsn \d+ in ([0-9.]+) s", line)
        if m:
            end = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(
                tzinfo=datetime.timezone.utc).timestamp()
            found.append((end - float(m.group(2)), end, float(m.group(2))))
    return found


summary = {"experiment": "10-scale", "commit": sys.argv[5], "changed_files": int(sys.argv[6]), "threads": threads,
           "inflight": inflight, "seconds": seconds, "sizes": {}}
for n in sizes:
    at = [r for r in runs if r["keys"] == n]
    load = next(r for r in at if r["run"] == "load")
    m = load["memory"]
    s = {"pages": load["pages"], "durability": load["durability"], "rounds": max(r["round"] for r in at),
         "load_s": load["result"]["load_s"], "load_keys_per_s": round(n / load["result"]["load_s"]),
         "load_checkpoints": load["checkpoints"], "settle_after_load_s": load["settle_s"],
         "meganodes": m["meganodes"], "node_bytes_per_key": round(m["node_bytes_used"] / n, 1),
         "record_bytes_per_key": round(m["record_bytes_used"] / n, 1),
         "record_bytes_per_key_resolution": round(m["record_bytes_resolution"] / n, 1),
         "stats_bytes_per_key": round((m["node_bytes_used"] + m["record_bytes_used"]) / n, 1),
         "rss_bytes_per_key": round(m["rss_bytes"] / n, 1), "rss_gib": round(m["rss_bytes"] / 2**30, 2),
         "checkpoint_bytes_after_load": load["files"]["checkpoint_bytes"], "gets": {}, "cpu_pressure_avg10": []}
    for d in dists:
        for side in sides:
            g = [r["result"] for r in at if r["run"] == "get" and r["distribution"] == d and r["search"] == side]
            s["gets"].setdefault(d, {})[side] = {
                "ops_per_s": round(med(x["ops_per_s"] for x in g)), "p99_us": med(x["p99_us"] for x in g),
                "each": [round(x["ops_per_s"]) for x in g],
                "server_fraction": med(x["server_fraction"] for x in g)}
    sc = [r["result"] for r in at if r["run"] == "scan"]
    s["scan_e_client"] = {"ops_per_s": round(med(x["ops_per_s"] for x in sc)), "p99_us": med(x["p99_us"] for x in sc),
                          "each": [round(x["ops_per_s"]) for x in sc]}
    rec = [r for r in at if r["run"] == "recovery"]
    s["recovery"] = {k: med(r[k] for r in rec) for k in ("recovered_s", "ready_s", "stats_s", "stop_s", "settle_s")}
    s["recovery"]["each"] = [{k: r[k] for k in ("recovered_s", "stats_s", "records_replayed", "records")} for r in rec]
    s["recovery"]["checkpoint_bytes"] = med(r["files"]["checkpoint_bytes"] for r in rec)
    s["recovery"]["rss_bytes_per_key_after"] = round(med(r["memory_after"]["rss_bytes"] for r in rec) / n, 1)
    s["cpu_pressure_avg10"] = [min(r["cpu_pressure_avg10"] for r in at if "cpu_pressure_avg10" in r),
                               max(r["cpu_pressure_avg10"] for r in at if "cpu_pressure_avg10" in r)]
    # Runs that a checkpoint overlapped (on the server's CPU, and the disk): none should, the script waits them out.
    ck = checkpoints(n)
    s["checkpoint_s_max"] = max((c[2] for c in ck), default=0)
    s["runs_during_checkpoint"] = [
        f"round {r['round']} {r['run']} {r.get('distribution', '')} {r['search']}".replace("  ", " ") for r in at
        if "t" in r and any(c[0] < r["t"][1] and c[1] > r["t"][0] for c in ck)]
    summary["sizes"][str(n)] = s
first, last = sizes[0], sizes[-1]
ratio = {d: round(summary["sizes"][str(last)]["gets"][d]["client"]["ops_per_s"] /
                  summary["sizes"][str(first)]["gets"][d]["client"]["ops_per_s"], 3) for d in dists}
summary["client_get_ratio"] = {"of": f"{label(last)} / {label(first)}", **ratio}
if first == 1000000 and last == 20000000:
    summary["acceptance"] = {"client_get_20m_over_1m": ratio, "pass": all(v >= 0.8 for v in ratio.values())}

# The plots' data: groups by key count, a column per series.
def dat(name, columns, value):
    with open(f"{out}/{name}.dat", "w") as f:
        f.write("keys " + " ".join(f'"{c}"' for c in columns) + "\n")
        for n in sizes:
            f.write(label(n) + " " + " ".join(f"{value(summary['sizes'][str(n)], c)}" for c in columns) + "\n")


names = {"server": "server-side", "client": "client-side", "adaptive": "adaptive"}
for d in dists:
    dat(f"gets-{d}", [names[x] for x in sides],
        lambda s, c: s["gets"][d][{v: k for k, v in names.items()}[c]]["ops_per_s"])
    dat(f"p99-{d}", [names[x] for x in sides], lambda s, c: s["gets"][d][{v: k for k, v in names.items()}[c]]["p99_us"])
dat("scans", ["client-side"], lambda s, c: s["scan_e_client"]["ops_per_s"])  # coloured as the gets' client-side
dat("bytes", ["nodes", "records", "nodes + records", "VmRSS"],
    lambda s, c: {"nodes": s["node_bytes_per_key"], "records": s["record_bytes_per_key"],
                  "nodes + records": s["stats_bytes_per_key"], "VmRSS": s["rss_bytes_per_key"]}[c])
dat("load", ["load"], lambda s, c: s["load_keys_per_s"])
dat("recovery", ["server's line", "to stats"],
    lambda s, c: s["recovery"]["recovered_s" if c.startswith("server") else "stats_s"])

# The tables, on stderr.
S = summary["sizes"]
L = [f"10-scale at {summary['commit']} ({summary['changed_files']} tracked files changed): Cell's shapes, one server "
     f"(1 worker, CPU 0), durability {S[str(first)]['durability']}; cell-bench on CPU 1 over shm, {threads} threads x "
     f"{inflight} in flight, {seconds:g} s a run; medians of each size's rounds"]
for n in sizes:
    L.append(f"  {label(n)}: {S[str(n)]['pages']}; {S[str(n)]['rounds']} round(s); CPU pressure (some avg10) "
             f"{S[str(n)]['cpu_pressure_avg10'][0]}-{S[str(n)]['cpu_pressure_avg10'][1]}%; runs a checkpoint "
             f"overlapped: {', '.join(S[str(n)]['runs_during_checkpoint']) or 'none'}")
L.append(f"{'keys':>6} {'load s':>8} {'keys/s':>8} {'ckpts':>5} {'megan.':>6} {'nodes B/k':>9} {'rec B/k':>8} "
         f"{'stats B/k':>9} {'RSS B/k':>8} {'RSS GiB':>7} {'recov s':>7} {'to stats s':>10} {'replayed':>9}")
for n in sizes:
    s = S[str(n)]
    rec = s["recovery"]
    replayed = "/".join(str(e["records_replayed"]) for e in rec["each"])
    L.append(f"{label(n):>6} {s['load_s']:>8.2f} {s['load_keys_per_s']:>8,} {s['load_checkpoints']:>5} "
             f"{s['meganodes']:>6} {s['node_bytes_per_key']:>9.1f} {s['record_bytes_per_key']:>8.1f} "
             f"{s['stats_bytes_per_key']:>9.1f} {s['rss_bytes_per_key']:>8.1f} {s['rss_gib']:>7.2f} "
             f"{rec['recovered_s']:>7.2f} {rec['stats_s']:>10.2f} {replayed:>9}")
for d in dists:
    L.append(f"gets/s, {d} (p99 us):" + "".join(f"{names[x]:>24}" for x in sides) + f"{'E ops/s (p99)':>22}")
    for n in sizes:
        s = S[str(n)]
        cells = "".join(f"{s['gets'][d][x]['ops_per_s']:>14,} ({s['gets'][d][x]['p99_us']:>7.0f})" for x in sides)
        e = s["scan_e_client"]
        L.append(f"{label(n):>21}   {cells}   {e['ops_per_s']:>10,} ({e['p99_us']:>7.0f})")
L.append(f"client-side gets/s, {summary['client_get_ratio']['of']}: zipfian {ratio['zipfian']:.3f}x, uniform "
         f"{ratio['uniform']:.3f}x" + ("" if "acceptance" not in summary else
                                      f"  (issue 22: >= 0.8x: {'pass' if summary['acceptance']['pass'] else 'FAIL'})"))
print("\n".join(L), file=sys.stderr)
print(json.dumps(summary))
PY
mv "$OUT_DIR/summary.json.new" "$OUT_DIR/summary.json"
# The plots' titles: the pages the sizes ran on ("4 KiB pages", "2 MiB huge pages").
pages_note=$(python3 -c 'import json, sys
sizes = json.load(open(sys.argv[1]))["sizes"].values()
print("; ".join(sorted({s["pages"].split(" (")[0].split(",")[0] for s in sizes})))' "$OUT_DIR/summary.json")
"$root/bench/plot.sh" groups "$OUT_DIR/scale-gets.png" \
  "Scale: one server, Cell's shapes ($pages_note, durability $durability); medians" \
  "gets/s, Zipfian=$OUT_DIR/gets-zipfian.dat" "gets/s, uniform=$OUT_DIR/gets-uniform.dat" \
  "get p99 us, Zipfian=$OUT_DIR/p99-zipfian.dat" "YCSB E (95% scans) ops/s=$OUT_DIR/scans.dat" >&2 ||
  log "plot failed"
"$root/bench/plot.sh" groups "$OUT_DIR/scale-memory.png" \
  "Scale: bytes per key, load rate, recovery ($pages_note, durability $durability)" \
  "bytes per key (stats; VmRSS)=$OUT_DIR/bytes.dat" "load keys/s=$OUT_DIR/load.dat" \
  "recovery s (log line; to stats)=$OUT_DIR/recovery.dat" >&2 ||
  log "plot failed"
cat "$OUT_DIR/summary.json"
