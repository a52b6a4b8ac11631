#!/usr/bin/env bash
# The tracked files people write, one per line: sources, tests, scripts, the Makefile, the README
# and the docs pages; not the fuzzers' inputs nor the files a program writes (docs/cli.md from
# `mosgrad help --markdown`, docs/reproduction/day.md, the reports under docs/speedrun/ and
# docs/testing/, bench/RESULTS*.md). What tools/check_words.sh and tools/check_sizes.sh check.
#
#   bash tools/written_files.sh [PATHSPEC...]    (more git pathspecs, e.g. ':!:tools/x.sh')
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh' '*.sh' '*.py' 'Makefile' '*.md' \
  ':!:tests/fuzz/corpus/*' ':!:tests/fuzz/crashes/*' ':!:docs/cli.md' ':!:docs/reproduction/day.md' \
  ':!:docs/speedrun/*' ':!:docs/testing/*' ':!:bench/RESULTS*.md' "$@"
