#!/usr/bin/env bash
# The GPU benchmark: mosgrad (make CUDA=1) and PyTorch on the same GPU in the same run, one table.
#   bash bench/run_cuda.sh            (on a machine with an NVIDIA GPU and PyTorch with CUDA)
#   BENCH_PRESETS (default small-mos,mos-paper), BENCH_SECONDS (8), BENCH_REPEATS (3)
#   BENCH_TF32=1: both sides with TF32 GEMMs (mosgrad --tf32, PyTorch allow_tf32), not FP32
#   BENCH_OUT: where the table goes (default bench/RESULTS_CUDA.md, with BENCH_TF32=1
#   bench/RESULTS_CUDA_TF32.md)
#   BENCH_BIN: a bench_train built elsewhere (make CUDA=1 build/release-cuda/bench/bench_train), run
#   as it is instead of building here (a GPU machine with no compiler time to spare)
# mosgrad's figures come from build/release-cuda/bench/bench_train --device cuda; PyTorch's from
# bench/torch_bench_cuda.py (the faster of its two loss forms; cuDNN LSTM). The table goes to stdout
# and to the top of $BENCH_OUT, its header naming the date, GPU, commit and settings; the runs
# already in the file move under "## Earlier runs".
set -euo pipefail
cd "$(dirname "$0")/.."
PRESETS="${BENCH_PRESETS:-small-mos,mos-paper}"
SECS="${BENCH_SECONDS:-8}"
REPS="${BENCH_REPEATS:-3}"
PY="${PYTHON:-python3}"
TF32=()
[ "${BENCH_TF32:-0}" = 1 ] && TF32=(--tf32)
RESULTS_DEFAULT=bench/RESULTS_CUDA.md
[ "${BENCH_TF32:-0}" = 1 ] && RESULTS_DEFAULT=bench/RESULTS_CUDA_TF32.md
RESULTS="${BENCH_OUT:-$RESULTS_DEFAULT}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
BIN="${BENCH_BIN:-build/release-cuda/bench/bench_train}"
[ -n "${BENCH_BIN:-}" ] || make --no-print-directory CUDA=1 -j"$(nproc)" "$BIN" >&2
for p in ${PRESETS//,/ }; do
  echo "bench: $p (mosgrad, GPU)" >&2
  "$BIN" --device cuda --preset "$p" --seconds "$SECS" --repeats "$REPS" "${TF32[@]}" >>"$OUT/mosgrad.jsonl"
  echo "bench: $p (PyTorch, GPU)" >&2
  "$PY" bench/torch_bench_cuda.py --preset "$p" --seconds "$SECS" --repeats "$REPS" "${TF32[@]}" >>"$OUT/torch.jsonl" ||
    echo "bench: PyTorch $p failed" >&2
done
touch "$OUT/torch.jsonl"
COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
"$PY" - "$OUT" "${BENCH_TF32:-0}" "$SECS" "$REPS" "$COMMIT" <<'PY' >"$OUT/table.md"
import datetime, json, os, sys
out = sys.argv[1]
rows = lambda f: [json.loads(l) for l in open(os.path.join(out, f)) if l.startswith("{")]
mg, pt = {r["preset"]: r for r in rows("mosgrad.jsonl")}, {r["preset"]: r for r in rows("torch.jsonl")}
if not mg:
    sys.exit("bench: mosgrad measured nothing; the results file is left as it was")
dev = next(iter(mg.values()))["device"] if mg else "?"
t0 = next(iter(pt.values()), {})
print("# mosgrad on the GPU\n")
tf32, secs, reps = sys.argv[2] == "1", sys.argv[3], sys.argv[4]
print("%s — %s; commit %s; PyTorch %s (cuDNN %s); `%sBENCH_SECONDS=%s BENCH_REPEATS=%s bash bench/run_cuda.sh`. %s" % (
    datetime.date.today().isoformat(), dev, sys.argv[5], t0.get("torch", "?"), t0.get("cudnn", "?"),
    "BENCH_TF32=1 " if tf32 else "", secs, reps,
    "TF32 GEMMs on both sides." if tf32 else "FP32 everywhere (no TF32)."))
print("Training: fixed T, forward + backward + clip + SGD, V = 10000 synthetic ids, medians of the runs;")
print("PyTorch's better loss form. Peak GPU memory: bytes held by tensors (mosgrad's allocator, torch.cuda.max_memory_allocated).")
print("GEMM share: time cuBLAS's GEMMs ran (CUDA events) over the wall time of mosgrad's training runs.\n")
print("| preset | mosgrad train tok/s | PyTorch train tok/s | ratio | mosgrad eval tok/s | PyTorch eval tok/s | ratio | mosgrad peak MB | PyTorch peak MB | ratio | GEMM share |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
f = lambda v: "%.0f" % v if v else "–"
r = lambda a, b: "%.2f×" % (a / b) if a and b else "–"
for p, m in mg.items():
    t = pt.get(p, {})
    forms = {k: t[k + "_tok_s"] for k in ("train_plain", "train_gathered") if k + "_tok_s" in t}
    best = max(forms, key=forms.get) if forms else None
    tt = forms.get(best) if best else None
    tm = t.get(best + "_peak_gpu_mb") if best else None
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f%% |" % (
        p, f(m["train_tok_s"]), f(tt), r(m["train_tok_s"], tt), f(m["eval_tok_s"]), f(t.get("eval_tok_s")),
        r(m["eval_tok_s"], t.get("eval_tok_s")), f(m["peak_gpu_mb"]), f(tm), r(m["peak_gpu_mb"], tm),
        100 * m["gemm_share"]))
PY
cat "$OUT/table.md"
# The file keeps every run: this one on top, the runs before it under "## Earlier runs", newest
# first (written beside the file and renamed over it, so an interrupted run leaves the old file).
"$PY" - "$OUT/table.md" "$RESULTS" <<'PY'
import os, sys
new, path = open(sys.argv[1]).read().rstrip() + "\n", sys.argv[2]
old = open(path).read() if os.path.exists(path) else ""
marker = "\n## Earlier runs\n"
top, _, earlier = old.partition(marker)
top = top.strip().removeprefix("# mosgrad on the GPU").strip()
kept = [part for part in (top, earlier.strip()) if part]
with open(path + ".tmp", "w") as f:
    f.write(new + (marker + "\n" + "\n\n".join(kept) + "\n" if kept else ""))
os.replace(path + ".tmp", path)
PY
