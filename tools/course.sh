#!/usr/bin/env bash
# The course kit (docs/course/README.md): the student tree, the grader, and the checks of both.
#
#   tools/course.sh student OUT [LABS]  (`make student`) copy this repository to OUT with the solution
#       regions of LABS (e.g. 3,4; default all; none: the copy the fairness check plants bugs in) stubbed
#   tools/course.sh grade [LAB] [--json FILE]  (`make grade`) run each task's tests in this tree
#       (build/release/grade_tests) and print the table of points
#   tools/course.sh check  (`make course-check`) lab by lab: a tree with only lab N stubbed must fail
#       exactly lab N's tasks and pass every other lab's up to N - 1 (no lab's tests lean on a later
#       lab); then `fairness`, `mutants` and `figures`
#   tools/course.sh fairness [MUTATION...]  a wrong answer, then a stub, planted in one task's region
#       alone must fail that task and no other of its lab or an earlier one (tools/course_fairness.sh)
#   tools/course.sh mutants [ARGS]  the mutations of tools/mutations.txt inside a region must fail
#       that task's tests (a wrong answer loses the points)
#   tools/course.sh figures  every command of the lab pages runs and prints the figures they show
#   tools/course.sh region-mutations OUT [LIST...]  write the mutations of LIST that fall inside a
#       region, each marked with its task
#
# A solution region is the lines between `// TASK <id>: <hint>` and `// END TASK <id>` (tasks in
# docs/course/tasks.txt). The student tree keeps both marker lines and gets, in between, one call
# `not_implemented("lab L, task <id>", "<hint>");` (tensor/not_implemented.h), so it builds and
# each unsolved task's tests fail with that message. Only the files git tracks are copied (no build
# outputs, no history); the mutation list and the fairness check (which quote solutions) are left
# out. After copying, no line of any removed region may appear anywhere in OUT: the copy is
# refused otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TASKS=$ROOT/docs/course/tasks.txt
STAMP=.mosgrad-student  # marks a directory this script made, so regenerating it is allowed

# Temporary files and folders, removed however the script exits (die, set -e, Ctrl-C: not RETURN).
TEMPS=()
trap '((${#TEMPS[@]} == 0)) || rm -rf "${TEMPS[@]}"' EXIT

die() {
  echo "course: $*" >&2
  exit 2
}

# The task table without comments: "id points filter title..." per line.
task_lines() { grep -v '^#' "$TASKS" | awk 'NF'; }

# ---- student -------------------------------------------------------------------------------------

# Writes $2 with $1's regions of the labs in $LABS stubbed; appends the removed lines to $REMOVED.
stub_file() {
  awk -v labs=",${LABS}," -v removed="$REMOVED" -v file="$1" '
    function esc(s) { gsub(/\\/, "&&", s); gsub(/"/, "\\\"", s); return s }
    function trimmed(s) { sub(/^[ \t]+/, "", s); sub(/[ \t\r]+$/, "", s); return s }
    !inside && /^[ \t]*\/\/ TASK [0-9]+\.[0-9]+: / {
      line = $0; sub(/^[ \t]*/, "", line); indent = substr($0, 1, length($0) - length(line))
      rest = substr(line, length("// TASK ") + 1); id = substr(rest, 1, index(rest, ":") - 1)
      hint = substr(rest, index(rest, ":") + 2); lab = substr(id, 1, index(id, ".") - 1)
      if (labs == ",," || index(labs, "," lab ",")) {
        print; print indent "not_implemented(\"lab " lab ", task " id "\", \"" esc(hint) "\");"
        inside = 1; start = NR; next
      }
    }
    inside && trimmed($0) == "// END TASK " id { print; inside = 0; next }
    inside { print >> removed; next }
    { print }
    END { if (inside) { print "course: " file ":" start ": TASK " id " has no END TASK " id > "/dev/stderr"; exit 1 } }
  ' "$1" > "$2"
}

student() {
  local out=${1:-} labs=${2:-}
  [[ -n $out ]] || die "student needs OUT, the directory to write (make student OUT=../course)"
  [[ -z $labs || $labs == none || $labs =~ ^[0-9]+(,[0-9]+)*$ ]] ||
    die "LABS must be lab numbers like 3 or 3,4, or none, got '$labs'"
  # OUT is compared with this checkout on the physical paths (symlinks and .. resolved, also
  # those of a folder not made yet), before anything is made. Inside the checkout, at any depth,
  # it is refused: this tree's own checks read its folders (tools/check_layers.sh scans lm/, tools/,
  # tests/ ... recursively) and would fail on the copy. build/ alone may hold one: outputs no check
  # reads, which `make clean` removes (`check` regenerates build/course-check).
  local root real changed=""
  root=$(cd "$ROOT" && pwd -P)
  real=$(realpath -m -- "$out") || die "OUT $out: cannot resolve the path"
  [[ $real != "$root" && $root != "$real"/* ]] || die "OUT $out holds this repository; choose a directory outside it"
  [[ $real != "$root"/* || $real == "$root"/build/?* ]] ||
    die "OUT $out is inside this repository ($real), whose own checks would read the copy; choose a directory outside it (make student OUT=../course), or one under build/"
  out=$(mkdir -p "$real" && cd "$real" && pwd -P)
  [[ -z $(ls -A "$out") || -f $out/$STAMP ]] ||
    die "OUT $out is not empty and was not made by make student; choose an empty or new directory"
  # A file changed since it was written (SHA-256 in the stamp) is a student's; the kit's build/ trees heal.
  [[ $out == "$root"/build/* ]] || changed=$(cd "$out" && grep -a '^[0-9a-f]\{64\}  ' "$STAMP" 2> /dev/null | sha256sum -c --quiet --ignore-missing 2> /dev/null | sed 's/: FAILED.*//' || true)
  [[ -z $changed ]] || die "OUT $out has files changed since make student wrote them: $(echo $changed); a student's work is never written over: move them away, or choose a new directory"
  LABS=$labs
  REMOVED=$(mktemp)
  TEMPS+=("$REMOVED" "$REMOVED".file "$REMOVED".scaffolding)
  local files
  if git -C "$ROOT" rev-parse --git-dir > /dev/null 2>&1; then
    files=$(git -C "$ROOT" ls-files)
  else  # a student tree made into a student tree again: every file but the build outputs
    files=$(cd "$ROOT" && find . -path ./build -prune -o -type f -print | sed 's|^\./||')
  fi
  local n=0 stubbed=0 written=()
  while IFS= read -r f; do
    case $f in tools/mutations.txt | tools/mutate.sh | tools/course_fairness.sh | .ci/* | "$STAMP") continue ;; esac
    [[ -f $ROOT/$f ]] || continue
    mkdir -p "$out/$(dirname "$f")"
    local src=$ROOT/$f
    if [[ $f == *.cpp || $f == *.h ]] && grep -q '^[[:space:]]*// TASK [0-9]' "$src"; then
      local before
      before=$(wc -l < "$REMOVED")
      stub_file "$src" "$REMOVED.file"
      (($(wc -l < "$REMOVED") > before)) && stubbed=$((stubbed + 1))
      src=$REMOVED.file
    elif [[ $f == Makefile ]]; then
      # A stub leaves its function's parameters and locals unused: no warnings for that.
      grep -q '^WARN     := -Wall -Wextra$' "$src" || die "Makefile: the WARN line changed; update tools/course.sh"
      sed 's/^WARN     := -Wall -Wextra$/WARN     := -Wall -Wextra -Wno-unused-parameter -Wno-unused-variable -Wno-unused-but-set-variable  # student tree: stubs leave names unused/' "$src" > "$REMOVED.file"
      src=$REMOVED.file
    fi
    # Unchanged files keep their time stamps, so rebuilding a regenerated tree is incremental.
    cmp -s "$src" "$out/$f" || cp "$src" "$out/$f"
    [[ -x $ROOT/$f ]] && chmod +x "$out/$f"
    n=$((n + 1)) written+=("$f")
  done <<< "$files"
  echo "stubbed labs ${labs:-all} in $stubbed files; $n files" > "$out/$STAMP"
  (cd "$out" && sha256sum -- "${written[@]}") >> "$out/$STAMP"
  # Nothing of a solution may survive: every removed line of 16 characters or more (code or
  # comment) must be absent from every file of the tree (tests and docs included), unless the
  # library's own code outside the regions has the same line: loop headers and declarations that
  # many functions share are scaffolding, not the solution.
  local scaffolding=$REMOVED.scaffolding leaks=0 line
  (cd "$out" && find math cuda mpi tensor autograd nn io lm analysis reproduce cli -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0 2> /dev/null |
    xargs -0 sed -E 's/^[[:space:]]+//; s/[[:space:]]+$//' | sort -u) > "$scaffolding"
  while IFS= read -r line; do
    line=$(sed -E 's/^[[:space:]]+//; s/[[:space:]]+$//' <<< "$line")
    ((${#line} >= 16)) || continue
    grep -qxF -- "$line" "$scaffolding" && continue
    if grep -rqF --exclude="$STAMP" --exclude-dir=build -- "$line" "$out"; then
      echo "course: solution line still in the student tree: $line" >&2
      grep -rlF --exclude="$STAMP" --exclude-dir=build -- "$line" "$out" | sed 's/^/    in /' >&2
      leaks=$((leaks + 1))
    fi
  done < <(sort -u "$REMOVED")
  ((leaks == 0)) || die "$leaks solution lines leaked into $out (see above); nothing is hidden until they are gone"
  echo "student tree: $out ($n files; labs ${labs:-all} stubbed in $stubbed files; no solution line left)"
}

# ---- grade ---------------------------------------------------------------------------------------

json_string() { printf '"%s"' "$(sed 's/\\/\\\\/g; s/"/\\"/g' <<< "$1" | tr '\000-\037' ' ' | sed 's/ *$//')"; }

grade() {
  local lab="" json=""
  while (($#)); do
    case $1 in
      --json) json=${2:?--json needs a FILE}; shift 2 ;;
      *) [[ $1 =~ ^[0-9]+$ ]] || die "LAB must be a lab number, got '$1'"; lab=$1; shift ;;
    esac
  done
  local bin=$ROOT/build/release/grade_tests
  [[ -x $bin ]] || die "$bin is missing: make grade builds it (or make build/release/grade_tests)"
  if [[ -n $lab ]] && ! task_lines | awk -v l="$lab" 'index($1, l ".") == 1 {f = 1} END {exit !f}'; then
    die "no lab $lab in docs/course/tasks.txt"
  fi
  local log score=0 total=0 failed=0 rows=() id points filter title
  log=$(mktemp)
  TEMPS+=("$log")
  printf '%-4s %-5s %-6s %-7s %s\n' lab task points result "what, and the first failure"
  while read -r id points filter title; do
    [[ -z $lab || ${id%%.*} == "$lab" ]] || continue
    total=$((total + points))
    local rc=0
    (cd "$ROOT" && timeout 900 "$bin" --gtest_filter="$filter" --gtest_color=no) < /dev/null > "$log" 2>&1 || rc=$?
    local ran passed why=""
    ran=$(sed -nE 's/^\[==========\] ([0-9]+) tests? from .* ran\..*/\1/p' "$log")
    passed=false
    if [[ $rc == 0 && -n $ran && $ran -gt 0 ]]; then
      passed=true
      score=$((score + points))
    else
      failed=$((failed + 1))
      why=$(grep -m1 -oE 'not implemented yet: [^"]*' "$log" || true)
      [[ -n $why ]] || why=$(grep -m1 -A1 ': Failure$' "$log" | tail -1 || true)
      [[ -n $ran ]] || why="crashed (exit status $rc): $(tail -1 "$log")"
      [[ $ran == 0 ]] && why="no test matches $filter"
    fi
    printf '%-4s %-5s %-6s %-7s %s\n' "${id%%.*}" "$id" "$points" "$($passed && echo passed || echo FAILED)" "$title"
    $passed || printf '%24s%s\n' "" "${why:0:150}"
    rows+=("{\"lab\": ${id%%.*}, \"task\": \"$id\", \"points\": $points, \"passed\": $passed, \"score\": $($passed && echo "$points" || echo 0), \"what\": $(json_string "$title"), \"message\": $(json_string "$why")}")
  done < <(task_lines)
  rm -f "$log"
  echo "score: $score of $total$([[ -n $lab ]] && echo " (lab $lab)")"
  if [[ -n $json ]]; then
    {
      printf '{"score": %d, "max_score": %d, "tasks": [\n' "$score" "$total"
      local i
      for i in "${!rows[@]}"; do printf '  %s%s\n' "${rows[$i]}" "$([[ $i -lt $((${#rows[@]} - 1)) ]] && echo ,)"; done
      printf ']}\n'
    } > "$json.tmp" && mv "$json.tmp" "$json"
    echo "wrote $json"
  fi
  ((failed == 0))
}

# ---- check ---------------------------------------------------------------------------------------

# For each lab N: a tree with lab N alone stubbed, built and graded: lab N's tasks must fail with
# "not implemented yet", every task of the labs before N must pass. One tree, regenerated per lab,
# so each rebuild compiles only the files whose regions changed.
check() {
  local dir=$ROOT/build/course-check labs lab bad=0
  labs=$(task_lines | awk '{split($1, p, "."); print p[1]}' | sort -un)
  for lab in $labs; do
    echo "== lab $lab stubbed"
    student "$dir" "$lab" > /dev/null
    make -C "$dir" --no-print-directory -j"$(nproc)" build/release/grade_tests > "$dir.build.log" 2>&1 ||
      { tail -20 "$dir.build.log"; die "the student tree with lab $lab stubbed does not build"; }
    local out
    out=$(cd "$dir" && bash tools/course.sh grade || true)
    local line
    while IFS= read -r line; do
      local l task result
      read -r l task _ result _ <<< "$line"
      [[ $task =~ ^[0-9]+\.[0-9]+$ ]] || continue
      if ((l == lab)) && [[ $result != FAILED ]]; then
        echo "  task $task passed with its lab stubbed: its tests do not check it"
        bad=$((bad + 1))
      elif ((l < lab)) && [[ $result != passed ]]; then
        echo "  task $task (lab $l) failed with lab $lab stubbed: its tests use a later lab's code"
        bad=$((bad + 1))
      fi
    done <<< "$out"
    grep -A1 FAILED <<< "$out" | grep -v -- -- | sed 's/^/  /' | head -40 || true
  done
  ((bad == 0)) || die "$bad tasks break the lab order (above)"
  echo "course check: every lab's tasks fail when it is stubbed, and no lab's tests use a later lab"
}

# ---- fairness ------------------------------------------------------------------------------------

# A wrong answer in one task must fail that task alone among its lab and the earlier labs. The check
# is a script of its own, since it quotes solutions and so stays out of the student tree.
fairness() {
  [[ -f $ROOT/tools/course_fairness.sh ]] ||
    die "tools/course_fairness.sh is missing: the fairness check runs in the instructor's tree"
  bash "$ROOT/tools/course_fairness.sh" "$@"
}

# ---- mutants -------------------------------------------------------------------------------------

# Writes to $1 the mutations of the lists $2... (default tools/mutations.txt) whose edits all fall
# inside one solution region, each with its `tests` set to that task's filter and preceded by a
# comment line `# task <id>` (tools/mutate.sh skips it; tools/course_fairness.sh reads it).
region_mutations() {
  local out=${1:?region-mutations needs the file to write}
  shift
  (($#)) || set -- "$ROOT/tools/mutations.txt"
  python3 - "$ROOT" "$out" "$@" << 'PY'
import re, sys
root, out, lists = sys.argv[1], sys.argv[2], sys.argv[3:]
tasks = {}
for line in open(f"{root}/docs/course/tasks.txt"):
    if line.strip() and not line.startswith("#"):
        f = line.split()
        tasks[f[0]] = f[2]
regions = {}  # file -> [(first, last, id)], line numbers of the region's body
def regions_of(path):
    if path not in regions:
        found, start, rid = [], None, None
        for n, line in enumerate(open(f"{root}/{path}"), 1):
            m = re.match(r"\s*// TASK (\d+\.\d+): ", line)
            if m: start, rid = n + 1, m.group(1)
            elif rid and re.match(r"\s*// END TASK " + re.escape(rid) + r"\s*$", line):
                found.append((start, n - 1, rid)); rid = None
        regions[path] = found
    return regions[path]
blocks, cur = [], None
for line in (l for path in lists for l in open(path)):
    s = line.strip()
    if s.startswith("mutation "):
        cur = {"lines": [], "edits": [], "equiv": False}; blocks.append(cur)
    if cur is None: continue
    if s.startswith("equivalent "): cur["equiv"] = True
    if s.startswith("in "): cur["file"] = s[3:]
    if s == "-" or s.startswith("- "):  # a '-' line; consecutive ones are one multi-line text
        text = line.rstrip("\n").lstrip()[2:]
        if cur["lines"] and cur["lines"][-1].strip().startswith("-") and cur["edits"]:
            cur["edits"][-1] = (cur["file"], cur["edits"][-1][1] + "\n" + text)
        else:
            cur["edits"].append((cur["file"], text))
    cur["lines"].append(line.rstrip("\n"))
n = 0
with open(out, "w") as w:
    for b in blocks:
        if b["equiv"] or not b["edits"]: continue
        ids = set()
        for path, text in b["edits"]:
            src = open(f"{root}/{path}").read()
            if src.count(text) != 1:  # mutate.sh --check names it; here it cannot be placed
                ids.add(None)
                continue
            at = src.find(text)
            line_no = src.count("\n", 0, at) + 1
            inside = [rid for first, last, rid in regions_of(path) if first <= line_no <= last]
            ids.add(inside[0] if inside else None)
        if len(ids) != 1 or None in ids: continue
        rid = ids.pop()
        w.write(f"# task {rid}\n")
        for line in b["lines"]:
            w.write(f"  tests {tasks[rid]}\n" if line.strip().startswith("tests ") else line + "\n")
        w.write("\n")
        n += 1
print(f"{n} mutations fall inside a solution region", file=sys.stderr)
PY
}

# A plausible wrong answer must lose its task's points: every mutation of tools/mutations.txt whose
# edits fall inside a solution region is run (tools/mutate.sh) against that task's tests, which
# must fail. Writes the list to build/course-mutants.txt first.
mutants() {
  local list=$ROOT/build/course-mutants.txt
  mkdir -p "$ROOT/build"
  region_mutations "$list"
  MUTATIONS=$list bash "$ROOT/tools/mutate.sh" "$@"
}

# ---- figures -------------------------------------------------------------------------------------

# Whether some line of $2 is the line $1 with every decimal number within 1% of the page's (whole
# numbers, words and signs exactly): training figures differ in their last digits between CPU
# models (bottleneck-demo's KL 0.7058 on AMD is 0.7021 on an Intel Xeon, with the same code; the
# -march=native builds differ), not between runs on one machine.
printed_within_1pct() {
  python3 - "$1" "$2" <<'PY'
import re, sys
number = re.compile(r"-?\d+\.\d+")
want = sys.argv[1]
def parts(line):
    return number.split(line), [float(x) for x in number.findall(line)]
text, values = parts(want)
if not values: sys.exit(1)
for line in sys.argv[2].splitlines():
    t, v = parts(line)
    if t == text and len(v) == len(values) and all(abs(a - b) <= 0.01 * abs(b) for a, b in zip(v, values)):
        sys.exit(0)
sys.exit(1)
PY
}

# Every `$ ` command of the lab pages' ```console blocks runs, in page order, in a scratch directory
# (with build/ linked in), and every line printed under it in the page must appear in its output
# (spaces collapsed): the deliverables a teaching assistant compares with stay true. Needs this
# tree built (make) and PTB ($MOSGRAD_DATA, else ../shared/data/ptb).
figures() {
  local work page cmd expect out n=0 bad=0
  [[ -x $ROOT/build/release/mosgrad ]] || die "build/release/mosgrad is missing: run make first"
  work=$(mktemp -d)
  TEMPS+=("$work")
  ln -s "$ROOT/build" "$work/build"
  export MOSGRAD_DATA=${MOSGRAD_DATA:-$ROOT/../shared/data/ptb}
  for page in "$ROOT"/docs/course/lab*.md; do
    # "k<TAB>cmd<TAB>expected line" rows (k numbers the page's commands); a command with nothing
    # printed under it gets one row with no expected line.
    local last=""
    while IFS=$'\t' read -r k cmd expect; do
      if [[ $page:$k != "$last" ]]; then
        last=$page:$k
        echo "\$ $cmd"
        n=$((n + 1))
        if [[ $cmd == "export "* ]]; then
          eval "$cmd"
          out=""
        else
          out=$(cd "$work" && bash -c "$cmd" < /dev/null 2>&1 | tr -s ' ') || { echo "course: failed: $cmd" >&2; bad=$((bad + 1)); }
        fi
      fi
      [[ -z $expect ]] && continue
      expect=$(tr -s ' ' <<< "$expect")
      if ! grep -qF -- "$expect" <<< "$out" && ! printed_within_1pct "$expect" "$out"; then
        echo "course: $(basename "$page"): '$cmd' did not print: $expect" >&2
        bad=$((bad + 1))
      fi
    done < <(awk '
      /^```console/ { on = 1; next }
      /^```/ { if (cmd != "" && !printed) print k "\t" cmd "\t"; on = 0; cmd = ""; next }
      on && /^\$ / { if (cmd != "" && !printed) print k "\t" cmd "\t"; k++; cmd = substr($0, 3); printed = 0; next }
      on && cmd != "" { print k "\t" cmd "\t" $0; printed = 1 }
      END { if (cmd != "" && !printed) print k "\t" cmd "\t" }
    ' "$page")
  done
  ((bad == 0)) || die "$bad of the lab pages' commands or figures are not what the pages say"
  echo "course figures: $n commands of docs/course/lab*.md ran and printed what the pages show"
}

case ${1:-} in
  student) shift; student "$@" ;;
  grade) shift; grade "$@" ;;
  check) check; fairness; mutants; figures ;;
  fairness) shift; fairness "$@" ;;
  region-mutations) shift; region_mutations "$@" ;;
  mutants) shift; mutants "$@" ;;
  figures) figures ;;
  *) die "usage: tools/course.sh student OUT [LABS] | grade [LAB] [--json FILE] | check | fairness [MUTATION...] | mutants | figures" ;;
esac
