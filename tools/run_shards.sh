#!/usr/bin/env bash
# Runs a GoogleTest binary's tests on N workers side by side, each test exactly once, so that the
# many tests that use one core keep every core busy. The tests are a queue: the ones the --first
# filter names come first, one at a time and in the filter's order (put the longest first), then
# the rest in small batches; a worker takes the next item whenever it is free. Unlike GoogleTest's
# fixed shards (GTEST_TOTAL_SHARDS), two long tests cannot end up on one worker while another core
# idles.
#
#   tools/run_shards.sh [--first FILTER] N BINARY [GTEST ARGS...]
#
# GTEST ARGS may hold one --gtest_filter: it chooses the tests (listed with --gtest_list_tests);
# each item then runs as its own process with a filter of its exact names and the other
# arguments, with its own temporary folder (TEST_TMPDIR). Each worker's output goes to a log beside
# the binary (BINARY.worker<i>.log). Prints each worker's count and every skipped test; a failing
# item prints its whole output at the end. Exits 1 when any item fails or the filter matches none.
set -u -o pipefail
first=""
if [ "${1:-}" = "--first" ]; then
  [ $# -ge 2 ] || { echo "run_shards: --first needs a filter" >&2; exit 2; }
  first=$2
  shift 2
fi
if [ $# -lt 2 ]; then
  echo "usage: tools/run_shards.sh [--first FILTER] N BINARY [GTEST ARGS...]" >&2
  exit 2
fi
n=$1 binary=$2
shift 2
case $n in '' | *[!0-9]* | 0) echo "run_shards: N must be a positive integer, got '$n'" >&2; exit 2 ;; esac
[ -x "$binary" ] || { echo "run_shards: $binary is not an executable" >&2; exit 2; }

filter="*" args=()
for a in "$@"; do
  case $a in --gtest_filter=*) filter=${a#--gtest_filter=} ;; *) args+=("$a") ;; esac
done

# list FILTER: the full names of the tests the binary runs under FILTER, one per line.
list() {
  "$binary" --gtest_list_tests --gtest_filter="$1" |
    awk '/^[^ ]/ { suite = $1; next } /^  / { print suite $1 }'
}
all=$(list "$filter") || { echo "run_shards: $binary --gtest_list_tests failed" >&2; exit 1; }
[ -n "$all" ] || { echo "run_shards: no test matches '$filter'" >&2; exit 1; }

# The queue: each --first pattern's tests (that the filter also selects) alone, in order; then
# the others in batches of about an eighth of what is left per worker, at least one test each
# (every item is a process: under the sanitizers its start and leak check cost about a second).
items=() taken=""
if [ -n "$first" ]; then
  IFS=: read -r -a patterns <<<"$first"
  for p in "${patterns[@]}"; do
    while IFS= read -r t; do
      [ -n "$t" ] || continue
      grep -qxF -- "$t" <<<"$all" || continue
      grep -qxF -- "$t" <<<"$taken" && continue
      items+=("$t") taken+="$t"$'\n'
    done < <(list "$p")
  done
fi
rest=()
while IFS= read -r t; do
  grep -qxF -- "$t" <<<"$taken" || rest+=("$t")
done <<<"$all"
batch=$(((${#rest[@]} + 8 * n - 1) / (8 * n)))
[ "$batch" -ge 1 ] || batch=1
for ((i = 0; i < ${#rest[@]}; i += batch)); do
  items+=("$(IFS=:; echo "${rest[*]:i:batch}")")
done

work=$(mktemp -d "${TMPDIR:-/tmp}/mosgrad-queue.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo 0 >"$work/next"
rm -f "$binary".worker*.log
# worker I: takes the next item (under a lock) until none is left; each item's output is
# appended to the worker's log, and a failing item's output is kept as work/failed.<item>.
worker() {
  local i=$1 log="$binary.worker$1.log" k out
  : >"$log"
  while :; do
    k=$(flock "$work/next" bash -c 'k=$(cat "$0"); echo $((k + 1)) >"$0"; echo "$k"' "$work/next")
    case $k in '' | *[!0-9]*) echo "run_shards: worker $i could not take an item" >&2; return 1 ;; esac
    [ "$k" -lt ${#items[@]} ] || break
    out="$work/item.$k"
    mkdir -p "$work/tmp.$k"
    if ! TEST_TMPDIR="$work/tmp.$k/" "$binary" --gtest_filter="${items[$k]}" "${args[@]}" >"$out" 2>&1; then
      cp "$out" "$work/failed.$k"
    fi
    cat "$out" >>"$log"
    rm -rf "$out" "$work/tmp.$k"
  done
}
pids=()
for ((i = 0; i < n; i++)); do
  worker "$i" &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done

for ((i = 0; i < n; i++)); do
  log="$binary.worker$i.log"
  echo "== worker $((i + 1)) of $n: $(grep -c '^\[       OK \]' "$log") passed, $(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$log") skipped"
  grep -E '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$log" || true
done
for ((k = 0; k < ${#items[@]}; k++)); do
  [ -e "$work/failed.$k" ] || continue
  failed=1
  echo "== FAILED: ${items[$k]}; its output:"
  cat "$work/failed.$k"
done
total=$(grep -c . <<<"$all")
passed=$(cat "$binary".worker*.log | grep -c '^\[       OK \]')
skipped=$(cat "$binary".worker*.log | grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$')
echo "== $total tests on $n workers: $passed passed, $skipped skipped$([ $failed = 0 ] || echo ', some FAILED (above)')"
if [ $failed = 0 ] && [ $((passed + skipped)) -ne "$total" ]; then  # a worker that died early
  echo "run_shards: $total tests listed but $((passed + skipped)) passed or skipped" >&2
  failed=1
fi
exit $failed
