#!/usr/bin/env bash
# The course's fairness check (`tools/course.sh fairness`; `tools/course.sh check`, i.e. `make
# course-check`, runs it): a task's points depend on its own region and on the labs before it,
# never on another task of its lab or of an earlier lab, so one wrong or missing answer costs one
# task.
#
# For each task of docs/course/tasks.txt, in a copy of this tree with no lab stubbed
# (`tools/course.sh student DIR none`), two bugs are planted inside that task's region alone, one
# at a time: a plausible wrong answer, then the student tree's stub (the task not written yet: a
# partial submission must not cost another task's points either). After each, the copy is rebuilt
# and graded (`tools/course.sh grade`), and
#   - the task must fail: its tests catch the bug;
#   - every other task of its lab and of the earlier labs must pass: their tests do not run it;
#   - tasks of later labs may fail, since their code is built on it (the LSTM of lab 4 runs on the
#     op backwards of lab 3); those the wrong answer fails are listed, for information.
# It prints one line per task and exits with status 1 when a task is graded unfairly (naming it and
# every task that wrongly failed) or its bug is not caught, 2 when it cannot run.
#
# The wrong answer is the first mutation of tools/mutations.txt that falls inside the task's region
# (the ones `tools/course.sh mutants` runs). A task with none gets its fallback from the list
# below (its id starts with "fallback."). Like the mutation list, this file quotes solutions:
# `make student` leaves it out.
#
#   tools/course.sh fairness [MUTATION...]   plant only these mutations (each in its task's
#                                            region, no stubs), e.g. to try a new entry of the
#                                            list; MUTATIONS=FILE reads another list, as
#                                            tools/mutate.sh does
#
# Speed: one copy, build/course-check (the tree `check` regenerates lab by lab, so after `check`
# only a few files recompile). A bug costs one compile of its file, one link and one grading:
# restoring the file puts back the object built from it too, so nothing recompiles then.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIST=${MUTATIONS:-$ROOT/tools/mutations.txt}
DIR=$ROOT/build/course-check
OBJ=build/release                 # where the copy's objects are: build/release/<source path>.o
GRADER=build/release/grade_tests  # the program `tools/course.sh grade` runs

die() {
  echo "course fairness: $*" >&2
  exit 2
}

# Wrong answers for the tasks that no mutation of tools/mutations.txt covers, in its format.
FALLBACKS=$(
  cat << 'EOF'
mutation fallback.broadcast.align_left
  why broadcasting aligns the shapes from the left: [2,3] with [3] is refused
  in tensor/shape.cpp
  - const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
  + const int64_t da = i < a.size() ? a[i] : 1;
  - const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
  + const int64_t db = i < b.size() ? b[i] : 1;

mutation fallback.topo.root_first
  why the order returned root first: the engine, walking it backwards, meets every node before its users
  in autograd/engine.cpp
  - return order;
  + return {order.rbegin(), order.rend()};

mutation fallback.mos.component_axis
  why each component's log_softmax over the rows instead of over the vocabulary
  in nn/heads.cpp
  - HeadKind::MoS ? log_softmax(z, 1)
  + HeadKind::MoS ? log_softmax(z, 0)
EOF
)

WORK=$(mktemp -d)
SAVE=$WORK/saved  # the sources (and objects) of the planted files, as they were
mkdir -p "$SAVE"
: > "$WORK/planted"

# Puts back every planted file. The object goes first: stopped between the two copies, the copy's
# source would still differ from this tree's, and the next `student` regeneration would rewrite it
# (a new time stamp, so make rebuilds the object). A header has no object of its own: it is copied
# back with a new time stamp, and the files that include it recompile.
restore() {
  local f
  while IFS= read -r f; do
    if [[ -f $SAVE/$f.o ]]; then
      cp "$SAVE/$f.o" "$DIR/$OBJ/${f%.*}.o"  # newer than the library: re-archived, not rebuilt
      cp -p "$SAVE/$f" "$DIR/$f"              # its old time stamp: older than that object
    else
      cp "$SAVE/$f" "$DIR/$f"
    fi
  done < "$WORK/planted"
  : > "$WORK/planted"
  rm -rf "$SAVE" && mkdir -p "$SAVE"
}
trap 'restore 2> /dev/null || true; rm -rf "$WORK"' EXIT

# Plants bug $1 in the copy: a mutation of $WORK/list.txt, applied as tools/mutate.sh applies it
# (each edit's text must occur exactly once in its file), or stub:<task>, the task's region body
# replaced by the line `make student` writes there. Saves each file, and its object, to $SAVE and
# appends its path to $WORK/planted.
plant() {
  python3 - "$WORK/list.txt" "$1" "$DIR" "$SAVE" "$OBJ" >> "$WORK/planted" << 'PY'
import os, re, shutil, subprocess, sys
lst, want, tree, save, obj = sys.argv[1:6]
texts = {}
if want.startswith("stub:"):
    task, lab = want[5:], want[5:].split(".")[0]
    found = subprocess.run(["grep", "-rlE", "--include=*.cpp", "--include=*.h", "--exclude-dir=build",
                            rf"^\s*// TASK {re.escape(task)}: ", tree], capture_output=True, text=True).stdout.split()
    if len(found) != 1: sys.exit(f"course fairness: no single file holds the region of task {task}")
    f = os.path.relpath(found[0], tree)
    out, inside = [], False
    for line in open(found[0]):
        m = re.match(rf"(\s*)// TASK {re.escape(task)}: (.*)$", line)
        if m:  # as tools/course.sh stub_file writes it
            hint = m.group(2).replace("\\", "\\\\").replace('"', '\\"')
            out += [line, f'{m.group(1)}not_implemented("lab {lab}, task {task}", "{hint}");\n']
            inside = True
        elif inside and line.strip() == f"// END TASK {task}":
            out.append(line); inside = False
        elif not inside:
            out.append(line)
    texts[f] = "".join(out)
else:
    edits, cur, path, side = [], None, None, None  # edits: [file, old, new]
    for raw in open(lst):
        s = raw.rstrip("\n").lstrip()
        if s.startswith("mutation "):
            cur, path, side = s[len("mutation "):], None, None
        elif cur != want:
            continue
        elif not s or s.startswith("#"):
            side = None
        elif s.startswith("in "):
            path, side = s[3:], None
        elif s == "-" or s.startswith("- "):
            if side == "-": edits[-1][1] += "\n" + s[2:]
            else: edits.append([path, s[2:], ""])
            side = "-"
        elif s == "+" or s.startswith("+ "):
            edits[-1][2] = edits[-1][2] + "\n" + s[2:] if side == "+" else s[2:]
            side = "+"
    if not edits: sys.exit(f"course fairness: mutation {want} has no edits in {lst}")
    for f, old, new in edits:
        if f not in texts: texts[f] = open(f"{tree}/{f}").read()
        if texts[f].count(old) != 1:
            sys.exit(f"course fairness: {want}: the text to replace occurs {texts[f].count(old)} times in {f}")
        texts[f] = texts[f].replace(old, new)
for f, text in texts.items():
    os.makedirs(os.path.dirname(f"{save}/{f}"), exist_ok=True)
    shutil.copy2(f"{tree}/{f}", f"{save}/{f}")
    o = f"{tree}/{obj}/{os.path.splitext(f)[0]}.o"
    if f.endswith(".cpp") and os.path.exists(o): shutil.copy2(o, f"{save}/{f}.o")
    open(f"{tree}/{f}", "w").write(text)
    print(f)
PY
}

build() {
  make -C "$DIR" --no-print-directory -j"$(nproc)" "$GRADER" > "$WORK/build.log" 2>&1
}

# "lab task result" for every task row of the grader's table in the copy. OpenMP threads that spin
# while they wait would slow the tests many times over on a machine busy with anything else.
graded() {
  (cd "$DIR" && OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} bash tools/course.sh grade || true) |
    sed -nE 's/^([0-9]+) +([0-9]+\.[0-9]+) +[0-9]+ +(passed|FAILED) .*/\1 \2 \3/p'
}

started=$SECONDS
# The mutations inside a region, the list's first, then the fallbacks, each with its task.
echo "$FALLBACKS" > "$WORK/fallbacks.txt"
bash "$ROOT/tools/course.sh" region-mutations "$WORK/list.txt" "$LIST" "$WORK/fallbacks.txt" 2> /dev/null
declare -A task_of=()
order=()
while read -r task mutation; do
  task_of[$mutation]=$task
  order+=("$mutation")
done < <(awk '/^# task / {t = $3} /^mutation / && t {print t, $2; t = ""}' "$WORK/list.txt")
for m in "$@"; do
  [[ -n ${task_of[$m]:-} ]] || die "$m is not a mutation of $LIST inside a region, nor a fallback here"
done
# "task lab mutation" per run, in the task table's order: each task's first mutation ("-" when it
# has none), or the mutations named.
runs=()
while read -r id lab; do
  if (($#)); then
    for m in "$@"; do [[ ${task_of[$m]} != "$id" ]] || runs+=("$id $lab $m"); done
  else
    m=-
    for x in "${order[@]}"; do [[ ${task_of[$x]} != "$id" ]] || { m=$x; break; }; done
    runs+=("$id $lab $m")
  fi
done < <(grep -v '^#' "$ROOT/docs/course/tasks.txt" | awk 'NF {split($1, p, "."); print $1, p[1]}')

echo "== fairness: bugs planted one at a time in each task's region, in $DIR (no lab stubbed)"
bash "$ROOT/tools/course.sh" student "$DIR" none > /dev/null
build || { tail -20 "$WORK/build.log"; die "the copy does not build before any bug is planted"; }
baseline=$(graded)
[[ -n $baseline ]] || die "the grader printed no task in $DIR"
if grep -q FAILED <<< "$baseline"; then
  die "before any bug is planted, tasks already fail in the copy: $(awk '$3 == "FAILED" {printf "%s ", $2}' <<< "$baseline")"
fi

# Plants bug $3 for task $1 of lab $2, builds and grades the copy, puts the file back; sets VERDICT
# ("fair" or what is wrong) and LATER (the later labs' tasks that failed).
judge() {
  local id=$1 lab=$2 own="" l task result wrong=()
  VERDICT=fair LATER=""
  plant "$3" || die "cannot plant $3"
  if ! build; then
    VERDICT="DOES NOT BUILD: $(grep -m1 'error' "$WORK/build.log" || tail -1 "$WORK/build.log")"
    restore
    return
  fi
  while read -r l task result; do
    if [[ $task == "$id" ]]; then
      own=$result
    elif [[ $result != passed ]]; then
      if ((l <= lab)); then wrong+=("$task"); else LATER+=" $task"; fi
    fi
  done < <(graded)
  restore
  if ((${#wrong[@]})); then
    VERDICT="UNFAIR, also failed ${wrong[*]}"
    [[ $own == FAILED ]] || VERDICT+=" while $id itself ${own:-was not graded}"
  elif [[ $own != FAILED ]]; then
    VERDICT="NOT CAUGHT, $id ${own:-was not graded}"
  fi
  LATER=${LATER# }
}

unfair=0
for run in "${runs[@]}"; do
  read -r id lab mutation <<< "$run"
  labs="lab 1"
  ((lab == 1)) || labs="labs 1-$lab"
  if [[ $mutation == - ]]; then
    wrong_answer="NO WRONG ANSWER (no mutation of the list inside its region, no fallback that matches)" later=""
  else
    judge "$id" "$lab" "$mutation"
    wrong_answer=$VERDICT later=$LATER
  fi
  line="wrong answer: $wrong_answer"
  if (($# == 0)); then  # the task unwritten, as in the student tree
    judge "$id" "$lab" "stub:$id"
    line+="; stubbed: $VERDICT"
  fi
  [[ $line == "wrong answer: fair; stubbed: fair" || $line == "wrong answer: fair" ]] &&
    line="fair: $id alone failed in $labs" || unfair=$((unfair + 1))
  [[ -z $later ]] || line+="; later labs failed too: $later"
  printf '%-5s %-30s %s\n' "$id" "$mutation" "$line"
done
if grep -q ' fallback\.' <<< "${runs[*]}"; then
  echo "(fallback.*: no mutation of $(basename "$LIST") falls inside that task's region; the wrong answer is tools/course_fairness.sh's)"
fi

build || true  # the copy's program as its sources are again, for whoever grades it next
elapsed=$((SECONDS - started))
if ((unfair)); then
  echo "course fairness: $unfair of ${#runs[@]} tasks are not graded fairly (above) ($((elapsed / 60)) min $((elapsed % 60)) s)" >&2
  exit 1
fi
echo "course fairness: each bug planted in a task's region failed that task alone among its lab and the earlier labs (${#runs[@]} tasks, $((elapsed / 60)) min $((elapsed % 60)) s)"
