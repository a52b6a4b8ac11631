#!/usr/bin/env python3
"""PyTorch peer of mosgrad's GPU benchmark (bench/run_cuda.sh): the same presets, on the same GPU.

    python3 bench/torch_bench_cuda.py --preset small-mos [--seconds 8] [--repeats 3]

Prints one JSON line: train tokens/s of both loss forms (plain: the full [N,V] log-prob matrix then
NLL; gathered: each component's log-prob only at the target), eval tokens/s (no_grad, batch 10) and
the peak GPU memory (torch.cuda.max_memory_allocated) of each measurement. The model is
tools/torch_model.py (the reference mosgrad is checked against); its LSTM layers call the fused
torch._VF.lstm, which is cuDNN's LSTM on the GPU. Timing: CUDA synchronised around each run,
one warm-up step, median of the runs. The presets are bench/torch_bench.py's.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
sys.path.insert(0, HERE)
# torch_bench re-executes the interpreter unless OpenBLAS's core type is already set (a CPU matter).
os.environ["OPENBLAS_CORETYPE"] = os.environ.get("MOSGRAD_BENCH_CORETYPE", "SkylakeX")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_model as tm  # noqa: E402
from torch_bench import PRESETS  # noqa: E402


def measure(p, mode, args):
    dev = torch.device("cuda")
    torch.manual_seed(0)
    layers = p["layers"]
    model = tm.RNNModel(args.vocab, p["E"], layers[0], layers[-1], len(layers), head=p["head"],
                        n_experts=max(p["K"], 1), tie_weights=True, **p["drop"]).to(dev)
    # FP32, as mosgrad's default; --tf32 lets both cuBLAS and cuDNN round GEMM operands to TF32
    # (mosgrad's --tf32 / bench_train --tf32), for the table run_cuda.sh makes with BENCH_TF32=1.
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=args.lr)
    B, T = (args.eval_batch, p["T"]) if mode == "eval" else (p["B"], p["T"])
    alpha, beta = p["alpha"], p["beta"]
    nwin = 50
    data = torch.randint(0, args.vocab, (T * nwin + 1, B), device=dev)
    state = {"i": 0, "hidden": model.init_hidden(B)}  # on the weights' device

    def batch():
        s = (state["i"] % nwin) * T
        state["i"] += 1
        return data[s:s + T], data[s + 1:s + T + 1]

    def train_step():
        x, y = batch()
        hidden = tm.repackage_hidden(state["hidden"])
        opt.zero_grad(set_to_none=True)
        if mode == "train-plain":
            logp, hidden, raw_outputs, outputs = model(x, hidden)
            nll = F.nll_loss(logp, y.reshape(-1))
        else:
            lp_t, hidden, raw_outputs, outputs = model.target_log_prob(x, hidden, y)
            nll = -lp_t.mean()
        loss = nll
        if alpha:
            loss = loss + alpha * outputs[-1].pow(2).mean()
        if beta:
            raw = raw_outputs[-1]
            loss = loss + beta * (raw[1:] - raw[:-1]).pow(2).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.25)
        opt.step()
        state["hidden"] = hidden

    def eval_step():
        x, y = batch()
        with torch.no_grad():
            logp, hidden, _, _ = model(x, state["hidden"])
            state["hidden"] = hidden
            F.nll_loss(logp, y.reshape(-1))

    if mode == "eval":
        model.eval()
        step = eval_step
    else:
        model.train()
        step = train_step
    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    runs = []
    for _ in range(args.repeats):
        steps, t0 = 0, time.perf_counter()
        while True:
            step()
            steps += 1
            if time.perf_counter() - t0 >= args.seconds:
                break
        torch.cuda.synchronize()
        runs.append(steps * B * T / (time.perf_counter() - t0))
    return statistics.median(runs), torch.cuda.max_memory_allocated() / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small-mos")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--eval-batch", type=int, default=10)
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--lr", type=float, default=20.0)
    ap.add_argument("--tf32", action="store_true", help="TF32 GEMMs in cuBLAS and cuDNN")
    args = ap.parse_args()
    p = PRESETS[args.preset]
    out = {"impl": "torch", "preset": args.preset, "device": torch.cuda.get_device_name(),
           "torch": torch.__version__, "cudnn": torch.backends.cudnn.version()}
    for mode in ("train-plain", "train-gathered", "eval"):
        tok_s, peak = measure(p, mode, args)
        key = mode.replace("-", "_")
        out[key + "_tok_s"], out[key + "_peak_gpu_mb"] = round(tok_s, 1), round(peak, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
