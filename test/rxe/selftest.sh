#!/usr/bin/env bash
# selftest.sh: proves that run_rxe.sh gives a working Soft-RoCE guest. Two guest boots:
#   1. rxe0 is listed and ACTIVE; rping (rdma_cm + SEND/RDMA READ/WRITE), ib_read_lat (raw verbs RDMA
#      READ, GID index from CELL_RXE_GID_INDEX) and ib_read_bw -R (RDMA READ over rdma_cm) pass,
#      server and client in the same guest on CELL_RXE_IP.
#   2. A failing command (`false`) makes run_rxe.sh exit non-zero.
#
#   test/rxe/selftest.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Runs inside the guest. Each server starts in the background; its client retries until the server
# listens (TCG is slow, and the host may be busy), then the server's own exit status is checked too.
# shellcheck disable=SC2016  # expanded by the guest's bash, not here
guest_script='
set -euo pipefail
step() { echo; echo "=== $*"; }
client() { for _ in $(seq 20); do "$@" && return 0; sleep 1; done; return 1; }
pair() {  # pair "server cmd" "client cmd": both must succeed
  $1 & local server=$!
  sleep 1
  client $2
  wait "$server"
}
dev=$CELL_RXE_DEV ip=$CELL_RXE_IP gid=$CELL_RXE_GID_INDEX
step "ibv_devices"
ibv_devices | tee /dev/stderr | grep -qw "$dev"
step "ibv_devinfo -d $dev"
ibv_devinfo -d "$dev" | tee /dev/stderr | grep -q PORT_ACTIVE
step "rping over rdma_cm on $ip"
pair "rping -s -a $ip -C 3" "rping -c -a $ip -C 3 -v"
step "ib_read_lat, raw verbs, GID index $gid"
pair "ib_read_lat -d $dev -x $gid -n 100 -F" "ib_read_lat -d $dev -x $gid -n 100 -F $ip"
step "ib_read_bw over rdma_cm (-R)"
pair "ib_read_bw -d $dev -x $gid -R -n 200 -F" "ib_read_bw -d $dev -x $gid -R -n 200 -F $ip"
step "all rxe checks passed"
'

echo "selftest: rdma checks in the guest"
"$here/run_rxe.sh" -- bash -c "$guest_script"

echo "selftest: a failing command must fail run_rxe.sh"
rc=0
"$here/run_rxe.sh" -- false 2>/dev/null || rc=$?
if [ "$rc" -ne 1 ]; then
  echo "selftest: FAILED: run_rxe.sh -- false exited $rc, expected 1" >&2
  exit 1
fi
echo "selftest: passed"
