#!/usr/bin/env bash
# Runs every `$ ` command of docs/tutorial.md, in order, so the tutorial cannot rot.
#   bash tools/tutorial_check.sh            (TUTORIAL_FULL=1: train for the ten minutes as written)
# It works in a private clone of the committed tree (under build/tutorial-check/), because
# exercise 3 plants a bug in a source file and rebuilds: an interrupted check must not leave the
# bug in your checkout. Without TUTORIAL_FULL, `--max-minutes 10` becomes `--max-steps 30`.
# A command written `$ ! cmd` must fail. Needs PTB ($MOSGRAD_DATA, else ../shared/data/ptb) and
# gdb for the last exercise. Prints each command; exits non-zero at the first that misbehaves.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
data="${MOSGRAD_DATA:-$root/data/ptb}"
[ -d "$data" ] || data="$root/../shared/data/ptb"
data=$(cd "$data" && pwd)
work="$root/build/tutorial-check"
rm -rf "$work"
mkdir -p "$root/build"
git clone --quiet --shared "$root" "$work"
script="$work/tutorial-commands.sh"
{
  echo "set -eu"
  echo "export MOSGRAD_DATA='$data' MAKEFLAGS=-j$(nproc)"
  # The commands of the ```console blocks, one per line.
  awk '/^```console/{on=1; next} /^```/{on=0} on && /^\$ /{print substr($0, 3)}' docs/tutorial.md |
    while IFS= read -r cmd; do
      [ "${TUTORIAL_FULL:-0}" = 1 ] || cmd="${cmd//--max-minutes 10/--max-steps 30}"
      printf 'echo %q >&2\n' "\$ $cmd"
      if [ "${cmd:0:2}" = "! " ]; then
        printf 'if %s; then echo "tutorial: this command should have failed" >&2; exit 1; fi\n' "${cmd:2}"
      else
        printf '%s\n' "$cmd"
      fi
    done
} >"$script"
cd "$work"
bash "$script" >"$work/tutorial.log" 2>&1 || { tail -40 "$work/tutorial.log"; echo "tutorial_check: FAILED (log: $work/tutorial.log)"; exit 1; }
grep '^\$ ' "$work/tutorial.log"
echo "tutorial_check: every command of docs/tutorial.md ran as the page says (log: $work/tutorial.log)"
