#!/usr/bin/env bash
# The `paper` plan's MoS run on a GPU for as long as one call to a lent machine allows
# (docs/reproduction.md, "The paper plan"): `mosgrad reproduce --plan paper --runs mos-s1 --device
# cuda` under a time budget, stopped by SIGINT (its checkpoint saved, so a later call with the
# same PAPER_DIR continues it), then the small files copied to DEST and the validation perplexity
# per epoch printed beside the MoS reference's (zihangdai/mos issue 12: valid 65.3 near epoch 97).
# The checkpoint (~180 MB for mos-paper) stays in PAPER_DIR: a lent machine returns at most 64 MiB.
#   BIN        folder holding mosgrad built with `make CUDA=1` (default build/release-cuda)
#   MOSGRAD_DATA  Penn Treebank folder (default data/ptb)
#   BUDGET     seconds before the SIGINT (default 480: a 600-second call keeps time to copy)
#   PAPER_DIR  the plan's --out (default build/paper)
#   DEST       where the small files go (default $OUT, the device tool's folder, else build/paper-out)
#   DEVICE     --device (default cuda; cpu checks this script's plumbing on any machine)
set -uo pipefail
cd "$(dirname "$0")/.."
export MOSGRAD_DATA="${MOSGRAD_DATA:-data/ptb}"
B="${BIN:-build/release-cuda}"
PAPER_DIR="${PAPER_DIR:-build/paper}"
DEST="${DEST:-${OUT:-build/paper-out}}"
BUDGET="${BUDGET:-480}"
[[ -x $B/mosgrad ]] || { echo "gpu_paper: no $B/mosgrad (build it with make CUDA=1, or set BIN)" >&2; exit 2; }
[[ $BUDGET =~ ^[1-9][0-9]*$ ]] || { echo "gpu_paper: BUDGET='$BUDGET' is not a whole number of seconds" >&2; exit 2; }
mkdir -p "$DEST"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true

# SIGINT, as Ctrl-C: the training stage saves its checkpoint and reproduce exits; 60 s later a
# KILL in case it is stuck (the results file is only ever appended whole lines, so even that is safe).
timeout -s INT -k 60 "$BUDGET" "$B/mosgrad" reproduce --plan paper --runs mos-s1 \
  --device "${DEVICE:-cuda}" --out "$PAPER_DIR" --data "$MOSGRAD_DATA" >"$DEST/reproduce.log" 2>&1
rc=$?
echo "gpu_paper: reproduce exited $rc after at most $BUDGET s (124 or 130: stopped by the budget)"
tail -3 "$DEST/reproduce.log"

run="$PAPER_DIR/runs/mos-s1"
for f in metrics.jsonl finetune_metrics.jsonl curves.svg device precision; do
  [[ -f $run/$f ]] && cp "$run/$f" "$DEST/"
done
[[ -f $PAPER_DIR/results.jsonl ]] && cp "$PAPER_DIR/results.jsonl" "$DEST/"

# epoch, valid ppl, seconds: one line per finished epoch, from the run's metrics.
if [[ -f $run/metrics.jsonl ]]; then
  echo "epoch valid_ppl epoch_s  (MoS reference: valid 65.3 near epoch 97)"
  sed -nE 's/.*"kind":"epoch","epoch":([0-9]+),.*"val_ppl":([0-9.e+]+),.*"epoch_s":([0-9.]+).*/\1 \2 \3/p' \
    "$run/metrics.jsonl" | tee "$DEST/valid_per_epoch.txt"
else
  echo "gpu_paper: no $run/metrics.jsonl: training did not start (see $DEST/reproduce.log)"
  exit 1
fi
