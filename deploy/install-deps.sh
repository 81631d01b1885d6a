#!/usr/bin/env bash
# Installs every system dependency of Cell from Debian 12 packages. Idempotent; run as root (or with sudo).
#
#   deploy/install-deps.sh
#
# Nothing is downloaded from anywhere but Debian's archive, and nothing is vendored.
set -euo pipefail

packages=(
  # Build tools.
  build-essential cmake ninja-build pkg-config git clang clang-format libclang-rt-14-dev python3
  # Libraries.
  libjemalloc-dev libprotobuf-dev protobuf-compiler libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev libspdlog-dev libabsl-dev libxxhash-dev libcli11-dev libisal-dev libssl-dev
  # RDMA (rdma-core) and ZooKeeper, used by the rpc/ and membership/ layers.
  rdma-core libibverbs-dev librdmacm-dev ibverbs-providers
  libzookeeper-mt-dev zookeeper
  # Soft-RoCE test guest (test/rxe/): qemu boots Debian's own kernel, whose package run_rxe.sh fetches.
  qemu-system-x86 busybox-static kmod cpio rdmacm-utils ibverbs-utils
  # Peer baseline for bench/peers/redis-baseline.sh.
  redis-server redis-tools libhiredis-dev
  # cell-bench --store=postgres, the transactional workloads' SQL peer: libpq to build against, and the server that
  # bench/private_postgres.h starts (initdb, postgres in /usr/lib/postgresql/15/bin; the package's postgresql-common
  # also creates the `postgres` user it runs as when the bench runs as root). Its own cluster is not used.
  postgresql-15 libpq-dev
  # Plots of the bench harness (bench/plot.sh).
  gnuplot-nox
  # SQL on Cell (sql/): SQLite to build the virtual table module against, and its shell (README's example).
  libsqlite3-dev sqlite3
)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo_cmd=(sudo); else
    echo "install-deps.sh: must run as root, or with sudo available" >&2; exit 1
  fi
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps.sh: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps.sh: done"
