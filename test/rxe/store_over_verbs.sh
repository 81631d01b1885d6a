#!/usr/bin/env bash
# store_over_verbs.sh: an end-to-end test of the store (cell-server and cellctl, not only the transport) over
# verbs:// with keys, meant to run in the Soft-RoCE guest of run_rxe.sh:
#
#   test/rxe/run_rxe.sh -- test/rxe/store_over_verbs.sh /work/main/build/bin
#
# BIN_DIR is the build's bin directory (cell-server, cellctl). It listens on $CELL_RXE_IP (the guest's rxe
# address) and keeps its keys, logs and outputs in a directory under $CELL_RXE_WORKDIR (kept by run_rxe.sh when the
# test fails). Every check compares exact output; the first failed one ends the test with exit 1 and says which.
set -euo pipefail

usage() { echo "usage: $0 BIN_DIR   (inside the rxe guest: test/rxe/run_rxe.sh -- $0 BIN_DIR)" >&2; exit 2; }
[ $# -eq 1 ] || usage
bin=$(readlink -f "$1")
server_bin=$bin/cell-server
cellctl_bin=$bin/cellctl
for b in "$server_bin" "$cellctl_bin"; do
  [ -x "$b" ] || { echo "store_over_verbs: $b is not an executable" >&2; exit 2; }
done
ip=${CELL_RXE_IP:-}
[ -n "$ip" ] || { echo "store_over_verbs: CELL_RXE_IP is not set: run this inside test/rxe/run_rxe.sh" >&2; exit 2; }

readonly START_TIMEOUT=60    # seconds for cell-server to print its ready line
readonly STOP_TIMEOUT=60     # seconds for cell-server to exit after SIGTERM
readonly CMD_TIMEOUT=60      # seconds any one cellctl (or refused cell-server) may run
readonly REQUEST_MS=20000    # cellctl --timeout-ms: one request (TCG is slow)
readonly COUNT=2000          # keys `cellctl load` puts

dir=$(mktemp -d "${CELL_RXE_WORKDIR:-${TMPDIR:-/tmp}}/store_over_verbs.XXXXXX")
# The FIFO carrying cell-server's stdout lives on a local filesystem (the job directory is a 9p share).
fifo_dir=$(mktemp -d "${TMPDIR:-/tmp}/store_over_verbs.XXXXXX")
server_pid=""
checks=0
t0=$SECONDS

log() { printf 'store_over_verbs: %s\n' "$*"; }
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    { kill -KILL "$server_pid" && wait "$server_pid"; } 2>/dev/null || true
  fi
  rm -rf "$fifo_dir"
}
trap cleanup EXIT
fail() {
  log "FAIL: $*"
  if [ -s "$dir/server.log" ]; then
    log "last lines of cell-server's log ($dir/server.log):"
    tail -n 20 "$dir/server.log" | sed 's/^/  | /'
  fi
  log "outputs kept in $dir"
  exit 1
}
ok() { checks=$((checks + 1)); log "ok [$((SECONDS - t0)) s]: $*"; }

# show TAG: TAG's stdout and stderr, indented, for failure messages (the first lines of each).
show() {
  printf -- '--- stdout (%s bytes):\n' "$(wc -c <"$dir/$1.out")"
  head -c 600 "$dir/$1.out" | head -n 8
  printf -- '--- stderr:\n'
  head -n 8 "$dir/$1.err"
}

# run TAG CMD...: runs CMD with a time limit; stdout in $dir/TAG.out, stderr in $dir/TAG.err, exit code in $rc.
rc=0
run() {
  local tag=$1
  shift
  rc=0
  timeout -k 5 "$CMD_TIMEOUT" "$@" </dev/null >"$dir/$tag.out" 2>"$dir/$tag.err" || rc=$?
}
# ctl TAG [cellctl options] SUBCOMMAND ...: cellctl as a client holding the client key.
ctl() {
  local tag=$1
  shift
  run "$tag" env -u CELL_KEY_FILE -u CELL_CLUSTER "$cellctl_bin" --cluster="$uri" --key-file="$client_key" \
    --timeout-ms="$REQUEST_MS" "$@"
}

expect_rc() {  # TAG WANT
  [ "$rc" -eq "$2" ] || fail "$1: exit code $rc, expected $2
$(show "$1")"
}
expect_stdout() {  # TAG FILE: TAG's stdout must be FILE's bytes exactly
  cmp -s "$dir/$1.out" "$2" || fail "$1: stdout differs from the expected $2:
$(diff "$2" "$dir/$1.out" | head -n 12)
$(show "$1")"
}
expect_stderr_line() {  # TAG LINE: TAG's stderr must be exactly LINE and a newline
  printf '%s\n' "$2" | cmp -s - "$dir/$1.err" || fail "$1: stderr is not exactly '$2'
$(show "$1")"
}
# expect_get TAG VALUE: a get printed exactly VALUE and a newline, nothing on stderr, exit 0.
expect_get() {
  expect_rc "$1" 0
  printf '%s\n' "$2" >"$dir/$1.want"
  expect_stdout "$1" "$dir/$1.want"
  [ ! -s "$dir/$1.err" ] || fail "$1: unexpected stderr
$(show "$1")"
}
# expect_refused TAG SECRET: exit 1, PermissionDenied on stderr, nothing on stdout, SECRET nowhere.
expect_refused() {
  expect_rc "$1" 1
  grep -q 'PermissionDenied' "$dir/$1.err" || fail "$1: no PermissionDenied on stderr
$(show "$1")"
  [ ! -s "$dir/$1.out" ] || fail "$1: printed something on stdout
$(show "$1")"
  ! grep -qF -- "$2" "$dir/$1.out" "$dir/$1.err" || fail "$1: the value '$2' was printed"
}
# requests TAG: sets $requests to the REQUESTS column of `cellctl stats` (the store requests the server has served,
# this stats call included) and $meganodes to its MEGANODES column.
requests() {
  ctl "$1" stats
  expect_rc "$1" 0
  [ "$(wc -l <"$dir/$1.out")" -eq 2 ] || fail "$1: expected a header and one server in stats
$(show "$1")"
  requests=$(awk 'NR == 2 { print $6 }' "$dir/$1.out")
  meganodes=$(awk 'NR == 2 { print $2 }' "$dir/$1.out")
  [[ $requests =~ ^[0-9]+$ && $meganodes =~ ^[0-9]+$ ]] || fail "$1: no request or meganode count in stats
$(show "$1")"
}
# pairs FROM TO: the pairs user<FROM>..user<TO-1> that `load` wrote, as scan prints them (key TAB value).
pairs() {
  local i
  for ((i = $1; i < $2; i++)); do printf 'user%06d\tvalue-of-user%06d\n' "$i" "$i"; done
}

log "cell-server and cellctl from $bin; listening on verbs://$ip; outputs in $dir"

# 1. Keys: the client key, the peer key, and a wrong key the server does not know.
client_key=$dir/client.key
peer_key=$dir/peer.key
wrong_key=$dir/wrong.key
for k in "$client_key" "$peer_key" "$wrong_key"; do
  run keygen "$cellctl_bin" keygen "$k"
  expect_rc keygen 0
  [ "$(cat "$dir/keygen.out")" = "wrote a new key to $k" ] || fail "keygen $k: unexpected output
$(show keygen)"
  [ "$(stat -c %a "$k")" = 600 ] || fail "keygen $k: mode $(stat -c %a "$k"), expected 600"
done
if cmp -s "$client_key" "$peer_key" || cmp -s "$client_key" "$wrong_key" || cmp -s "$peer_key" "$wrong_key"; then
  fail "cellctl keygen wrote the same key twice"
fi
ok "keygen made three distinct keys, mode 0600"

# 2. Without keys, cell-server refuses a non-loopback verbs address (and must not print ready).
run insecure env -u CELL_CLIENT_KEY_FILE -u CELL_PEER_KEY_FILE "$server_bin" --listen="verbs://$ip:0" --workers=2
expect_rc insecure 1
grep -qF -- '--insecure' "$dir/insecure.err" || fail "insecure: the refusal does not mention --insecure
$(show insecure)"
grep -qF -- "verbs://$ip:0" "$dir/insecure.err" || fail "insecure: the refusal does not name verbs://$ip:0
$(show insecure)"
[ ! -s "$dir/insecure.out" ] || fail "insecure: cell-server printed on stdout
$(show insecure)"
ok "cell-server without keys refuses verbs://$ip:0 (exit 1, names --insecure)"

# 3. The server, with both keys. Small regions: over verbs every region is registered, and so pinned, whole, and
# the defaults (1 GiB of meganodes plus a 1 GiB extent region) do not fit in the guest's 1 GiB of memory. Small
# meganodes also make the tree span several meganodes, so client-side searches and scans cross meganodes.
fifo=$fifo_dir/server.out
mkfifo "$fifo"
exec {server_out}<>"$fifo"  # read-write: opening cannot block, and reads time out rather than see end-of-file
env -u CELL_CLIENT_KEY_FILE -u CELL_PEER_KEY_FILE "$server_bin" --listen="verbs://$ip:0" \
  --client-key-file="$client_key" --peer-key-file="$peer_key" --workers=2 \
  --meganode-size=64KiB --meganodes=64 --region-size=16MiB \
  </dev/null >"$fifo" 2>"$dir/server.log" {server_out}<&- &
server_pid=$!
start=$SECONDS
uri=""
ready=""
partial=""
: >"$dir/server.out"
while [ -z "$ready" ]; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    src=0
    wait "$server_pid" || src=$?
    server_pid=""
    fail "cell-server exited with status $src before printing its ready line (dmesg: $(dmesg 2>/dev/null | grep -ci 'out of memory') OOM line(s))"
  fi
  [ $((SECONDS - start)) -lt "$START_TIMEOUT" ] || fail "cell-server printed no ready line within $START_TIMEOUT s"
  line=""
  r=0
  IFS= read -r -t 1 -u "$server_out" line || r=$?
  if [ "$r" -gt 128 ]; then  # timed out; keep any partial line
    partial+=$line
    continue
  fi
  [ "$r" -eq 0 ] || fail "reading cell-server's stdout failed ($r)"
  line=$partial$line
  partial=""
  printf '%s\n' "$line" >>"$dir/server.out"
  case "$line" in
    "listening "*)
      [ -z "$uri" ] || fail "cell-server printed a second listening line: '$line'"
      uri=${line#listening }
      if ! [[ $uri =~ ^verbs://${ip//./\\.}:([0-9]+)$ ]] || [ "${BASH_REMATCH[1]}" -eq 0 ]; then
        fail "cell-server's listening line is not verbs://$ip:<port>: '$line'"
      fi
      ;;
    "ready "*)
      [ "$line" = "ready server=1 membership=embedded" ] || fail "unexpected ready line: '$line'"
      ready=1
      ;;
    *) fail "unexpected line from cell-server: '$line'" ;;
  esac
done
[ -n "$uri" ] || fail "cell-server was ready without printing a listening line"
ok "cell-server ready on $uri in $((SECONDS - start)) s"

ctl servers servers
expect_rc servers 0
printf '%-8s %-14s %s\n%-8s %-14s %s\n1 live server(s)\n' SERVER CAPACITY ADDRESSES 1 "1.0 GiB" "$uri" \
  >"$dir/servers.want"
expect_stdout servers "$dir/servers.want"
ok "cellctl servers lists server 1 at $uri only"

# 4. Load and a few puts.
load_start=$SECONDS
ctl load load --count="$COUNT"
expect_rc load 0
[[ $(cat "$dir/load.out") =~ ^loaded\ $COUNT\ keys\ user000000\.\.user001999\ in\ [0-9.]+\ s$ ]] ||
  fail "load: unexpected output
$(show load)"
ok "load --count=$COUNT over verbs: $(cat "$dir/load.out") ($((SECONDS - load_start)) s wall)"

big=$(printf 'chunk%04d|' $(seq 0 5999))  # 60000 bytes: a one-sided read of many packets
[ "${#big}" -eq 60000 ] || fail "the big value is ${#big} bytes"
declare -A want=(
  [greeting]="hello over verbs"
  [spaced]="  two leading spaces, a	tab and two trailing  "
  [big]=$big
  [user000150]="overwritten-150"
  [user000123]="to-be-deleted"
)
for k in greeting spaced big user000150 user000123; do
  ctl "put-$k" put "$k" "${want[$k]}"
  expect_rc "put-$k" 0
  if [ -s "$dir/put-$k.out" ] || [ -s "$dir/put-$k.err" ]; then fail "put-$k: unexpected output
$(show "put-$k")"; fi
done
ok "put greeting, spaced, big (60000 bytes), user000150 (overwrite), user000123"

# 5. Gets, searched by the client (one-sided RDMA reads of the tree) and by the server.
want[user000000]=value-of-user000000
want[user001999]=value-of-user001999
for search in client server; do
  for k in greeting spaced big user000150 user000123 user000000 user001999; do
    ctl "get-$search-$k" --search="$search" get "$k"
    expect_get "get-$search-$k" "${want[$k]}"
  done
  ctl "get-$search-missing" --search="$search" get user002000
  expect_rc "get-$search-missing" 3
  [ ! -s "$dir/get-$search-missing.out" ] || fail "get-$search-missing: printed a value"
  expect_stderr_line "get-$search-missing" "cellctl: no key 'user002000'"
done
ok "get --search=client and --search=server: 7 keys exact, user002000 absent (exit 3)"

# A client-side get sends the server no store request: only the stats calls around it count.
requests stats1
r1=$requests
ctl get-counted-client --search=client get user001234
expect_get get-counted-client value-of-user001234
requests stats2
r2=$requests
ctl get-counted-server --search=server get user001234
expect_get get-counted-server value-of-user001234
requests stats3
r3=$requests
[ $((r2 - r1)) -eq 1 ] || fail "a --search=client get made the server serve $((r2 - r1 - 1)) store request(s), expected 0"
[ $((r3 - r2)) -eq 2 ] || fail "a --search=server get made the server serve $((r3 - r2 - 1)) store request(s), expected 1"
[ "$meganodes" -ge 2 ] || fail "the tree fits in $meganodes meganode: the test no longer crosses meganodes
$(cat "$dir/stats3.out")"
ok "a client-side get sends no store request (server requests $r1 -> $r2 -> $r3); the tree spans $meganodes meganodes"

# 6. Scans.
{ pairs 100 123; printf 'user000123\tto-be-deleted\n'; pairs 124 150; printf 'user000150\toverwritten-150\n'
  pairs 151 200; } >"$dir/scan100.want"
[ "$(wc -l <"$dir/scan100.want")" -eq 100 ] || fail "the expected scan has $(wc -l <"$dir/scan100.want") lines"
for search in client server; do
  ctl "scan-$search" --search="$search" scan user000100 user000200 --limit=1000
  expect_rc "scan-$search" 0
  expect_stdout "scan-$search" "$dir/scan100.want"
  expect_stderr_line "scan-$search" "100 pair(s)"
done
ctl scan-limit --search=client scan user000100 user000200 --limit=7
expect_rc scan-limit 0
head -n 7 "$dir/scan100.want" >"$dir/scan-limit.want"
expect_stdout scan-limit "$dir/scan-limit.want"
expect_stderr_line scan-limit "7 pair(s)"
# Everything, in key order (bytewise): the loaded keys with the puts applied, then big, greeting, spaced.
for k in big greeting spaced user000123 user000150; do printf '%s\t%s\n' "$k" "${want[$k]}"; done >"$dir/puts.tsv"
pairs 0 "$COUNT" | awk -F'\t' 'NR == FNR { v[$1] = $2; next } ($1 in v) { $2 = v[$1] } { print $1 "\t" $2 }' \
  "$dir/puts.tsv" - >"$dir/loaded.tsv"
{ grep -v '^user' "$dir/puts.tsv"; cat "$dir/loaded.tsv"; } | LC_ALL=C sort -t$'\t' -k1,1 >"$dir/scan-all.want"
ctl scan-all --search=client scan --limit=100000
expect_rc scan-all 0
expect_stdout scan-all "$dir/scan-all.want"
expect_stderr_line scan-all "$((COUNT + 3)) pair(s)"
ok "scan user000100..user000200 (client and server): exactly 100 pairs in order; --limit=7: the first 7;" \
  "a full client-side scan: all $((COUNT + 3)) pairs in order"

# 7. Delete.
ctl del del user000123
expect_rc del 0
if [ -s "$dir/del.out" ] || [ -s "$dir/del.err" ]; then fail "del: unexpected output
$(show del)"; fi
for search in client server; do
  ctl "get-deleted-$search" --search="$search" get user000123
  expect_rc "get-deleted-$search" 3
  [ ! -s "$dir/get-deleted-$search.out" ] || fail "get-deleted-$search: printed a value"
  expect_stderr_line "get-deleted-$search" "cellctl: no key 'user000123'"
done
ctl del-again del user000123
expect_rc del-again 3
expect_stderr_line del-again "cellctl: no key 'user000123'"
grep -v '^user000123	' "$dir/scan100.want" >"$dir/scan-deleted.want"
ctl scan-deleted --search=client scan user000100 user000200 --limit=1000
expect_rc scan-deleted 0
expect_stdout scan-deleted "$dir/scan-deleted.want"
expect_stderr_line scan-deleted "99 pair(s)"
ok "del user000123: get exits 3 (client and server search), del again exits 3, the scan has 99 pairs"

# 8. Clients without the client key are refused, and change nothing.
run nokey env -u CELL_KEY_FILE -u CELL_CLUSTER "$cellctl_bin" --cluster="$uri" --timeout-ms="$REQUEST_MS" \
  get user000001
expect_refused nokey value-of-user000001
run wrongkey env -u CELL_KEY_FILE "$cellctl_bin" --cluster="$uri" --key-file="$wrong_key" \
  --timeout-ms="$REQUEST_MS" get user000001
expect_refused wrongkey value-of-user000001
run peerkey env -u CELL_KEY_FILE "$cellctl_bin" --cluster="$uri" --key-file="$peer_key" \
  --timeout-ms="$REQUEST_MS" get user000001
expect_refused peerkey value-of-user000001
run envkey env CELL_KEY_FILE="$wrong_key" "$cellctl_bin" --cluster="$uri" --timeout-ms="$REQUEST_MS" \
  --search=client scan user000000 user000010
expect_refused envkey value-of-user000001
run wrongput env -u CELL_KEY_FILE "$cellctl_bin" --cluster="$uri" --key-file="$wrong_key" \
  --timeout-ms="$REQUEST_MS" put user000001 stolen
expect_refused wrongput stolen
run nokeydel env -u CELL_KEY_FILE "$cellctl_bin" --cluster="$uri" --timeout-ms="$REQUEST_MS" del user000001
expect_refused nokeydel value-of-user000001
ctl get-after-refusals --search=client get user000001
expect_get get-after-refusals value-of-user000001
ok "no key, the wrong key, the peer key (get), CELL_KEY_FILE=wrong key (scan), the wrong key (put), no key (del):" \
  "all exit 1 with PermissionDenied, print no value, and user000001 is unchanged"

# 9. SIGTERM: the server leaves and exits 0.
kill -TERM "$server_pid"
stop=$SECONDS
while kill -0 "$server_pid" 2>/dev/null; do
  [ $((SECONDS - stop)) -lt "$STOP_TIMEOUT" ] || fail "cell-server still running $STOP_TIMEOUT s after SIGTERM"
  sleep 0.1  # polling for the process to go, with a deadline
done
src=0
wait "$server_pid" || src=$?
server_pid=""
[ "$src" -eq 0 ] || fail "cell-server exited with status $src after SIGTERM, expected 0"
ok "cell-server exited 0 on SIGTERM in $((SECONDS - stop)) s"

log "PASS: $checks checks in $((SECONDS - t0)) s: keygen; cell-server refuses verbs://$ip without keys;" \
  "with keys on $uri: load $COUNT, puts (60000-byte value, overwrite), gets by client (no store request) and server" \
  "search, scans (100 pairs, limit, all $((COUNT + 3))), del (exit 3); no/wrong/peer key refused" \
  "(PermissionDenied, no value, nothing changed); SIGTERM exit 0"
