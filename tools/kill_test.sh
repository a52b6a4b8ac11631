#!/usr/bin/env bash
# Kill test: a training run killed at random moments (SIGKILL or SIGTERM) and resumed each time must
# end with the same model, bit for bit, as the same run left alone.
#   bash tools/kill_test.sh [TRIALS]        (default 20; needs Penn Treebank: $MOSGRAD_DATA or data/ptb)
# Each trial starts the run in a fresh directory, kills it after a random 0.2-3 s, then resumes it with
# --resume (killing again at random, at most 5 times) until it finishes; then its best.ckpt and
# checkpoint.ckpt's weights must equal the uninterrupted run's. Prints one line per trial and a
# summary; exits 1 when any trial differs.
set -uo pipefail
cd "$(dirname "$0")/.."
TRIALS=${1:-20}
DATA=${MOSGRAD_DATA:-data/ptb}
[ -f "$DATA/ptb.train.txt" ] || { echo "kill_test: no Penn Treebank at $DATA (set MOSGRAD_DATA)"; exit 2; }
make --no-print-directory -j"$(nproc)" build/release/mosgrad >/dev/null || exit 2
B=build/release/mosgrad
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# tiny with dropout, so the RNG streams must be restored too; two epochs cross an epoch end.
ARGS=(train --preset tiny --data "$DATA" --max-train-tokens 30000 --max-eval-tokens 3000 --epochs 2
      --dropout 0.2 --wdrop 0.2 --test-at-end false --log-interval 10 --threads 1)

"$B" "${ARGS[@]}" --save "$WORK/straight" >/dev/null 2>&1 || { echo "kill_test: the uninterrupted run failed"; exit 2; }
"$B" export --model "$WORK/straight/best.ckpt" --out "$WORK/straight.safetensors" >/dev/null

same=0 differ=0
for ((t = 1; t <= TRIALS; ++t)); do
  dir="$WORK/trial$t" kills="" resume=()
  for ((k = 0; k < 6; ++k)); do
    "$B" "${ARGS[@]}" --save "$dir" "${resume[@]}" >/dev/null 2>&1 &
    pid=$!
    if ((k < 5)); then
      sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.2 + 2.8 * r / 32767 }')"
      sig=$([ $((RANDOM % 2)) = 0 ] && echo KILL || echo TERM)
      if kill -"$sig" $pid 2>/dev/null; then kills+="$sig "; fi
    fi
    wait $pid 2>/dev/null; rc=$?
    [ -f "$dir/checkpoint.ckpt" ] && resume=(--resume)
    # Exit 0: the run went through its epochs (there is no step or time limit); 130 = stopped by
    # SIGTERM with a checkpoint, 137 = SIGKILL.
    [ $rc = 0 ] && break
  done
  "$B" export --model "$dir/best.ckpt" --out "$dir.safetensors" >/dev/null 2>&1
  if cmp -s "$dir.safetensors" "$WORK/straight.safetensors"; then
    same=$((same + 1)); echo "trial $t: killed ${kills:-never}-> same weights"
  else
    differ=$((differ + 1)); echo "trial $t: killed ${kills:-never}-> DIFFERENT weights"
  fi
done
echo "kill_test: $same of $TRIALS trials ended with the uninterrupted run's weights, $differ differ"
[ $differ = 0 ]
