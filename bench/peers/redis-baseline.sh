#!/usr/bin/env bash
# Redis GET throughput measured the way cell-rpc-bench and cell-bench measure Cell: Debian's redis-server pinned to
# one CPU, redis-benchmark (GET, 100-byte values) pinned to the other, by default over one connection with 50
# requests pipelined, as Cell's one client thread keeps 50 requests in flight on its one connection. (--connections=50
# --pipeline=1 is redis-benchmark's own default shape: 50 clients, one request each in flight.) Prints one JSON line.
#
#   bench/peers/redis-baseline.sh [--server-cpu=0] [--client-cpu=1] [--requests=300000] [--connections=1]
#                                 [--pipeline=50]
set -euo pipefail

server_cpu=0 client_cpu=1 requests=300000 connections=1 pipeline=50
for arg in "$@"; do
  case "$arg" in
    --server-cpu=*) server_cpu=${arg#*=} ;;
    --client-cpu=*) client_cpu=${arg#*=} ;;
    --requests=*) requests=${arg#*=} ;;
    --connections=*) connections=${arg#*=} ;;
    --pipeline=*) pipeline=${arg#*=} ;;
    *) echo "redis-baseline.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
for tool in redis-server redis-benchmark redis-cli taskset; do
  command -v "$tool" >/dev/null || { echo "redis-baseline.sh: $tool not found (deploy/install-deps.sh installs it)" >&2; exit 1; }
done

dir=$(mktemp -d)
sock="$dir/redis.sock"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

# Port 0: no TCP listener of its own; the benchmark needs TCP, so pick a free port by asking the kernel.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
taskset -c "$server_cpu" redis-server --port "$port" --bind 127.0.0.1 --unixsocket "$sock" --save "" \
  --appendonly no --daemonize no --dir "$dir" --logfile "$dir/redis.log" &
pid=$!
# Wait until it answers (bounded): redis-server has no readiness notification on this path.
for _ in $(seq 1 200); do
  if redis-cli -s "$sock" ping 2>/dev/null | grep -q PONG; then break; fi
  kill -0 "$pid" 2>/dev/null || { echo "redis-baseline.sh: redis-server exited; log:" >&2; cat "$dir/redis.log" >&2; exit 1; }
  sleep 0.05
done
redis-cli -s "$sock" ping | grep -q PONG || { echo "redis-baseline.sh: redis-server did not start" >&2; exit 1; }

out=$(taskset -c "$client_cpu" redis-benchmark -h 127.0.0.1 -p "$port" -t get -c "$connections" -P "$pipeline" \
  -d 100 -n "$requests" --csv)
# CSV: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
line=$(echo "$out" | grep '^"GET"')
rps=$(echo "$line" | cut -d, -f2 | tr -d '"')
p50=$(echo "$line" | cut -d, -f5 | tr -d '"')
p99=$(echo "$line" | cut -d, -f7 | tr -d '"')
version=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')
echo "{\"peer\":\"redis\",\"version\":\"$version\",\"test\":\"GET\",\"connections\":$connections,\"pipeline\":$pipeline,\"value_bytes\":100,\"requests\":$requests,\"get_per_s\":$rps,\"p50_ms\":$p50,\"p99_ms\":$p99}"
