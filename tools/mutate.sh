#!/usr/bin/env bash
# Mutation testing: how many plausible bugs does the suite catch?
#
#   tools/mutate.sh [--check] [--full] [ID...]        (`make mutate` runs them all)
#
# tools/mutations.txt lists small, plausible bugs (a sign, a factor, a transpose, an index, an
# off-by-one in time, a dropped term, a wrong mask axis, a missing scale), each as exact text edits
# of library sources. For each one this script applies the edits to a private copy of the sources
# (build/mutate/src), rebuilds only the mutated object there (build/mutate/obj; for a mutated header,
# math/formulas.h, the objects that include it), runs the tests the
# mutation names, and restores the copy; then it prints one row: the mutation, its file:line, and
# the test that killed it, or SURVIVED. The working tree and build/release are never touched, so a
# Ctrl-C or a crash cannot leave a mutated source behind, and `make test` is not disturbed.
#
#   --check  only check the list: every edit's text must occur exactly once in its file (so the
#            list cannot silently go stale when the code changes); builds and runs nothing
#   --full   run the whole fast suite for every mutant instead of the tests each one names
#   ID...    run only these mutations (e.g. tools/mutate.sh wdrop.unused lstm.cell_carry)
#
# A mutant counts as killed when a test fails, crashes or times out; one that does not compile is a
# broken list entry and fails the run. Mutations marked `equivalent` cannot change any result (the
# docs/testing.md says why); they are expected to survive, and the run fails if one is killed or if any
# other mutant survives. MOSGRAD_DATA is passed on to the tests (the PTB tests skip without it);
# unset, it is set to the checkout's data/ptb, else ../shared/data/ptb (whichever holds
# ptb.train.txt), since the private copy sits elsewhere and would find neither. A named test that
# skips in the unmutated run is reported before any mutant runs: a mutant only it could catch
# would otherwise count as SURVIVED.
set -uo pipefail
shopt -u patsub_replacement 2>/dev/null || true  # '&' in a replacement is literal text

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIST=${MUTATIONS:-$ROOT/tools/mutations.txt}
WORK=$ROOT/build/mutate
SRC=$WORK/src
OBJ=$WORK/obj
JOBS=${JOBS:-2}
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
# Everything but the slow PTB training run and the tests that only read data files.
FAST_SUITE='-Trainer.TinyPresetLearnsPennTreebank:Corpus.PennTreebankFigures:Corpus.WikiText2Figures:Batching.PennTreebankEvalTargets:Cuda*'

if [[ -z ${MOSGRAD_DATA:-} ]]; then
  for d in "$ROOT/data/ptb" "$ROOT/../shared/data/ptb"; do
    if [[ -f $d/ptb.train.txt ]]; then
      export MOSGRAD_DATA
      MOSGRAD_DATA=$(cd "$d" && pwd)
      break
    fi
  done
fi

check_only=0 full=0
selected=()
for arg in "$@"; do
  case $arg in
    --check) check_only=1 ;;
    --full) full=1 ;;
    -h|--help) sed -n '2,/^set -uo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "mutate: unknown option $arg (see --help)" >&2; exit 2 ;;
    *) selected+=("$arg") ;;
  esac
done

die() { echo "mutate: $*" >&2; exit 2; }

# ---- the list ------------------------------------------------------------------------------------
# Mutation m has id[m], why[m], tests[m], equiv[m]; edit k belongs to mutation e_of[k] and replaces
# e_old[k] with e_new[k] in file e_file[k]. See the head of tools/mutations.txt for the format.
id=() why=() tests=() equiv=()
e_of=() e_file=() e_old=() e_new=()
m=-1 file="" side="" lineno=0
while IFS= read -r raw || [[ -n $raw ]]; do
  lineno=$((lineno + 1))
  line=${raw#"${raw%%[![:space:]]*}"}  # without its indentation
  case $line in
    '' | '#'*) side="" ;;
    'mutation '*)
      m=$((m + 1)) file="" side=""
      id[m]=${line#mutation }
      why[m]="" tests[m]="" equiv[m]="" ;;
    'why '*) why[m]=${line#why } ;;
    'tests '*) tests[m]=${line#tests } ;;
    'equivalent '*) equiv[m]=${line#equivalent } ;;
    'in '*) file=${line#in } side="" ;;
    '-' | '- '*)
      ((m >= 0)) && [[ -n $file ]] || die "$LIST:$lineno: a '-' line needs a mutation and an 'in FILE' above it"
      text=${line#-}
      text=${text# }
      if [[ $side == - ]]; then
        e_old[-1]+=$'\n'$text
      else
        e_of+=("$m") e_file+=("$file") e_old+=("$text") e_new+=("")
      fi
      side=- ;;
    '+' | '+ '*)
      [[ $side == - || $side == + ]] || die "$LIST:$lineno: a '+' line must follow the '-' lines it replaces"
      text=${line#+}
      text=${text# }
      if [[ $side == + ]]; then e_new[-1]+=$'\n'$text; else e_new[-1]=$text; fi
      side=+ ;;
    *) die "$LIST:$lineno: cannot read '$line'" ;;
  esac
done <"$LIST"
((m >= 0)) || die "$LIST has no mutations"

# Which mutations to run.
run=()
if ((${#selected[@]})); then
  for want in "${selected[@]}"; do
    found=""
    for i in "${!id[@]}"; do [[ ${id[i]} == "$want" ]] && found=$i; done
    [[ -n $found ]] || die "no mutation '$want' in $LIST"
    run+=("$found")
  done
else
  run=("${!id[@]}")
fi

# ---- checking and applying edits -----------------------------------------------------------------
# A file's text, trailing newlines included.
read_text() { local t; t=$(cat "$1"; printf x) || return 1; printf '%s' "${t%x}"; }

# Every edit must match its file exactly once, in the text its mutation's earlier edits of the same
# file left; where[i] is the file:line of mutation i's first edit. Checked in one Python pass over
# the edits as parsed above (NUL-separated), since bash's substitutions over whole files took
# minutes for two hundred mutations.
where=()  # file:line of each mutation's first edit, in the unmutated sources
problems=0
checked=$(for k in "${!e_of[@]}"; do
  printf '%s\0%s\0%s\0%s\0' "${e_of[k]}" "${e_file[k]}" "${e_old[k]}" "${e_new[k]}"
done | python3 -c '
import os, sys
root, ids, whys = sys.argv[1], sys.argv[2].split("\n"), sys.argv[3].split("\n")
fields = sys.stdin.buffer.read().decode().split("\0")[:-1]
edits = {}
for n in range(0, len(fields), 4):
    edits.setdefault(int(fields[n]), []).append(fields[n + 1:n + 4])
for i, name in enumerate(ids):
    where, text = "", {}
    if i >= len(whys) or not whys[i]:
        print(f"problem mutation {name}: no \x27why\x27 line")
    if i not in edits:
        print(f"problem mutation {name}: no edits")
    for f, old, new in edits.get(i, []):
        path = os.path.join(root, f)
        if not (f.endswith(".cpp") or f.endswith(".h")) or f.startswith(("tests/", "bench/")) or not os.path.isfile(path):
            print(f"problem mutation {name}: {f} is not a library .cpp or .h file of this tree")
            continue
        if f not in text:
            text[f] = open(path, encoding="utf-8", newline="").read()
        n = text[f].count(old)
        if n != 1:
            print(f"problem mutation {name}: \x27{old}\x27 occurs {n} times in {f} (must be exactly once: update tools/mutations.txt)")
            continue
        if old == new:
            print(f"problem mutation {name}: its edit in {f} changes nothing")
        if not where:
            where = f"{f}:{text[f][:text[f].index(old)].count(chr(10)) + 1}"
        text[f] = text[f].replace(old, new, 1)  # later edits of the same file see this one
    print(f"where {i} {where}")
' "$ROOT" "$(printf '%s\n' "${id[@]}")" "$(printf '%s\n' "${why[@]}")") || die "could not check $LIST"
while IFS= read -r line; do
  case $line in
    'problem '*) echo "${line#problem }"; problems=$((problems + 1)) ;;
    'where '*) line=${line#where }; where[${line%% *}]=${line#* } ;;
  esac
done <<< "$checked"
for i in "${!id[@]}"; do
  for j in "${!id[@]}"; do
    ((j > i)) && [[ ${id[i]} == "${id[j]}" ]] && { echo "mutation ${id[i]} is listed twice"; problems=$((problems + 1)); }
  done
done
((problems == 0)) || die "$problems problem(s) in $LIST"
if ((check_only)); then
  echo "mutate: ${#id[@]} mutations in $LIST; every edit matches exactly once"
  exit 0
fi

# ---- a private copy of the sources, built in its own folder --------------------------------------
mkdir -p "$SRC" "$OBJ" "$WORK/saved"
cd "$ROOT" || exit 2
# Copy what changed since the last run (tracked files and new ones git does not ignore), so make
# rebuilds only that; drop files that no longer exist.
: >"$WORK/files"
while IFS= read -r -d '' f; do
  [[ -f $f ]] || continue
  printf '%s\n' "$f" >>"$WORK/files"
  if ! cmp -s "$f" "$SRC/$f"; then mkdir -p "$SRC/$(dirname "$f")" && cp "$f" "$SRC/$f"; fi
done < <(git ls-files -z --cached --others --exclude-standard)
(cd "$SRC" && find . -type f | sed 's|^\./||' | sort) | comm -23 - <(sort "$WORK/files") |
  while IFS= read -r gone; do rm -f "$SRC/$gone"; done

build() { make -C "$SRC" --no-print-directory -j"$JOBS" MODE=release TREE="$OBJ" "$OBJ/run_tests"; }
echo "mutate: building the unmutated copy in build/mutate/ ..."
build >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; die "the unmutated sources do not build"; }

# Runs the tests of filter $1; sets out (the log) and rc.
run_tests() {
  out=$WORK/test.log
  # The outer redirection keeps bash's own "Aborted" line for a crashing mutant out of the table.
  { (cd "$SRC" && timeout "$TEST_TIMEOUT" "$OBJ/run_tests" --gtest_filter="$1" --gtest_color=no) >"$out" 2>&1; } 2>/dev/null
  rc=$?
}
tests_ran() { sed -nE 's/^\[==========\] ([0-9]+) tests? from .* ran\..*/\1/p' "$out"; }

filter_of() { if ((full)) || [[ -z ${tests[$1]} ]]; then echo "$FAST_SUITE"; else echo "${tests[$1]}"; fi; }

# The unmutated code must pass every filter, and every filter must select tests.
declare -A baseline=()
for i in "${run[@]}"; do
  f=$(filter_of "$i")
  [[ -n ${baseline[$f]+set} ]] && continue
  baseline[$f]=1
  run_tests "$f"
  n=$(tests_ran)
  if ((rc != 0)); then
    cat "$out"
    die "the unmutated suite fails with --gtest_filter='$f'"
  fi
  [[ -n $n && $n -gt 0 ]] || die "--gtest_filter='$f' (mutation ${id[i]}) selects no test"
  skipped=$(sed -nE 's/^\[  SKIPPED \] ([A-Za-z0-9_/.]+) \(.*/\1/p' "$out")
  if [[ -n $skipped ]]; then
    echo "mutate: warning: with --gtest_filter='$f' these tests skip (PTB not found? set MOSGRAD_DATA):" >&2
    echo "$skipped" | sed 's/^/  /' >&2
    [[ $(echo "$skipped" | wc -l) -lt $n ]] ||
      die "every test of --gtest_filter='$f' (mutation ${id[i]}) skips: its mutants would all survive"
  fi
done

# ---- one mutant at a time --------------------------------------------------------------------------
# Before a mutant: save each file it edits, that file's object and the test program,
# with their times. After it (and on Ctrl-C): put them back, so make sees an up-to-date build of the
# unmutated copy and the next mutant recompiles only its own file.
saved=() headers=()
save() {
  saved=()
  local f
  headers=()
  for f in "$@"; do
    saved+=("$SRC/$f")
    # A header (math/formulas.h: the formulas both devices share) has no object of its own: make
    # rebuilds what includes it, and restore() touches it afterwards so those objects are rebuilt
    # from the restored header before the next mutant.
    if [[ $f == *.cpp ]]; then saved+=("$OBJ/${f%.cpp}.o"); else headers+=("$SRC/$f"); fi
  done
  saved+=("$OBJ/run_tests")  # linked from the objects themselves (Makefile), no library archive
  local s
  for s in "${saved[@]}"; do
    mkdir -p "$WORK/saved/$(dirname "${s#"$WORK"/}")"
    cp -p "$s" "$WORK/saved/${s#"$WORK"/}"
  done
}
restore() {
  local s
  for s in "${saved[@]}"; do
    cp -p "$WORK/saved/${s#"$WORK"/}" "$s"
  done
  for s in "${headers[@]}"; do touch "$s"; done
  saved=() headers=()
}
trap 'restore; echo; echo "mutate: interrupted; build/mutate restored"; exit 130' INT TERM
trap 'restore' EXIT

apply() {  # the edits of mutation $1, to the copy
  local k f t
  for k in "${!e_of[@]}"; do
    ((e_of[k] == $1)) || continue
    f=$SRC/${e_file[k]}
    t=$(read_text "$f")
    printf '%s' "${t/"${e_old[k]}"/"${e_new[k]}"}" >"$f"
  done
}

files_of() {  # the distinct files mutation $1 edits
  local k
  for k in "${!e_of[@]}"; do ((e_of[k] == $1)) && echo "${e_file[k]}"; done | sort -u
}

# The verdict from the test log: the failed tests, or where it crashed.
verdict() {
  local failed n first
  failed=$(sed -nE 's/^\[  FAILED  \] ([A-Za-z0-9_]+\.[A-Za-z0-9_/]+).*/\1/p' "$out" | awk '!seen[$0]++')
  if [[ -n $failed ]]; then
    n=$(wc -l <<<"$failed")
    first=$(head -1 <<<"$failed")
    ((n > 1)) && echo "$first (+$((n - 1)) more)" || echo "$first"
    return
  fi
  # No FAILED line: it crashed or hung inside the test that started last.
  first=$(sed -nE 's/^\[ RUN      \] (.*)/\1/p' "$out" | tail -1)
  if ((rc == 124)); then echo "${first:-?} (timed out after ${TEST_TIMEOUT}s)"
  elif ((rc > 128)); then echo "${first:-?} (crashed: signal $((rc - 128)))"
  else echo "${first:-?} (exit $rc)"
  fi
}

report=$WORK/report.txt
killed=0 survived=0 equivalent=0 broken=0
unexpected=()
started=$(date +%s)
{
  printf 'mutate: %d mutations, tests %s\n\n' "${#run[@]}" "$( ((full)) && echo "of the whole fast suite" || echo "named per mutation")"
  printf '%-4s %-28s %-34s %s\n' '#' mutation file:line 'killed by'
} | tee "$report"
for n in "${!run[@]}"; do
  i=${run[n]}
  mapfile -t files < <(files_of "$i")
  save "${files[@]}"
  apply "$i"
  if ! build >"$WORK/build.log" 2>&1; then
    result="DOES NOT COMPILE (see build/mutate/build.log)"
    broken=$((broken + 1)) unexpected+=("${id[i]}: does not compile")
    cp "$WORK/build.log" "$WORK/build-${id[i]}.log"
  else
    run_tests "$(filter_of "$i")"
    if ((rc == 0)); then
      if [[ -n ${equiv[i]} ]]; then
        result="survived (equivalent)" equivalent=$((equivalent + 1))
      else
        result="SURVIVED" survived=$((survived + 1)) unexpected+=("${id[i]} (${where[i]}): ${why[i]}")
      fi
    else
      result=$(verdict) killed=$((killed + 1))
      [[ -n ${equiv[i]} ]] && unexpected+=("${id[i]} is marked equivalent but was killed by $result")
    fi
  fi
  restore
  printf '%-4s %-28s %-34s %s\n' "$((n + 1))" "${id[i]}" "${where[i]}" "$result" | tee -a "$report"
done
elapsed=$(($(date +%s) - started))

total=$((killed + survived + equivalent))
{
  echo
  if ((total > 0)); then
    printf 'killed %d of %d mutants (%d.%d%%)' "$killed" "$total" $((killed * 100 / total)) $((killed * 1000 / total % 10))
    ((equivalent)) && printf '; %d equivalent survived (%d of %d non-equivalent killed)' "$equivalent" "$killed" $((killed + survived))
    printf '; %dm%02ds\n' $((elapsed / 60)) $((elapsed % 60))
  fi
  for i in "${run[@]}"; do
    [[ -n ${equiv[i]} ]] && echo "  equivalent: ${id[i]} (${where[i]}): ${equiv[i]}"
  done
  for u in "${unexpected[@]}"; do echo "  $u"; done
} | tee -a "$report"
echo "(table saved in build/mutate/report.txt)"
# A run of the whole list is a measurement: one stamped row in docs/testing/mutations.md.
if ((${#selected[@]} == 0)) && [[ $LIST == "$ROOT/tools/mutations.txt" ]]; then
  bash "$ROOT/tools/record_mutations.sh" "$ROOT" || echo "mutate: the run's row was not recorded" >&2
fi
((${#unexpected[@]} == 0))
