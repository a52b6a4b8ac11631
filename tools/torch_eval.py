#!/usr/bin/env python3
"""PyTorch side of mosgrad's perplexity cross-check and of the safetensors exchange.

  /usr/bin/python3 tools/torch_eval.py gen-fixture [--data DIR]
      Builds a small MoS model (fixed seed) with the reference definition in tools/torch_model.py,
      writes its weights and flags to tests/fixtures/ptb_eval_model.safetensors, and the PyTorch
      perplexity of the first 5,000 tokens of PTB valid (AWD-LSTM convention: batchify into B=10
      columns, hidden state carried over segments of 35) into tests/fixtures/ptb_eval.txt.
      tests/lm/test_ptb_eval.cpp imports the file and must get the same loss within 1e-4 relative.

  /usr/bin/python3 tools/torch_eval.py eval FILE.safetensors [--data DIR] [--split valid|test]
                                             [--batch_size B] [--bptt T] [--tokens N]
      Loads a file written by `mosgrad export` into the PyTorch reference model and prints its
      perplexity: what a PyTorch user gets from the same weights.

PTB is read with AWD-LSTM's data.py rules (vocabulary from train in order of first appearance,
<eos> after every line), which is what lm/corpus.cpp does, so token ids agree.
"""
import argparse
import json
import math
import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_model  # noqa: E402
from check_safetensors import spec_bytes, spec_read  # noqa: E402

FIXTURE_MODEL = os.path.join(HERE, "..", "tests", "fixtures", "ptb_eval_model.safetensors")
FIXTURE_TEXT = os.path.join(HERE, "..", "tests", "fixtures", "ptb_eval.txt")


def default_data():
    return os.environ.get("MOSGRAD_DATA", os.path.join(HERE, "..", "..", "shared", "data", "ptb"))


def read_corpus(data):
    """AWD-LSTM data.py: ids of train/valid/test with the train vocabulary."""
    vocab, ids = {}, {}
    for split in ("train", "valid", "test"):
        out = []
        with open(os.path.join(data, "ptb.%s.txt" % split), encoding="utf-8") as f:
            for line in f:
                for w in line.split() + ["<eos>"]:
                    if split == "train" and w not in vocab:
                        vocab[w] = len(vocab)
                    out.append(vocab.get(w, vocab.get("<unk>")))
        ids[split] = out
    return vocab, ids


def evaluate(model, ids, batch_size, bptt):
    """Mean NLL per target: B columns, hidden carried, every position after the first scored once."""
    n = len(ids) // batch_size
    data = torch.tensor(ids[: n * batch_size], dtype=torch.long).view(batch_size, n).t().contiguous()
    model.eval()
    hidden = model.init_hidden(batch_size)
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, n - 1, bptt):
            seq_len = min(bptt, n - 1 - i)
            x, y = data[i:i + seq_len], data[i + 1:i + 1 + seq_len].reshape(-1)
            log_prob, hidden, _, _ = model(x, hidden)
            total += -log_prob.double().gather(1, y.view(-1, 1)).sum().item()
            count += y.numel()
    return total / count, count


def flags_of(model):
    return {"model.ntoken": str(model.ntoken), "model.emsize": str(model.ninp),
            "model.nhid": str(model.layer_sizes[0][1] if model.nlayers > 1 else model.layer_sizes[-1][1]),
            "model.nhidlast": str(model.layer_sizes[-1][1]), "model.nlayers": str(model.nlayers),
            "model.n_experts": str(max(1, model.n_experts)), "model.dropout": "0", "model.dropouth": "0",
            "model.dropouti": "0", "model.dropoute": "0", "model.dropoutl": "0", "model.wdrop": "0",
            "model.tied": "1" if model.tie_weights else "0", "model.head": model.head}


def model_from_file(path):
    tensors, meta = spec_read(path)
    m = {k[len("model."):]: v for k, v in meta.items() if k.startswith("model.")}
    model = torch_model.RNNModel(int(m["ntoken"]), int(m["emsize"]), int(m["nhid"]), int(m["nhidlast"]),
                                 int(m["nlayers"]), head=m["head"], n_experts=int(m["n_experts"]),
                                 tie_weights=m["tied"] == "1", dropout=0, dropouth=0, dropouti=0, dropoute=0,
                                 wdrop=0, dropoutl=0)
    with torch.no_grad():
        for name, p in model.spec_parameters().items():
            if name not in tensors:
                raise SystemExit("%s: parameter %s is missing" % (path, name))
            if tuple(tensors[name].shape) != tuple(p.shape):
                raise SystemExit("%s: %s is %s, the model expects %s" % (path, name, tuple(tensors[name].shape), tuple(p.shape)))
            p.copy_(tensors[name])
    return model, meta


def gen_fixture(args):
    vocab, ids = read_corpus(args.data)
    torch.manual_seed(1234)
    model = torch_model.RNNModel(len(vocab), 8, 12, 10, 2, head="mos", n_experts=3, tie_weights=True,
                                 dropout=0, dropouth=0, dropouti=0, dropoute=0, wdrop=0, dropoutl=0)
    # Make the numbers mean something: a near-uniform untrained model scores ~ln(10000) whatever the
    # code does. The decoder bias becomes log unigram frequencies of train (ppl ~700 alone) and the
    # embeddings are widened so the LSTM and the mixture visibly move the prediction.
    with torch.no_grad():
        counts = torch.bincount(torch.tensor(ids["train"]), minlength=len(vocab)).double() + 1
        model.decoder.bias.copy_((counts / counts.sum()).log())
        model.encoder.weight.uniform_(-0.6, 0.6)
        model.latent.weight.mul_(3)
    tensors = {n: p.detach().float().contiguous() for n, p in model.spec_parameters().items()}
    meta = flags_of(model)
    with open(FIXTURE_MODEL, "wb") as f:
        f.write(spec_bytes(tensors, meta))
    tokens = ids["valid"][:5000]
    loss, count = evaluate(model.double(), tokens, 10, 35)  # float64 reference
    with open(FIXTURE_TEXT, "w") as f:
        f.write("# tests/fixtures/ptb_eval.txt -- written by tools/torch_eval.py gen-fixture with PyTorch %s\n" % torch.__version__)
        f.write("# PyTorch (float64) loss of ptb_eval_model.safetensors on the first 5000 tokens of PTB valid,\n")
        f.write("# batch size 10, bptt 35, hidden state carried; targets = (5000/10 - 1) * 10.\n")
        f.write("tokens 0 : 5000\nbatch_size 0 : 10\nbptt 0 : 35\ntargets 0 : %d\nloss 0 : %.9g\n" % (count, loss))
    print("wrote %s and %s: loss %.6f ppl %.3f over %d targets" % (FIXTURE_MODEL, FIXTURE_TEXT, loss, math.exp(loss), count))


def eval_file(args):
    model, meta = model_from_file(args.file)
    vocab, ids = read_corpus(args.data)
    if len(vocab) != model.ntoken:
        raise SystemExit("the corpus has V=%d but the model V=%d" % (len(vocab), model.ntoken))
    tokens = ids[args.split][: args.tokens] if args.tokens else ids[args.split]
    loss, count = evaluate(model, tokens, args.batch_size, args.bptt)
    print("pytorch %s loss %.6f ppl %.3f (%d targets)" % (args.split, loss, math.exp(loss), count))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen-fixture")
    g.add_argument("--data", default=default_data())
    e = sub.add_parser("eval")
    e.add_argument("file")
    e.add_argument("--data", default=default_data())
    e.add_argument("--split", default="test", choices=["valid", "test"])
    e.add_argument("--batch_size", type=int, default=1)
    e.add_argument("--bptt", type=int, default=70)
    e.add_argument("--tokens", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(2)
    gen_fixture(args) if args.cmd == "gen-fixture" else eval_file(args)


if __name__ == "__main__":
    main()
