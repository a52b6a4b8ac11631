#!/usr/bin/python3
"""mos_port.py: a PyTorch (CPU) port of the AWD-LSTM / Mixture-of-Softmaxes training recipe, to give
PyTorch the same wall-clock budget and cores as `mosgrad train` on Penn Treebank and compare them.

Follows zihangdai/mos (main.py, finetune.py, model.py, utils.py) and salesforce/awd-lstm-lm
(main.py, weight_drop.py, embed_regularize.py, locked_dropout.py, utils.py), rewritten for today's
PyTorch; the model is in tools/mos_port_model.py. Flags are named as mosgrad's `train` (underscores;
`-` works too) with the defaults of its small-mos preset: E=200, LSTM [400,400], MoS K=5, B=20,
T=35, lr 20, dropout .4/.25/0/.1, dropoutl .4, wdrop .5, alpha 2, beta 1, wdecay 1.2e-6, clip .25.
The recipe: SGD, lr * seq_len/bptt per step; variable BPTT (bptt w.p. .95 else bptt/2, then
int(N(., 5)), at least 5, at most bptt + max_seq_len_delta); loss = mean NLL + alpha mean(dropped
last output^2) + beta mean((raw h_t - h_{t-1})^2); clip the gradient norm; NT-ASGD (torch.optim.ASGD
t0=0 lambd=0 once validation is worse than the best of all but the last `nonmono` epochs, validation
and the saved model use the averaged weights); valid at batch 10, test of the best model at batch 1.

Differences from the reference code (all that are known):
 - Weight drop: the reference's WeightDrop (delete nn.LSTM's weight_hh_l0 Parameter, setattr a
   dropped tensor, a no-op flatten_parameters) fails on today's PyTorch. Here each layer owns its
   weights and calls torch._VF.lstm (nn.LSTM's own kernel) with F.dropout(W_hh): the same function,
   a new element-wise mask per forward. No cuDNN (CPU).
 - MoS loss (--fused_head true, default): -log(sum_k pi_k softmax_k(x) + 1e-8) is computed for the
   target words only (a custom autograd Function, TargetLogSoftmax: one softmax pass forward, the
   gradient from the saved probabilities; logsumexp over K, logaddexp with log 1e-8), not via the
   full [N,V] mixture; the same function to rounding (checked in float64, loss and gradients).
   --fused_head false is the reference's path (softmax, * prior, sum, log(p + 1e-8)).
 - Evaluation divides by the number of targets; the reference divides the sum by len(data_source)
   (rows, one more than the targets per column: its figures are lower by a factor (rows-1)/rows,
   1.4e-4 on PTB valid at batch 10).
 - Added, not in the reference: --asgd_epoch N (switch to ASGD at the start of epoch N whatever
   validation says, as mosgrad), --max_minutes (stop, validate, keep the best, test), --max_steps,
   --max_train_tokens / --max_eval_tokens, --threads, metrics.jsonl, --head softmax (AWD-LSTM's
   model, plain softmax: the reference used SplitCrossEntropyLoss without splits, the same for PTB).
 - Finetune (--finetune_epochs N, MoS finetune.py) runs in the same process after training: load the
   best model, validate it, a fresh ASGD, stop at N epochs, at the budget or when non-monotone. The
   reference re-seeds numpy with 331 for it; here the BPTT stream continues. The budget
   (--max_minutes) covers training and finetuning together.
 - The NT-ASGD history also records epochs run under ASGD (the reference appends only under SGD;
   after the switch it is no longer read, so no effect). No small_batch_size (gradient
   accumulation), no DataParallel, no checkpoint/resume (--continue_train), no AWD-LSTM --when
   (lr / 10 at given epochs), no dynamic evaluation. A non-finite training loss stops the run.
 - Process setup (speed only): the script re-executes itself once with glibc malloc keeping freed
   memory, OMP/OpenBLAS threads = --threads and OMP_WAIT_POLICY=PASSIVE (tools/mos_port_env.py).
   Debian's python3-torch (1.13) calls the system libblas.so.3: with the reference BLAS
   (netlib) a GEMM ran at 2.8 GFLOP/s; install libopenblas0-pthread (the run prints its BLAS).
 - Corpus: as the references (every line + <eos>, vocabulary in order of first appearance over
   train, valid, test); files ptb.{train,valid,test}.txt, {train,...}.txt or wiki.*.tokens.
 - Saved model: a state_dict with the flags and vocabulary (torch.save), not a pickled module.
 - RNG: numpy (seeded --seed) draws the BPTT lengths as the reference; torch (manual_seed) the
   weights and masks. Not bitwise comparable with mosgrad (Philox) nor with the reference
   (different order of draws: each layer owns its weights).
Known differences from mosgrad: the 1e-8 floor of the MoS loss (mosgrad is exact in log space);
torch's ASGD applies, at each step, the learning rate (seq_len-scaled) of the previous step (eta
is updated after the step; the reference uses the same torch.optim.ASGD); ASGD's average starts at
its second iterate (mu = 1/max(1, step - t0); mosgrad averages from the first); the epoch loop ends
at row rows-2 as the reference does (mosgrad: rows-1); metrics.jsonl keys: "valid_ppl", and
"val_ppl" as mosgrad writes it.

One hour on 2 cores, PTB (stop after 60 minutes, validate, test the best at batch size 1):
  /usr/bin/python3 tools/mos_port.py --data "$MOSGRAD_DATA" --threads 2 \
      --max_minutes 60 --save runs/torch-small-mos
"""

import argparse
import json
import math
import os
import sys
import time


sys.dont_write_bytecode = True  # no tools/__pycache__ in the work tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mos_port_env import blas_library, cpu_name, source_commit, tune_process_env  # noqa: E402

if __name__ == "__main__":
    tune_process_env()  # before torch is loaded: may re-execute this script

import numpy as np  # noqa: E402
import torch  # noqa: E402

from mos_port_data import batchify, detach, evaluate, get_batch, read_corpus  # noqa: E402
from mos_port_model import MoSModel  # noqa: E402


# ------------------------------------------------------------------------------------------------
# Flags
# ------------------------------------------------------------------------------------------------

def str2bool(s):
    if s.lower() in ("true", "1", "yes"):
        return True
    if s.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true|false, got {s!r}")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)

    def add(name, **kw):
        names = ["--" + name] + (["--" + name.replace("_", "-")] if "_" in name else [])
        p.add_argument(*names, dest=name, **kw)

    # data and run
    add("data", default=os.environ.get("MOSGRAD_DATA", "data/ptb"),
        help="corpus directory")
    add("save", default="runs/torch-small-mos", help="run directory (metrics.jsonl, best.pt)")
    add("epochs", type=int, default=40, help="epochs of training")
    add("max_minutes", type=float, default=0, help="stop training after this many minutes (0: none)")
    add("max_steps", type=int, default=0, help="... or after this many steps (0: none)")
    add("threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    add("log_interval", type=int, default=200, help="steps between progress lines")
    add("max_train_tokens", type=int, default=0, help="train on the first N tokens (0: all)")
    add("max_eval_tokens", type=int, default=0, help="validate on the first N tokens (0: all)")
    add("test_at_end", type=str2bool, default=True, help="test the best model at the end")
    # model
    add("emsize", type=int, default=200)
    add("nhid", type=int, default=400)
    add("nhidlast", type=int, default=400)
    add("nlayers", type=int, default=2)
    add("n_experts", type=int, default=5)
    add("head", choices=["mos", "softmax"], default="mos")
    add("tied", type=str2bool, default=True)
    add("dropout", type=float, default=0.4)
    add("dropouth", type=float, default=0.25)
    add("dropouti", type=float, default=0.0)
    add("dropoute", type=float, default=0.1)
    add("dropoutl", type=float, default=0.4)
    add("wdrop", type=float, default=0.5)
    add("fused_head", type=str2bool, default=True,
        help="MoS loss on the targets only (true) or the reference's full mixture (false)")
    # optimisation
    add("lr", type=float, default=20.0)
    add("clip", type=float, default=0.25)
    add("alpha", type=float, default=2.0)
    add("beta", type=float, default=1.0)
    add("wdecay", type=float, default=1.2e-6)
    add("batch_size", type=int, default=20)
    add("eval_batch_size", type=int, default=10)
    add("test_batch_size", type=int, default=1)
    add("bptt", type=int, default=35)
    add("max_seq_len_delta", type=int, default=40)
    add("variable_bptt", type=str2bool, default=True)
    add("nonmono", type=int, default=5)
    add("asgd_epoch", type=int, default=0, help="switch to ASGD at the start of this epoch (0: NT)")
    add("seed", type=int, default=1)
    add("optimizer", choices=["sgd", "adam"], default="sgd")
    add("finetune_epochs", type=int, default=0, help="MoS finetune: ASGD from the best model")
    return p.parse_args(argv)


# ------------------------------------------------------------------------------------------------
# Training
# ------------------------------------------------------------------------------------------------

class Run:
    def __init__(self, args):
        self.args = args
        self.t0 = time.time()
        self.metrics = open(os.path.join(args.save, "metrics.jsonl"), "a")
        self.step = 0
        self.tokens = 0
        self.best_val = float("inf")
        self.best_path = os.path.join(args.save, "best.pt")

    def elapsed(self):
        return time.time() - self.t0

    def out_of_budget(self):
        a = self.args
        if a.max_minutes > 0 and self.elapsed() >= 60 * a.max_minutes:
            return f"--max_minutes {a.max_minutes:g}"
        if a.max_steps > 0 and self.step >= a.max_steps:
            return f"--max_steps {a.max_steps}"
        return ""

    def record(self, obj):
        self.metrics.write(json.dumps(obj) + "\n")
        self.metrics.flush()


def is_asgd(opt):
    return isinstance(opt, torch.optim.ASGD)


class AveragedWeights:
    """Within the block the model holds ASGD's averages (state 'ax'); the SGD iterate is restored
    after (main.py's `prm.data = optimizer.state[prm]['ax'].clone()` and back)."""

    def __init__(self, model, opt):
        self.model, self.opt, self.saved = model, opt, None

    def __enter__(self):
        if is_asgd(self.opt):
            self.saved = []
            for prm in self.model.parameters():
                st = self.opt.state.get(prm, {})
                self.saved.append(prm.data.clone())
                if "ax" in st:
                    prm.data.copy_(st["ax"])

    def __exit__(self, *exc):
        if self.saved is not None:
            for prm, w in zip(self.model.parameters(), self.saved):
                prm.data.copy_(w)


def validate_and_keep_best(run, model, opt, val_data, vocab):
    a = run.args
    with AveragedWeights(model, opt):
        val = evaluate(model, val_data, a.bptt, a.eval_batch_size)
        improved = val < run.best_val
        if improved:
            run.best_val = val
            torch.save({"args": vars(a), "vocab": vocab, "state_dict": model.state_dict()},
                       run.best_path)
    return val, improved


def make_asgd(model, a):
    return torch.optim.ASGD(model.parameters(), lr=a.lr, t0=0, lambd=0.0, weight_decay=a.wdecay)


def train_epoch(run, model, opt, train_data, epoch, bptt_rng):
    """One pass over the training data (main.py's train()); returns (mean NLL, tokens, seconds,
    stop reason or "")."""
    a = run.args
    model.train()
    hidden = model.init_hidden(a.batch_size)
    params = list(model.parameters())
    i, batch = 0, 0
    ep_loss, ep_tok, t_ep = 0.0, 0, time.time()
    iv_loss, iv_steps, iv_tok, t_iv = 0.0, 0, 0, time.time()
    nbatches = len(train_data) // a.bptt
    while i < train_data.size(0) - 1 - 1:
        if a.variable_bptt:
            bptt = a.bptt if bptt_rng.random() < 0.95 else a.bptt / 2.0
            seq_len = max(5, int(bptt_rng.normal(bptt, 5)))
            seq_len = min(seq_len, a.bptt + a.max_seq_len_delta)
        else:
            seq_len = a.bptt
        lr2 = opt.param_groups[0]["lr"]
        opt.param_groups[0]["lr"] = lr2 * seq_len / a.bptt
        x, y = get_batch(train_data, i, seq_len)
        hidden = detach(hidden)
        opt.zero_grad(set_to_none=True)
        raw_loss, _, dropped, raw, hidden = model(x, hidden, y, fused=a.fused_head)
        loss = raw_loss
        if a.alpha:
            loss = loss + a.alpha * dropped.pow(2).mean()
        if a.beta:
            loss = loss + a.beta * (raw[1:] - raw[:-1]).pow(2).mean()
        loss.backward()
        if a.clip:
            torch.nn.utils.clip_grad_norm_(params, a.clip)
        opt.step()
        opt.param_groups[0]["lr"] = lr2

        n = x.numel()
        nll = raw_loss.item()
        if not math.isfinite(nll):
            sys.exit(f"training loss is {nll} at step {run.step + 1}: diverged")
        run.step += 1
        run.tokens += n
        ep_loss += nll * n
        ep_tok += n
        iv_loss += nll
        iv_steps += 1
        iv_tok += n
        batch += 1
        i += seq_len
        if run.step % a.log_interval == 0:
            dt = time.time() - t_iv
            cur = iv_loss / iv_steps
            print(f"| epoch {epoch:3d} | {batch:5d}/{nbatches:5d} batches | step {run.step} | "
                  f"lr {lr2:g} | {iv_tok / dt:,.0f} tok/s | ms/batch {1000 * dt / iv_steps:6.1f} | "
                  f"loss {cur:5.2f} | ppl {math.exp(cur):8.2f}", flush=True)
            run.record({"kind": "interval", "epoch": epoch, "step": run.step, "batch": batch,
                        "tokens": run.tokens, "loss": cur, "ppl": math.exp(cur),
                        "tok_per_s": iv_tok / dt, "elapsed_s": run.elapsed()})
            iv_loss, iv_steps, iv_tok, t_iv = 0.0, 0, 0, time.time()
        reason = run.out_of_budget()
        if reason:
            return ep_loss / ep_tok, ep_tok, time.time() - t_ep, reason
    return ep_loss / max(ep_tok, 1), ep_tok, time.time() - t_ep, ""


def run_phase(run, model, opt, data, vocab, phase, epochs, bptt_rng, stored_loss=None):
    """Epochs of training (phase "train": SGD with NT-ASGD / --asgd_epoch) or finetuning (phase
    "finetune": ASGD throughout, ends when non-monotone). Returns the optimizer."""
    a = run.args
    train_data, val_data = data
    history = []
    for epoch in range(1, epochs + 1):
        if phase == "train" and a.asgd_epoch > 0 and epoch >= a.asgd_epoch \
                and a.optimizer == "sgd" and not is_asgd(opt):
            print(f"switching to ASGD (--asgd_epoch {a.asgd_epoch})", flush=True)
            opt = make_asgd(model, a)
        train_loss, ntok, secs, reason = train_epoch(run, model, opt, train_data, epoch, bptt_rng)
        val, improved = validate_and_keep_best(run, model, opt, val_data, vocab)
        optname = "asgd" if is_asgd(opt) else a.optimizer
        rec = {"kind": "epoch", "phase": phase, "epoch": epoch, "step": run.step,
               "tokens": run.tokens, "elapsed_s": run.elapsed(), "epoch_s": secs,
               "train_ppl": math.exp(train_loss), "valid_ppl": math.exp(val),
               "valid_loss": val, "val_ppl": math.exp(val), "val_loss": val,
               "train_loss": train_loss, "optimizer": optname, "tok_per_s": ntok / secs,
               "best": improved}
        if reason:
            rec["at_stop"] = True
        run.record(rec)
        print("-" * 89)
        print(f"| {phase} epoch {epoch:3d}{' (stopped)' if reason else ''} | time {secs:6.1f}s | "
              f"{ntok / secs:,.0f} tok/s | train ppl {math.exp(train_loss):8.2f} | valid ppl "
              f"{math.exp(val):8.2f}{' *' if improved else ''} | {optname} | "
              f"elapsed {run.elapsed() / 60:.1f} min", flush=True)
        print("-" * 89, flush=True)
        if reason:
            print(f"stopped: {reason}", flush=True)
            return opt, reason
        worse = len(history) > a.nonmono and val > min(history[:-a.nonmono])
        history.append(val)
        if phase == "train" and worse and a.optimizer == "sgd" and not is_asgd(opt):
            print(f"switching to ASGD (validation has not improved for {a.nonmono} epochs)")
            opt = make_asgd(model, a)
        if phase == "finetune" and worse:
            print("finetuning done: validation stopped improving")
            break
    return opt, ""


def main():
    a = parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    np.random.seed(a.seed)
    torch.manual_seed(a.seed)
    bptt_rng = np.random  # the references draw the BPTT lengths from numpy's global stream
    os.makedirs(a.save, exist_ok=True)

    vocab, (train_ids, valid_ids, test_ids) = read_corpus(a.data)
    if a.max_train_tokens > 0:
        train_ids = train_ids[:a.max_train_tokens]
    if a.max_eval_tokens > 0:
        valid_ids = valid_ids[:a.max_eval_tokens]
    train_data = batchify(train_ids, a.batch_size)
    val_data = batchify(valid_ids, a.eval_batch_size)
    test_data = batchify(test_ids, a.test_batch_size)
    print(f"data {a.data}: {len(train_ids)} train tokens, V={len(vocab)}; run directory {a.save}")

    model = MoSModel(len(vocab), a.emsize, a.nhid, a.nhidlast, a.nlayers, a.n_experts, a.head,
                     a.tied, a.dropout, a.dropouth, a.dropouti, a.dropoute, a.dropoutl, a.wdrop)
    nparams = sum(p.numel() for p in model.parameters())
    sizes = [r.nhid for r in model.rnns]
    print(f"{a.head} K={a.n_experts} E={a.emsize} LSTM {sizes} V={len(vocab)} "
          f"{'tied' if a.tied else 'untied'}, {nparams} parameters, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}", flush=True)
    blas = blas_library()
    print(f"BLAS: {blas}" + ("  (the reference BLAS: slow; install OpenBLAS)"
                              if "openblas" not in blas and "mkl" not in blas else ""))
    run = Run(a)
    run.record({"kind": "start", "args": vars(a), "parameters": nparams, "blas": blas,
                "threads": torch.get_num_threads(), "torch": torch.__version__,
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpu": cpu_name(),
                "commit": source_commit(), "command": " ".join(["tools/mos_port.py"] + sys.argv[1:])})

    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, weight_decay=a.wdecay)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=a.lr, weight_decay=a.wdecay)
    reason = ""
    try:
        opt, reason = run_phase(run, model, opt, (train_data, val_data), vocab, "train", a.epochs,
                                bptt_rng)
        if a.finetune_epochs > 0 and not reason and os.path.exists(run.best_path):
            model.load_state_dict(torch.load(run.best_path)["state_dict"])
            print(f"finetuning from {run.best_path} (valid ppl {math.exp(run.best_val):.2f})")
            run_phase(run, model, make_asgd(model, a), (train_data, val_data), vocab, "finetune",
                      a.finetune_epochs, bptt_rng)
    except KeyboardInterrupt:
        print("-" * 89 + "\nexiting from training early (Ctrl-C)", flush=True)

    final = {"kind": "final", "best_valid_ppl": math.exp(run.best_val), "steps": run.step,
             "tokens": run.tokens, "train_elapsed_s": run.elapsed()}
    if a.test_at_end and os.path.exists(run.best_path):
        model.load_state_dict(torch.load(run.best_path)["state_dict"])
        t = time.time()
        test = evaluate(model, test_data, a.bptt, a.test_batch_size)
        final.update(test_loss=test, test_ppl=math.exp(test), test_s=time.time() - t)
        print("=" * 89)
        print(f"| end of training | best valid ppl {math.exp(run.best_val):8.2f} | test loss "
              f"{test:5.3f} | test ppl {math.exp(test):8.2f} | {time.time() - t:.0f}s")
        print("=" * 89, flush=True)
    run.record(final)


if __name__ == "__main__":
    main()
