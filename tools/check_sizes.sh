#!/usr/bin/env bash
# Files stay short enough to read in one sitting: a source, test or script at most 400 lines (split
# a longer one by concept: one concept per file), a hand-written docs page at most 350 (the manual
# is many short pages), the README at most 160 (a newcomer's first page). Files a program writes
# are not checked (tools/written_files.sh lists what is). `make test` runs this after the layer
# check; it names every file over its limit and exits 1.
#
#   bash tools/check_sizes.sh [FILE...]    (default: tools/written_files.sh's list)
set -euo pipefail
cd "$(dirname "$0")/.."
CODE_MAX=400 DOCS_MAX=350 README_MAX=160
if [ $# -eq 0 ]; then
  if ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "check_sizes: not a git checkout (a student tree?): nothing to check"
    exit 0
  fi
  mapfile -t files < <(bash tools/written_files.sh)
else
  files=("$@")
fi
existing=()
for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
# One wc for every file (a process per file was most of this check's time); with more than one
# file its last line is the total.
counts=()
[ ${#existing[@]} -eq 0 ] || mapfile -t counts < <(wc -l -- "${existing[@]}")
over=0
for i in "${!existing[@]}"; do
  f=${existing[i]}
  case $f in
    README.md) max=$README_MAX ;;
    *.md) max=$DOCS_MAX ;;
    *) max=$CODE_MAX ;;
  esac
  read -r n _ <<<"${counts[i]}"
  if [ "$n" -gt "$max" ]; then
    echo "$f: $n lines, more than $max"
    over=1
  fi
done
if [ $over = 1 ]; then
  echo "check_sizes: the files above are too long to read in one sitting; split them by concept" >&2
  exit 1
fi
echo "check_sizes: ${#files[@]} files within their limits"
