# Shared by bench/experiments/*.sh (sourced, not run). Each experiment starts one cell-server pinned to CPU 0 (one
# worker: the server's CPU), runs cell-bench pinned to CPU 1 (the clients), writes its raw output (JSON lines, CSV
# time series) and its PNG plots under OUT_DIR, and prints a JSON summary last.
#
# The model that makes two cores look like Cell's testbed (docs/BENCHMARKS.md explains the numbers):
#   --nic-model=$NIC     one-sided reads obey a NIC's rate and latency (rpc/shm/nic_model.h); default 25k reads/s
#                        and 240 us (plus the ~35 us a sleeping thread wakes late on these VMs), so that a read's
#                        round trip costs about what a server-side search's does with no queue (~280 us), as on
#                        Cell's RDMA NICs, which its rule assumes
#   --search-cpu-us=$CPU each get, put or scan searched on the server costs its worker this much more CPU; default
#                        200 us, so that one worker serves about 4.7k searches/s, as the NIC serves about 5k
#                        client-side gets/s (5 reads each)
#   --poll-us=$POLL      the worker polls for requests this long after its last before it sleeps (default 100 us):
#                        it has CPU 0 to itself, and a sleeping worker costs each request a wake-up (an interrupt
#                        to its CPU: microseconds of the client's CPU and of the request's latency in a VM); 0: sleep
#                        at once. Redis has no such setting (its server sleeps in epoll_wait whenever idle).
# Slow motion: a real NIC's rate over shm would need a thread to sleep and wake per read, and on a 2-core VM those
# wake-ups (~15 us of CPU each) saturate the client's core first; at these rates they take a fraction of it.
# Environment: BUILD_DIR (default build), OUT_DIR (default out/experiments/<name>), NIC, CPU, POLL, KEYS (default
# 200000), SECONDS_PER_RUN, SERVER_CPU (0), CLIENT_CPU (1), BENCH_FLAGS (more cell-bench flags for every Cell run
# made through `bench` below, after the script's own: say --selector-floor=read to run an experiment with another
# rule).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${BUILD_DIR:-$root/build}/bin
NIC=${NIC-reads_per_s=25000,latency_us=240}
CPU=${CPU:-200}
POLL=${POLL:-100}
KEYS=${KEYS:-200000}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

for b in cell-server cell-bench; do
  [ -x "$bin/$b" ] || die "$bin/$b not built (deploy/test.sh or cmake --build build builds it)"
done
command -v taskset >/dev/null || die "taskset not found (util-linux)"

# exp_init NAME: the output directory, and cleanup on exit.
exp_init() {
  exp_name=$1
  OUT_DIR=${OUT_DIR:-$root/out/experiments/$exp_name}
  mkdir -p "$OUT_DIR"
  work=$(mktemp -d)
  server_pid=""
  trap exp_cleanup EXIT
  log "$exp_name: output in $OUT_DIR"
}

exp_cleanup() {
  stop_server
  rm -rf "$work"
}

# start_server [cell-server flags...]: one server, one worker, pinned to SERVER_CPU, embedded membership, listening
# on tcp and shm, with the NIC and CPU models and POLL; sets CLUSTER. Flags given override the defaults.
start_server() {
  stop_server
  local out="$work/server.out"
  rm -f "$out"
  local models=()
  [ -z "$NIC" ] || models+=(--nic-model="$NIC")
  [ "$CPU" = 0 ] || models+=(--search-cpu-us="$CPU")
  taskset -c "$SERVER_CPU" "$bin/cell-server" --listen=tcp://127.0.0.1:0 --listen="shm://$work/cell.sock" \
    --workers=1 --poll-us="$POLL" --meganode-size=64MiB --meganodes=8 --region-size=1GiB ${models[@]+"${models[@]}"} \
    "$@" >"$out" 2>"$work/server.log" &
  server_pid=$!
  local i
  for i in $(seq 300); do
    grep -q '^ready ' "$out" 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1  # polling the server's readiness line, bounded (30 s)
  done
  grep -q '^ready ' "$out" 2>/dev/null || { cat "$work/server.log" >&2; die "cell-server did not start"; }
  CLUSTER=$(sed -n 's/^listening \(tcp:.*\)/\1/p' "$out")
}

# shm_pages: what a server's default regions (memfd, which shm clients map) are backed by on this kernel: transparent
# huge pages where shmem THP is "advise" or on (meganode/region.cc asks for them), else 4 KiB pages. A phrase for logs
# and summaries; the scripts change no setting (README.md, "Huge pages").
shm_pages() {
  local thp
  thp=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null)
  case "$thp" in
    advise | always | within_size | force) echo "transparent huge pages (shmem_enabled $thp)" ;;
    *) echo "4 KiB pages (shmem_enabled ${thp:-unknown})" ;;
  esac
}

# Starts a redis-server without persistence, pinned to $SERVER_CPU, on a Unix socket in $work/redis (sets redis_dir
# and redis_pid; the caller stops it), and waits up to 10 s for it to answer PING.
start_redis() {
  redis_dir="$work/redis"
  mkdir -p "$redis_dir"
  taskset -c "$SERVER_CPU" redis-server --port 0 --unixsocket "$redis_dir/redis.sock" --save "" --appendonly no \
    --daemonize no --dir "$redis_dir" --logfile "$redis_dir/redis.log" &
  redis_pid=$!
  local ready=""
  for _ in $(seq 200); do
    if [ -S "$redis_dir/redis.sock" ] && redis-cli -s "$redis_dir/redis.sock" ping 2>/dev/null | grep -q PONG; then
      ready=1
      break
    fi
    kill -0 "$redis_pid" 2>/dev/null || { cat "$redis_dir/redis.log" >&2; die "redis-server exited"; }
    sleep 0.05  # polling redis-server's readiness, bounded (10 s)
  done
  [ -n "$ready" ] || { cat "$redis_dir/redis.log" >&2; die "redis-server did not answer PING within 10 s"; }
}

stop_server() {
  if [ -n "${server_pid:-}" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}

# bench [cell-bench flags...]: one run against CLUSTER over shm, pinned to CLIENT_CPU; prints its JSON line.
bench() {
  # shellcheck disable=SC2086 # BENCH_FLAGS: words, as given
  taskset -c "$CLIENT_CPU" "$bin/cell-bench" --cluster="$CLUSTER" --transport=shm --keys="$KEYS" "$@" \
    ${BENCH_FLAGS:-} 2>>"$OUT_DIR/bench.log" | tail -1
}

# bench_redis SOCKET [cell-bench flags...]: the same harness against the redis-server at unix:SOCKET.
bench_redis() {
  local socket=$1
  shift
  taskset -c "$CLIENT_CPU" "$bin/cell-bench" --store=redis --redis="unix:$socket" --keys="$KEYS" "$@" \
    2>>"$OUT_DIR/bench.log" | tail -1
}

# load: puts the KEYS keys once (later runs pass --no-load).
load() {
  log "loading $KEYS keys"
  bench --workload=c --search=server --duration=0.2 "$@" >/dev/null
}

# json FIELD: FIELD of the JSON line on stdin.
json() { python3 -c 'import json, sys; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$1"; }
