#!/usr/bin/env bash
# Self-test of the deploy/zookeeper/ scripts against a real Debian ZooKeeper (~15 s):
#   1. standalone node: start, write and read a znode, stop, directory gone;
#   2. 3-node ensemble: start, one leader, kill a follower, the other two still serve a write, restart the
#      follower (it catches up and sees the write), kill the leader, a new leader is elected, stop all.
#
#   deploy/zookeeper/zk-selftest.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=zk-common.sh
. "$here/zk-common.sh"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
step() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
ZK_DIR=""
trap '[ -z "$ZK_DIR" ] || "$here/zk-stop.sh" --dir="$ZK_DIR" --kill >/dev/null 2>&1 || true' EXIT

# modes DIR: "i:mode" for every node, e.g. "1:follower 2:leader 3:down".
modes() {
  local i m out=""
  for i in $(zk_nodes "$ZK_DIR"); do
    m=$(zk_mode "$(zk_node_port "$ZK_DIR" "$i")")
    out+="$i:${m:-down} "
  done
  echo "${out% }"
}

# wait_for_leader: waits (up to 30 s) until some running node reports Mode: leader; prints its index.
wait_for_leader() {
  local deadline=$((SECONDS + 30)) i
  while [ "$SECONDS" -lt "$deadline" ]; do
    for i in $(zk_nodes "$ZK_DIR"); do
      if [ "$(zk_mode "$(zk_node_port "$ZK_DIR" "$i")")" = leader ]; then echo "$i"; return 0; fi
    done
    sleep 0.1
  done
  return 1
}

step "standalone node"
t=$(now)
eval "$("$here/zk-start.sh")"
echo "started in $(elapsed "$t") s: ZK_CONNECT=$ZK_CONNECT ZK_DIR=$ZK_DIR pid=$ZK_NODE_1_PID"
[ "$(zk_mode "$ZK_NODE_1_PORT")" = standalone ] || fail "node is not standalone: $(modes)"
[ "$(zk_4lw "$ZK_NODE_1_PORT" ruok)" = imok ] || fail "ruok not answered"
"$here/zk-cli.sh" -server "$ZK_CONNECT" create /selftest v1 2>/dev/null
[ "$("$here/zk-cli.sh" -server "$ZK_CONNECT" get /selftest)" = v1 ] || fail "znode read back wrong"
echo "create/get /selftest ok"
t=$(now)
"$here/zk-stop.sh" --dir="$ZK_DIR"
echo "stopped in $(elapsed "$t") s"
[ ! -e "$ZK_DIR" ] || fail "$ZK_DIR still exists"
zk_pid_gone "$ZK_NODE_1_PID" || fail "pid $ZK_NODE_1_PID still alive"
ZK_DIR=""

step "3-node ensemble"
t=$(now)
eval "$("$here/zk-start.sh" --nodes=3)"
echo "started in $(elapsed "$t") s: ZK_CONNECT=$ZK_CONNECT ZK_DIR=$ZK_DIR"
echo "modes: $(modes)"
"$here/zk-status.sh" --dir="$ZK_DIR" | tr '\n' ' '; echo
leader=$("$here/zk-status.sh" --dir="$ZK_DIR" | sed -n 's/^ZK_LEADER=//p')
[ -n "$leader" ] || fail "no leader: $(modes)"
follower=$(( leader % 3 + 1 ))
"$here/zk-cli.sh" -server "$ZK_CONNECT" create /selftest v1 2>/dev/null

step "kill follower $follower (SIGKILL)"
t=$(now)
"$here/zk-stop.sh" --dir="$ZK_DIR" --node="$follower" --kill
echo "killed in $(elapsed "$t") s; modes: $(modes)"
[ -d "$ZK_DIR" ] || fail "--node removed the directory"
# The two survivors still form a quorum: write through one of them only.
survivor_port=$(zk_node_port "$ZK_DIR" "$leader")
"$here/zk-cli.sh" -server "127.0.0.1:$survivor_port" set /selftest v2 2>/dev/null || fail "write with 2 of 3 failed"
other=$(( follower % 3 + 1 )); [ "$other" != "$leader" ] || other=$(( other % 3 + 1 ))
[ "$("$here/zk-cli.sh" -server "127.0.0.1:$(zk_node_port "$ZK_DIR" "$other")" get /selftest)" = v2 ] ||
  fail "write not visible on node $other"
echo "write with 2 of 3 nodes ok; modes: $(modes)"

step "restart node $follower"
t=$(now)
eval "$("$here/zk-start.sh" --dir="$ZK_DIR" --restart-node="$follower")"
echo "restarted in $(elapsed "$t") s; modes: $(modes)"
pv="ZK_NODE_${follower}_PORT"
[ "$("$here/zk-cli.sh" -server "127.0.0.1:${!pv}" get /selftest)" = v2 ] || fail "restarted node lacks the write"
echo "restarted node has /selftest=v2"

step "kill leader $leader (SIGTERM)"
t=$(now)
"$here/zk-stop.sh" --dir="$ZK_DIR" --node="$leader"
new_leader=$(wait_for_leader) || fail "no new leader: $(modes)"
echo "new leader $new_leader after $(elapsed "$t") s; modes: $(modes)"
"$here/zk-start.sh" --dir="$ZK_DIR" --restart-node="$leader" >/dev/null

step "stop all"
t=$(now)
"$here/zk-stop.sh" --dir="$ZK_DIR"
echo "stopped in $(elapsed "$t") s"
[ ! -e "$ZK_DIR" ] || fail "$ZK_DIR still exists"
ZK_DIR=""
echo "zk-selftest.sh: PASS"
