#!/usr/bin/env bash
# Runs a GoogleTest binary as N shards side by side, each on its own part of the tests (GoogleTest's
# GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX) and with its own temporary folder (TEST_TMPDIR), so that
# the many tests that use one core keep both cores busy. Every test still runs exactly once.
#
#   tools/run_shards.sh N BINARY [GTEST ARGS...]
#
# Each shard's output goes to a log beside the binary (BINARY.shard<i>.log); a passing shard prints
# its summary, a failing one its whole log. Fails when any shard fails (or runs no test at all while
# another does: a filter that matches nothing anywhere is GoogleTest's own business).
set -u
if [ $# -lt 2 ]; then
  echo "usage: tools/run_shards.sh N BINARY [GTEST ARGS...]" >&2
  exit 2
fi
n=$1 binary=$2
shift 2
case $n in '' | *[!0-9]* | 0) echo "run_shards: N must be a positive integer, got '$n'" >&2; exit 2 ;; esac
[ -x "$binary" ] || { echo "run_shards: $binary is not an executable" >&2; exit 2; }

pids=() logs=() tmps=()
for ((i = 0; i < n; i++)); do
  log="$binary.shard$i.log" tmp=$(mktemp -d "${TMPDIR:-/tmp}/mosgrad-shard$i.XXXXXX")
  logs+=("$log") tmps+=("$tmp")
  GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i TEST_TMPDIR="$tmp/" "$binary" "$@" >"$log" 2>&1 &
  pids+=($!)
done
failed=0
for ((i = 0; i < n; i++)); do
  if wait "${pids[$i]}"; then
    echo "== shard $((i + 1)) of $n: $(grep -E '^\[==========\] .* ran\.' "${logs[$i]}" | tail -1)"
    grep -E '^\[  (PASSED|SKIPPED) ' "${logs[$i]}"
  else
    failed=1
    echo "== shard $((i + 1)) of $n FAILED; its log (${logs[$i]}):"
    cat "${logs[$i]}"
  fi
  rm -rf "${tmps[$i]}"
done
exit $failed
