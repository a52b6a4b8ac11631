#!/usr/bin/env bash
# `make bench`: mosgrad and PyTorch side by side on the same machine in the same run, one table.
#   BENCH_PRESETS  comma-separated presets (default: all six)
#   BENCH_SECONDS  length of one timed run (default 8); BENCH_REPEATS runs per figure (default 3)
#   BENCH_THREADS  threads for both sides (default 2)
#   BENCH_BF16     1 (default where the CPU has AVX512_BF16): also --precision bf16 for mosgrad and
#                  torch.autocast(bfloat16) for PyTorch, in a second table with the FP32 ceiling
#                  (without it, that table has FP32 alone: the share of the FP32 ceiling)
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
BF16="${BENCH_BF16:-$(grep -q avx512_bf16 /proc/cpuinfo && echo 1 || echo 0)}"
# (An if, not "$([ ... ] && echo ...)": under set -e that substitution's failing status ended the
# script on every CPU without AVX512_BF16, before the first preset.)
PRECISIONS="fp32"
if [ "$BF16" = 1 ]; then PRECISIONS="fp32 bf16"; fi
for p in ${PRESETS//,/ }; do
  for precision in $PRECISIONS; do
    echo "bench: $p (mosgrad, $precision)" >&2
    build/release/bench/bench_train --preset "$p" --seconds "$SECS" --repeats "$REPS" --threads "$THREADS" \
      --precision "$precision" >>"$OUT/mosgrad.jsonl" || echo "bench: mosgrad $p $precision failed" >&2
    if [ $have_torch = 1 ]; then
      echo "bench: $p (PyTorch, $precision)" >&2
      OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/torch_bench.py --presets "$p" --json --seconds "$SECS" \
        --repeats "$REPS" --threads "$THREADS" --forms plain,gathered --precision "$precision" \
        >>"$OUT/torch.jsonl" || echo "bench: PyTorch $p $precision failed" >&2
    fi
  done
done
echo "bench: GEMM" >&2
build/release/bench/bench_gemm --threads "$THREADS" >"$OUT/gemm.txt" 2>/dev/null || true
if [ "$BF16" = 1 ]; then
  build/release/bench/bench_gemm --threads "$THREADS" --kernel avx512_bf16 2>/dev/null | grep -v '^peak' >>"$OUT/gemm.txt" || true
fi
if [ $have_torch = 1 ]; then
  OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/torch_gemm.py --threads "$THREADS" >>"$OUT/gemm.txt" 2>/dev/null || true
fi
touch "$OUT/torch.jsonl"

/usr/bin/python3 - "$OUT" "$THREADS" <<'PY' | tee bench/RESULTS.md
import datetime, glob, json, os, platform, re, subprocess, sys
out, threads = sys.argv[1], sys.argv[2]
def jsonl(name):
    path = os.path.join(out, name)
    return [json.loads(l) for l in open(path) if l.strip().startswith("{")] if os.path.exists(path) else []
mg_all = {(r["preset"], r.get("precision", "fp32")): r for r in jsonl("mosgrad.jsonl")}
pt_all = {(r["preset"], r.get("precision", "fp32")): r for r in jsonl("torch.jsonl")}
mg = {p: r for (p, prec), r in mg_all.items() if prec == "fp32"}
pt = {p: r for (p, prec), r in pt_all.items() if prec == "fp32"}
info = {}
for l in open("/proc/cpuinfo"):
    if ":" in l:
        k, v = (x.strip() for x in l.split(":", 1))
        info.setdefault(k, v)
cpu = info.get("model name") or platform.processor()
flags = set(info.get("flags", "").split())
isa = "AVX-512" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "SSE")
# The model name alone ("AMD EPYC") does not say which core: the family and model do.
fam, model = int(info.get("cpu family", "0")), int(info.get("model", "0"))
core = {0x1A: "Zen 5", 0x19: "Zen 4" if model >= 0x10 else "Zen 3", 0x17: "Zen / Zen 2"}.get(fam, "") \
    if info.get("vendor_id") == "AuthenticAMD" else ""
kernels = [l.split()[2].rstrip(",") for l in open(os.path.join(out, "gemm.txt")) if l.startswith("# kernel ")]
# The commit measured, and whether the tree differed from it (this file aside: tee is writing it).
def git(*args):
    return subprocess.run(["git"] + list(args), capture_output=True, text=True)
commit = git("rev-parse", "--short=12", "HEAD").stdout.strip() or "unknown"
if git("diff", "--quiet", "HEAD", "--", ".", ":!bench/RESULTS.md").returncode == 1:
    commit += " with uncommitted changes"
print("# mosgrad benchmark results\n")
print("%s — %s (%s), %d cores visible, %s threads used; `make bench` at commit %s.\n" % (
    datetime.date.today().isoformat(), cpu, isa, os.cpu_count(), threads, commit))
print("CPU: %s, family %d model %d stepping %s%s; AVX512_BF16 %s, AMX %s. GEMM kernels run: %s.\n" % (
    cpu, fam, model, info.get("stepping", "?"), " (%s)" % core if core else "",
    "yes" if "avx512_bf16" in flags else "no", "yes" if "amx_bf16" in flags else "no",
    ", ".join(dict.fromkeys(kernels)) or "–"))
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
        gemm.setdefault(w[1], {})[w[2].replace("mosgrad-avx512_bf16", "bf16")] = float(w[3])
    if len(w) >= 4 and w[0] == "peak":
        peak.append(" ".join(w[1:]))
if gemm:
    print("\nGEMM GFLOP/s (median; mosgrad bf16 = --precision bf16's kernel, operands rounded to bfloat16; -prepacked: B packed once, as the LSTM's W_hh):\n")
    print("| shape | mosgrad | torch.mm | ratio | mosgrad bf16 | bf16 ÷ mosgrad FP32 |\n|---|---|---|---|---|---|")
    f1 = lambda x: "%.1f" % x if x else "–"
    for s, v in gemm.items():
        a, b, c = v.get("mosgrad"), v.get("torch"), v.get("bf16")
        print("| %s | %s | %s | %s | %s | %s |" % (s, f1(a), f1(b), "%.2f×" % (a / b) if a and b else "–",
                                                 f1(c), "%.2f×" % (c / a) if a and c else "–"))
if peak:
    print("\nMeasured FP32 FMA peak (GFLOP/s): " + "; ".join(peak))
# bf16: the same presets in both precisions, as shares of the FP32 ceiling (FP32 FMA peak with
# the benchmark's threads), from the FLOP count per token in bench/bench_train.cpp.
ceiling = None
for line in peak:
    w = line.split()
    if w[0] == "%st" % threads:
        ceiling = float(w[-1]) * 1e9
def train(d, p, prec):
    r = d.get((p, prec), {})
    forms = [r[k] for k in ("train_tok_s", "train_plain_tok_s", "train_gathered_tok_s") if r.get(k)]
    return max(forms) if forms else None
if any(prec == "bf16" for (_, prec) in list(mg_all) + list(pt_all)):
    print("\nTraining tokens/s in FP32 and bf16 (mosgrad --precision bf16; PyTorch torch.autocast(\"cpu\", bfloat16)), and the share of the FP32 ceiling each reaches: tokens/s × FLOP per token ÷ the FP32 FMA peak measured right before and after this preset's mosgrad runs (bench_train's fma_peak_gflops, best of its bursts; PyTorch's runs of the preset follow each of them). This machine's speed drifts by 5-10%% over minutes, so a share divides figures of the same minute; the last column divides mosgrad FP32 by the single peak measured at the end of the run%s instead.\n" % (
        ", %.0f GFLOP/s" % (ceiling / 1e9) if ceiling else ""))
    print("| preset | MFLOP/token | mosgrad FP32 | mosgrad bf16 | PyTorch FP32 | PyTorch bf16 | bf16 ÷ FP32 | mosgrad bf16 ÷ PyTorch FP32 | mosgrad bf16 ÷ PyTorch bf16 | FP32 FMA peak GFLOP/s | ceiling share: mosgrad FP32 / bf16, PyTorch FP32 / bf16 | mosgrad FP32 ÷ end-of-run peak |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in mg:
        flop = mg[p].get("train_flop_per_token")
        peaks = [mg_all.get((p, prec), {}).get("fma_peak_gflops") for prec in ("fp32", "bf16")]
        peaks = [x * 1e9 for x in peaks if x]
        here = max(peaks) if peaks else ceiling  # this preset's ceiling
        a, b = train(mg_all, p, "fp32"), train(mg_all, p, "bf16")
        c, d = train(pt_all, p, "fp32"), train(pt_all, p, "bf16")
        err = pt_all.get((p, "bf16"), {})
        if not d and any(k.endswith("_error") for k in err):
            d_note = "failed: " + "; ".join(str(v) for k, v in err.items() if k.endswith("_error"))[:60]
        else:
            d_note = None
        f0 = lambda x: "%.0f" % x if x else "–"
        r = lambda x, y: "%.2f×" % (x / y) if x and y else "–"
        sh = lambda x, c=here: "%.0f%%" % (100 * x * flop / c) if x and flop and c else "–"
        print("| %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s, %s / %s | %s |" % (
            p, (flop or 0) / 1e6, f0(a), f0(b), f0(c), d_note or f0(d), r(b, a), r(b, c), r(b, d),
            f0(here / 1e9 if here else None), sh(a), sh(b), sh(c), sh(d), sh(a, ceiling)))
elif mg:
    # Without AVX512_BF16 the FP32 share of the ceiling alone, so that such CPUs get the figure
    # too.
    print("\nTraining tokens/s in FP32 and the share of the FP32 ceiling each reaches: tokens/s × FLOP per token ÷ the FP32 FMA peak measured right before and after this preset's mosgrad run (bench_train's fma_peak_gflops, best of its bursts; PyTorch's run of the preset follows it). No bf16 columns: this CPU has no AVX512_BF16. The last column divides mosgrad by the single peak measured at the end of the run%s instead.\n" % (
        ", %.0f GFLOP/s" % (ceiling / 1e9) if ceiling else ""))
    print("| preset | MFLOP/token | mosgrad FP32 | PyTorch FP32 | FP32 FMA peak GFLOP/s | ceiling share: mosgrad, PyTorch | mosgrad ÷ end-of-run peak |")
    print("|---|---|---|---|---|---|---|")
    for p in mg:
        flop = mg[p].get("train_flop_per_token")
        here = mg[p].get("fma_peak_gflops")
        here = here * 1e9 if here else ceiling
        a, c = train(mg_all, p, "fp32"), train(pt_all, p, "fp32")
        f0 = lambda x: "%.0f" % x if x else "–"
        sh = lambda x, cl=here: "%.0f%%" % (100 * x * flop / cl) if x and flop and cl else "–"
        print("| %s | %.1f | %s | %s | %s | %s, %s | %s |" % (
            p, (flop or 0) / 1e6, f0(a), f0(c), f0(here / 1e9 if here else None), sh(a), sh(c),
            sh(a, ceiling)))
# The quality side of bf16, from tools/bf16_quality.sh's runs on this machine (it trains for ~35
# minutes, so make bench does not re-run it): best valid perplexity after the same steps, same
# seeds, in both precisions.
runs = {}
for log in glob.glob("runs/bf16-quality/*.log"):
    m = re.match(r"(.+)-(fp32|bf16)(?:-seed(\d+))?\.log$", os.path.basename(log))
    done = [re.match(r"best valid ppl ([0-9.]+) after (\d+) steps", l) for l in open(log)]
    done = [d for d in done if d]
    if m and done:
        runs.setdefault((m.group(1), int(m.group(3) or 1), int(done[-1].group(2))), {})[m.group(2)] = (
            float(done[-1].group(1)), os.path.getmtime(log))
pairs = {k: v for k, v in runs.items() if "fp32" in v and "bf16" in v}
print("\nbf16 quality (`bash tools/bf16_quality.sh`: the same seeds and steps in both precisions, best perplexity on all of PTB valid; criterion: the means within 1%):\n")
if not pairs:
    print("Not run on this machine yet.")
else:
    when = max(t for v in pairs.values() for _, t in v.values())
    print("Runs of %s:\n" % datetime.date.fromtimestamp(when).isoformat())
    print("| preset | seed | steps | FP32 valid ppl | bf16 valid ppl | difference |\n|---|---|---|---|---|---|")
    for preset, steps in sorted({(k[0], k[2]) for k in pairs}):  # a mean is over equal runs only
        rows = sorted(k for k in pairs if k[0] == preset and k[2] == steps)
        for k in rows:
            a, b = pairs[k]["fp32"][0], pairs[k]["bf16"][0]
            print("| %s | %d | %d | %.2f | %.2f | %+.2f%% |" % (preset, k[1], k[2], a, b, 100 * (b - a) / a))
        a = sum(pairs[k]["fp32"][0] for k in rows) / len(rows)
        b = sum(pairs[k]["bf16"][0] for k in rows) / len(rows)
        print("| **%s, mean of %d** | | | **%.2f** | **%.2f** | **%+.2f%%** |" % (preset, len(rows), a, b, 100 * (b - a) / a))
PY

# What `train --log-stats` costs (bench/bench_health.cpp): a logged step against a plain one, and
# the share of the training time at the default --log_interval 200 (the target: at most 5%).
echo "bench: --log-stats" >&2
{
  printf '\n## Training-health statistics (`--log-stats`)\n\n'
  build/release/bench/bench_health --threads "$THREADS" --preset small-mos || echo "bench: bench_health failed" >&2
} | tee -a bench/RESULTS.md
# What `mosgrad rank` costs over all of PTB valid (bench/bench_svd.cpp, target: 5 minutes in
# all): one fold of 20,000 contexts into the 10,000 x 10,000 factor, its reduction to bidiagonal
# form and the values, and the projection to 73,750 contexts (about 2.5 minutes to run).
echo "bench: rank's singular values" >&2
{
  printf '\n## `mosgrad rank` over all of PTB valid (singular values, random matrices)\n\n```\n'
  build/release/bench/bench_svd --n 10000 --rows 20000 --folds 1 --one_stage 0 --threads "$THREADS" ||
    echo "bench: bench_svd failed" >&2
  printf '```\n'
} | tee -a bench/RESULTS.md
# Data parallel on one machine (bench/mpi.sh), once `make MPI=1` has built the MPI program.
if [ -x build/release-mpi/mosgrad ] && command -v mpirun >/dev/null 2>&1; then
  echo "bench: mpirun -np 2 against one process" >&2
  { printf '\n'; bash bench/mpi.sh || echo "bench: bench/mpi.sh failed" >&2; } | tee -a bench/RESULTS.md
fi
