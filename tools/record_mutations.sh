#!/usr/bin/env bash
# Appends one row to docs/testing/mutations.md for a mutation run of the whole list: what it
# measured (the report tools/mutate.sh leaves in build/mutate/report.txt), stamped with the CPU, the
# date and the commit of the sources it mutated ("+dirty" when they had uncommitted changes, which
# mutate.sh copies too). tools/mutate.sh calls it after a run of the whole list; given a checkout,
# it records the run left in that checkout's build/mutate/report.txt.
#
#   tools/record_mutations.sh [CHECKOUT] [--out FILE]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/docs/testing/mutations.md
src=$ROOT
while [ $# -gt 0 ]; do
  case $1 in
    --out) [ $# -ge 2 ] || { echo "record_mutations: --out needs a file" >&2; exit 2; }
           OUT=$2; shift ;;
    -*) echo "record_mutations: unknown option '$1' (allowed: --out FILE)" >&2; exit 2 ;;
    *) [ -d "$1" ] || { echo "record_mutations: no checkout at '$1'" >&2; exit 2; }
       src=$(cd "$1" && pwd) ;;
  esac
  shift
done
report=$src/build/mutate/report.txt
[ -f "$report" ] || { echo "record_mutations: no report at $report (run make mutate first)" >&2; exit 2; }
summary=$(grep -m1 '^killed [0-9]* of [0-9]* mutants' "$report") ||
  { echo "record_mutations: $report has no summary line: the run did not finish" >&2; exit 2; }
grep -q '^mutate: [0-9]* mutations, tests named per mutation' "$report" || grep -q 'whole fast suite' "$report" ||
  { echo "record_mutations: $report is not a mutation run's report" >&2; exit 2; }
listed=$(sed -n 's/^mutate: \([0-9]*\) mutations.*/\1/p' "$report")
entries=$(grep -c '^mutation ' "$src/tools/mutations.txt")
[ "$listed" = "$entries" ] ||
  { echo "record_mutations: the run covered $listed of the list's $entries mutations: only a run of the whole list is recorded" >&2; exit 2; }

. "$ROOT/tools/machine_stamp.sh"  # sets machine
commit=$(git -C "$src" rev-parse --short=7 HEAD)
# (the table itself aside: a run of the whole list appends its own row to it before this reads it)
[ -z "$(git -C "$src" status --porcelain --untracked-files=no -- . ':!docs/testing/mutations.md')" ] ||
  commit="$commit+dirty"
killed=$(sed -n 's/^killed \([0-9]*\) of \([0-9]*\) mutants.*/\1 of \2/p' <<<"$summary")
equivalent=$(sed -n 's/.*; \([0-9]*\) equivalent survived.*/\1/p' <<<"$summary")
took=$(sed -n 's/.*; \([0-9]*m[0-9]*s\)$/\1/p' <<<"$summary")
survivors=$(awk '$4 == "SURVIVED" {printf "%s%s", (n++ ? ", " : ""), $2}' "$report")
broken=$(awk '$4 == "DOES" {printf "%s%s", (n++ ? ", " : ""), $2}' "$report")

mkdir -p "$(dirname "$OUT")"
if [ ! -f "$OUT" ]; then
  {
    echo "# Mutation runs: what the suite catches"
    echo
    echo "Rows appended by \`tools/record_mutations.sh\` (which \`make mutate\` calls after a run of the"
    echo "whole list; docs/testing.md says what the list holds), one per run."
    echo
    echo "| machine | date | commit | killed | equivalent (expected to survive) | survived | does not compile | time |"
    echo "|---|---|---|---|---|---|---|---|"
  } >"$OUT"
fi
echo "| $machine | $(date -u +%Y-%m-%d) | $commit | $killed | ${equivalent:-0} | ${survivors:-none} | ${broken:-none} | $took |" >>"$OUT"
echo "record_mutations: appended to $OUT"
