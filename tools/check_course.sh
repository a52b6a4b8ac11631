#!/usr/bin/env bash
# The course kit's tier of `make check` (docs/testing.md, docs/course/README.md):
#   1. this tree scores 100 of 100 (`make grade`);
#   2. the student tree (`make student`, written outside the checkout) builds what grading needs,
#      and each of its tasks fails with its "not implemented yet" message, nothing crashing;
#   3. every command of the lab pages runs and prints the figures the pages show.
# Needs PTB for 3 ($MOSGRAD_DATA, else ../shared/data/ptb). Its time is check-course's in
# docs/testing/timings.md.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

make --no-print-directory grade

student=$(mktemp -d "${TMPDIR:-/tmp}/mosgrad-student.XXXXXX")
log=$(mktemp)
trap 'rm -rf "$student" "$log"' EXIT
make --no-print-directory student OUT="$student"
make -C "$student" --no-print-directory -j"$JOBS" build/release/grade_tests build/release/mosgrad
(cd "$student" && bash tools/course.sh grade --json grade.json) > "$log" 2>&1 || true
cat "$log"
tasks=$(grep -v '^#' docs/course/tasks.txt | awk 'NF' | wc -l)
stubbed=$(grep -c '"passed": false, "score": 0, .*"message": "not implemented yet: lab' "$student/grade.json" || true)
if [[ $stubbed != "$tasks" ]]; then
  echo "check_course: the student tree must fail all $tasks tasks with 'not implemented yet', $stubbed did" >&2
  exit 1
fi

make --no-print-directory -j"$JOBS" build/release/mosgrad
bash tools/course.sh figures
echo "check_course: 100 of 100 here, every task of the student tree stubbed, the lab pages' figures"
