#!/usr/bin/env bash
# Builds everything (scripts/build.sh) and runs every test; exits non-zero when any test fails.
# The fuzzers (scripts/fuzz.sh: a clang build, then 60 s per target, targets in parallel) run
# before ctest, so that ctest's summary closes the output; STRATA_FUZZ_SECONDS=0 replays only
# the saved regression inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
fuzz_status=0
bash scripts/fuzz.sh || fuzz_status=$?
# ctest runs as many tests at once as there are cores, so each test's own threads default to one:
# OpenMP's and OpenBLAS's waiting threads would otherwise spin against the other tests' (a test
# that wants more threads sets them itself).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
exit "$fuzz_status"
