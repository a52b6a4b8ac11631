#!/usr/bin/env bash
# Data-parallel training under Open MPI gives the bits of one process (docs/distributed.md).
#   make mpi-check      (builds build/release/mosgrad and build/release-mpi/mosgrad, then this)
# Needs mpirun (Debian: apt-get install libopenmpi-dev openmpi-bin) and PTB (MOSGRAD_DATA, default
# ../shared/data/ptb). What it checks, on a small MoS model with every dropout on:
#   1. 20 steps with --grad-groups 4: the plain build, mpirun -np 1, -np 2 and -np 4 save the same
#      best.ckpt, byte for byte (weights, validation loss), and the same training losses; and with
#      a validation batch the groups do not divide (validated whole), -np 2 the same as plain;
#   2. a 3-epoch run under -np 2 with one process killed -9 in its second epoch: the job ends with
#      an error, the last checkpoint is intact, and --resume with -np 4 finishes with the bytes of
#      the uninterrupted run;
#   3. the refusals: -np 3 for 4 groups, --device cuda with 2 processes, a batch the groups do not
#      divide; each names the values, before any work.
# Prints one line per check and exits 1 at the first failure. Its time is mpi-check's in
# docs/testing/timings.md.
set -euo pipefail
cd "$(dirname "$0")/.."

DATA=${MOSGRAD_DATA:-../shared/data/ptb}
PLAIN=build/release/mosgrad
MPI_BIN=build/release-mpi/mosgrad
for f in "$PLAIN" "$MPI_BIN"; do
  [[ -x $f ]] || { echo "mpi_check: $f is missing: run make mpi-check" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "mpi_check: no mpirun (apt-get install openmpi-bin)" >&2; exit 1; }
[[ -f $DATA/ptb.train.txt || -f $DATA/train.txt ]] ||
  { echo "mpi_check: no corpus in $DATA (set MOSGRAD_DATA)" >&2; exit 1; }

# More processes than cores is fine here (correctness, not speed); root needs its own flag; the
# shared-memory transport's single-copy mode needs ptrace, which containers often forbid.
MPIRUN=(mpirun --oversubscribe)
[[ $(id -u) == 0 ]] && MPIRUN+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
WORK=$(mktemp -d /tmp/mpi_check.XXXXXX)
[[ -n ${MPI_CHECK_KEEP:-} ]] && echo "mpi_check: keeping $WORK" || trap 'rm -rf "$WORK"' EXIT

MODEL=(--preset tiny --head mos --n_experts 3 --nlayers 2 --nhid 48 --nhidlast 32 --dropout 0.3
       --dropouth 0.2 --dropouti 0.1 --dropoute 0.1 --dropoutl 0.2 --wdrop 0.3 --alpha 2 --beta 1
       --data "$DATA" --max-eval-tokens 3000 --eval_batch_size 4 --test-at-end false
       --threads 1 --grad-groups 4)
fail() { echo "mpi_check: FAILED: $*" >&2; exit 1; }
losses() { grep -o '"loss":[^,]*' "$1/metrics.jsonl"; }

# ---- 1. the same bits for every number of processes --------------------------------------------
STEPS=(--max-steps 20 --max-train-tokens 20000 --log-interval 5)
"$PLAIN" train "${MODEL[@]}" "${STEPS[@]}" --save "$WORK/plain" >"$WORK/plain.log"
for np in 1 2 4; do
  "${MPIRUN[@]}" -np "$np" "$MPI_BIN" train "${MODEL[@]}" "${STEPS[@]}" --save "$WORK/np$np" \
    >"$WORK/np$np.log" 2>&1 || { cat "$WORK/np$np.log"; fail "mpirun -np $np train"; }
  cmp "$WORK/plain/best.ckpt" "$WORK/np$np/best.ckpt" ||
    fail "-np $np: best.ckpt differs from the plain build's"
  [[ $(losses "$WORK/np$np") == "$(losses "$WORK/plain")" ]] ||
    fail "-np $np: the training losses differ from the plain build's"
done
echo "mpi_check: 20 steps, --grad-groups 4: plain, -np 1, -np 2, -np 4 give the same best.ckpt" \
     "($(sha256sum "$WORK/plain/best.ckpt" | cut -c1-12)) and losses"
# Validation's 10 columns are not divisible into 4 groups: it runs whole, on every process.
"$PLAIN" train "${MODEL[@]}" "${STEPS[@]}" --eval_batch_size 10 --save "$WORK/plain10" >/dev/null
"${MPIRUN[@]}" -np 2 "$MPI_BIN" train "${MODEL[@]}" "${STEPS[@]}" --eval_batch_size 10 \
  --save "$WORK/np2e10" >"$WORK/np2e10.log" 2>&1 || { cat "$WORK/np2e10.log"; fail "-np 2, eval 10"; }
cmp "$WORK/plain10/best.ckpt" "$WORK/np2e10/best.ckpt" ||
  fail "-np 2 with validation whole (10 columns, 4 groups): best.ckpt differs from the plain build's"
echo "mpi_check: validation whole (10 columns, 4 groups): -np 2 gives the plain build's best.ckpt"

# ---- 2. a process killed mid-run, then --resume with another N ----------------------------------
EPOCHS=(--epochs 3 --max-train-tokens 60000)
"${MPIRUN[@]}" -np 2 "$MPI_BIN" train "${MODEL[@]}" "${EPOCHS[@]}" --save "$WORK/whole" \
  >"$WORK/whole.log" 2>&1 || { cat "$WORK/whole.log"; fail "the uninterrupted 3-epoch run"; }
"${MPIRUN[@]}" -np 2 "$MPI_BIN" train "${MODEL[@]}" "${EPOCHS[@]}" --save "$WORK/killed" \
  >"$WORK/killed.log" 2>&1 &
job=$!
for _ in $(seq 600); do  # the first epoch's checkpoint, then kill one process in the second
  [[ -f $WORK/killed/checkpoint.ckpt ]] && break
  sleep 0.1
done
[[ -f $WORK/killed/checkpoint.ckpt ]] || fail "no checkpoint after the first epoch"
victim=$(pgrep -f "^$MPI_BIN train .*--save $WORK/killed" | tail -1)
[[ -n $victim ]] || fail "no process of the run to kill"
kill -9 "$victim"
if wait "$job"; then fail "the job went on after a process was killed"; fi
grep -qiE "signal 9|killed" "$WORK/killed.log" ||
  { cat "$WORK/killed.log"; fail "mpirun did not say that a process was killed"; }
"$PLAIN" eval --model "$WORK/killed/best.ckpt" --data "$DATA" --split valid --batch_size 4 \
  >/dev/null || fail "best.ckpt of the killed run does not load"
"${MPIRUN[@]}" -np 4 "$MPI_BIN" train "${MODEL[@]}" "${EPOCHS[@]}" --save "$WORK/killed" \
  --resume >"$WORK/resumed.log" 2>&1 || { cat "$WORK/resumed.log"; fail "--resume with -np 4"; }
cmp "$WORK/whole/best.ckpt" "$WORK/killed/best.ckpt" ||
  fail "killed at epoch 2 and resumed with -np 4: best.ckpt differs from the uninterrupted run's"
echo "mpi_check: one of 2 processes killed -9 in epoch 2; --resume with -np 4 ends with the" \
     "uninterrupted run's best.ckpt ($(sha256sum "$WORK/whole/best.ckpt" | cut -c1-12))"

# ---- 3. refusals, before any work -------------------------------------------------------------
refused() {  # refused NAME EXPECTED-TEXT mpirun-args...
  local name=$1 text=$2
  shift 2
  if "${MPIRUN[@]}" "$@" >"$WORK/refused.log" 2>&1; then fail "$name was not refused"; fi
  grep -qF -- "$text" "$WORK/refused.log" || { cat "$WORK/refused.log"; fail "$name: no '$text'"; }
  [[ ! -e $WORK/refused ]] || fail "$name: wrote $WORK/refused before refusing"
}
refused "-np 3 with 4 groups" "--grad-groups 4 cannot be shared by 3 processes" \
  -np 3 "$MPI_BIN" train "${MODEL[@]}" --save "$WORK/refused"
refused "--device cuda under -np 2" "--device cuda cannot train under mpirun -np 2" \
  -np 2 "$MPI_BIN" train "${MODEL[@]}" --device cuda --save "$WORK/refused"
refused "a batch of 18 in 4 groups" "--batch_size 18 is not divisible into --grad-groups 4" \
  -np 2 "$MPI_BIN" train "${MODEL[@]}" --batch_size 18 --save "$WORK/refused"
echo "mpi_check: -np 3 for 4 groups, --device cuda with 2 processes and a batch of 18 in 4" \
     "groups are refused, naming the values"
echo "mpi_check: ok"
