#!/usr/bin/python3
"""Writes tests/fixtures/weight_drop.txt: PyTorch reference values for weight drop in training mode
(read by tests/nn/test_weight_drop.cpp).

    /usr/bin/python3 tools/gen_weight_drop_fixtures.py [--out tests/fixtures/weight_drop.txt]

Weight drop is AWD-LSTM's WeightDrop: before every forward pass, F.dropout(weight_hh_raw, p) --
one Bernoulli(1-p) mask over the whole [4H,H] matrix, kept weights scaled by 1/(1-p), shared by
every time step, a fresh mask per forward pass and per layer, weight_ih untouched, the identity in
eval mode -- and the gradient reaches the raw weight through the mask. tools/torch_model.py is
that model. PyTorch cannot draw mosgrad's masks, so this script runs it with F.dropout's Bernoulli
draws replaced by mosgrad's: Philox4x32-10 at the positions mosgrad's dropout generator hands out
(tensor/philox.cpp, written out again below), u >= p keeps a weight. Everything else -- which
matrix is dropped, the scale, when masks are drawn, the LSTM and the gradients -- is PyTorch's.

Format: as tests/fixtures/layers.txt (tools/gen_layer_fixtures.py): one tensor per line,
`name rank d0 d1 ... : values`, float32 inputs, float64 references.
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_model as tm  # noqa: E402
from gen_layer_fixtures import FixtureWriter, f32, seed  # noqa: E402

DEFAULT_OUT = os.path.join(HERE, "..", "tests", "fixtures", "weight_drop.txt")

# A model where only weight drop draws random numbers: every other dropout is 0. nhid = E so that
# weight_ih and weight_hh have the same shape in both layers: dropping the wrong one is then a
# wrong number, not a shape error.
V, E, NHID, NLAYERS, T, B = 23, 6, 6, 2, 5, 2
WDROP = 0.4
GEN_SEED = 1234  # the C++ test sets the model's dropout generator to Generator(GEN_SEED)


# ---- mosgrad's random numbers (tensor/philox.h) ------------------------------------------------

M32 = 0xFFFFFFFF


def philox4x32(ctr, key):
    """One Philox4x32-10 block: 4 words from the counter ctr (4 words) and a 64-bit key."""
    k0, k1 = key & M32, (key >> 32) & M32
    c = list(ctr)
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c[3] ^ k1) & M32, p0 & M32]
        k0 = (k0 + 0x9E3779B9) & M32
        k1 = (k1 + 0xBB67AE85) & M32
    return c


def philox_uniform(seed_, index):
    """The float in [0,1) at position `index` of stream `seed_` (24 random bits, exact)."""
    block = index >> 2
    word = philox4x32([block & M32, (block >> 32) & M32, 0, 0], seed_)[index & 3]
    return (word >> 8) / 16777216.0


class Stream:
    """mosgrad's Generator: (seed, offset); a draw of n numbers takes positions offset..offset+n-1."""

    def __init__(self, seed_):
        self.seed, self.offset = seed_, 0

    def dropout_mask(self, shape, p):
        """mosgrad's dropout_mask: u >= p keeps, scaled by 1/(1-p), both in float32."""
        n = 1
        for d in shape:
            n *= d
        p32 = float(torch.tensor(p, dtype=torch.float32))
        scale = float(torch.tensor(1.0, dtype=torch.float32) / (1 - torch.tensor(p, dtype=torch.float32)))
        u = [philox_uniform(self.seed, self.offset + i) for i in range(n)]
        self.offset += n
        return torch.tensor([scale if x >= p32 else 0.0 for x in u], dtype=torch.float64).view(shape)


def check_philox():
    # The known answer tests/tensor/test_tensor.cpp checks too (Random123's kat_vectors, all-ones input).
    assert philox4x32([M32] * 4, 0xFFFFFFFFFFFFFFFF) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


# ---- the reference --------------------------------------------------------------------------------

def run_pass(model, input, target, stream):
    """One training-mode forward and backward, F.dropout drawing from mosgrad's stream.
    Returns (loss, masks per layer, gradients per spec parameter)."""
    masks = []

    def mosgrad_dropout(x, p, training=True):
        assert training
        mask = stream.dropout_mask(tuple(x.shape), p)
        masks.append(mask)
        return x * mask

    real_dropout = tm.F.dropout
    tm.F.dropout = mosgrad_dropout  # only torch_model's weight drop calls it: other dropouts are 0
    try:
        logp, _, _, _ = model(input, model.init_hidden(B))
    finally:
        tm.F.dropout = real_dropout
    loss = F.nll_loss(logp, target.reshape(-1))
    params = model.spec_parameters()
    grads = torch.autograd.grad(loss, list(params.values()))
    return loss, masks, dict(zip(params.keys(), grads))


def gen(w):
    seed("weight_drop")
    model = tm.RNNModel(V, E, NHID, NHID, NLAYERS, head="softmax", tie_weights=True, dropout=0,
                        dropouth=0, dropouti=0, dropoute=0, wdrop=WDROP, dropoutl=0)
    with torch.no_grad():  # larger embeddings and a decoder bias: gradients well above rounding
        model.encoder.weight.copy_(f32(model.encoder.weight.shape, 1.0, "uniform").float())
        model.decoder.bias.copy_(f32(model.decoder.bias.shape, 1.0, "uniform").float())
    model = model.double()
    input = torch.randint(0, V, (T, B))
    target = torch.randint(0, V, (T, B))
    params = model.spec_parameters()

    w.add("cfg.ntoken", torch.tensor(float(V)))
    w.add("cfg.emsize", torch.tensor(float(E)))
    w.add("cfg.nhid", torch.tensor(float(NHID)))
    w.add("cfg.nlayers", torch.tensor(float(NLAYERS)))
    w.add("cfg.wdrop", torch.tensor(WDROP, dtype=torch.float32))
    w.add("cfg.seed", torch.tensor(float(GEN_SEED)))
    w.add("input", input)
    w.add("target", target)
    for n, p in params.items():
        w.add("param." + n, p)

    model.train()
    stream = Stream(GEN_SEED)
    for k in (1, 2):  # two passes: the second must draw fresh masks at the next positions
        loss, masks, grads = run_pass(model, input, target, stream)
        assert len(masks) == NLAYERS
        w.add("train%d.loss" % k, loss)
        for l, m in enumerate(masks):
            w.add("train%d.mask.%d" % (k, l), m)
        for n, g in grads.items():
            w.add("train%d.grad.%s" % (k, n), g)
    model.eval()
    logp, _, _, _ = model(input, model.init_hidden(B))
    w.add("eval.loss", F.nll_loss(logp, target.reshape(-1)))


HEADER = """\
tests/fixtures/weight_drop.txt -- written by tools/gen_weight_drop_fixtures.py with PyTorch {torch}
Regenerate: /usr/bin/python3 tools/gen_weight_drop_fixtures.py
A tied softmax model V=23 E=nhid=6, 2 LSTM layers, T=5 B=2, zero initial state; every dropout 0
except wdrop (cfg.wdrop). Its dropout generator is Generator(cfg.seed) at offset 0. Two training
passes in a row (train1, train2), each: loss = mean NLL, mask.<l> [4H,H] the weight-drop mask of
layer l (0 or 1/(1-p); drawn from mosgrad's Philox stream, layer 0 then layer 1, pass 1 then pass
2), grad.<name> = d loss / d param (the raw weight_hh gets mask * the dropped weight's gradient).
eval.loss: the same model in eval mode (no weight drop)."""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    torch.set_num_threads(1)
    check_philox()
    w = FixtureWriter()
    w.comment(HEADER.format(torch=torch.__version__))
    gen(w)
    text = w.text()
    out = os.path.normpath(args.out)
    with open(out, "w") as f:
        f.write(text)
    print("wrote %s: %d tensors, %d bytes" % (out, len(w.names), len(text)))


if __name__ == "__main__":
    main()
