#!/usr/bin/env bash
# Installs dependencies, builds Cell, starts a one-machine store with deploy/local-cluster.sh (embedded membership:
# one server, no ZooKeeper; with keys, made into the cluster's directory), loads sample data and shows gets, a put,
# a delete and a range scan with cellctl, by server-side search (RPC), by client-side search (one-sided reads over
# shared memory) and adaptively, and a client without the key refused. The store keeps running; the last lines say
# how to use and stop it.
#
#   deploy/quickstart.sh [--membership=embedded|zookeeper] [--servers=N] [--insecure]
#     zookeeper: a local ZooKeeper and N servers (default 1) instead. --insecure: no keys.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCELL_BUILD_TESTS=OFF
cmake --build build -j "$(nproc)"

echo "== deploy/local-cluster.sh start $*"
if [ -e "${TMPDIR:-/tmp}/cell-local-cluster/env" ]; then
  echo "(a local cluster was running: stopping it first)"
  deploy/local-cluster.sh stop
fi
started=$(deploy/local-cluster.sh start "$@" | tee /dev/stderr)
cluster=$(sed -n 's/^CELL_CLUSTER=//p' <<<"$started")
key_file=$(sed -n 's/^CELL_KEY_FILE=//p' <<<"$started")
ctl() {
  echo "\$ cellctl $*"
  CELL_KEY_FILE=$key_file build/bin/cellctl --cluster="$cluster" "$@"
}
ctl servers
ctl load --count=10000
ctl --search=server get user004242
ctl --search=client get user004242
ctl get user004242   # the default, adaptive: the client picks whichever it expects to answer sooner
ctl put user004242 "a new value"
ctl --search=client get user004242
ctl del user004243
ctl --search=client scan user004240 user004245
ctl regions
ctl stats
if [ -n "$key_file" ]; then
  echo "\$ cellctl get user004242   # without the client key: refused"
  if env -u CELL_KEY_FILE build/bin/cellctl --cluster="$cluster" get user004242; then
    echo "quickstart: a client without the key was served" >&2
    exit 1
  fi
fi
echo
echo "Cell is running (cluster $cluster${key_file:+, client key $key_file}); try:"
echo "  build/bin/cellctl --cluster=$cluster${key_file:+ --key-file=$key_file} --help"
echo "Stop it with: deploy/local-cluster.sh stop"
