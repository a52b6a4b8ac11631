#!/usr/bin/env bash
# Runs each fuzz target (tests/fuzz/targets.h) under libFuzzer for SECONDS, two at a time (2 cores),
# and prints executions and crashes per target. Called by `make fuzz` after it builds the targets.
#   bash tools/fuzz.sh SECONDS TARGET...
# The working corpus grows in build/fuzz/corpus/<target>/ (kept between runs, not committed), seeded
# from tests/fuzz/corpus/<target>/, the generated model files in build/fuzz/model_seeds/<target>/
# and the generated binary crash reproducers in build/fuzz/crash_reproducers/<target>/ (make fuzz
# writes them first). A crash (or leak, timeout, out-of-memory) is saved by libFuzzer and copied to
# tests/fuzz/crashes/<target>/: fix it, commit the file (a text input) or a builder of it in
# tests/fuzz/crash_builders.cpp (a binary one; tests/fuzz/crashes/README.md), and make test replays
# it.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=$1; shift
jobs=${FUZZ_JOBS:-2}
mkdir -p build/fuzz/logs

run_one() {
  local t=$1
  mkdir -p "build/fuzz/corpus/$t" "build/fuzz/artifacts/$t" "build/fuzz/model_seeds/$t"
  # -rss_limit_mb: a reader must not need more than 2 GB for a 64 KB input.
  # The seed folders that exist (libFuzzer stops at a missing one: the model-file targets have no
  # committed text seeds, the text targets no generated model seeds or crash reproducers).
  local seeds=()
  for d in "tests/fuzz/corpus/$t" "build/fuzz/model_seeds/$t" "build/fuzz/crash_reproducers/$t"; do
    [ -d "$d" ] && seeds+=("$d")
  done
  "build/fuzz/fuzz_$t" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="build/fuzz/artifacts/$t/" \
    "build/fuzz/corpus/$t" "${seeds[@]}" >"build/fuzz/logs/$t.log" 2>&1
  echo $? >"build/fuzz/logs/$t.rc"
}

running=0
for t in "$@"; do
  rm -f "build/fuzz/artifacts/$t/"* 2>/dev/null
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait

status=0
total=0
printf '%-12s %14s %10s %8s  %s\n' target executions exec/s crashes "corpus (files)"
for t in "$@"; do
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "build/fuzz/logs/$t.log" | grep -o '[0-9]*$' | tail -1)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "build/fuzz/logs/$t.log" | grep -o '[0-9]*$' | tail -1)
  crashes=$(find "build/fuzz/artifacts/$t" -type f | wc -l)
  files=$(find "build/fuzz/corpus/$t" -type f | wc -l)
  printf '%-12s %14s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$crashes" "$files"
  total=$((total + ${execs:-0}))
  if [ "$crashes" -gt 0 ] || [ "$(cat "build/fuzz/logs/$t.rc")" != 0 ]; then
    status=1
    mkdir -p "tests/fuzz/crashes/$t"
    cp build/fuzz/artifacts/"$t"/* "tests/fuzz/crashes/$t/" 2>/dev/null
    echo "  $t: see build/fuzz/logs/$t.log; reproducers copied to tests/fuzz/crashes/$t/" >&2
    grep -m3 -E 'ERROR|SUMMARY|terminate|what\(\)' "build/fuzz/logs/$t.log" | sed 's/^/    /' >&2
  fi
done
echo "total executions: $total in ${seconds}s per target"
exit $status
