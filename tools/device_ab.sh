#!/usr/bin/env bash
# On the GPU machine: strata bench of a base source tree against this tree's build, in one call, so
# that both figures come from the same machine. Run after tools/device_check.sh has built
# build-gpu (this tree's strata). Usage, from the repository root:
#   tools/device_ab.sh BASE_SRC OUT_DIR [ROUNDS] -- strata bench options
# BASE_SRC: a copy of the base commit's sources (e.g. `git archive BASE src cmake configs
# CMakeLists.txt bench tests/CMakeLists.txt | tar -x -C .carry/base`, carried to the machine). The two builds run
# alternately ROUNDS times (default 2); OUT_DIR/ab.md gets every table in order.
set -uo pipefail
base=${1:?usage: tools/device_ab.sh BASE_SRC OUT_DIR [ROUNDS] -- bench options}
out=${2:?usage: tools/device_ab.sh BASE_SRC OUT_DIR [ROUNDS] -- bench options}
shift 2
rounds=2
if [ $# -gt 0 ] && [ "$1" != "--" ]; then rounds=$1; shift; fi
[ "${1:-}" = "--" ] && shift
mkdir -p "$out"
if [ -f .devdeps/unpack-debs.sh ]; then eval "$(bash .devdeps/unpack-debs.sh)"; fi
[ -x build-gpu/strata ] || { echo "build-gpu/strata is missing: run tools/device_check.sh first" >&2; exit 1; }
start=$SECONDS
if ! { cmake -S "$base" -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
         -DSTRATA_CUDA=ON -DSTRATA_NATIVE=OFF -DSTRATA_BUILD_TESTS=OFF -DSTRATA_BUILD_BENCH=OFF &&
       cmake --build build-base -j"$(nproc)" --target strata; } > "$out/base_build.log" 2>&1; then
  echo "base build failed" >&2
  tail -30 "$out/base_build.log" >&2
  exit 1
fi
{
  echo "# strata bench: base against this tree"
  echo
  echo "- GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo none)"
  echo "- base build: $((SECONDS - start)) s; options: $*"
  echo
} > "$out/ab.md"
status=0
for r in $(seq 1 "$rounds"); do
  for side in base gpu; do
    label=$([ $side = base ] && echo base || echo tree)
    if ./build-$side/strata bench "$@" --output "$out/$label-$r.md" > "$out/$label-$r.log" 2>&1; then
      { echo "## $label, round $r"; echo; sed -n '/^| model/,/^$/p' "$out/$label-$r.md"; echo; } >> "$out/ab.md"
    else
      status=1
      { echo "## $label, round $r: FAILED"; echo '```'; tail -20 "$out/$label-$r.log"; echo '```'; } >> "$out/ab.md"
    fi
  done
done
cat "$out/ab.md"
exit $status
