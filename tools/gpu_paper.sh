#!/usr/bin/env bash
# One run of the `paper` plan on a GPU for a time budget
# (docs/reproduction.md, "The `paper` plan on a GPU for a few minutes"): `mosgrad reproduce --plan paper --runs $RUN
# --device cuda` under a time budget, stopped by SIGINT (its checkpoint saved, so a later call with the
# same PAPER_DIR continues it), then the small files copied to DEST and the validation perplexity
# per epoch printed beside the MoS reference's (github.com/zihangdai/mos/issues/12: valid 65.3 near epoch 97).
# The checkpoint (~180 MB for mos-paper) stays in PAPER_DIR: only the small files are copied.
# Relative paths below are taken from the checkout's root (the script cds there).
#   RUN        the plan's run (default mos-s1; softmax-s1 is the other). Two runs at once need two
#              PAPER_DIRs and DESTs (reproduce refuses a second process on one folder)
#   BIN        folder holding mosgrad built with `make CUDA=1` (default build/release-cuda)
#   MOSGRAD_DATA  Penn Treebank folder (unset: mosgrad's own search, data/ptb then ../shared/data/ptb)
#   BUDGET     seconds before the SIGINT (default 480: a 600-second session keeps time to copy)
#   PAPER_DIR  the plan's --out (default build/paper)
#   DEST       where the small files go (default $OUT when set, else build/paper-out)
#   DEVICE     --device (default cuda; cpu checks this script's plumbing on any machine)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN_DIR="${BIN:-build/release-cuda}"
PAPER_DIR="${PAPER_DIR:-build/paper}"
DEST="${DEST:-${OUT:-build/paper-out}}"
BUDGET="${BUDGET:-480}"
RUN="${RUN:-mos-s1}"
[[ -x $BIN_DIR/mosgrad ]] || { echo "gpu_paper: no $BIN_DIR/mosgrad (build it with make CUDA=1, or set BIN)" >&2; exit 2; }
[[ $BUDGET =~ ^[1-9][0-9]*$ ]] || { echo "gpu_paper: BUDGET='$BUDGET' is not a whole number of seconds" >&2; exit 2; }
mkdir -p "$DEST"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true

# SIGINT, as Ctrl-C: the training stage saves its checkpoint and reproduce exits; 60 s later a
# KILL in case it is stuck (the results file is only ever appended whole lines, so even that is safe).
data=()
[[ -n ${MOSGRAD_DATA:-} ]] && data=(--data "$MOSGRAD_DATA")
timeout -s INT -k 60 "$BUDGET" "$BIN_DIR/mosgrad" reproduce --plan paper --runs "$RUN" \
  --device "${DEVICE:-cuda}" --out "$PAPER_DIR" "${data[@]}" >"$DEST/reproduce.log" 2>&1
rc=$?
case $rc in
  0) echo "gpu_paper: the run finished every stage within $BUDGET s" ;;
  124) echo "gpu_paper: stopped by the budget ($BUDGET s), its checkpoint saved" ;;
  137) echo "gpu_paper: killed 60 s after the budget's SIGINT (the last checkpoint stands)" ;;
  *) echo "gpu_paper: reproduce failed (exit $rc)" ;;
esac
tail -3 "$DEST/reproduce.log"

run="$PAPER_DIR/runs/$RUN"
for f in metrics.jsonl finetune_metrics.jsonl curves.svg device precision; do
  [[ -f $run/$f ]] && cp "$run/$f" "$DEST/"
done
[[ -f $PAPER_DIR/results.jsonl ]] && cp "$PAPER_DIR/results.jsonl" "$DEST/"

# epoch, valid ppl, seconds: one line per finished epoch, from the run's metrics.
if [[ -f $run/metrics.jsonl ]]; then
  echo "epoch valid_ppl epoch_s  (MoS reference: valid 65.3 near epoch 97)"
  sed -nE 's/.*"kind":"epoch","epoch":([0-9]+),.*"val_ppl":([0-9.e+]+),.*"epoch_s":([0-9.]+).*/\1 \2 \3/p' \
    "$run/metrics.jsonl" | tee "$DEST/valid_per_epoch.txt"
  [[ $rc == 0 || $rc == 124 ]] || exit "$rc"
else
  echo "gpu_paper: no $run/metrics.jsonl: training did not start (see $DEST/reproduce.log)"
  exit 1
fi
