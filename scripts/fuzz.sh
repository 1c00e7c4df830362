#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (ASan + UBSan) into build-fuzz/, replays every
# saved crash in fuzz/regressions/<target>/, then fuzzes each target for a bounded time, all targets
# at once (sharing the cores: an input's time limit grows with the targets a core carries). Exits non-zero on any crash, leak, hang or sanitizer report; the input
# that caused it is left in build-fuzz/artifacts/ (copy it to fuzz/regressions/<target>/ once fixed).
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 60, or $STRATA_FUZZ_SECONDS; 0: replay only)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-${STRATA_FUZZ_SECONDS:-60}}"
build=build-fuzz
targets=(openai_request openai_request_structured anthropic_request responses_request jinja http gbnf)

mkdir -p "$build"
# A build that fails says so, with its last lines (quiet otherwise).
{ cmake -S fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ && cmake --build "$build" -j "$(nproc)"; } \
  >"$build/build.log" 2>&1 ||
  { tail -n 40 "$build/build.log"; echo "fuzz: the fuzz targets do not build" >&2; exit 1; }

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$build/artifacts"

for t in "${targets[@]}"; do
  shopt -s nullglob
  saved=(fuzz/regressions/"$t"/*)
  shopt -u nullglob
  if [ ${#saved[@]} -gt 0 ]; then
    "$build/fuzz_$t" -runs=1 "${saved[@]}" >"$build/replay_$t.log" 2>&1 ||
      { tail -n 40 "$build/replay_$t.log"; echo "fuzz: $t fails on a saved regression input" >&2; exit 1; }
  fi
  echo "fuzz: $t replays ${#saved[@]} regression inputs"
done
[ "$seconds" -gt 0 ] || exit 0

# Seeds: the checked-in corpus, plus the real chat templates of the shared fixtures for the Jinja
# target. New inputs go to a scratch corpus (the first directory), never into the repository.
seeds_jinja=()
[ -d ../shared/fixtures/chat-templates/templates ] && seeds_jinja=(../shared/fixtures/chat-templates/templates)
# An input may take 10 s of a core: a step that is not linear in the body's size takes far longer.
# The targets share the cores, so the wall-clock limit is 10 s times the targets per core (40 s for
# seven on two cores: 100,000 messages through the fallback template take 7 s alone under ASan).
cores=$(nproc)
timeout=$((10 * ((${#targets[@]} + cores - 1) / cores)))
pids=()
for t in "${targets[@]}"; do
  work="$build/corpus_$t"
  mkdir -p "$work"
  extra=()
  [ "$t" = jinja ] && extra=("${seeds_jinja[@]}")
  [ -f "fuzz/$t.dict" ] && extra+=(-dict="fuzz/$t.dict")
  # Request bodies may be as long as the server's body limit; a structured input is a program that
  # expands into one (up to the same limit), so it stays short itself.
  max_len=16384
  [ "$t" = openai_request ] && max_len=$((16 << 20))
  [ "$t" = anthropic_request ] && max_len=$((16 << 20))
  [ "$t" = responses_request ] && max_len=$((16 << 20))
  [ "$t" = openai_request_structured ] && max_len=4096
  [ "$t" = http ] && max_len=8192  # four times the fuzz server's head limit, with a body
  [ "$t" = gbnf ] && max_len=65536  # grammars of many rules; the compiler's own limit is 1 MiB
  "$build/fuzz_$t" "$work" "fuzz/corpus/$t" "${extra[@]}" \
    -max_total_time="$seconds" -max_len="$max_len" -timeout="$timeout" -rss_limit_mb=2048 \
    -artifact_prefix="$build/artifacts/${t}-" -print_final_stats=1 >"$build/fuzz_$t.log" 2>&1 &
  pids+=($!)
done

failed=0
for i in "${!targets[@]}"; do
  t="${targets[$i]}"
  if wait "${pids[$i]}"; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz_$t.log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz: $t ran ${seconds}s, $runs inputs, no crash"
  else
    failed=1
    tail -n 60 "$build/fuzz_$t.log"
    echo "fuzz: $t FAILED; the input is in $build/artifacts/" >&2
  fi
done
exit $failed
