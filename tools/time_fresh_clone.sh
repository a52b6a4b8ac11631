#!/usr/bin/env bash
# Times what a newcomer, a student and CI wait for: `make test` in a fresh clone; a student's first
# `make grade` in a student tree written from it (`make student`; every task still to do), then a
# second one; then `.ci/run` in another fresh clone. All of this checkout's committed HEAD
# (uncommitted changes are not in a clone). Appends one row to docs/testing/timings.md stamped with
# the CPU, the date and the commit.
#
#   tools/time_fresh_clone.sh [--test-only] [--out FILE]
#
# Run it with nothing else on the machine: the row is a wall time. Each clone lives in a temporary
# folder (TMPDIR), removed when its command passes and kept, with its log, when it fails; a failed
# command writes no row. MOSGRAD_DATA is passed on (the PTB tests skip without it); unset, it is the
# checkout's data/ptb, else ../shared/data/ptb, whichever holds ptb.train.txt, as for `make test`
# in the checkout itself.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/docs/testing/timings.md
test_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --test-only) test_only=1 ;;
    --out) [ $# -ge 2 ] || { echo "time_fresh_clone: --out needs a file" >&2; exit 2; }
           OUT=$2; shift ;;
    *) echo "time_fresh_clone: unknown argument '$1' (allowed: --test-only, --out FILE)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "${MOSGRAD_DATA:-}" ]; then
  for d in "$ROOT/data/ptb" "$(dirname "$ROOT")/shared/data/ptb"; do
    if [ -f "$d/ptb.train.txt" ]; then export MOSGRAD_DATA=$d; break; fi
  done
fi
[ -n "${MOSGRAD_DATA:-}" ] || echo "time_fresh_clone: no PTB found: the PTB tests will skip" >&2

commit=$(git -C "$ROOT" rev-parse --short=7 HEAD)
. "$ROOT/tools/machine_stamp.sh"  # sets machine

# timed DIR COMMAND...: clone into DIR, run COMMAND there, print its wall seconds.
timed() {
  local dir=$1; shift
  git clone -q "$ROOT" "$dir"
  git -C "$dir" checkout -q "$commit"
  local start end
  start=$(date +%s)
  if ! (cd "$dir" && "$@") >"$dir.log" 2>&1; then
    echo "time_fresh_clone: '$*' failed in $dir (log: $dir.log)" >&2
    tail -30 "$dir.log" >&2
    return 1
  fi
  end=$(date +%s)
  echo $((end - start))
}
fmt() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }

work=$(mktemp -d "${TMPDIR:-/tmp}/mosgrad-clone.XXXXXX")
echo "time_fresh_clone: $commit on $machine; clones in $work"
test_s=$(timed "$work/test" make test)
echo "time_fresh_clone: make test: $(fmt "$test_s")"
# graded DIR: seconds of `make grade` there. Its tasks fail (a student tree, nothing written yet),
# so the grade's own last line, its score, tells a grade that ran from one that did not build.
graded() {
  local start end
  start=$(date +%s)
  (cd "$1" && make grade) >"$1.grade.log" 2>&1 || true
  end=$(date +%s)
  if ! grep -q '^score: [0-9]* of [0-9]*$' "$1.grade.log"; then
    echo "time_fresh_clone: make grade did not grade in $1 (log: $1.grade.log)" >&2
    tail -30 "$1.grade.log" >&2
    return 1
  fi
  echo $((end - start))
}
make -C "$work/test" --no-print-directory student OUT="$work/student" >/dev/null
grade_s=$(graded "$work/student") regrade_s=$(graded "$work/student")
echo "time_fresh_clone: a student's first make grade: $(fmt "$grade_s"), the next $(fmt "$regrade_s")"
rm -rf "$work/test" "$work/student" "$work/student.grade.log"
ci="–" tiers="–"
if [ $test_only = 0 ]; then
  ci_s=$(timed "$work/ci" .ci/run)
  ci=$(fmt "$ci_s")
  tiers=$(awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $3, $(NF - 1)}' "$work/ci/build/check-times.txt")
  echo "time_fresh_clone: .ci/run: $ci ($tiers s)"
  rm -rf "$work/ci"
fi
rm -rf "$work"

mkdir -p "$(dirname "$OUT")"
if [ ! -f "$OUT" ]; then
  {
    echo "# Fresh-clone timings: \`make test\`, \`.ci/run\` and a student's \`make grade\`"
    echo
    echo "Rows appended by \`tools/time_fresh_clone.sh\` (docs/testing.md), one per run; compare rows"
    echo "of one CPU kind only. The tiers' seconds are \`make check\`'s (build/check-times.txt)."
    echo
    echo "| machine | date | commit | \`make test\` | \`.ci/run\` | tiers (s) | first \`make grade\`, next |"
    echo "|---|---|---|---|---|---|---|"
  } >"$OUT"
fi
echo "| $machine | $(date -u +%Y-%m-%d) | $commit | $(fmt "$test_s") | $ci | $tiers | $(fmt "$grade_s"), $(fmt "$regrade_s") |" >>"$OUT"
echo "time_fresh_clone: appended to $OUT"
