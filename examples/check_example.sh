#!/usr/bin/env bash
# The test that Cell works from another CMake project: installs BUILD into a fresh prefix, builds examples/hello
# against it with find_package(Cell), starts a cell-server with keys and runs the example against it (the client key
# in CELL_KEY_FILE). Exit 0 on success.
#
#   examples/check_example.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$here/hello" -B "$work/hello" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/hello" >/dev/null

# With keys, as a cluster runs: the example passes the client key through CELL_KEY_FILE, which cell::Client reads.
"$build/bin/cellctl" keygen "$work/client.key" >/dev/null
"$build/bin/cellctl" keygen "$work/peer.key" >/dev/null
"$build/bin/cell-server" --listen=tcp://127.0.0.1:0 --listen="shm://$work/cell.sock" --region-size=64MiB \
  --meganode-size=1MiB --meganodes=4 --client-key-file="$work/client.key" --peer-key-file="$work/peer.key" \
  >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
# It prints "ready" once it serves; give up after 30 s or if it exits.
for _ in $(seq 300); do
  grep -q '^ready ' "$work/server.out" && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
grep -q '^ready ' "$work/server.out" || { echo "cell-server did not start:" >&2; cat "$work/server.log" >&2; exit 1; }
cluster=$(sed -n 's/^listening \(tcp:.*\)/\1/p' "$work/server.out")
# The installed library is found through the example's RUNPATH (CMake sets it for the build tree).
CELL_KEY_FILE="$work/client.key" "$work/hello/cell-hello" "$cluster"
