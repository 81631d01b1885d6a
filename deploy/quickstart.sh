#!/usr/bin/env bash
# Installs dependencies, builds Cell and shows its meganode-local tree working: puts, gets, a delete, a refused
# oversized key and a range scan. (The running distributed store arrives with later issues.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCELL_BUILD_TESTS=OFF
cmake --build build -j "$(nproc)"
echo "== build/bin/cell-local-demo"
build/bin/cell-local-demo
