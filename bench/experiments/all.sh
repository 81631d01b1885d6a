#!/usr/bin/env bash
# Runs experiments 1-6 one after another (about ten minutes on 2 cores), each into OUT_DIR's parent
# (default out/experiments/<name>), and prints their JSON summaries, one per line. Nothing else should run meanwhile:
# the experiments pin the server to CPU 0 and the clients to CPU 1.
#
#   bench/experiments/all.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for exp in 1-curves 2-sweep 3-spike 4-hogs 5-mixes 6-redis; do
  "$here/$exp.sh" | tail -1
done
