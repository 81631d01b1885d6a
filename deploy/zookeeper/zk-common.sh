# shellcheck shell=bash
# Shared helpers for the deploy/zookeeper/ scripts. Sourced, never executed.
#
# Layout of a cluster directory (DIR), written by zk-start.sh:
#   DIR/env                 the ZK_* variables printed by zk-start.sh (sourceable)
#   DIR/log4j.properties    log4j 1.2 config: everything at INFO to stdout, which goes to the node's log
#   DIR/node<i>/zoo.cfg     the node's config (clientPort, dataDir, server.N lines for an ensemble)
#   DIR/node<i>/data/myid   the node's id (ensemble only); snapshots and txn logs live in data/ too
#   DIR/node<i>/zookeeper.log   the JVM's stdout+stderr (ZooKeeper log + any JVM error)
#   DIR/node<i>/pid         pid of the running JVM (removed by zk-stop.sh)

# Debian's `zookeeper` package ships the server classes in /usr/share/java/zookeeper.jar, whose manifest
# Class-Path names all its dependencies (netty, jetty, jackson, slf4j-api, ...). Debian's own zkEnv.sh uses
# CLASSPATH=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar, which has no slf4j binding, so the server would
# log nothing; we add the slf4j->log4j 1.2 binding (both are hard dependencies of libzookeeper-java).
ZK_JAR=/usr/share/java/zookeeper.jar
# shellcheck disable=SC2034  # used by the scripts that source this file.
ZK_CLASSPATH="$ZK_JAR:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar"

zk_die() { echo "zookeeper: $*" >&2; exit 1; }

# Fails with an install hint unless Debian's zookeeper package (and thus Java) is present.
zk_require_install() {
  local f
  for f in "$ZK_JAR" /usr/share/java/slf4j-log4j12.jar /usr/share/java/log4j-1.2.jar; do
    [ -r "$f" ] || zk_die "$f not found; install Debian's ZooKeeper: apt-get install -y --no-install-recommends zookeeper (or run deploy/install-deps.sh)"
  done
  command -v java >/dev/null 2>&1 || zk_die "java not found; it comes with Debian's zookeeper package (default-jre)"
}

# zk_4lw PORT CMD: sends a ZooKeeper four-letter word (must be in 4lw.commands.whitelist) to 127.0.0.1:PORT over
# bash's /dev/tcp and prints the reply. Needs no client binary. Fails (quietly) if nothing answers within 2 s.
zk_4lw() {
  # shellcheck disable=SC2016  # $0/$1 expand in the inner bash.
  timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" && printf %s "$1" >&3 && cat <&3' "$1" "$2" 2>/dev/null
}

# zk_mode PORT: prints the node's mode (standalone, leader, follower, observer) or nothing if it is down or not
# serving (a quorum member without a quorum answers srvr with "This ZooKeeper instance is not currently serving").
zk_mode() {
  local out
  out=$(zk_4lw "$1" srvr) || return 0
  sed -n 's/^Mode: //p' <<<"$out"
}

# zk_pid_alive PIDFILE CFG: true if PIDFILE names a live process whose command line mentions CFG (so a recycled
# pid of some unrelated process is never mistaken for, or killed as, our node).
zk_pid_alive() {
  local pid
  [ -r "$1" ] || return 1
  pid=$(<"$1")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$2"
}

# zk_pid_gone PID: true once process PID has exited (no longer exists, or is a zombie awaiting its reaper).
# Note an exiting JVM's /proc/PID/cmdline is already empty while it still closes its sockets, so waiting for
# exit uses this, not zk_pid_alive.
zk_pid_gone() {
  local state
  state=$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || return 0
  [ -z "$state" ] || [ "$state" = Z ] || [ "$state" = X ]
}

# zk_nodes DIR: prints the node indexes present in DIR (1, or 1 2 3).
zk_nodes() {
  local d
  for d in "$1"/node*/; do
    [ -f "$d/zoo.cfg" ] || continue
    d=${d%/}
    echo "${d##*/node}"
  done | sort -n
}

# zk_node_port DIR I: the client port of node I, read back from its zoo.cfg.
zk_node_port() {
  sed -n 's/^clientPort=//p' "$1/node$2/zoo.cfg"
}
