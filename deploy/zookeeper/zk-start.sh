#!/usr/bin/env bash
# Starts a throwaway local ZooKeeper (Debian's `zookeeper` package) on 127.0.0.1: one standalone node or an
# ensemble, each node a JVM in the background with its own config, data and log under one directory.
#
#   deploy/zookeeper/zk-start.sh [--nodes=1|3] [--dir=DIR] [--base-port=N] [--timeout=SECS]
#   deploy/zookeeper/zk-start.sh --dir=DIR --restart-node=I [--no-wait] [--timeout=SECS]
#
#   --nodes=N         1 (default): standalone; 3: an ensemble (any N >= 1 works; use odd N).
#   --dir=DIR         where to put everything; must be absent or empty. Default: a fresh mktemp -d directory.
#   --base-port=N     node i uses client port N+3(i-1), quorum port N+3(i-1)+1, election port N+3(i-1)+2.
#                     Default: a random free block in 20000-31999 (below Linux's ephemeral range), retried
#                     with a new block if a port turns out to be taken, so parallel test runs do not collide.
#   --timeout=SECS    how long to wait for the nodes to serve (default 60).
#   --restart-node=I  start node I of an existing DIR again with its existing data (after zk-stop.sh --node=I).
#   --no-wait         with --restart-node: do not wait for the node to serve (e.g. when it cannot reach a
#                     quorum until another stopped node is restarted too).
#
# On success prints (and writes to DIR/env) lines for `eval "$(deploy/zookeeper/zk-start.sh ...)"`:
#   ZK_CONNECT=127.0.0.1:p1,127.0.0.1:p2,...  ZK_DIR=...  ZK_NODES=n  ZK_NODE_<i>_PID=...  ZK_NODE_<i>_PORT=...
# (--restart-node prints only ZK_NODE_<i>_PID / ZK_NODE_<i>_PORT.) Everything else goes to stderr.
# "Serving" means every node answers the `srvr` four-letter word with a Mode (standalone, or, for an ensemble,
# leader/follower with exactly one leader). On failure it prints why plus the tail of each node's log, kills
# the nodes it started, removes the directory if it created it, and exits 1.
#
# Stop with: deploy/zookeeper/zk-stop.sh --dir="$ZK_DIR" [--node=I] [--keep]
# Extra JVM flags can be passed in ZK_JAVA_OPTS (word-split).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=zk-common.sh
. "$here/zk-common.sh"

nodes=1 dir="" base_port="" timeout_s=60 restart_node="" wait_serving=1
for arg in "$@"; do
  case "$arg" in
    --nodes=*) nodes=${arg#*=} ;;
    --dir=*) dir=${arg#*=} ;;
    --base-port=*) base_port=${arg#*=} ;;
    --timeout=*) timeout_s=${arg#*=} ;;
    --restart-node=*) restart_node=${arg#*=} ;;
    --no-wait) wait_serving=0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) zk_die "zk-start.sh: unknown argument '$arg' (see --help)" ;;
  esac
done
[[ "$nodes" =~ ^[1-9]$ ]] || zk_die "--nodes must be 1..9 (1 or 3 in practice), got '$nodes'"
[[ "$timeout_s" =~ ^[0-9]+$ ]] || zk_die "--timeout must be a number of seconds"
[ -z "$base_port" ] || [[ "$base_port" =~ ^[0-9]+$ && "$base_port" -ge 1024 && "$base_port" -le 65500 ]] ||
  zk_die "--base-port must be a port number in 1024..65500"
zk_require_install

# --- launching and watching nodes ---------------------------------------------------------------------------

# start_node I: launches node I's JVM in the background and records its pid in DIR/node<I>/pid.
# stdin/stdout/stderr are all redirected so that the JVM does not hold the caller's pipe open: otherwise
# `eval "$(zk-start.sh)"` would hang until ZooKeeper exits.
start_node() {
  local nd="$dir/node$1"
  local -a extra=()
  # shellcheck disable=SC2206  # ZK_JAVA_OPTS is deliberately word-split.
  [ -z "${ZK_JAVA_OPTS:-}" ] || extra=($ZK_JAVA_OPTS)
  # Serial GC and C1-only JIT: faster JVM startup and fewer threads on a small (2-core) test machine.
  # forceSync=no: no fsync per transaction (data still survives a killed JVM, just not a power loss).
  # The admin server (Jetty on :8080) is off, so parallel runs do not fight over port 8080.
  java -Xmx256m -Xms32m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true \
    -Dlog4j.configuration="file:$dir/log4j.properties" -Dzookeeper.log.dir="$nd" \
    -Dzookeeper.admin.enableServer=false -Dzookeeper.forceSync=no -Dzookeeper.jmx.log4j.disable=true \
    ${extra[@]+"${extra[@]}"} \
    -cp "$ZK_CLASSPATH" org.apache.zookeeper.server.quorum.QuorumPeerMain "$nd/zoo.cfg" \
    >>"$nd/zookeeper.log" 2>&1 </dev/null &
  echo $! >"$nd/pid"
  # Not a job of this shell any more: no "Killed" notices on stderr if we have to kill it.
  disown
}

# node_ready I: true once node I serves (any Mode for a standalone node; leader/follower in an ensemble).
node_ready() {
  local mode
  mode=$(zk_mode "$(zk_node_port "$dir" "$1")")
  [ -n "$mode" ]
}

# report_failure MSG: explains on stderr which node is not serving, with the tail of each node's log.
report_failure() {
  local i port
  echo "zk-start.sh: $1" >&2
  for i in $(zk_nodes "$dir"); do
    port=$(zk_node_port "$dir" "$i")
    if zk_pid_alive "$dir/node$i/pid" "$dir/node$i/zoo.cfg"; then
      echo "--- node $i (port $port): running, srvr mode '$(zk_mode "$port")'; last log lines:" >&2
    else
      echo "--- node $i (port $port): NOT running; last log lines:" >&2
    fi
    tail -n 25 "$dir/node$i/zookeeper.log" 2>/dev/null | sed 's/^/    /' >&2 || true
  done
}

# kill_nodes: SIGKILLs every node of DIR that is still running (used only on failure).
kill_nodes() {
  local i pid pids=()
  for i in $(zk_nodes "$dir"); do
    # Our own children (perhaps not yet exec'd into java), so their pids are not recycled: zk_pid_gone suffices.
    if [ -r "$dir/node$i/pid" ] && ! zk_pid_gone "$(<"$dir/node$i/pid")"; then
      pid=$(<"$dir/node$i/pid")
      kill -KILL "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    rm -f "$dir/node$i/pid"
  done
  # Wait (at most ~5 s) until they are gone, so their ports are free again when we return.
  for pid in ${pids[@]+"${pids[@]}"}; do
    for _ in $(seq 50); do zk_pid_gone "$pid" && break; sleep 0.1; done
  done
}

# wait_serving I...: waits (up to --timeout) until every given node serves; for an ensemble also until exactly
# one member reports Mode: leader. Fails at once if a JVM exits.
wait_serving() {
  local deadline=$((SECONDS + timeout_s)) i all leaders mode
  while :; do
    all=1 leaders=0
    for i in "$@"; do
      # Not zk_pid_alive: until the forked shell has exec'd java, the pid's command line does not name zoo.cfg
      # yet. The pid is our own child here, so it cannot have been recycled while we watch it.
      ! zk_pid_gone "$(<"$dir/node$i/pid")" || { report_failure "node $i exited during startup"; return 1; }
      mode=$(zk_mode "$(zk_node_port "$dir" "$i")")
      [ -n "$mode" ] || all=0
      [ "$mode" != leader ] || leaders=$((leaders + 1))
    done
    if [ "$all" = 1 ] && { [ "$#" -lt "$nodes" ] || [ "$nodes" = 1 ] || [ "$leaders" = 1 ]; }; then
      return 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      report_failure "ZooKeeper not serving after ${timeout_s}s (nodes $*)"
      return 1
    fi
    sleep 0.2
  done
}

# --- --restart-node: start one node of an existing cluster again ---------------------------------------------
if [ -n "$restart_node" ]; then
  [ -n "$dir" ] || zk_die "--restart-node needs --dir=DIR"
  dir=$(cd "$dir" && pwd) || zk_die "no such directory: $dir"
  [ -f "$dir/node$restart_node/zoo.cfg" ] || zk_die "$dir has no node $restart_node"
  nodes=$(zk_nodes "$dir" | wc -l)
  if zk_pid_alive "$dir/node$restart_node/pid" "$dir/node$restart_node/zoo.cfg"; then
    zk_die "node $restart_node is already running (pid $(<"$dir/node$restart_node/pid"))"
  fi
  echo "=== restart $(date -Is)" >>"$dir/node$restart_node/zookeeper.log"
  start_node "$restart_node"
  if [ "$wait_serving" = 1 ] && ! wait_serving "$restart_node"; then
    pid=$(<"$dir/node$restart_node/pid")
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/node$restart_node/pid"
    exit 1
  fi
  pid=$(<"$dir/node$restart_node/pid")
  # Keep DIR/env current: replace the node's PID line.
  sed -i "s/^ZK_NODE_${restart_node}_PID=.*/ZK_NODE_${restart_node}_PID=$pid/" "$dir/env"
  echo "ZK_NODE_${restart_node}_PID=$pid"
  echo "ZK_NODE_${restart_node}_PORT=$(zk_node_port "$dir" "$restart_node")"
  exit 0
fi

# --- fresh cluster ---------------------------------------------------------------------------------------------
created_dir=0
if [ -n "$dir" ]; then
  if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
    zk_die "--dir=$dir exists and is not empty (use --restart-node to reuse it, or zk-stop.sh to remove it)"
  fi
  [ -d "$dir" ] || created_dir=1
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
else
  dir=$(mktemp -d "${TMPDIR:-/tmp}/cell-zk.XXXXXX")
  created_dir=1
fi

# If anything fails or we are interrupted before printing the result, kill what we started.
ok=0
cleanup() {
  if [ "$ok" = 0 ]; then
    kill_nodes
    if [ "$created_dir" = 1 ]; then rm -rf "$dir"; else rm -rf "${dir:?}"/node* "$dir/env" "$dir/log4j.properties"; fi
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Everything at INFO to stdout (= the node's zookeeper.log).
cat >"$dir/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n
EOF

# ports_free B: true if none of the 3*nodes ports from B is in use (listening or in any TCP state).
ports_free() {
  local used p
  used=$(ss -Htan 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }' | sort -u)
  for ((p = $1; p < $1 + 3 * nodes; p++)); do
    ! grep -qx "$p" <<<"$used" || return 1
  done
}

# pick_base: a random block of 3*nodes free ports in 20000..31999 (Linux hands out outgoing ports from 32768
# up, so connections never steal these). Random, so parallel runs rarely even try the same block.
pick_base() {
  local tries b
  for ((tries = 0; tries < 200; tries++)); do
    b=$((20000 + (RANDOM % 1300) * 9))
    if ports_free "$b"; then echo "$b"; return 0; fi
  done
  zk_die "no free port block found in 20000-31999"
}

# write_configs B: one directory, zoo.cfg (and myid for an ensemble) per node.
write_configs() {
  local b=$1 i j nd
  for ((i = 1; i <= nodes; i++)); do
    nd="$dir/node$i"
    mkdir -p "$nd/data"
    {
      echo "# Generated by deploy/zookeeper/zk-start.sh (node $i of $nodes)."
      echo "# tickTime 500 ms: short session timeouts (1-60 s allowed) and fast failure detection for tests."
      echo "tickTime=500"
      echo "initLimit=20"
      echo "syncLimit=5"
      echo "minSessionTimeout=1000"
      echo "maxSessionTimeout=60000"
      echo "dataDir=$nd/data"
      echo "clientPort=$((b + 3 * (i - 1)))"
      echo "clientPortAddress=127.0.0.1"
      echo "# Tests open many sessions from one address; the default cap is 60 per IP."
      echo "maxClientCnxns=0"
      echo "admin.enableServer=false"
      echo "4lw.commands.whitelist=srvr,ruok,stat,mntr,conf,cons"
      if [ "$nodes" -gt 1 ]; then
        for ((j = 1; j <= nodes; j++)); do
          echo "server.$j=127.0.0.1:$((b + 3 * (j - 1) + 1)):$((b + 3 * (j - 1) + 2))"
        done
      fi
    } >"$nd/zoo.cfg"
    [ "$nodes" = 1 ] || echo "$i" >"$nd/data/myid"
  done
}

attempts=1
if [ -n "$base_port" ]; then
  # A taken quorum port only bites when that node becomes leader, so check every port up front.
  ports_free "$base_port" || zk_die "--base-port=$base_port: some of ports $base_port..$((base_port + 3 * nodes - 1)) are in use"
else
  attempts=4
fi
started_at=$SECONDS
for ((attempt = 1; ; attempt++)); do
  base=${base_port:-$(pick_base)}
  write_configs "$base"
  for ((i = 1; i <= nodes; i++)); do start_node "$i"; done
  if wait_serving $(seq 1 "$nodes") 2>"$dir/wait.err"; then
    rm -f "$dir/wait.err"
    break
  fi
  # A port grabbed by someone else between our check and the JVM's bind: retry with another block.
  if [ "$attempt" -lt "$attempts" ] && cat "$dir"/node*/zookeeper.log | grep -q "Address already in use"; then
    echo "zk-start.sh: port block $base taken meanwhile; retrying with another one" >&2
    kill_nodes
    rm -rf "${dir:?}"/node* "$dir/wait.err"
    continue
  fi
  cat "$dir/wait.err" >&2
  exit 1
done

connect=""
for ((i = 1; i <= nodes; i++)); do connect+="${connect:+,}127.0.0.1:$(zk_node_port "$dir" "$i")"; done
{
  printf 'ZK_CONNECT=%s\n' "$connect"
  printf 'ZK_DIR=%q\n' "$dir"
  printf 'ZK_NODES=%s\n' "$nodes"
  for ((i = 1; i <= nodes; i++)); do
    printf 'ZK_NODE_%s_PID=%s\n' "$i" "$(<"$dir/node$i/pid")"
    printf 'ZK_NODE_%s_PORT=%s\n' "$i" "$(zk_node_port "$dir" "$i")"
  done
} >"$dir/env"
ok=1
echo "zk-start.sh: $nodes node(s) serving at $connect after $((SECONDS - started_at))s (dir $dir)" >&2
cat "$dir/env"
