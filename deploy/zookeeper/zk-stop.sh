#!/usr/bin/env bash
# Stops ZooKeeper nodes started by zk-start.sh, using the pid files in their directory.
#
#   deploy/zookeeper/zk-stop.sh --dir=DIR [--node=I] [--keep] [--kill] [--grace=SECS]
#
#   --dir=DIR      the cluster directory (ZK_DIR printed by zk-start.sh); defaults to $ZK_DIR if set.
#   --node=I       stop only node I (e.g. to kill an ensemble member in a test); DIR is always kept.
#                  Bring it back with: zk-start.sh --dir=DIR --restart-node=I
#   --keep         do not remove DIR after stopping all nodes (keeps data and logs).
#   --kill         SIGKILL at once (a crash) instead of SIGTERM (a clean shutdown).
#   --grace=SECS   how long to wait after SIGTERM before SIGKILL (default 10).
#
# Waits until the processes are gone (SIGKILL after the grace period, then at most 5 s more) and exits 0;
# exits 1 if a process survives that. Stopping an already stopped node is not an error.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=zk-common.sh
. "$here/zk-common.sh"

dir=${ZK_DIR:-} node="" keep=0 signal=TERM grace=10
for arg in "$@"; do
  case "$arg" in
    --dir=*) dir=${arg#*=} ;;
    --node=*) node=${arg#*=} ;;
    --keep) keep=1 ;;
    --kill) signal=KILL ;;
    --grace=*) grace=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) zk_die "zk-stop.sh: unknown argument '$arg' (see --help)" ;;
  esac
done
[ -n "$dir" ] || zk_die "zk-stop.sh: --dir=DIR is required (or set ZK_DIR)"
[[ "$grace" =~ ^[0-9]+$ ]] || zk_die "--grace must be a number of seconds"
if [ ! -d "$dir" ]; then
  echo "zk-stop.sh: $dir does not exist; nothing to stop" >&2
  exit 0
fi
dir=$(cd "$dir" && pwd)
# Refuse to touch (let alone rm -rf) a directory zk-start.sh did not make.
if [ ! -f "$dir/log4j.properties" ] || [ -z "$(zk_nodes "$dir")" ]; then
  zk_die "$dir is not a zk-start.sh cluster directory"
fi

if [ -n "$node" ]; then
  [ -f "$dir/node$node/zoo.cfg" ] || zk_die "$dir has no node $node"
  targets=("$node")
else
  mapfile -t targets < <(zk_nodes "$dir")
fi

# Signal every target first, so an ensemble shuts down in parallel rather than one grace period per node.
running=() pids=()
for i in "${targets[@]}"; do
  if zk_pid_alive "$dir/node$i/pid" "$dir/node$i/zoo.cfg"; then
    pid=$(<"$dir/node$i/pid")
    kill -"$signal" "$pid" 2>/dev/null || true
    running+=("$i") pids+=("$pid")
  fi
done

# alive_nodes: prints the signalled nodes whose process has not exited yet.
alive_nodes() {
  local k
  for k in "${!pids[@]}"; do
    zk_pid_gone "${pids[$k]}" || echo "${running[$k]}"
  done
}

deadline=$((SECONDS + grace)) killed=0
while [ -n "$(alive_nodes)" ]; do
  if [ "$killed" = 0 ] && [ "$SECONDS" -ge "$deadline" ]; then
    for k in "${!pids[@]}"; do
      if ! zk_pid_gone "${pids[$k]}"; then
        echo "zk-stop.sh: node ${running[$k]} did not exit within ${grace}s of SIGTERM; sending SIGKILL" >&2
        kill -KILL "${pids[$k]}" 2>/dev/null || true
      fi
    done
    killed=1 deadline=$((SECONDS + 5))
  elif [ "$killed" = 1 ] && [ "$SECONDS" -ge "$deadline" ]; then
    zk_die "zk-stop.sh: node(s) $(alive_nodes | tr '\n' ' ')still running after SIGKILL"
  fi
  sleep 0.05
done
for i in "${targets[@]}"; do rm -f "$dir/node$i/pid"; done

if [ -z "$node" ] && [ "$keep" = 0 ]; then
  rm -rf "$dir"
fi
