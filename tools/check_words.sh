#!/usr/bin/env bash
# The software speaks of the software: code, tests, scripts, the Makefile, the README and the docs
# describe what the program does and why, never who built it, in which session, for which issue or
# on whose machine; history lives in git, measured figures in the files programs write and stamp
# with their machine, date and commit, which this does not check (tools/written_files.sh lists
# what it does). `make test` runs this after the
# layer check; it prints every line that tells history, with its file and line, and exits 1.
#
#   bash tools/check_words.sh [FILE...]    (default: tools/written_files.sh's list)
#
# What counts: "session N", this/last/next/our session(s), our machine(s)/team, a teammate, "the
# issue" or "issue #N", and a calendar date (a commit-visible diary entry). A gdb session is a
# session of gdb, not of us: "session" alone is fine. An ISO time with its "T" (an example of a
# format) is fine.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  if ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "check_words: not a git checkout (a student tree?): nothing to check"
    exit 0
  fi
  mapfile -t files < <(bash tools/written_files.sh ':!:tools/check_words.sh')
else
  files=("$@")
fi
pattern='\bsessions? [0-9]+\b|\b(this|last|next|our|previous|earlier) sessions?\b|\bour (machines?|team|sessions?)\b|\bteammates?\b|\bthe issue\b|\bissue #?[0-9]+\b|\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b(?!T)'
if hits=$(grep -n -i -P -- "$pattern" "${files[@]}" 2>/dev/null); then
  echo "$hits"
  echo "check_words: the lines above tell the project's history; say what the code does and why" >&2
  exit 1
fi
echo "check_words: ${#files[@]} files speak of the software"
