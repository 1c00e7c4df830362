#!/usr/bin/env bash
# One call on the GPU machine: build with CUDA, run every test (CUDA op and whole-model tests
# included), run the benchmarks, and write a report. Usage, from the repository root:
#   tools/device_check.sh OUT_DIR [STAGES] [-- strata bench options]
# STAGES: any of build,test,bench,full (default build,test,bench). build: the CUDA test binaries,
# strata and the GPU benchmarks; test: the CUDA op and whole-model suites; bench: strata bench and
# the decode matmul benchmarks (bench_cuda_gemv, bench_cuda_chain, bench_cuda_stream_chain);
# full: every target and every other ctest suite too. Writes OUT_DIR/report.md plus logs.
# Libraries the GPU image lacks come from .devdeps when present (tools/stage_device_debs.sh fills it).
set -uo pipefail
out=${1:?usage: tools/device_check.sh OUT_DIR [STAGES] [-- bench options]}
shift
stages=${1:-build,test,bench}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
bench_args=("$@")
mkdir -p "$out"
report=$out/report.md
jobs=$(nproc)

cmake_extra=()
if [ -f .devdeps/unpack-debs.sh ]; then
  eval "$(bash .devdeps/unpack-debs.sh)"
  lib=/opt/devdeps/usr/lib/x86_64-linux-gnu
  if [ -d "$lib/openblas-pthread" ]; then
    ln -sf openblas-pthread/libopenblas.so.0 "$lib/libopenblas.so.0"
    ln -sf openblas-pthread/libopenblas.so "$lib/libopenblas.so"
    cmake_extra+=(-DOPENBLAS_INCLUDE_DIR=/opt/devdeps/usr/include/x86_64-linux-gnu/openblas-pthread
                  -DBLAS_LIBRARIES=$lib/openblas-pthread/libopenblas.so)
  fi
fi

gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU")
{
  echo "# strata device check"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- GPU: $gpu"
  echo "- command: tools/device_check.sh $out $stages ${bench_args[*]}"
  echo
} > "$report"

status=0
targets="test_backend_cuda test_cuda strata bench_cuda_gemv bench_cuda_chain bench_cuda_stream_chain"
[[ $stages == *full* ]] && targets=all
if [[ $stages == *build* || $stages == *full* ]]; then
  start=$SECONDS
  if cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
       -DSTRATA_CUDA=ON -DSTRATA_NATIVE=OFF "${cmake_extra[@]}" > "$out/configure.log" 2>&1 &&
     cmake --build build-gpu -j"$jobs" --target $targets > "$out/build.log" 2>&1; then
    echo "## Build: ok ($((SECONDS - start)) s)" >> "$report"
  else
    echo "## Build: FAILED" >> "$report"
    { echo '```'; grep -E "error|Error" -A3 "$out/build.log" "$out/configure.log" | head -60; echo '```'; } >> "$report"
    exit 1
  fi
  echo >> "$report"
fi

if [[ $stages == *test* || $stages == *full* ]]; then
  start=$SECONDS
  # The OpenAI SDK suite needs npm, which the GPU machine does not reach. The CUDA suites run
  # directly below, so their figures reach the report.
  if [[ $stages == *full* ]]; then
    (cd build-gpu && ctest -j"$jobs" -E "OpenAiSdk" -LE "cuda" --timeout 900) > "$out/ctest.log" 2>&1 || status=1
  fi
  for t in backend_cuda cuda; do
    [ -x "build-gpu/tests/test_$t" ] && { "build-gpu/tests/test_$t" > "$out/test_$t.log" 2>&1 || status=1; }
  done
  {
    echo "## Tests ($((SECONDS - start)) s)"
    echo
    if [ -f "$out/ctest.log" ]; then
      echo "All suites but the CUDA ones and the npm-based SDK suite (ctest):"
      echo
      echo '```'
      grep -E "tests passed|tests failed" "$out/ctest.log"
      grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)" "$out/ctest.log" | head -40
      echo '```'
    fi
    for t in backend_cuda cuda; do
      [ -f "$out/test_$t.log" ] || continue
      echo
      echo "test_$t:"
      echo
      echo '```'
      grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|Failure|Expected|Which is|^\[ [a-z]" "$out/test_$t.log" | head -120
      echo '```'
    done
    echo
  } >> "$report"
fi

if [[ $stages == *bench* ]]; then
  start=$SECONDS
  ./build-gpu/strata bench --output "$out/bench.md" "${bench_args[@]}" > "$out/bench.log" 2>&1 || status=1
  {
    echo "## Benchmarks ($((SECONDS - start)) s)"
    echo
    if [ -s "$out/bench.md" ]; then cat "$out/bench.md"; else echo '```'; tail -30 "$out/bench.log"; echo '```'; fi
    echo
  } >> "$report"
  if [ -x build-gpu/bench/bench_cuda_gemv ]; then
    ./build-gpu/bench/bench_cuda_gemv > "$out/bench_gemv.md" 2>&1 || status=1
    { echo "## Decode matmul bandwidth"; echo; cat "$out/bench_gemv.md"; echo; } >> "$report"
  fi
  if [ -x build-gpu/bench/bench_cuda_chain ]; then
    ./build-gpu/bench/bench_cuda_chain > "$out/bench_chain.md" 2>&1 || status=1
    { echo "## Decode matmuls chained alone"; echo; cat "$out/bench_chain.md"; echo; } >> "$report"
  fi
  if [ -x build-gpu/bench/bench_cuda_stream_chain ]; then
    ./build-gpu/bench/bench_cuda_stream_chain > "$out/bench_stream_chain.md" 2>&1 || status=1
    { echo "## Decode matmuls: persistent kernels, and launches of a ring kernel"; echo; cat "$out/bench_stream_chain.md"; echo; } >> "$report"
  fi
fi
exit $status
