#!/usr/bin/env bash
# The cost of the exchange on one machine: small-mos trained by 2 processes x 1 thread (mpirun,
# --grad-groups 2) against 1 process x 2 threads with the same groups (the same arithmetic, the
# same bits) and against the plain step (--grad-groups 1). A benchmark, not a test: the figures go
# to stdout, to be read beside docs/distributed.md's arithmetic.
#   bash bench/mpi.sh          (needs build/release/mosgrad, build/release-mpi/mosgrad, mpirun, PTB)
#   BENCH_MPI_PRESET (default small-mos), BENCH_MPI_STEPS (default 60), MOSGRAD_DATA
# `make bench` runs it when the MPI program has been built (make MPI=1).
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${BENCH_MPI_PRESET:-small-mos}
STEPS=${BENCH_MPI_STEPS:-60}
DATA=${MOSGRAD_DATA:-../shared/data/ptb}
MPIRUN=(mpirun --oversubscribe --bind-to none)
[[ $(id -u) == 0 ]] && MPIRUN+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
COMMON=(--preset "$PRESET" --data "$DATA" --max-steps "$STEPS" --log-interval 10
        --variable_bptt false --max-eval-tokens 2000 --test-at-end false)

# tokens/s of the steps after the first interval (warm-up), median of the intervals
rate() {
  grep '"kind":"interval"' "$1/metrics.jsonl" | tail -n +2 |
    grep -o '"tok_per_s":[0-9.e+]*' | cut -d: -f2 | sort -g |
    awk '{v[NR]=$1} END {print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2)}'
}

build/release/mosgrad train "${COMMON[@]}" --threads 2 --grad-groups 1 --save "$OUT/plain" >/dev/null
build/release/mosgrad train "${COMMON[@]}" --threads 2 --grad-groups 2 --save "$OUT/groups" >/dev/null
"${MPIRUN[@]}" -np 2 build/release-mpi/mosgrad train "${COMMON[@]}" --threads 1 --grad-groups 2 \
  --save "$OUT/mpi" >/dev/null
same=$(cmp -s "$OUT/groups/best.ckpt" "$OUT/mpi/best.ckpt" && echo yes || echo NO)
plain=$(rate "$OUT/plain") groups=$(rate "$OUT/groups") mpi=$(rate "$OUT/mpi")
cat <<EOF
## Data parallel on one machine ($PRESET, $STEPS steps, $(date -u +%Y-%m-%d), $(nproc) cores)

| run | tokens/s | vs 1 process x 2 threads, plain step |
|---|---:|---:|
| 1 process x 2 threads, --grad-groups 1 | $plain | 1.00 |
| 1 process x 2 threads, --grad-groups 2 | $groups | $(awk "BEGIN {printf \"%.2f\", $groups / $plain}") |
| mpirun -np 2 x 1 thread, --grad-groups 2 | $mpi | $(awk "BEGIN {printf \"%.2f\", $mpi / $plain}") |

best.ckpt of the last two byte for byte the same: $same
EOF
