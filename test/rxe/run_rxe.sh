#!/usr/bin/env bash
# run_rxe.sh: run one command inside a throwaway qemu guest that has a real Soft-RoCE (rdma_rxe)
# RDMA device, so RDMA verbs / rdma_cm tests run for real on a host whose kernel has no RDMA.
#
#   test/rxe/run_rxe.sh [--workdir DIR] -- COMMAND [ARGS...]
#
# How it works:
#   1. Debian's own kernel package (the linux-image-6.1.*-amd64 that linux-image-amd64 depends on) is
#      fetched with `apt-get download` into a cache directory; only the .deb, the kernel image and the
#      initramfs are kept there, so reruns skip straight to step 3.
#   2. A small initramfs is built: busybox-static, the kernel modules for rxe, rdma_cm, 9p, overlayfs
#      and the dummy netdev (with all their dependencies), and an /init script (written below).
#   3. qemu-system-x86_64 boots it under TCG (no KVM) with two virtio-9p shares: the host's root
#      filesystem, read-only, and the job directory (--workdir), read-write.
#   4. The guest's /init makes a writable overlay (host root + a RAM upper layer), mounts /proc, /sys,
#      /dev, /dev/pts, /dev/shm inside it, mounts the job directory at the same path as on the host,
#      creates dummy0 (10.0.0.1/24) and rxe0 on it, then runs COMMAND chrooted into that overlay,
#      in the host's current directory, with the host's environment, under `timeout`.
#   5. COMMAND's exit code is written to the job directory, the guest powers off, and this script
#      exits with that code.
#
# Output: COMMAND's stdout and stderr (merged, a pipe inside the guest, not a tty) stream live to
# this script's stdout through a second serial port, and are also saved in DIR/output.log. The
# guest console (kernel + /init messages) goes to DIR/console.log, whose tail is printed when
# anything fails. Processes COMMAND leaves behind are killed when it exits.
#
# Environment:
#   CELL_RXE_CACHE          cache directory (default: ${XDG_CACHE_HOME:-~/.cache}/cell-rxe)
#   CELL_RXE_TIMEOUT        seconds COMMAND may run inside the guest (default 300)
#   CELL_RXE_BOOT_TIMEOUT   extra seconds allowed for boot + setup + poweroff (default 240)
#   CELL_RXE_MEM            guest memory in MiB (default 1024)
#   CELL_RXE_HUGEPAGES      2 MiB huge pages to reserve in the guest, hugetlbfs at /dev/hugepages (default 0)
#   CELL_RXE_KERNEL_PKG     kernel package to use instead of linux-image-amd64's dependency
# Inside the guest COMMAND sees, besides the host's environment:
#   CELL_RXE_IP=10.0.0.1  CELL_RXE_DEV=rxe0  CELL_RXE_NETDEV=dummy0  CELL_RXE_GID_INDEX=<n>
#   CELL_RXE_WORKDIR=<DIR>
#
# Exit status: COMMAND's (124 if the guest-side timeout killed it), or 125 if the harness itself
# failed (kernel fetch, boot, module load, rxe setup, or no exit code came back).
set -euo pipefail

readonly RXE_IP=10.0.0.1
readonly RXE_PREFIX=24
readonly HARNESS_FAIL=125

# Modules the guest needs; modprobe --show-depends adds their dependencies.
readonly MODULES=(
  virtio_pci 9pnet_virtio 9p overlay                 # host filesystem over virtio-9p, writable overlay
  crc32_generic crc32_pclmul                          # rxe computes the RoCEv2 ICRC with crc32
  rdma_rxe ib_uverbs rdma_ucm                         # Soft-RoCE, user verbs, user rdma_cm
  dummy                                               # the netdev rxe0 sits on
)

log() { printf 'run_rxe: %s\n' "$*" >&2; }
die() { log "error: $*"; exit "$HARNESS_FAIL"; }

usage() {
  cat <<'EOF'
usage: test/rxe/run_rxe.sh [--workdir DIR] -- COMMAND [ARGS...]

Boots a qemu guest with a Soft-RoCE device (rxe0 on dummy0, IP 10.0.0.1) and runs COMMAND in it,
chrooted into the host filesystem (writes outside DIR are discarded), in the current directory.
DIR (default: a temporary directory) is mounted read-write at the same path in the guest and receives
console.log, output.log and exit-code. Exits with COMMAND's exit code (125: harness failure).
EOF
}

# ---------------------------------------------------------------------------------------------------
# Arguments and settings.
workdir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --workdir) [ $# -ge 2 ] || { usage >&2; exit 2; }; workdir=$2; shift 2 ;;
    --workdir=*) workdir=${1#--workdir=}; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) usage >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { usage >&2; exit 2; }

script=$(readlink -f "${BASH_SOURCE[0]}")
cache=${CELL_RXE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cell-rxe}
cmd_timeout=${CELL_RXE_TIMEOUT:-300}
boot_timeout=${CELL_RXE_BOOT_TIMEOUT:-240}
mem=${CELL_RXE_MEM:-1024}
hugepages=${CELL_RXE_HUGEPAGES:-0}
for v in cmd_timeout boot_timeout mem hugepages; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done

for tool in qemu-system-x86_64 apt-get dpkg-deb depmod modprobe cpio gzip timeout flock; do
  command -v "$tool" >/dev/null || die "$tool not found (run deploy/install-deps.sh)"
done
busybox=""
for b in /bin/busybox /usr/bin/busybox; do
  # The initramfs needs a static busybox (package busybox-static); a dynamic one would miss its libc.
  if [ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1; then busybox=$b; break; fi
done
[ -n "$busybox" ] || die "static busybox not found (apt-get install busybox-static)"
if [ ! -x /usr/bin/ip ] || [ ! -x /usr/bin/rdma ]; then
  die "/usr/bin/ip and /usr/bin/rdma (iproute2) are needed"
fi

mkdir -p "$cache"
cache=$(readlink -f "$cache")

# ---------------------------------------------------------------------------------------------------
# Step 1: the kernel package. Cached as $cache/<pkg>.deb; everything derived from it lives in
# $cache/<pkg>/. A lock serialises concurrent runs (ctest -j) while they fill the cache.
exec 9>"$cache/.lock"
flock 9

kernel_pkg_name() {
  # "linux-image-amd64 Depends: linux-image-6.1.0-NN-amd64" -> the concrete package.
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9].*-amd64$/ { print $2; exit }'
}

pkg=${CELL_RXE_KERNEL_PKG:-}
if [ -z "$pkg" ]; then
  pkg=$(kernel_pkg_name)
  if [ -z "$pkg" ]; then
    log "apt knows no linux-image-amd64; running apt-get update"
    apt-get update -qq >&2 || true
    pkg=$(kernel_pkg_name)
  fi
  if [ -z "$pkg" ]; then
    # Offline with empty apt lists: fall back to the newest kernel already cached.
    pkg=$(find "$cache" -maxdepth 1 -name 'linux-image-*.deb' -printf '%f\n' 2>/dev/null |
            sed 's/\.deb$//' | sort -V | tail -n 1)
    [ -n "$pkg" ] || die "cannot resolve linux-image-amd64's kernel package with apt"
    log "apt cannot resolve linux-image-amd64; using cached $pkg"
  fi
fi

deb=$cache/$pkg.deb
if [ ! -s "$deb" ]; then
  log "downloading $pkg with apt-get"
  dl=$(mktemp -d "$cache/download.XXXXXX")
  chmod 755 "$dl"   # apt's _apt sandbox user must be able to write here, or apt warns
  apt_opts=()
  # As root, apt drops to user _apt to download, which cannot write into root's home: skip that.
  [ "$(id -u)" -ne 0 ] || apt_opts=(-o APT::Sandbox::User=root)
  download() { (cd "$dl" && apt-get download -q "${apt_opts[@]}" "$pkg" >&2); }
  if ! download; then
    log "apt-get download failed; running apt-get update and retrying"
    apt-get update -qq >&2 || true
    download || { rm -rf "$dl"; die "apt-get download $pkg failed"; }
  fi
  files=("$dl"/*.deb)
  if [ ${#files[@]} -ne 1 ] || [ ! -s "${files[0]}" ]; then rm -rf "$dl"; die "no .deb downloaded for $pkg"; fi
  mv "${files[0]}" "$deb"
  rm -rf "$dl"
  # Keep one kernel: drop .debs and derived directories of other kernel packages.
  find "$cache" -maxdepth 1 -name 'linux-image-*' ! -name "$pkg" ! -name "$pkg.deb" \
    -exec rm -rf {} +
fi

# ---------------------------------------------------------------------------------------------------
# Step 2: kernel image and initramfs, rebuilt whenever this script (which holds /init) changes.
kdir=$cache/$pkg
script_hash=$(sha256sum "$script" | cut -c1-16)
initrd=$kdir/initramfs-$script_hash.cpio.gz
vmlinuz=$kdir/vmlinuz

# write_init PATH: the guest's PID 1, a busybox sh script. Settings come from /job/.rxe/guest.conf,
# which this script writes into the job directory before each boot.
write_init() {
  cat >"$1" <<'INIT'
#!/bin/sh
# PID 1 of the run_rxe.sh guest. Everything it prints goes to the console (ttyS0 -> console.log);
# COMMAND's output goes to ttyS1 (-> run_rxe.sh's stdout).
export PATH=/bin
NEWROOT=/newroot

say() { echo "rxe-init: $*"; }
stage() { say "$*"; [ -d /job/.rxe ] && echo "$*" >>/job/.rxe/status; }
halt_now() { sync; poweroff -f; sleep 10; }
fail() { stage "FAILED: $*"; dmesg | tail -n 30; halt_now; }
# Host binaries (iproute2's ip and rdma) run chrooted, by full path: this busybox would otherwise
# run its own applet of the same name.
host() { chroot "$NEWROOT" "$@"; }

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

# The job directory (read-write share "work") carries guest.conf in and status/exit-code out.
modprobe -a virtio_pci 9pnet_virtio 9p || fail "cannot load virtio/9p modules"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=mmap work /job ||
  fail "cannot mount the job directory"
[ -r /job/.rxe/guest.conf ] || fail "cannot read guest.conf"
. /job/.rxe/guest.conf
stage "booted $(uname -r)"

# Root: the host's / (read-only share "hostroot") under a RAM overlay, so COMMAND can write anywhere
# (writes are discarded) and sees the host's /tmp, build trees and tools unchanged.
mkdir -p /lower /ovl
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro hostroot /lower ||
  fail "cannot mount the host root filesystem"
mount -t tmpfs -o mode=755 ovl /ovl
mkdir -p /ovl/upper /ovl/work
if modprobe overlay &&
   mount -t overlay -o lowerdir=/lower,upperdir=/ovl/upper,workdir=/ovl/work overlay "$NEWROOT"; then
  :
else
  say "overlayfs failed; using the read-only host root with a tmpfs /tmp"
  mount -o bind /lower "$NEWROOT"
  mount -t tmpfs -o mode=1777 tmp "$NEWROOT/tmp"
fi
mount -t proc proc "$NEWROOT/proc"
mount -t sysfs sysfs "$NEWROOT/sys"
mount -t devtmpfs devtmpfs "$NEWROOT/dev"
# devtmpfs lacks the links udev would make; without them `> /dev/stderr` creates a plain file.
ln -sf /proc/self/fd "$NEWROOT/dev/fd"
ln -sf /proc/self/fd/0 "$NEWROOT/dev/stdin"
ln -sf /proc/self/fd/1 "$NEWROOT/dev/stdout"
ln -sf /proc/self/fd/2 "$NEWROOT/dev/stderr"
mkdir -p "$NEWROOT/dev/pts" "$NEWROOT/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$NEWROOT/dev/pts"
mount -t tmpfs -o mode=1777 shm "$NEWROOT/dev/shm"
if [ "$HUGEPAGES" -gt 0 ]; then
  echo "$HUGEPAGES" >/proc/sys/vm/nr_hugepages
  mkdir -p "$NEWROOT/dev/hugepages"
  mount -t hugetlbfs hugetlbfs "$NEWROOT/dev/hugepages"
  say "huge pages: $(cat /proc/sys/vm/nr_hugepages) of $HUGEPAGES reserved"
fi
mkdir -p "$NEWROOT$WORKDIR" && mount -o bind /job "$NEWROOT$WORKDIR" ||
  fail "cannot mount the job directory at $WORKDIR"

# Network: rxe needs a netdev with an IPv4 address. dummy0, not lo: on lo raw verbs work but
# rdma_cm cannot resolve routes.
modprobe -a crc32_generic crc32_pclmul 2>/dev/null  # crc32_pclmul needs a CPU with PCLMULQDQ
modprobe dummy numdummies=0 || fail "cannot load dummy"
host /usr/bin/ip link set lo up
host /usr/bin/ip link add "$NETDEV" type dummy || fail "cannot create $NETDEV"
host /usr/bin/ip addr add "$IP/$PREFIX" dev "$NETDEV"
host /usr/bin/ip link set "$NETDEV" up || fail "cannot bring up $NETDEV"

# Soft-RoCE device.
modprobe -a rdma_rxe ib_uverbs rdma_ucm || fail "cannot load the rdma modules"
if ! host /usr/bin/rdma link add "$DEV" type rxe netdev "$NETDEV"; then
  echo "$NETDEV" >/sys/module/rdma_rxe/parameters/add  # kernels before rdma link add (< 5.x)
fi
# Wait for the port to be ACTIVE and for the RoCEv2 GID of $IP (::ffff:a.b.c.d) to be populated.
want=$(echo "$IP" | awk -F. '{ printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", $1, $2, $3, $4 }')
port=/sys/class/infiniband/$DEV/ports/1
gid_index=""
tries=0
while [ "$tries" -lt 100 ]; do
  if grep -q ACTIVE "$port/state" 2>/dev/null; then
    for g in "$port"/gids/*; do
      if [ "$(cat "$g" 2>/dev/null)" = "$want" ]; then gid_index=${g##*/}; break; fi
    done
  fi
  [ -n "$gid_index" ] && [ -e "$NEWROOT/dev/infiniband/uverbs0" ] && break
  tries=$((tries + 1))
  sleep 0.1
done
[ -d "/sys/class/infiniband/$DEV" ] || fail "rxe device $DEV did not appear"
[ -n "$gid_index" ] || fail "$DEV has no ACTIVE port with GID ::ffff:$IP"
[ -e "$NEWROOT/dev/infiniband/uverbs0" ] || fail "/dev/infiniband/uverbs0 missing"
stage "rdma ready: $DEV on $NETDEV, ip $IP, gid index $gid_index, $(ls "$NEWROOT/dev/infiniband" | tr '\n' ' ')"

# Run COMMAND. Its stdout/stderr is a pipe (through a FIFO and cat to ttyS1), as under ctest or CI,
# not a tty: no colour codes, normal buffering. ttyS1 is raw so bytes reach the host unchanged.
stty -F /dev/ttyS1 raw -echo 2>/dev/null
out=/dev/ttyS1
[ -c "$out" ] || out=/dev/console
mkfifo /output
cat /output >"$out" &
cat_pid=$!
export CELL_RXE_IP="$IP" CELL_RXE_DEV="$DEV" CELL_RXE_NETDEV="$NETDEV"
export CELL_RXE_GID_INDEX="$gid_index" CELL_RXE_WORKDIR="$WORKDIR"
stage "running"
rm -f /job/exit-code
chroot "$NEWROOT" /usr/bin/timeout -k 10 "$TIMEOUT" /bin/bash "$WORKDIR/.rxe/job.sh" \
  <"$NEWROOT/dev/null" >/output 2>&1
rc=$?
[ "$rc" -eq 124 ] && say "COMMAND timed out after $TIMEOUT s"
# Kill whatever COMMAND left running (a background server, say) so it lets go of the FIFO and cat
# sees end-of-file after draining. Kernel threads ignore the signal.
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  [ "$pid" = 1 ] || [ "$pid" = "$cat_pid" ] || kill -9 "$pid" 2>/dev/null
done
wait "$cat_pid"
echo "$rc" >/job/exit-code
stage "exit code $rc"
umount "$NEWROOT$WORKDIR" 2>/dev/null
halt_now
INIT
  chmod 755 "$1"
}

if [ ! -s "$initrd" ] || [ ! -s "$vmlinuz" ]; then
  log "building the initramfs for $pkg"
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  dpkg-deb -x "$deb" "$tmp/kernel"
  kvers=("$tmp"/kernel/lib/modules/*)
  if [ ${#kvers[@]} -ne 1 ] || [ ! -d "${kvers[0]}" ]; then die "expected one module tree in $pkg"; fi
  kver=${kvers[0]##*/}
  depmod -b "$tmp/kernel" "$kver"

  root=$tmp/initramfs
  mkdir -p "$root"/{bin,dev,proc,sys,job,newroot,lower,ovl} "$root/lib/modules/$kver"
  cp "$busybox" "$root/bin/busybox"
  for applet in $("$busybox" --list); do
    # Never replace busybox itself by a symlink to itself.
    [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
  done

  # Modules and their dependencies, at the same paths as in the package.
  modpaths=$(for m in "${MODULES[@]}"; do
               modprobe -d "$tmp/kernel" -S "$kver" --show-depends "$m" ||
                 echo "MISSING $m"
             done)
  if grep -q '^MISSING' <<<"$modpaths"; then
    die "modules missing from $pkg: $(grep '^MISSING' <<<"$modpaths" | tr '\n' ' ')"
  fi
  while read -r path; do
    rel=lib/modules/${path#*/lib/modules/}
    mkdir -p "$root/$(dirname "$rel")"
    cp "$path" "$root/$rel"
  done < <(awk '$1 == "insmod" { print $2 }' <<<"$modpaths" | sort -u)
  cp "$tmp/kernel/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} "$root/lib/modules/$kver/"
  depmod -b "$root" "$kver"

  write_init "$root/init"
  mkdir -p "$kdir"
  (cd "$root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) >"$initrd.tmp"
  mv "$initrd.tmp" "$initrd"
  cp "$tmp/kernel/boot/vmlinuz-$kver" "$vmlinuz.tmp"
  mv "$vmlinuz.tmp" "$vmlinuz"
  # Drop initramfs images built by other versions of this script.
  find "$kdir" -maxdepth 1 -name 'initramfs-*.cpio.gz' ! -name "${initrd##*/}" -delete
  rm -rf "$tmp"
  trap - EXIT
fi
flock -u 9
exec 9>&-

# ---------------------------------------------------------------------------------------------------
# Step 3: the job directory and the job script.
keep_workdir=1
if [ -z "$workdir" ]; then
  workdir=$(mktemp -d "${TMPDIR:-/tmp}/cell-rxe.XXXXXX")
  keep_workdir=0
fi
mkdir -p "$workdir"
workdir=$(readlink -f "$workdir")
[ "$workdir" != / ] || die "--workdir / is not allowed"
rm -rf "$workdir/.rxe"
rm -f "$workdir/exit-code" "$workdir/console.log" "$workdir/output.log"
mkdir -p "$workdir/.rxe"

# Quote a string for the guest's busybox sh.
shq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
{
  printf 'WORKDIR=%s\n' "$(shq "$workdir")"
  printf 'TIMEOUT=%s\nHUGEPAGES=%s\n' "$cmd_timeout" "$hugepages"
  printf 'IP=%s\nPREFIX=%s\nNETDEV=dummy0\nDEV=rxe0\n' "$RXE_IP" "$RXE_PREFIX"
} >"$workdir/.rxe/guest.conf"

# job.sh runs under the host's bash inside the guest: the host's environment (minus per-shell and
# guest-provided variables), unlimited locked memory for memory registration, the host's current
# directory, then COMMAND.
{
  echo '# Generated by run_rxe.sh.'
  while read -r name; do
    case "$name" in
      PWD|OLDPWD|SHLVL|_|BASHOPTS|SHELLOPTS|BASH_*) ;;
      CELL_RXE_IP|CELL_RXE_DEV|CELL_RXE_NETDEV|CELL_RXE_GID_INDEX|CELL_RXE_WORKDIR) ;;  # set by /init
      *) printf 'export %s=%q\n' "$name" "${!name}" ;;
    esac
  done < <(compgen -e)
  echo 'ulimit -l unlimited 2>/dev/null || true'
  printf 'cd -- %q || exit 125\n' "$PWD"
  printf 'exec'
  printf ' %q' "$@"
  printf '\n'
} >"$workdir/.rxe/job.sh"

# ---------------------------------------------------------------------------------------------------
# Step 4: boot. ttyS0 (console) -> console.log; ttyS1 (COMMAND's output) -> stdout and output.log.
# shellcheck disable=SC2054  # the commas are qemu's option syntax
qemu=(
  qemu-system-x86_64
  -accel tcg,thread=multi -cpu max -smp 2 -m "$mem"
  -nic none -nographic -no-reboot -monitor none
  -kernel "$vmlinuz" -initrd "$initrd"
  -append "console=ttyS0 panic=-1 quiet loglevel=4 8250.nr_uarts=2"
  -serial "file:$workdir/console.log"
  -chardev "stdio,id=out,signal=off,logfile=$workdir/output.log"
  -serial chardev:out
  -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
  -virtfs "local,path=$workdir,mount_tag=work,security_model=none,multidevs=remap"
)
start=$SECONDS
qemu_rc=0
timeout --foreground -k 10 "$((cmd_timeout + boot_timeout))" "${qemu[@]}" </dev/null || qemu_rc=$?
elapsed=$((SECONDS - start))

# ---------------------------------------------------------------------------------------------------
# Step 5: report.
console_tail() {
  log "last lines of the guest console ($workdir/console.log):"
  # Strip SeaBIOS's terminal escapes (ESC c, ESC [ ... letter) so the tail reads cleanly.
  tail -n 40 "$workdir/console.log" 2>/dev/null |
    sed -E $'s/\x1b(\[[0-9;?]*[A-Za-z]|c)//g; s/^/  | /' >&2 || true
}
harness_fail() {
  log "error: $*"
  console_tail
  log "job directory kept: $workdir"
  exit "$HARNESS_FAIL"
}
if [ "$qemu_rc" -eq 124 ]; then
  harness_fail "qemu killed after $((cmd_timeout + boot_timeout)) s" \
    "(CELL_RXE_TIMEOUT + CELL_RXE_BOOT_TIMEOUT)"
fi
[ "$qemu_rc" -eq 0 ] || harness_fail "qemu exited with status $qemu_rc"
if [ ! -s "$workdir/.rxe/status" ]; then
  harness_fail "the guest did not boot far enough to mount the job directory"
fi
if grep -q '^FAILED' "$workdir/.rxe/status"; then
  harness_fail "guest setup $(grep '^FAILED' "$workdir/.rxe/status" | head -n 1)"
fi
[ -s "$workdir/exit-code" ] || harness_fail "no exit code came back from the guest (crash or hang?)"
rc=$(cat "$workdir/exit-code")
[[ $rc =~ ^[0-9]+$ ]] || harness_fail "bad exit code '$rc' from the guest"

if [ "$rc" -eq 0 ]; then
  log "COMMAND passed in the rxe guest (${elapsed} s including boot)"
  [ "$keep_workdir" -eq 1 ] || rm -rf "$workdir"
else
  [ "$rc" -ne 124 ] || log "COMMAND timed out after $cmd_timeout s (CELL_RXE_TIMEOUT)"
  log "COMMAND failed in the rxe guest with exit code $rc (${elapsed} s including boot)"
  console_tail
  log "job directory kept: $workdir"
fi
exit "$rc"
