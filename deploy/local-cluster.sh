#!/usr/bin/env bash
# A real Cell cluster on this machine, on loopback: cell-server processes, and with --membership=zookeeper a
# ZooKeeper started by deploy/zookeeper/zk-start.sh. Needs a build (deploy/quickstart.sh makes one).
#
#   deploy/local-cluster.sh start [--membership=embedded|zookeeper] [--servers=N] [--base-port=P] [--dir=DIR]
#   deploy/local-cluster.sh status [--dir=DIR]
#   deploy/local-cluster.sh stop [--dir=DIR]
#
#   --membership=embedded (default): one server holds the region table itself; no ZooKeeper. One server only.
#   --membership=zookeeper: a local ZooKeeper holds membership and the region table; any number of servers.
#   --servers=N     how many servers (default 1). Server i has id i and listens on tcp://127.0.0.1:P+i-1 and on
#                   shm://DIR/server<i>.sock.
#   --base-port=P   default 7000.
#   --dir=DIR       where pids, logs, the servers' write-ahead logs (DIR/data) and the ZooKeeper data go (default ${TMPDIR:-/tmp}/cell-local-cluster).
#   --server-flag=F passed to every cell-server (repeatable), e.g. --server-flag=--meganode-size=1MiB to see the
#                   tree spread over the servers after a few thousand keys.
#   --insecure      no keys: the servers accept anyone (on loopback only). By default the cluster has keys, made
#                   with `cellctl keygen` into DIR/keys: client.key (for clients) and peer.key (for the servers).
#   BUILD_DIR       the build to run (default build/).
#
# start prints CELL_CLUSTER=<cluster URI> and CELL_KEY_FILE=<client key> (the variables cellctl reads; or pass
# --cluster and --key-file), and writes them to DIR/env. Each server's log is DIR/server<i>.log.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${BUILD_DIR:-$root/build}/bin

die() { echo "local-cluster.sh: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: local-cluster.sh start|status|stop [options] (see --help)"
command=$1
shift
membership=embedded servers=1 base_port=7000 dir=${TMPDIR:-/tmp}/cell-local-cluster insecure=0
server_flags=()
for arg in "$@"; do
  case "$arg" in
    --server-flag=*) server_flags+=("${arg#*=}") ;;
    --membership=*) membership=${arg#*=} ;;
    --servers=*) servers=${arg#*=} ;;
    --base-port=*) base_port=${arg#*=} ;;
    --dir=*) dir=${arg#*=} ;;
    --insecure) insecure=1 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
case "$command" in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

# server_alive I: true if server I's recorded pid is a running cell-server.
server_alive() {
  local pid
  [ -r "$dir/server$1.pid" ] || return 1
  pid=$(<"$dir/server$1.pid")
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "cell-server"
}

# Written by start into DIR; stop and status touch only a directory that has it.
marker=.cell-local-cluster

stop_cluster() {
  local f i pid
  [ -d "$dir" ] || { echo "local-cluster.sh: nothing running in $dir"; return 0; }
  [ -e "$dir/$marker" ] || die "$dir was not made by local-cluster.sh start (no $marker in it); not touching it"
  for f in "$dir"/server*.pid; do
    [ -e "$f" ] || continue
    i=${f##*/server}; i=${i%.pid}
    if server_alive "$i"; then
      pid=$(<"$f")
      kill -TERM "$pid" 2>/dev/null || true
      # A clean stop leaves the membership at once; give it up to 10 s, then kill.
      for _ in $(seq 100); do server_alive "$i" || break; sleep 0.1; done
      if server_alive "$i"; then kill -KILL "$pid" 2>/dev/null || true; fi
      echo "stopped server $i (pid $pid)"
    fi
    rm -f "$f"
  done
  if [ -d "$dir/zk" ]; then
    "$root/deploy/zookeeper/zk-stop.sh" --dir="$dir/zk" >/dev/null
    echo "stopped ZooKeeper"
  fi
  rm -rf "$dir"
}

status_cluster() {
  local f i
  { [ -r "$dir/env" ] && [ -e "$dir/$marker" ]; } || { echo "no local cluster in $dir"; return 1; }
  cat "$dir/env"
  local key_file
  key_file=$(sed -n 's/^CELL_KEY_FILE=//p' "$dir/env")
  for f in "$dir"/server*.pid; do
    [ -e "$f" ] || continue
    i=${f##*/server}; i=${i%.pid}
    if server_alive "$i"; then echo "server $i: running (pid $(<"$f"))"; else echo "server $i: NOT running (see $dir/server$i.log)"; fi
  done
  CELL_KEY_FILE=$key_file "$bin/cellctl" --cluster="$(sed -n 's/^CELL_CLUSTER=//p' "$dir/env")" servers
}

start_cluster() {
  local cluster i port pid ready
  { [ -x "$bin/cell-server" ] && [ -x "$bin/cellctl" ]; } ||
    die "no build in ${bin%/bin} (run deploy/quickstart.sh, or cmake --build build; or set BUILD_DIR)"
  [[ "$servers" =~ ^[1-9][0-9]*$ ]] || die "--servers must be a positive number, not '$servers'"
  [[ "$base_port" =~ ^[0-9]+$ ]] || die "--base-port must be a port number"
  case "$membership" in
    embedded) [ "$servers" = 1 ] || die "embedded membership is one server (it holds the table); use --membership=zookeeper for $servers" ;;
    zookeeper) ;;
    *) die "--membership must be embedded or zookeeper, not '$membership'" ;;
  esac
  if [ -e "$dir/$marker" ]; then
    die "a local cluster is already in $dir (see: deploy/local-cluster.sh status; stop it: deploy/local-cluster.sh stop)"
  fi
  if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then die "$dir exists and is not empty; choose another --dir"; fi
  for ((i = 1; i <= servers; i++)); do
    port=$((base_port + i - 1))
    if ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
      die "port $port is in use; choose another --base-port"
    fi
  done
  mkdir -p "$dir"
  touch "$dir/$marker"
  # If anything below fails, or we are interrupted, take down what was started.
  started=0  # global: the EXIT trap reads it after this function has returned
  trap '[ "$started" = 1 ] || { echo "local-cluster.sh: start failed; stopping what was started" >&2; stop_cluster >&2; }' EXIT
  trap 'exit 130' INT TERM

  # The cluster's keys: the client key for clients, the peer key for the servers among themselves.
  local key_args=() client_key=""
  if [ "$insecure" = 0 ]; then
    mkdir -m 700 "$dir/keys"
    "$bin/cellctl" keygen "$dir/keys/client.key" >/dev/null
    "$bin/cellctl" keygen "$dir/keys/peer.key" >/dev/null
    client_key="$dir/keys/client.key"
    key_args=(--client-key-file="$client_key" --peer-key-file="$dir/keys/peer.key")
  fi

  cluster=""
  if [ "$membership" = zookeeper ]; then
    local zk_env
    zk_env=$("$root/deploy/zookeeper/zk-start.sh" --dir="$dir/zk") || die "ZooKeeper did not start (see above)"
    eval "$zk_env"
    cluster="zk://$ZK_CONNECT/cell/local"
  fi
  for ((i = 1; i <= servers; i++)); do
    port=$((base_port + i - 1))
    # Every server logs to the cluster's data directory (each in files named by its id and regions).
    mkdir -p "$dir/data"
    local args=(--listen="tcp://127.0.0.1:$port" --listen="shm://$dir/server$i.sock" --id="$i" --data-dir="$dir/data")
    if [ "$membership" = zookeeper ]; then args+=(--membership="$cluster"); fi
    args+=(${key_args[@]+"${key_args[@]}"} ${server_flags[@]+"${server_flags[@]}"})
    "$bin/cell-server" "${args[@]}" >"$dir/server$i.out" 2>"$dir/server$i.log" </dev/null &
    pid=$!
    disown
    echo "$pid" >"$dir/server$i.pid"
    # It prints "ready ..." once it has joined the membership; give up after 30 s or if it exits.
    ready=0
    for _ in $(seq 300); do
      if grep -q '^ready ' "$dir/server$i.out"; then ready=1; break; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ "$ready" != 1 ]; then
      tail -n 20 "$dir/server$i.log" >&2
      die "server $i did not start (its log: $dir/server$i.log, shown above)"
    fi
    if [ -z "$cluster" ]; then cluster="tcp://127.0.0.1:$port"; fi
    echo "server $i: pid $pid, $(grep '^listening ' "$dir/server$i.out" | sed 's/^listening //' | tr '\n' ' ')"
  done
  { echo "CELL_CLUSTER=$cluster"; echo "CELL_KEY_FILE=$client_key"; } >"$dir/env"
  started=1
  trap - INT TERM
  echo "CELL_CLUSTER=$cluster"
  echo "CELL_KEY_FILE=$client_key"
}

case "$command" in
  start) start_cluster ;;
  stop) stop_cluster ;;
  status) status_cluster ;;
  *) die "unknown command '$command': start, status or stop" ;;
esac
