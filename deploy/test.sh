#!/usr/bin/env bash
# Installs dependencies, checks every C++ file's format, builds Cell (Release, with tests) and runs every test (the
# verbs transport's included, in a qemu guest with Soft-RoCE: test/rxe/); then runs the concurrency tests again under
# ThreadSanitizer; then fuzzes the RPC frame decoder and the store's request handler for 60 s each, and shows the
# store fuzzer finds a field left unchecked on purpose. The ThreadSanitizer and fuzzer builds are compiled at low
# priority while the Release tests run. Exit status is non-zero if anything fails.
#
#   deploy/test.sh   (BUILD_DIR, TSAN_BUILD_DIR, FUZZ_BUILD_DIR may be set; defaults build/, build-tsan/, build-fuzz/;
#                     CELL_FUZZ_SECONDS sets the fuzzing time)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-$root/build}
tsan=${TSAN_BUILD_DIR:-$root/build-tsan}
fuzz=${FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=$(nproc)
# Each stage's heading says how long the run has taken so far (CI's budget is 30 minutes).
stage() { echo "== [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }

bash deploy/install-deps.sh

# The house style is .clang-format (Google, 120 columns); reformat with: git ls-files '*.h' '*.cc' | xargs clang-format -i
stage "Format: clang-format --dry-run --Werror on every C++ file"
git ls-files -z '*.h' '*.cc' | xargs -0 clang-format --dry-run --Werror

stage "Release build and tests ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCELL_BUILD_TESTS=ON -DCELL_BUILD_BENCH=ON
cmake --build "$build" -j "$jobs"
# The house rules a compiler does not check (file and function sizes, client/ includes, libcell.so's symbols); the
# self-test first proves each check rejects a bad input (libcell_meganode.a is storage-engine code).
stage "House rules: deploy/check-house.py"
python3 deploy/check-house.py --self-test --lib="$build/libcell_meganode.a"
python3 deploy/check-house.py --lib="$build/libcell.so"

# The later stages' builds (ThreadSanitizer's, then the fuzzers') are compiled while the Release tests run, at the
# lowest priority: many of those tests wait (on ZooKeeper sessions, lock expiries, a qemu guest) much of the time,
# and a compiler at nice 19 takes only the CPU they leave. Their output goes to a file, shown when they are waited for.
# ThreadSanitizer's -g1: line tables only, which is what its reports print (file:line of every frame; no inlined
# frames), at much less compile time than -g.
later_builds_log=$(mktemp)
export tsan fuzz jobs
# In a session of its own (setsid), so that a failing run stops the whole build (its group), not only its shell. A new
# session is also a new scheduling autogroup where the kernel has them (sched_autogroup_enabled), and autogroups share
# the CPU equally whatever their processes' nice values: the group itself is niced too, or the build takes half of it.
setsid -w bash -c '
  set -euo pipefail
  echo 19 >/proc/self/autogroup 2>/dev/null || true
  cmake -S . -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DCELL_SANITIZE=thread -DCELL_BUILD_BENCH=OFF
  nice -n 19 cmake --build "$tsan" -j "$jobs" --target concurrency_tests
  cmake -S . -B "$fuzz" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCELL_FUZZ=ON -DCELL_BUILD_TESTS=OFF \
    -DCELL_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD=OFF
  nice -n 19 cmake --build "$fuzz" -j "$jobs" --target rpc_frame_fuzz store_request_fuzz store_request_fuzz_planted
' >"$later_builds_log" 2>&1 &
later_builds=$!
trap 'kill -- -"$later_builds" 2>/dev/null || true; rm -f "$later_builds_log"' EXIT
ctest --test-dir "$build" --output-on-failure -j "$jobs"

stage "ThreadSanitizer and fuzzer builds (begun during the Release tests), then the concurrency tests ($tsan)"
later_status=0
wait "$later_builds" || later_status=$?
trap - EXIT  # reaped: its group id may be reused
cat "$later_builds_log"
rm -f "$later_builds_log"
if [ "$later_status" -ne 0 ]; then
  echo "the ThreadSanitizer or fuzzer build failed (exit $later_status)" >&2
  exit 1
fi
# At most two at a time: whole-cluster tests slowed by ThreadSanitizer starve each other when many run at once.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --test-dir "$tsan" --output-on-failure -L concurrency \
  -j "$((jobs < 2 ? jobs : 2))"

seconds=${CELL_FUZZ_SECONDS:-60}
stage "libFuzzer: the RPC frame decoder and the store's request handler, ${seconds} s each ($fuzz)"
mkdir -p "$fuzz/corpus" "$fuzz/store-corpus"
# The two fuzzers run side by side (one core each); the stage fails if either finds anything.
"$fuzz/bin/rpc_frame_fuzz" -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix="$fuzz/" "$fuzz/corpus" &
frame_fuzzer=$!
# The store's targets log what they refuse on stderr: -close_fd_mask=2 keeps libFuzzer's own report only.
store_flags=(-max_len=4096 -len_control=0 -close_fd_mask=2)
store_status=0
"$fuzz/bin/store_request_fuzz" -max_total_time="$seconds" -print_final_stats=1 "${store_flags[@]}" \
  -artifact_prefix="$fuzz/store-" "$fuzz/store-corpus" || store_status=$?
frame_status=0
wait "$frame_fuzzer" || frame_status=$?
if [ "$frame_status" -ne 0 ] || [ "$store_status" -ne 0 ]; then
  echo "a fuzzer found a failing input (frame decoder: exit $frame_status, store: exit $store_status)" >&2
  exit 1
fi

# The checker must be able to fail: over a tree built with one field left unchecked (CELL_FUZZ_PLANTED_BUG: the
# range of MEGA_FILL's entries), starting from the corpus above, the fuzzer must report an inconsistent tree.
stage "libFuzzer: the store fuzzer finds a field left unchecked (within 600 s; it stops when it does)"
planted=$(mktemp -d)
cp -r "$fuzz/store-corpus/." "$planted/"
if "$fuzz/bin/store_request_fuzz_planted" -max_total_time=600 "${store_flags[@]}" -artifact_prefix="$planted/" \
     "$planted" > "$planted/log" 2>&1; then
  echo "the store fuzzer did not find the planted unchecked field in 600 s" >&2
  exit 1
fi
found=$(ls "$planted"/crash-* 2>/dev/null | head -n 1)
# Replayed alone, the input must show the inconsistency (the fuzzer exits non-zero on it, as it should).
[ -z "$found" ] || "$fuzz/bin/store_request_fuzz_planted" "$found" > "$planted/replay" 2>&1 || true
if [ -z "$found" ] || ! grep -q "fails its consistency check" "$planted/replay"; then
  echo "the planted store fuzzer stopped, but not on an inconsistent tree:" >&2
  tail -n 20 "$planted/log" >&2
  exit 1
fi
echo "found it: $(grep -m1 "fails its consistency check" "$planted/replay")"
rm -rf "$planted"
stage "Done: every stage passed"
