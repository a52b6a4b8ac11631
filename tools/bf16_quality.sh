#!/usr/bin/env bash
# Does bf16 cost quality? (issue #12: not part of `make test`, it trains for minutes.)
# Trains small-softmax and small-mos for the same number of steps in --precision fp32 and bf16, same
# seed and data, validates each on all of PTB valid, and checks that the two precisions' best
# validation perplexities are within 1% of each other (exit status 1 when not).
#   bash tools/bf16_quality.sh [STEPS (default 2000)] [PRESETS (default small-softmax,small-mos)]
# Runs go to runs/bf16-quality/<preset>-<precision> (replaced each time: they are this script's);
# the table goes to stdout and to runs/bf16-quality/RESULTS.md. Needs a CPU with AVX512_BF16 and
# PTB ($MOSGRAD_DATA, else data/ptb, else ../shared/data/ptb).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS="${1:-2000}"
PRESETS="${2:-small-softmax,small-mos}"
OUT=runs/bf16-quality
make --no-print-directory -j"$(nproc)" MODE=release build/release/mosgrad >/dev/null
mkdir -p "$OUT"
status=0
{
  echo "| preset | steps | fp32 valid ppl | bf16 valid ppl | difference | fp32 tok/s | bf16 tok/s |"
  echo "|---|---|---|---|---|---|---|"
} >"$OUT/RESULTS.md"
for preset in ${PRESETS//,/ }; do
  declare -A ppl=() toks=()
  for precision in fp32 bf16; do
    dir="$OUT/$preset-$precision"
    rm -rf "$dir"
    echo "bf16_quality: $preset $precision, $STEPS steps -> $dir" >&2
    build/release/mosgrad train --preset "$preset" --precision "$precision" --max-steps "$STEPS" \
      --test_at_end false --seed 1 --save "$dir" >"$dir.log" 2>&1
    ppl[$precision]=$(sed -n 's/^best valid ppl \([0-9.]*\).*/\1/p' "$dir.log" | tail -1)
    # The training rate of the last logged interval (the progress lines are "| ... | N tok/s |").
    toks[$precision]=$(grep -o '[0-9,]* tok/s' "$dir.log" | tail -1 | tr -d ', tok/s')
  done
  diff=$(python3 -c "a,b=${ppl[fp32]},${ppl[bf16]}; print('%+.2f%%' % (100*(b-a)/a))")
  echo "| $preset | $STEPS | ${ppl[fp32]} | ${ppl[bf16]} | $diff | ${toks[fp32]} | ${toks[bf16]} |" >>"$OUT/RESULTS.md"
  if ! python3 -c "import sys; a,b=${ppl[fp32]},${ppl[bf16]}; sys.exit(abs(b-a)/a > 0.01)"; then
    echo "bf16_quality: $preset: bf16 is more than 1% away from fp32" >&2
    status=1
  fi
done
cat "$OUT/RESULTS.md"
exit $status
