#!/usr/bin/env bash
# Prints the state of every node of a zk-start.sh cluster, as sourceable lines (e.g. to find the leader to kill):
#   ZK_NODE_<i>_MODE=standalone|leader|follower|down   ("down": not running, or running but not serving)
#   ZK_LEADER=<i>                                      (empty if no node is leader)
#
#   deploy/zookeeper/zk-status.sh --dir=DIR      (DIR defaults to $ZK_DIR)
#
# Uses the `srvr` four-letter word over bash's /dev/tcp. Exit status 0 if at least one node serves, else 1.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=zk-common.sh
. "$here/zk-common.sh"

dir=${ZK_DIR:-}
for arg in "$@"; do
  case "$arg" in
    --dir=*) dir=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) zk_die "zk-status.sh: unknown argument '$arg' (see --help)" ;;
  esac
done
if [ -z "$dir" ] || [ ! -d "$dir" ]; then zk_die "zk-status.sh: --dir=DIR (or ZK_DIR) must name a cluster directory"; fi

leader="" serving=0
for i in $(zk_nodes "$dir"); do
  mode=$(zk_mode "$(zk_node_port "$dir" "$i")")
  echo "ZK_NODE_${i}_MODE=${mode:-down}"
  [ -z "$mode" ] || serving=1
  [ "$mode" != leader ] || leader=$i
done
echo "ZK_LEADER=$leader"
[ "$serving" = 1 ]
