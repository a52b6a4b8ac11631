#!/usr/bin/env bash
# Does bf16 cost quality? (Not part of `make test`: it trains for minutes.)
# Trains small-softmax and small-mos for the same number of steps in --precision fp32 and bf16, same
# seeds and data, validates each on all of PTB valid, and checks that the two precisions' mean best
# validation perplexities (over the seeds) are within 1% of each other (exit status 1 when not).
#   bash tools/bf16_quality.sh [STEPS (default 2000)] [PRESETS (default small-softmax,small-mos)]
#                              [SEEDS (default "1 2 3")]
# Why several seeds: after 2,000 steps a run is chaotic in its last digits. Changing the MoS latent
# layer's tanh by at most 2 ulp (glibc tanhf -> vtanh) moved small-mos's FP32 perplexity from 211.90
# to 214.79 (1.4%), and that run's bf16 twin came out 2.7% *better* than it; one seed cannot tell a
# 1% effect of the precision from that (nor could two: small-softmax was +1.21% on two seeds'
# mean, +0.86% on three; nor three, always: small-mos was -1.05% on three, bf16 ahead, and -0.74%
# on five). The table gives each seed, the means, and the FP32 spread across seeds to compare the
# difference with; with BF16_QUALITY_REUSE=1, more seeds add to the finished runs.
# Runs go to runs/bf16-quality/<preset>-<precision> for seed 1 (docs/bottleneck.md's `mosgrad rank`
# examples use) and <preset>-<precision>-seed<N> for the others. They are this script's: each is
# replaced, unless BF16_QUALITY_REUSE=1 and its log shows it finished the same number of steps.
# The table goes to stdout and to runs/bf16-quality/RESULTS.md. Needs a CPU with AVX512_BF16 and
# PTB ($MOSGRAD_DATA, else data/ptb, else ../shared/data/ptb).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS="${1:-2000}"
PRESETS="${2:-small-softmax,small-mos}"
SEEDS="${3:-1 2 3}"
REUSE="${BF16_QUALITY_REUSE:-0}"
OUT=runs/bf16-quality
make --no-print-directory -j"$(nproc)" MODE=release build/release/mosgrad >/dev/null
mkdir -p "$OUT"
status=0
{
  echo "| preset | seed | steps | fp32 valid ppl | bf16 valid ppl | difference | fp32 tok/s | bf16 tok/s |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$OUT/RESULTS.md"
pct() { python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print('%+.2f%%' % (100*(b-a)/a))" "$1" "$2"; }
for preset in ${PRESETS//,/ }; do
  fp32_all=() bf16_all=()
  for seed in $SEEDS; do
    declare -A ppl=() toks=()
    for precision in fp32 bf16; do
      dir="$OUT/$preset-$precision$([ "$seed" = 1 ] || echo "-seed$seed")"
      if [ "$REUSE" = 1 ] && grep -q "^best valid ppl .* after $STEPS steps" "$dir.log" 2>/dev/null; then
        echo "bf16_quality: $preset $precision seed $seed: reusing $dir" >&2
      else
        rm -rf "$dir"
        echo "bf16_quality: $preset $precision seed $seed, $STEPS steps -> $dir" >&2
        build/release/mosgrad train --preset "$preset" --precision "$precision" --max-steps "$STEPS" \
          --test_at_end false --seed "$seed" --save "$dir" >"$dir.log" 2>&1
      fi
      ppl[$precision]=$(sed -n 's/^best valid ppl \([0-9.]*\).*/\1/p' "$dir.log" | tail -1)
      # The training rate of the last logged interval (the progress lines are "| ... | N tok/s |").
      toks[$precision]=$(grep -o '[0-9,]* tok/s' "$dir.log" | tail -1 | tr -d ', tok/s')
    done
    fp32_all+=("${ppl[fp32]}") bf16_all+=("${ppl[bf16]}")
    echo "| $preset | $seed | $STEPS | ${ppl[fp32]} | ${ppl[bf16]} | $(pct "${ppl[fp32]}" "${ppl[bf16]}") | ${toks[fp32]} | ${toks[bf16]} |" >>"$OUT/RESULTS.md"
  done
  # Means over the seeds; the criterion is on them. The FP32 spread (max - min over the seeds,
  # relative to the mean) says how much of the difference two FP32 runs would show as well.
  read -r mean_fp32 mean_bf16 spread < <(python3 -c "
import sys
a = [float(x) for x in sys.argv[1].split()]; b = [float(x) for x in sys.argv[2].split()]
ma, mb = sum(a) / len(a), sum(b) / len(b)
print('%.2f %.2f %.2f%%' % (ma, mb, 100 * (max(a) - min(a)) / ma))" "${fp32_all[*]}" "${bf16_all[*]}")
  n=$(echo $SEEDS | wc -w)
  echo "| **$preset, mean of $n** (FP32 spread $spread) | | $STEPS | **$mean_fp32** | **$mean_bf16** | **$(pct "$mean_fp32" "$mean_bf16")** | | |" >>"$OUT/RESULTS.md"
  if ! python3 -c "import sys; a,b=$mean_fp32,$mean_bf16; sys.exit(abs(b-a)/a > 0.01)"; then
    echo "bf16_quality: $preset: bf16's mean is more than 1% away from fp32's" >&2
    status=1
  fi
done
cat "$OUT/RESULTS.md"
exit $status
