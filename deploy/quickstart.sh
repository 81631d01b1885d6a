#!/usr/bin/env bash
# Installs dependencies, builds Cell, shows its meganode-local tree working (puts, gets, a delete, a refused oversized
# key, a range scan), then starts a one-machine store with deploy/local-cluster.sh and shows it with cellctl. The
# store keeps running; the last line says how to stop it.
#
#   deploy/quickstart.sh [--membership=embedded|zookeeper] [--servers=N]
#     embedded (default): one server, no ZooKeeper; zookeeper: a local ZooKeeper and N servers (default 1).
# (The key-value operations over the network arrive with the distributed store; today the servers hold the
# membership and the region table.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCELL_BUILD_TESTS=OFF
cmake --build build -j "$(nproc)"
echo "== build/bin/cell-local-demo"
build/bin/cell-local-demo

echo "== deploy/local-cluster.sh start $*"
if [ -e "${TMPDIR:-/tmp}/cell-local-cluster/env" ]; then
  echo "(a local cluster was running: stopping it first)"
  deploy/local-cluster.sh stop
fi
cluster=$(deploy/local-cluster.sh start "$@" | tee /dev/stderr | sed -n 's/^CELL_CLUSTER=//p')
echo "== build/bin/cellctl --cluster=$cluster servers"
build/bin/cellctl --cluster="$cluster" servers
echo "== build/bin/cellctl --cluster=$cluster regions"
build/bin/cellctl --cluster="$cluster" regions
echo
echo "Cell is running (cluster $cluster). Stop it with: deploy/local-cluster.sh stop"
