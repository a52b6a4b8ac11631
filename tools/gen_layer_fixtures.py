#!/usr/bin/python3
"""Writes tests/fixtures/layers.txt: PyTorch reference values for the C++ layer, head and model
tests (read by mgtest::Fixtures in tests/test_util.cpp).

    /usr/bin/python3 tools/gen_layer_fixtures.py [--out tests/fixtures/layers.txt]

Format: one tensor per line, `name rank d0 d1 ... : v0 v1 ...` (row-major, '%.9g'), '#' lines are
comments; integer tensors (token ids, targets) are stored as exact floats; a scalar has rank 0.

Every input and parameter is drawn in float32 and written exactly; the reference computation runs
in float64 on those values, so the fixture is the float64 answer for float32-representable data
(the C++ float32 results should match it to float32 rounding, not to PyTorch's float32 rounding).

Sections (the "naming scheme"; R tensors are the random projections that make a scalar
loss = sum(out * R), whose gradients are the grad.* tensors):
  linear.{x,weight,bias,out,R}, linear.grad.{x,weight,bias}
  embedding.{weight,ids,out,R}, embedding.grad.weight
  lstm.{x,h0,c0,weight_ih,weight_hh,bias_ih,bias_hh,out,hT,cT,R,Rh,Rc},
      lstm.grad.{x,h0,c0,weight_ih,weight_hh,bias_ih,bias_hh}
      (loss = sum(out*R) + sum(hT*Rh) + sum(cT*Rc))
  head_<kind>[_extreme].{h, <params>, logp, lse, R, target, nll}, .grad.{h,<params>} of
      sum(logp*R), .grad_nll.{h,<params>} of nll = mean_n -logp[n, target[n]]
      kind in softmax, mos, sigsoftmax, mosig, moc; <params> = decoder.weight decoder.bias
      [+ prior.weight latent.weight latent.bias]; _extreme has logits of magnitude >= 50.
  model_<config>.{cfg.*, input, target, param.<name>, logp, loss, h.<l>, c.<l>, out.<l>,
      grad.<name>}   (eval mode, zero initial hidden, loss = mean NLL, grad = d loss / d param)
"""

import argparse
import os
import sys
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_model as tm  # noqa: E402

SEED = 20240601
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "tests", "fixtures", "layers.txt")


class FixtureWriter:
    def __init__(self):
        self.lines = []
        self.names = set()

    def comment(self, text):
        for line in text.splitlines():
            self.lines.append(("# " + line).rstrip())

    def add(self, name, t):
        t = torch.as_tensor(t).detach()
        assert name not in self.names, name
        assert " " not in name, name
        self.names.add(name)
        vals = t.reshape(-1).double().tolist()
        assert all(v == v and abs(v) != float("inf") for v in vals), "non-finite in " + name
        dims = " ".join(str(d) for d in t.shape)
        head = "%s %d%s :" % (name, t.dim(), (" " + dims) if dims else "")
        self.lines.append(head + "".join(" %.9g" % v for v in vals))

    def text(self):
        return "\n".join(self.lines) + "\n"


def seed(section):
    """A per-section seed so adding a section does not change the others' values."""
    torch.manual_seed(SEED + zlib.crc32(section.encode()) % 100000)


def f32(shape, scale=1.0, kind="normal"):
    """A float32-representable float64 tensor."""
    if kind == "normal":
        t = torch.randn(shape, dtype=torch.float32) * scale
    else:  # uniform(-scale, scale)
        t = (torch.rand(shape, dtype=torch.float32) * 2 - 1) * scale
    return t.double()


def leaf(t):
    return t.clone().requires_grad_(True)


# ----------------------------------------------------------------------------------------------

def gen_linear(w):
    seed("linear")
    x, weight, bias = leaf(f32([5, 4])), leaf(f32([3, 4], 0.5)), leaf(f32([3]))
    out = F.linear(x, weight, bias)  # [5,3] = x W^T + b
    R = f32([5, 3])
    (out * R).sum().backward()
    for n, t in (("x", x), ("weight", weight), ("bias", bias), ("out", out), ("R", R)):
        w.add("linear." + n, t)
    for n, t in (("x", x), ("weight", weight), ("bias", bias)):
        w.add("linear.grad." + n, t.grad)


def gen_embedding(w):
    seed("embedding")
    weight = leaf(f32([7, 4]))
    ids = torch.tensor([[1, 3], [3, 0], [6, 3]])  # [T=3,B=2]; 3 repeats so grads accumulate
    out = F.embedding(ids, weight)  # [3,2,4]
    R = f32([3, 2, 4])
    (out * R).sum().backward()
    w.add("embedding.weight", weight)
    w.add("embedding.ids", ids)
    w.add("embedding.out", out)
    w.add("embedding.R", R)
    w.add("embedding.grad.weight", weight.grad)


def lstm_by_hand(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """The LSTM equations written out, gate rows in PyTorch order (i, f, g, o):
    i,f,o = sigmoid(.), g = tanh(.), c' = f*c + i*g, h' = o*tanh(c')."""
    outs = []
    h, c = h[0], c[0]  # [B,H]
    for t in range(x.size(0)):
        gates = x[t] @ w_ih.t() + b_ih + h @ w_hh.t() + b_hh  # [B,4H]
        i, f, g, o = gates.chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outs.append(h)
    return torch.stack(outs), h.unsqueeze(0), c.unsqueeze(0)


def gen_lstm(w):
    seed("lstm")
    T, B, IN, H = 6, 3, 4, 5
    k = 1.0 / H ** 0.5  # nn.LSTM's default init range
    x = leaf(f32([T, B, IN]))
    h0, c0 = leaf(f32([1, B, H], 0.5)), leaf(f32([1, B, H], 0.5))
    params = {n: leaf(f32(s, k, "uniform")) for n, s in
              (("weight_ih", [4 * H, IN]), ("weight_hh", [4 * H, H]), ("bias_ih", [4 * H]),
               ("bias_hh", [4 * H]))}
    rnn = nn.LSTM(IN, H, 1).double()
    with torch.no_grad():
        for n, t in params.items():
            getattr(rnn, n + "_l0").copy_(t)
    out, (hT, cT) = rnn(x, (h0, c0))  # [T,B,H], [1,B,H], [1,B,H]
    ref = lstm_by_hand(x, h0, c0, *params.values())
    for a, b in zip((out, hT, cT), ref):
        assert (a - b).abs().max() < 1e-12, "nn.LSTM disagrees with the written-out equations"
    R, Rh, Rc = f32([T, B, H]), f32([1, B, H]), f32([1, B, H])
    ((out * R).sum() + (hT * Rh).sum() + (cT * Rc).sum()).backward()
    w.add("lstm.x", x)
    w.add("lstm.h0", h0)
    w.add("lstm.c0", c0)
    for n, t in params.items():
        w.add("lstm." + n, t)
    for n, t in (("out", out), ("hT", hT), ("cT", cT), ("R", R), ("Rh", Rh), ("Rc", Rc)):
        w.add("lstm." + n, t)
    w.add("lstm.grad.x", x.grad)
    w.add("lstm.grad.h0", h0.grad)
    w.add("lstm.grad.c0", c0.grad)
    for n, t in params.items():
        w.add("lstm.grad." + n, getattr(rnn, n + "_l0").grad)


# ----------------------------------------------------------------------------------------------

def naive_head_prob(kind, h, p):
    """Probability-space versions (the papers' formulas verbatim) to cross-check the log-space
    heads on well-scaled inputs."""
    z_of = lambda a: a @ p["decoder.weight"].t() + p["decoder.bias"]  # noqa: E731
    sig = lambda z: torch.exp(z) * torch.sigmoid(z) / (torch.exp(z) * torch.sigmoid(z)).sum(-1, keepdim=True)  # noqa: E731,E501
    if kind == "softmax":
        return torch.softmax(z_of(h), -1)
    if kind == "sigsoftmax":
        return sig(z_of(h))
    K = p["prior.weight"].size(0)
    pi = torch.softmax(h @ p["prior.weight"].t(), -1)  # [N,K]
    lat = torch.tanh(h @ p["latent.weight"].t() + p["latent.bias"]).view(h.size(0), K, -1)
    if kind == "moc":
        return torch.softmax(z_of((pi.unsqueeze(2) * lat).sum(1)), -1)
    comp = torch.softmax(z_of(lat), -1) if kind == "mos" else sig(z_of(lat))  # [N,K,V]
    return (pi.unsqueeze(2) * comp).sum(1)


def gen_head(w, kind, extreme):
    name = "head_%s%s" % (kind, "_extreme" if extreme else "")
    seed(name)
    N, H, E, K, V = 6, 5, 4, 3, 11
    h = leaf(f32([N, H]))
    if kind in tm.MIXTURE_HEADS:
        shapes = [("decoder.weight", [V, E], 0.5), ("decoder.bias", [V], 0.5),
                  ("prior.weight", [K, H], 0.5), ("latent.weight", [K * E, H], 0.5),
                  ("latent.bias", [K * E], 0.5)]
        # Extreme: tanh bounds the experts' contexts by 1, so scale the decoder (|z| ~ 50..200)
        # and the gate (log pi down to about -100).
        boost = {"decoder.weight": 60.0, "decoder.bias": 20.0, "prior.weight": 30.0}
    else:
        shapes = [("decoder.weight", [V, H], 0.5), ("decoder.bias", [V], 0.5)]
        boost = {"decoder.weight": 50.0, "decoder.bias": 20.0}
    p = {}
    for n, s, sc in shapes:
        p[n] = leaf(f32(s, sc * (boost.get(n, 1.0) if extreme else 1.0)))
    args = dict(dec_w=p["decoder.weight"], dec_b=p["decoder.bias"])
    if kind in tm.MIXTURE_HEADS:
        args.update(prior_w=p["prior.weight"], latent_w=p["latent.weight"],
                    latent_b=p["latent.bias"])
    logp = tm.head_log_prob(kind, h, **args)  # [N,V]
    lse = torch.logsumexp(logp, dim=1)  # [N], must be 0
    assert lse.abs().max() < 1e-12, (name, lse)

    with torch.no_grad():  # logit magnitudes, to make sure the extreme case is extreme
        if kind in tm.MIXTURE_HEADS:
            lat = torch.tanh(F.linear(h, p["latent.weight"], p["latent.bias"])).view(N * K, E)
            zmax = F.linear(lat, p["decoder.weight"], p["decoder.bias"]).abs().max().item()
        else:
            zmax = F.linear(h, p["decoder.weight"], p["decoder.bias"]).abs().max().item()
    if extreme:
        assert zmax >= 50, (name, zmax)
    else:
        ref = naive_head_prob(kind, h.detach(), {k: v.detach() for k, v in p.items()})
        assert (logp.exp() - ref).abs().max() < 1e-12, (name, "log-space != prob-space")

    R = f32([N, V])
    target = torch.randint(0, V, (N,))
    # The gathered form must agree with the full matrix.
    lp_t = tm.head_target_log_prob(kind, h, target, **args)
    assert (lp_t - logp.gather(1, target[:, None])[:, 0]).abs().max() < 1e-10, name
    nll = -logp.gather(1, target[:, None]).mean()

    leaves = [("h", h)] + list(p.items())
    g_nll = torch.autograd.grad(nll, [t for _, t in leaves], retain_graph=True)
    g_R = torch.autograd.grad((logp * R).sum(), [t for _, t in leaves])

    w.comment("%s: max |logit| = %.1f" % (name, zmax))
    for n, t in leaves:
        w.add("%s.%s" % (name, n), t)
    w.add(name + ".logp", logp)
    w.add(name + ".lse", lse)
    w.add(name + ".R", R)
    for (n, _), g in zip(leaves, g_R):
        w.add("%s.grad.%s" % (name, n), g)
    w.add(name + ".target", target)
    w.add(name + ".nll", nll)
    for (n, _), g in zip(leaves, g_nll):
        w.add("%s.grad_nll.%s" % (name, n), g)


# ----------------------------------------------------------------------------------------------

MODEL_V, MODEL_E, MODEL_NHID, MODEL_NHIDLAST, MODEL_K, MODEL_T, MODEL_B = 23, 6, 7, 5, 3, 5, 2

# (fixture name, head, nlayers, tied, scaled)
MODEL_CONFIGS = [
    ("model_softmax", "softmax", 2, True, False),
    ("model_softmax_untied", "softmax", 2, False, False),
    ("model_mos", "mos", 2, True, False),
    ("model_mos_l3", "mos", 3, True, False),
    ("model_mos_scaled", "mos", 2, True, True),
    ("model_sigsoftmax", "sigsoftmax", 2, True, False),
    ("model_mosig", "mosig", 2, True, False),
    ("model_moc", "moc", 2, True, False),
]


def gen_model(w, name, head, nlayers, tied, scaled):
    seed(name)
    # Built (and initialised) in float32 so every parameter is float32-representable, then run
    # in float64.  .double() converts parameters in place, so a tied decoder stays tied.
    model = tm.RNNModel(MODEL_V, MODEL_E, MODEL_NHID, MODEL_NHIDLAST, nlayers, head=head,
                        n_experts=MODEL_K, tie_weights=tied)
    if scaled:
        # With the references' init (embeddings +-0.1, zero decoder bias) the lower layers'
        # gradients are ~1e-7 and a loose absolute tolerance would hide a wrong LSTM backward;
        # this variant uses embeddings +-1 and a random decoder bias so every gradient is O(1e-3+).
        with torch.no_grad():
            model.encoder.weight.uniform_(-1, 1)
            model.decoder.bias.uniform_(-1, 1)
    model = model.double().eval()
    assert not tied or model.decoder.weight is model.encoder.weight
    T, B = MODEL_T, MODEL_B
    input = torch.randint(0, MODEL_V, (T, B))
    target = torch.randint(0, MODEL_V, (T, B))
    hidden = model.init_hidden(B)
    logp, new_hidden, raw_outputs, _ = model(input, hidden)  # [N,V]
    loss = F.nll_loss(logp, target.reshape(-1))  # mean over N = T*B
    params = model.spec_parameters()
    grads = torch.autograd.grad(loss, list(params.values()))

    # The gathered form gives the same loss.
    lp_t, _, _, _ = model.target_log_prob(input, hidden, target)
    assert abs(-lp_t.mean().item() - loss.item()) < 1e-12, name

    cfg = dict(ntoken=MODEL_V, ninp=MODEL_E, nhid=MODEL_NHID, nhidlast=MODEL_NHIDLAST,
               nlayers=nlayers, n_experts=MODEL_K if head in tm.MIXTURE_HEADS else 0,
               tied=int(tied))
    w.comment("%s: head %s, LSTM (in,H) %s, %s decoder%s; max |grad| per parameter %s" %
              (name, head, model.layer_sizes, "tied" if tied else "untied",
               ", encoder +-1 and decoder bias +-1" if scaled else "",
               " ".join("%.1e" % g.abs().max().item() for g in grads)))
    for k, v in cfg.items():
        w.add("%s.cfg.%s" % (name, k), torch.tensor(float(v)))
    w.add(name + ".input", input)
    w.add(name + ".target", target)
    for n, p in params.items():
        w.add("%s.param.%s" % (name, n), p)
    w.add(name + ".logp", logp)
    w.add(name + ".loss", loss)
    for l, (h, c) in enumerate(new_hidden):
        w.add("%s.h.%d" % (name, l), h)
        w.add("%s.c.%d" % (name, l), c)
    for l, o in enumerate(raw_outputs):
        w.add("%s.out.%d" % (name, l), o)
    for n, g in zip(params.keys(), grads):
        w.add("%s.grad.%s" % (name, n), g)


HEADER = """\
tests/fixtures/layers.txt -- written by tools/gen_layer_fixtures.py with PyTorch {torch}
Regenerate: /usr/bin/python3 tools/gen_layer_fixtures.py
Format: name rank d0 d1 ... : values (row-major, %.9g); ids/targets are exact floats; rank 0 = scalar.
Inputs/parameters are float32 values; references are computed in float64 from them.
R tensors: random projections, loss = sum(out*R); grad.* = d loss / d input.
head_<kind>[_extreme]: N=6 rows, H=5; mixture heads K=3, E=4; V=11. logp [N,V], lse = row
  logsumexp(logp) (0), grad_nll.* = d/d(.) of nll = mean_n -logp[n,target[n]].
  Mixture experts: latent.weight rows k*E..(k+1)*E-1 are expert k's context (MoS row order).
model_<config>: eval mode (no dropout), zero initial hidden, V=23 E=6 nhid=7 nhidlast=5 K=3 T=5 B=2.
  Configs: softmax (tied, last H=E=6), softmax_untied (last H=5), mos, mos_l3 (3 layers),
  mos_scaled (mos with encoder +-1, decoder bias +-1: larger gradients), sigsoftmax (tied),
  mosig, moc. Init otherwise as AWD-LSTM/MoS: encoder/decoder +-0.1, decoder bias 0, LSTM
  +-1/sqrt(H), prior/latent nn.Linear default.
  input/target [T,B]; logp [T*B,V] with row n = t*B + b; loss = mean NLL (scalar);
  h.<l>/c.<l> [1,B,H_l] final state; out.<l> [T,B,H_l] layer outputs; param.<name> / grad.<name>
  use the spec names (encoder.weight, rnns.<l>.weight_ih ..., decoder.weight only when untied,
  decoder.bias, prior.weight, latent.weight, latent.bias). A tied model's grad.encoder.weight
  includes the decoder's contribution. LSTM gates in PyTorch order i,f,g,o."""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    torch.set_num_threads(1)  # deterministic reductions

    w = FixtureWriter()
    w.comment(HEADER.format(torch=torch.__version__))
    gen_linear(w)
    gen_embedding(w)
    gen_lstm(w)
    for kind in tm.HEADS:
        gen_head(w, kind, extreme=False)
        gen_head(w, kind, extreme=True)
    for name, head, nlayers, tied, scaled in MODEL_CONFIGS:
        gen_model(w, name, head, nlayers, tied, scaled)

    text = w.text()
    assert len(text) < 1.5e6, "fixture file too large: %d bytes" % len(text)
    out = os.path.normpath(args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    print("wrote %s: %d tensors, %d bytes" % (out, len(w.names), len(text)))


if __name__ == "__main__":
    main()
