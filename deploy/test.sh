#!/usr/bin/env bash
# Installs dependencies, builds Cell (Release, with tests) and runs every test; then builds the concurrency tests
# under ThreadSanitizer and runs them again. Exit status is non-zero if anything fails.
#
#   deploy/test.sh            (BUILD_DIR and TSAN_BUILD_DIR may be set; defaults build/ and build-tsan/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-$root/build}
tsan=${TSAN_BUILD_DIR:-$root/build-tsan}
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
