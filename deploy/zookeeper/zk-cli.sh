#!/usr/bin/env bash
# Runs Debian's Java ZooKeeper command-line client (org.apache.zookeeper.ZooKeeperMain, what zkCli.sh runs)
# with its logging silenced, so one command's output can be checked by scripts and tests.
#
#   deploy/zookeeper/zk-cli.sh [-server HOST:PORT,...] [COMMAND ARGS...]
#   e.g. deploy/zookeeper/zk-cli.sh -server "$ZK_CONNECT" create /cell hello
#        deploy/zookeeper/zk-cli.sh -server "$ZK_CONNECT" get /cell        # prints: hello
#
# -server defaults to $ZK_CONNECT when set. With a COMMAND it runs that one command and exits (non-zero if the
# command failed, e.g. "Node already exists"); without one it is interactive. Takes ~1 s (JVM start).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=zk-common.sh
. "$here/zk-common.sh"
zk_require_install
args=("$@")
if [ "${1:-}" != -server ]; then
  if [ -n "${ZK_CONNECT:-}" ]; then
    args=(-server "$ZK_CONNECT" "$@")
  else
    # `eval "$(zk-start.sh)"` sets shell variables only; `set -a` before it exports them to this script.
    echo "zk-cli.sh: no -server and ZK_CONNECT not exported; using ZooKeeper's default localhost:2181" >&2
  fi
fi
# slf4j-nop: the client's INFO logging would otherwise be mixed into the command output.
cli=(java -Xmx64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true
  -cp "$ZK_JAR:/usr/share/java/slf4j-nop.jar" org.apache.zookeeper.ZooKeeperMain "${args[@]}")
if [ "${#args[@]}" -le 2 ]; then exec "${cli[@]}"; fi   # interactive
# One command: drop the banner ZooKeeperMain prints before the result ("Connecting to ...", an empty line,
# "WATCHER::", the SyncConnected event). Results such as "Created /x" or "Node already exists" go to stderr.
"${cli[@]}" | awk 'NR <= 5 && (/^Connecting to / || /^$/ || /^WATCHER::$/ || /^WatchedEvent state:SyncConnected type:None path:null$/) { next } { print }'
