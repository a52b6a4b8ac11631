#!/usr/bin/python3
"""PyTorch peer benchmark of mosgrad's training presets (the numbers the C++ trainer is compared
against in bench/run.sh).

    /usr/bin/python3 bench/torch_bench.py [--presets tiny,small-mos] [--seconds 10] [--repeats 3]
                                          [--threads 2] [--json] [--precision fp32|bf16]

For every preset it measures, each in a fresh subprocess (so ru_maxrss is that measurement's own
peak RSS, and one preset's allocator state cannot help another's):
  train tokens/s  fixed-T truncated BPTT step: forward + backward + clip_grad_norm_(0.25) + plain
                  SGD step (lr 20), train mode with the preset's dropouts, loss = NLL + AWD-LSTM's
                  AR/TAR terms as lm/train_config.cpp's presets (alpha 2, beta 1; tiny none);
                  median of --repeats runs of --seconds each, after one warm-up step.  Forms:
                    plain     full log-prob matrix [N,V], then NLL (as the MoS code)
                    gathered  each component's log-prob only at the target (mixture heads:
                              logsumexp_k(log pi_k + z_k[t] - logsumexp z_k); mosig the same with
                              s = z + log sigmoid(z)); see tools/torch_model.head_target_log_prob
                  By default "gathered" is measured for the mixture heads only (for softmax heads
                  both forms compute the same [N,V] logsumexp).
  eval tokens/s   no_grad, eval mode, plain form, batch 10 (--eval-batch, as the references and
                  bench/bench_train.cpp), the preset's T; runs of --eval-seconds.
  peak RSS        resource.getrusage(RUSAGE_SELF).ru_maxrss of the measuring process, plus the
                  RSS right after `import torch` (the interpreter + torch baseline).

Data: synthetic uniform random token ids over V = 10000 (PTB's vocabulary size); speed does not
depend on the ids.  Threads: torch.set_num_threads(--threads) and OMP_NUM_THREADS (OpenBLAS is
the OpenMP build).  OPENBLAS_CORETYPE is forced to SkylakeX (override with
MOSGRAD_BENCH_CORETYPE) before torch is imported, re-executing the interpreter if needed, because
OpenBLAS reads it once when it is loaded.

Tokens/s on a shared 2-core machine are noisy: compare medians, and only runs from one session.
Each record carries the 1-minute load average before/after.  With libgomp's default wait policy
(threads spin at barriers) an oversubscribed machine slows the LSTM's many small parallel regions
3-10x; OMP_WAIT_POLICY=PASSIVE (--omp-wait-policy PASSIVE, or exported for both this and the C++
benchmarks) keeps the numbers usable under load.
"""

import os
import sys

CORETYPE = os.environ.get("MOSGRAD_BENCH_CORETYPE", "SkylakeX")
if os.environ.get("OPENBLAS_CORETYPE") != CORETYPE:
    os.environ["OPENBLAS_CORETYPE"] = CORETYPE
    os.execv(sys.executable, [sys.executable] + sys.argv)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Presets: E, LSTM layer sizes, head, K, B, T, dropouts, AR/TAR weights (alpha, beta).  They
# mirror lm/train_config.cpp's preset_config.  All decoders are tied (the MoS and AWD-LSTM PTB
# setups); softmax heads therefore need the last LSTM size == E (tiny: E = H = 64).
NO_DROPOUT = dict(dropout=0.0, dropouth=0.0, dropouti=0.0, dropoute=0.0, wdrop=0.0, dropoutl=0.0)
SMALL_DROPOUT = dict(dropout=0.4, dropouth=0.25, dropouti=0.0, dropoute=0.1, wdrop=0.5,
                     dropoutl=0.4)
PRESETS = {
    "tiny": dict(E=64, layers=[64], head="softmax", K=0, B=16, T=32, drop=NO_DROPOUT,
                 alpha=0.0, beta=0.0),
    "small-softmax": dict(E=200, layers=[400, 200], head="softmax", K=0, B=20, T=35,
                          drop=SMALL_DROPOUT, alpha=2.0, beta=1.0),
    "small-mos": dict(E=200, layers=[400, 400], head="mos", K=5, B=20, T=35, drop=SMALL_DROPOUT,
                      alpha=2.0, beta=1.0),
    "small-sigsoftmax": dict(E=200, layers=[400, 200], head="sigsoftmax", K=0, B=20, T=35,
                             drop=SMALL_DROPOUT, alpha=2.0, beta=1.0),
    "small-mosig": dict(E=200, layers=[400, 400], head="mosig", K=5, B=20, T=35,
                        drop=SMALL_DROPOUT, alpha=2.0, beta=1.0),
    # Yang et al.'s PTB model (zihangdai/mos README command line).
    "mos-paper": dict(E=280, layers=[960, 960, 620], head="mos", K=15, B=12, T=70,
                      drop=dict(dropout=0.4, dropouth=0.225, dropouti=0.4, dropoute=0.1,
                                wdrop=0.5, dropoutl=0.29),
                      alpha=2.0, beta=1.0, slow=True),
}
MIXTURE = ("mos", "mosig", "moc")


# ----------------------------------------------------------------------------------------------
# Worker: one measurement (preset, mode) in this process
# ----------------------------------------------------------------------------------------------

def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def blas_info():
    """Which BLAS shared objects this process loaded, and OpenBLAS's own idea of its kernel."""
    import ctypes
    libs = []
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if ("blas" in path or "lapack" in path) and path.startswith("/") and path not in libs:
            libs.append(path)
    info = {"blas_loaded": [p for p in libs if "blas" in os.path.basename(p)]}
    for p in info["blas_loaded"]:
        try:
            lib = ctypes.CDLL(p)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            info["openblas_core"] = lib.openblas_get_corename().decode()
            info["openblas_config"] = lib.openblas_get_config().decode().strip()
            break
        except (OSError, AttributeError):
            continue
    return info


def worker(args):
    import torch
    import torch.nn.functional as F
    rss_import = rss_mib()
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import torch_model as tm

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    p = PRESETS[args.worker]
    mode = args.mode  # train-plain | train-gathered | eval
    layers = p["layers"]
    model = tm.RNNModel(args.vocab, p["E"], layers[0], layers[-1], len(layers), head=p["head"],
                        n_experts=max(p["K"], 1), tie_weights=True, **p["drop"])
    assert [h for _, h in model.layer_sizes] == layers, (model.layer_sizes, layers)
    params = list(model.parameters())  # the tied weight once
    nparams = sum(t.numel() for t in params)
    opt = torch.optim.SGD(params, lr=args.lr)  # plain SGD: no momentum, no weight decay

    B, T = p["B"], p["T"]
    if mode == "eval":
        B = args.eval_batch  # the references evaluate with batch 10
    alpha, beta = (0.0, 0.0) if args.no_ar_tar else (p["alpha"], p["beta"])
    # A synthetic token stream [L,B], batchified as in the references; windows cycle over it.
    nwin = 50
    data = torch.randint(0, args.vocab, (T * nwin + 1, B))
    state = {"i": 0, "hidden": model.init_hidden(B), "loss": float("nan")}

    def batch():
        s = (state["i"] % nwin) * T
        state["i"] += 1
        return data[s:s + T], data[s + 1:s + T + 1]  # input [T,B], target [T,B]

    # --precision bf16: PyTorch's own mixed precision on the CPU, torch.autocast with bfloat16
    # (oneDNN GEMMs in bf16; log_softmax, the losses and the weights stay FP32), around the forward
    # and the loss as its documentation prescribes; backward runs outside it.
    def autocast():
        if args.precision == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def train_step():
        with autocast():
            loss, nll, hidden = forward_loss()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.25)
        opt.step()
        state["hidden"], state["loss"] = hidden, nll.item()

    def forward_loss():
        x, y = batch()
        hidden = tm.repackage_hidden(state["hidden"])  # truncated BPTT
        opt.zero_grad(set_to_none=True)
        if mode == "train-plain":
            logp, hidden, raw_outputs, outputs = model(x, hidden)  # [N,V]
            nll = F.nll_loss(logp, y.reshape(-1))
        else:
            lp_t, hidden, raw_outputs, outputs = model.target_log_prob(x, hidden, y)  # [N]
            nll = -lp_t.mean()
        loss = nll
        # AWD-LSTM's activation regularisation (AR, on the last layer's dropped output) and
        # temporal activation regularisation (TAR, on its raw output's step differences).
        if alpha:
            loss = loss + alpha * outputs[-1].pow(2).mean()
        if beta:
            raw = raw_outputs[-1]  # [T,B,H_last]
            loss = loss + beta * (raw[1:] - raw[:-1]).pow(2).mean()
        return loss.float(), nll.float(), hidden

    def eval_step():
        x, y = batch()
        with torch.no_grad(), autocast():
            logp, hidden, _, _ = model(x, state["hidden"])
            state["hidden"], state["loss"] = hidden, F.nll_loss(logp, y.reshape(-1)).item()

    if mode == "eval":
        model.eval()
        step, seconds = eval_step, args.eval_seconds
    else:
        model.train()
        step, seconds = train_step, args.seconds
    repeats = args.repeats
    if p.get("slow"):
        repeats = args.slow_repeats
        seconds = min(seconds, args.slow_seconds)

    step()  # warm-up: allocator, OpenMP pool, OpenBLAS buffers
    runs, steps_total = [], 0
    for _ in range(repeats):
        steps, t0 = 0, time.perf_counter()
        while True:  # at least one step; stop at the first step that ends past `seconds`
            step()
            steps += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds:
                break
        runs.append(steps * B * T / elapsed)
        steps_total += steps

    out = dict(preset=args.worker, mode=mode, precision=args.precision, B=B, T=T, alpha=alpha,
               beta=beta,
               tok_s=statistics.median(runs), runs=runs,
               steps=steps_total, seconds_per_run=seconds, loss=state["loss"],
               peak_rss_mib=rss_mib(), rss_mib_torch_import=rss_import, params=nparams,
               torch=torch.__version__, threads=torch.get_num_threads(),
               openblas_coretype_env=os.environ.get("OPENBLAS_CORETYPE"))
    out.update(blas_info())
    print(json.dumps(out))


# ----------------------------------------------------------------------------------------------
# Driver: a subprocess per (preset, mode), merged into one record per preset
# ----------------------------------------------------------------------------------------------

def blas_alternative():
    """Where Debian's libblas.so.3 alternative points (libopenblas0-openmp should win)."""
    try:
        out = subprocess.run(["update-alternatives", "--display", "libblas.so.3-x86_64-linux-gnu"],
                             capture_output=True, text=True, check=False).stdout
    except OSError:
        return "unknown (no update-alternatives)"
    for line in out.splitlines():
        if "currently points to" in line:
            return line.split("currently points to")[-1].strip()
    return "unknown"


def measure(args, preset, mode):
    env = dict(os.environ, OPENBLAS_CORETYPE=CORETYPE, OMP_NUM_THREADS=str(args.threads))
    if args.omp_wait_policy:
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", preset, "--mode", mode,
           "--seconds", str(args.seconds), "--eval-seconds", str(args.eval_seconds),
           "--repeats", str(args.repeats), "--slow-repeats", str(args.slow_repeats),
           "--slow-seconds", str(args.slow_seconds), "--threads", str(args.threads),
           "--vocab", str(args.vocab), "--lr", str(args.lr), "--eval-batch", str(args.eval_batch),
           "--precision", args.precision]
    if args.no_ar_tar:
        cmd.append("--no-ar-tar")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": "rc %d: %s" % (r.returncode, r.stderr.strip().splitlines()[-1:])}
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_preset(args, name, alt):
    p = PRESETS[name]
    forms = args.forms.split(",") if args.forms else (
        ["plain", "gathered"] if p["head"] in MIXTURE else ["plain"])
    modes = ["train-" + f for f in forms] + (["eval"] if not args.no_eval else [])
    rec = dict(impl="pytorch", preset=name, precision=args.precision, V=args.vocab, E=p["E"], layers=p["layers"],
               head=p["head"], K=p["K"], B=p["B"], T=p["T"], tied=True, **p["drop"])
    # The 1-minute load average before and after: on a shared machine, a load above the thread
    # count means the numbers are mostly contention (OpenMP threads that spin at barriers
    # suffer most when the cores are oversubscribed).
    rec["loadavg_before"] = round(os.getloadavg()[0], 2)
    for mode in modes:
        m = measure(args, name, mode)
        key = mode.replace("train-", "train_")
        if "error" in m:
            rec[key + "_error"] = m["error"]
            continue
        for k in ("torch", "threads", "openblas_coretype_env", "blas_loaded", "openblas_core",
                  "params", "rss_mib_torch_import"):
            if k in m:
                rec[k] = m[k]
        if mode == "eval":
            rec["eval_B"] = m["B"]
        else:
            rec["alpha"], rec["beta"] = m["alpha"], m["beta"]
        rec[key + "_tok_s"] = round(m["tok_s"], 1)
        rec[key + "_runs"] = [round(v, 1) for v in m["runs"]]
        rec[key + "_seconds_per_run"] = m["seconds_per_run"]
        rec[key + "_peak_rss_mib"] = round(m["peak_rss_mib"], 1)
        rec[key + "_loss"] = round(m["loss"], 4)
    rec["loadavg_after"] = round(os.getloadavg()[0], 2)
    rec["omp_wait_policy"] = args.omp_wait_policy or os.environ.get("OMP_WAIT_POLICY", "default")
    rec["peak_rss_mib"] = max([v for k, v in rec.items() if k.endswith("_peak_rss_mib")] or [0])
    # The keys bench/bench_train.cpp prints, for merging: train_tok_s is the plain form.
    if "train_plain_tok_s" in rec:
        rec["train_tok_s"] = rec["train_plain_tok_s"]
    rec["peak_rss_mb"] = rec["peak_rss_mib"]
    rec["blas_alternative"] = alt
    return rec


def main():
    ap = argparse.ArgumentParser(description="PyTorch peer benchmark of mosgrad's presets")
    ap.add_argument("--presets", default=",".join(PRESETS),
                    help="comma-separated, from: " + ", ".join(PRESETS))
    ap.add_argument("--seconds", type=float, default=10.0, help="length of one training run")
    ap.add_argument("--repeats", type=int, default=3, help="runs per measurement (median)")
    ap.add_argument("--eval-seconds", type=float, default=None,
                    help="length of one eval run (default: --seconds / 2)")
    ap.add_argument("--slow-repeats", type=int, default=1, help="runs for slow presets (mos-paper)")
    ap.add_argument("--slow-seconds", type=float, default=6.0,
                    help="cap on the run length for slow presets")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--omp-wait-policy", choices=["PASSIVE", "ACTIVE"], default=None,
                    help="OMP_WAIT_POLICY for the measuring processes (default: inherited, "
                         "else libgomp's spin-then-sleep); PASSIVE degrades far less when the "
                         "cores are oversubscribed")
    ap.add_argument("--forms", default=None,
                    help="loss forms to train with: plain,gathered (default: gathered for "
                         "mixture heads only)")
    ap.add_argument("--no-eval", action="store_true")
    ap.add_argument("--eval-batch", type=int, default=10, help="eval batch size (references: 10)")
    ap.add_argument("--no-ar-tar", action="store_true",
                    help="train without AWD-LSTM's AR/TAR terms (presets: alpha 2, beta 1)")
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: torch.autocast('cpu', dtype=torch.bfloat16) around forward + loss")
    ap.add_argument("--lr", type=float, default=20.0, help="SGD learning rate (MoS PTB: 20)")
    ap.add_argument("--json", action="store_true", help="one JSON object per preset per line")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.eval_seconds is None:
        args.eval_seconds = args.seconds / 2
    if args.worker:
        return worker(args)

    names = [n for n in args.presets.split(",") if n]
    for n in names:
        if n not in PRESETS:
            ap.error("unknown preset %r (have %s)" % (n, ", ".join(PRESETS)))
    alt = blas_alternative()
    if not args.json:
        print("PyTorch peer benchmark: %d thread(s), OPENBLAS_CORETYPE=%s, OMP_WAIT_POLICY=%s, "
              "libblas.so.3 -> %s" % (args.threads, CORETYPE, args.omp_wait_policy or
                                      os.environ.get("OMP_WAIT_POLICY", "default"), alt))
        print("(shared machine: tokens/s are noisy; median of runs shown)")
        print("%-17s %12s %12s %12s %26s" % ("preset", "train plain", "train gath.", "eval",
                                             "peak RSS MiB (tp/tg/ev)"))
    for n in names:
        rec = run_preset(args, n, alt)
        if args.json:
            print(json.dumps(rec), flush=True)
            continue
        f = lambda k: ("%.0f" % rec[k]) if k in rec else "-"  # noqa: E731
        print("%-17s %12s %12s %12s %26s   load %.1f -> %.1f" % (
            n, f("train_plain_tok_s"), f("train_gathered_tok_s"), f("eval_tok_s"),
            "/".join(f(k + "_peak_rss_mib") for k in ("train_plain", "train_gathered", "eval")),
            rec["loadavg_before"], rec["loadavg_after"]), flush=True)
        for k, v in rec.items():
            if k.endswith("_error"):
                print("  %s: %s" % (k, v))
    if not args.json and names:
        print("torch %s, BLAS loaded: %s (OpenBLAS core %s), torch import RSS %.0f MiB" % (
            rec.get("torch"), ", ".join(rec.get("blas_loaded", [])), rec.get("openblas_core"),
            rec.get("rss_mib_torch_import", 0)))


if __name__ == "__main__":
    main()
