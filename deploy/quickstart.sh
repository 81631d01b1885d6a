#!/usr/bin/env bash
# Installs dependencies, builds Cell, starts a one-machine store with deploy/local-cluster.sh (embedded membership:
# one server, no ZooKeeper), loads sample data and shows gets, a put, a delete and a range scan with cellctl, by
# server-side search (RPC), by client-side search (one-sided reads over shared memory) and adaptively. The store
# keeps running; the last line says how to stop it.
#
#   deploy/quickstart.sh [--membership=embedded|zookeeper] [--servers=N]
#     zookeeper: a local ZooKeeper and N servers (default 1) instead.
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
cluster=$(deploy/local-cluster.sh start "$@" | tee /dev/stderr | sed -n 's/^CELL_CLUSTER=//p')
ctl() {
  echo "\$ cellctl $*"
  build/bin/cellctl --cluster="$cluster" "$@"
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
echo
echo "Cell is running (cluster $cluster); try: build/bin/cellctl --cluster=$cluster --help"
echo "Stop it with: deploy/local-cluster.sh stop"
