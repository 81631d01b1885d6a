#!/usr/bin/env bash
# Installs dependencies, builds Cell (Release, with tests) and runs every test (the verbs transport's included, in a
# qemu guest with Soft-RoCE: test/rxe/); then builds the concurrency tests under ThreadSanitizer and runs them again;
# then fuzzes the RPC frame decoder for 60 s. Exit status is non-zero if anything fails.
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

bash deploy/install-deps.sh

echo "== Release build and tests ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCELL_BUILD_TESTS=ON -DCELL_BUILD_BENCH=ON
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"

echo "== ThreadSanitizer build and concurrency tests ($tsan)"
cmake -S . -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCELL_SANITIZE=thread -DCELL_BUILD_BENCH=OFF
cmake --build "$tsan" -j "$jobs"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --test-dir "$tsan" --output-on-failure -L concurrency

echo "== libFuzzer: the RPC frame decoder for ${CELL_FUZZ_SECONDS:-60} s ($fuzz)"
cmake -S . -B "$fuzz" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCELL_FUZZ=ON -DCELL_BUILD_TESTS=OFF -DCELL_BUILD_BENCH=OFF
cmake --build "$fuzz" --target rpc_frame_fuzz
mkdir -p "$fuzz/corpus"
"$fuzz/bin/rpc_frame_fuzz" -max_total_time="${CELL_FUZZ_SECONDS:-60}" -print_final_stats=1 \
  -artifact_prefix="$fuzz/" "$fuzz/corpus"
