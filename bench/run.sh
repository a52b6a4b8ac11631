#!/usr/bin/env bash
# `make bench`: mosgrad and PyTorch side by side on the same machine in the same run, one table.
#   BENCH_PRESETS  comma-separated presets (default: all six)
#   BENCH_SECONDS  length of one timed run (default 8); BENCH_REPEATS runs per figure (default 3)
#   BENCH_THREADS  threads for both sides (default 2)
# Each figure is the median of the runs; mosgrad and PyTorch run one after the other per preset, each
# in a fresh process (peak RSS is per process). The table goes to stdout and to bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PRESETS="${BENCH_PRESETS:-tiny,small-softmax,small-sigsoftmax,small-mos,small-mosig,mos-paper}"
SECS="${BENCH_SECONDS:-8}"
REPS="${BENCH_REPEATS:-3}"
THREADS="${BENCH_THREADS:-2}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

have_torch=0
if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then have_torch=1; fi

echo "bench: presets $PRESETS, ${REPS} x ${SECS}s per figure, $THREADS threads, torch: $([ $have_torch = 1 ] && echo yes || echo 'not installed (apt-get install python3-torch libopenblas0-openmp)')" >&2
for p in ${PRESETS//,/ }; do
  echo "bench: $p (mosgrad)" >&2
  build/release/bench/bench_train --preset "$p" --seconds "$SECS" --repeats "$REPS" --threads "$THREADS" >>"$OUT/mosgrad.jsonl"
  if [ $have_torch = 1 ]; then
    echo "bench: $p (PyTorch)" >&2
    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/torch_bench.py --presets "$p" --json --seconds "$SECS" \
      --repeats "$REPS" --threads "$THREADS" --forms plain,gathered >>"$OUT/torch.jsonl" || echo "bench: PyTorch $p failed" >&2
  fi
done
echo "bench: GEMM" >&2
build/release/bench/bench_gemm --threads "$THREADS" >"$OUT/gemm.txt" 2>/dev/null || true
if [ $have_torch = 1 ]; then
  OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/torch_gemm.py --threads "$THREADS" >>"$OUT/gemm.txt" 2>/dev/null || true
fi
touch "$OUT/torch.jsonl"

/usr/bin/python3 - "$OUT" "$THREADS" <<'PY' | tee bench/RESULTS.md
import json, os, platform, subprocess, sys, datetime
out, threads = sys.argv[1], sys.argv[2]
def jsonl(name):
    path = os.path.join(out, name)
    return [json.loads(l) for l in open(path) if l.strip().startswith("{")] if os.path.exists(path) else []
mg = {r["preset"]: r for r in jsonl("mosgrad.jsonl")}
pt = {r["preset"]: r for r in jsonl("torch.jsonl")}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
flags = open("/proc/cpuinfo").read()
isa = "AVX-512" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "SSE")
print("# mosgrad benchmark results\n")
print("%s — %s (%s), %d cores visible, %s threads used; `make bench`.\n" % (
    datetime.date.today().isoformat(), cpu, isa, os.cpu_count(), threads))
print("Training: fixed T, forward + backward + clip + SGD, V = 10000 synthetic ids; tokens/s are medians.")
print("PyTorch: the better of its two loss forms (full log-prob matrix, or gathered at the targets).\n")
print("| preset | mosgrad train tok/s | PyTorch train tok/s | ratio | mosgrad eval tok/s | PyTorch eval tok/s | ratio | mosgrad peak RSS MB | PyTorch peak RSS MB | ratio |")
print("|---|---|---|---|---|---|---|---|---|---|")
for p, m in mg.items():
    t = pt.get(p, {})
    forms = [t[k] for k in ("train_plain_tok_s", "train_gathered_tok_s") if k in t]
    tt = max(forms) if forms else None
    te = t.get("eval_tok_s")
    rss = [t[k] for k in ("train_plain_peak_rss_mib", "train_gathered_peak_rss_mib") if k in t]
    tr = min(rss) if rss else None
    f = lambda v: "%.0f" % v if v else "–"
    r = lambda a, b: "%.2f×" % (a / b) if a and b else "–"
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        p, f(m["train_tok_s"]), f(tt), r(m["train_tok_s"], tt), f(m["eval_tok_s"]), f(te), r(m["eval_tok_s"], te),
        f(m["peak_rss_mb"]), f(tr), r(m["peak_rss_mb"], tr)))
gemm = {}
peak = []
for line in open(os.path.join(out, "gemm.txt")):
    w = line.split()
    if len(w) == 4 and w[0] == "gemm":
        gemm.setdefault(w[1], {})[w[2]] = float(w[3])
    if len(w) >= 4 and w[0] == "peak":
        peak.append(" ".join(w[1:]))
if gemm:
    print("\nGEMM GFLOP/s (median):\n")
    print("| shape | mosgrad | torch.mm | ratio |\n|---|---|---|---|")
    for s, v in gemm.items():
        a, b = v.get("mosgrad"), v.get("torch")
        print("| %s | %s | %s | %s |" % (s, "%.1f" % a if a else "–", "%.1f" % b if b else "–", "%.2f×" % (a / b) if a and b else "–"))
if peak:
    print("\nMeasured FP32 FMA peak (GFLOP/s): " + "; ".join(peak))
PY
