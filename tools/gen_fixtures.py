#!/usr/bin/python3
"""PyTorch reference numbers for every op in autograd/ops.h -> tests/fixtures/ops.txt.

Regenerate (from the repository root):
    /usr/bin/python3 tools/gen_fixtures.py

torch is used only here, never at build or test time: the C++ suite (tests/test_ops_fixtures*.cpp)
reads the text file this writes.

For each case NAME the file holds
    NAME.<input>       every differentiable input (float32-exact values)
    NAME.<index>       integer arguments (indices, targets), stored as exact floats
    NAME.out           the forward output
    NAME.R             a projection weight of the output's shape
    NAME.grad.<input>  d sum(out * R) / d input
Inputs and R are drawn in float32 so the C++ side sees exactly the numbers torch saw; the reference
forward/backward then runs in float64 on those values, so the stored answers carry no float32
rounding of their own and the C++ tolerance measures mosgrad alone.

Non-tensor arguments (dims, keepdim, transpose flags, scalars) are written in the case's '#' line
and repeated by hand in the C++ test of the same name.

Line format (read by tests/test_util.cpp):  name rank d0 d1 ... : v0 v1 ...
"""
import os
import sys
import zlib

import torch
import torch.nn.functional as F

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "ops.txt")

lines = []  # the file's lines, in case order


def S(shape):
    """A shape as mosgrad prints it: [3,4]."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def fmt_tensor(name, t):
    # %.9g round-trips a float32 exactly, and is close enough for the float64 answers, which the
    # reader rounds to float32 anyway.
    t = t.detach().double().contiguous()
    dims = " ".join(str(d) for d in t.shape)
    vals = " ".join("%.9g" % v for v in t.reshape(-1).tolist())
    head = "%s %d" % (name, t.dim()) + (" " + dims if dims else "")
    return head + " : " + vals


class Case:
    """One op call: float32 inputs drawn from a generator seeded by the case name (so adding or
    reordering cases never changes the numbers of the others)."""

    names = set()

    def __init__(self, name, call):
        assert name not in Case.names, "case name %s used twice: its tensors would overwrite" % name
        Case.names.add(name)
        self.name = name
        self.call = call  # the C++-style call, for the '#' line
        self.gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
        self.inputs = []  # (key, float32 tensor), differentiable
        self.ints = []  # (key, list of int)

    # ---- input makers: all return float32 tensors ----
    def randn(self, *shape, scale=1.0, shift=0.0):
        return (torch.randn(shape, generator=self.gen) * scale + shift).float()

    def uniform(self, *shape, low=0.0, high=1.0):
        return (torch.rand(shape, generator=self.gen) * (high - low) + low).float()

    def away_from_zero(self, *shape, low=0.5, high=2.0):
        # Random sign, magnitude in [low, high): safe divisors, relu inputs off the kink.
        mag = self.uniform(*shape, low=low, high=high)
        sign = torch.where(torch.rand(shape, generator=self.gen) < 0.5, -1.0, 1.0)
        return (mag * sign).float()

    def add(self, key, t):
        assert t.dtype == torch.float32
        self.inputs.append((key, t))
        return self

    def index(self, key, values):
        self.ints.append((key, list(values)))
        return self

    def run(self, fn):
        """fn(*float64 leaves, *index lists) -> output. Records inputs, out, R and every gradient."""
        leaves = [t.double().requires_grad_() for _, t in self.inputs]
        idx = [torch.tensor(v, dtype=torch.long) for _, v in self.ints]
        out = fn(*leaves, *idx)
        R = torch.randn(out.shape, generator=self.gen).float()
        (out * R.double()).sum().backward()
        lines.append("# %s: %s" % (self.name, self.call))
        for (key, t) in self.inputs:
            lines.append(fmt_tensor("%s.%s" % (self.name, key), t))
        for (key, v) in self.ints:
            lines.append(fmt_tensor("%s.%s" % (self.name, key), torch.tensor(v, dtype=torch.float64)))
        lines.append(fmt_tensor(self.name + ".out", out))
        lines.append(fmt_tensor(self.name + ".R", R))
        for (key, _), leaf in zip(self.inputs, leaves):
            assert leaf.grad is not None, "%s: no gradient reached %s" % (self.name, key)
            lines.append(fmt_tensor("%s.grad.%s" % (self.name, key), leaf.grad))


def case(name, call):
    return Case(name, call)


# ------------------------------------------------------------------ elementwise binary
def binary_cases():
    ops = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
    # (suffix, shape of a, shape of b): same shape, then each broadcasting pattern mosgrad supports.
    patterns = [
        ("same", (3, 4), (3, 4)),
        ("bcast", (3, 4), (4,)),          # trailing-dim bias
        ("bcast3", (2, 3, 4), (3, 1)),    # missing leading dim and a size-1 dim
        ("bcast_both", (3, 1), (1, 4)),   # both sides expand
        ("bcast_lhs", (4,), (2, 3, 4)),   # the smaller operand on the left
        ("rank0", (3, 4), ()),            # rank-0 operand
        ("rank0_both", (), ()),           # both rank 0
    ]
    for op, fn in ops.items():
        for suffix, sa, sb in patterns:
            c = case("%s_%s" % (op, suffix), "%s(a%s, b%s)" % (op, S(sa), S(sb)))
            c.add("a", c.randn(*sa))
            # Divisors stay away from 0 so the reference itself is well conditioned.
            c.add("b", c.away_from_zero(*sb) if op == "div" else c.randn(*sb))
            c.run(fn)

    c = case("add_scalar", "add_scalar(a[3,4], 2.5f)")
    c.add("a", c.randn(3, 4)).run(lambda a: a + 2.5)
    c = case("mul_scalar", "mul_scalar(a[2,3,4], -1.75f)")
    c.add("a", c.randn(2, 3, 4)).run(lambda a: a * -1.75)
    c = case("neg", "neg(a[3,4])")
    c.add("a", c.randn(3, 4)).run(lambda a: -a)

    # sum_to is the backward of broadcasting, and differentiable itself (its backward expands).
    for suffix, sg, target in [("3d_to_31", (2, 3, 4), (3, 1)), ("3d_to_4", (2, 3, 4), (4,)),
                               ("to_14", (3, 4), (1, 4)), ("to_scalar", (3, 4), ())]:
        c = case("sum_to_" + suffix, "sum_to(g%s, %s)" % (S(sg), S(target)))
        c.add("g", c.randn(*sg)).run(lambda g, target=target: g.sum_to_size(target) if target else g.sum())


# ------------------------------------------------------------------ elementwise unary
def unary_cases():
    c = case("tanh", "tanh(x[5,7])")
    c.add("x", c.randn(5, 7, scale=2.0)).run(torch.tanh)
    c = case("tanh_large", "tanh(x[3,4]), |x| up to ~20: saturated")
    c.add("x", c.randn(3, 4, scale=10.0)).run(torch.tanh)
    c = case("sigmoid", "sigmoid(x[5,7])")
    c.add("x", c.randn(5, 7, scale=3.0)).run(torch.sigmoid)
    c = case("sigmoid_large", "sigmoid(x[2,4]), x = +-30, +-60, +-88, +-5")
    c.add("x", torch.tensor([[30., -30., 60., -60.], [88., -88., 5., -5.]])).run(torch.sigmoid)
    c = case("log_sigmoid", "log_sigmoid(x[5,7])")
    c.add("x", c.randn(5, 7, scale=3.0)).run(F.logsigmoid)
    c = case("log_sigmoid_large", "log_sigmoid(x[2,4]), x = +-60, +-100, +-20, +-1e-3")
    c.add("x", torch.tensor([[60., -60., 100., -100.], [20., -20., 1e-3, -1e-3]])).run(F.logsigmoid)
    c = case("exp", "exp(x[5,7])")
    c.add("x", c.randn(5, 7, scale=1.5)).run(torch.exp)
    c = case("log", "log(x[5,7]), x in [0.05, 5)")
    c.add("x", c.uniform(5, 7, low=0.05, high=5.0)).run(torch.log)
    # relu's kink is at 0, where PyTorch and mosgrad may legitimately choose different subgradients.
    c = case("relu", "relu(x[5,7]), |x| >= 0.1")
    c.add("x", c.away_from_zero(5, 7, low=0.1, high=3.0)).run(torch.relu)
    c = case("square", "square(x[2,3,4])")
    c.add("x", c.randn(2, 3, 4, scale=2.0)).run(torch.square)


# ------------------------------------------------------------------ matrix products
def matmul_cases():
    M, K, N, G = 3, 5, 4, 2
    for ta in (False, True):
        for tb in (False, True):
            sa = (K, M) if ta else (M, K)
            sb = (N, K) if tb else (K, N)
            suffix = ("T" if ta else "N") + ("T" if tb else "N")
            c = case("matmul_" + suffix, "matmul(a%s, b%s, %s, %s) -> [%d,%d]" %
                     (S(sa), S(sb), str(ta).lower(), str(tb).lower(), M, N))
            c.add("a", c.randn(*sa)).add("b", c.randn(*sb))
            c.run(lambda a, b, ta=ta, tb=tb: (a.t() if ta else a) @ (b.t() if tb else b))
            c = case("bmm_" + suffix, "bmm(a%s, b%s, %s, %s) -> [%d,%d,%d]" %
                     (S((G,) + sa), S((G,) + sb), str(ta).lower(), str(tb).lower(), G, M, N))
            c.add("a", c.randn(G, *sa)).add("b", c.randn(G, *sb))
            c.run(lambda a, b, ta=ta, tb=tb: torch.bmm(a.transpose(1, 2) if ta else a,
                                                       b.transpose(1, 2) if tb else b))


# ------------------------------------------------------------------ reductions
def reduce_cases():
    c = case("sum_all", "sum(x[3,4]) -> []")
    c.add("x", c.randn(3, 4)).run(torch.sum)
    for suffix, dim, keep in [("d1", 1, False), ("d0_keep", 0, True), ("dm1", -1, False), ("d1_keep", 1, True)]:
        c = case("sum_" + suffix, "sum(x[2,3,4], %d, %s)" % (dim, str(keep).lower()))
        c.add("x", c.randn(2, 3, 4)).run(lambda x, dim=dim, keep=keep: x.sum(dim, keepdim=keep))
    c = case("mean_all", "mean(x[5,7]) -> []")
    c.add("x", c.randn(5, 7)).run(torch.mean)
    for suffix, dim, keep in [("d1", 1, False), ("d0_keep", 0, True), ("dm1_keep", -1, True)]:
        c = case("mean_" + suffix, "mean(x[2,3,4], %d, %s)" % (dim, str(keep).lower()))
        c.add("x", c.randn(2, 3, 4)).run(lambda x, dim=dim, keep=keep: x.mean(dim, keepdim=keep))
    c = case("logsumexp_dm1", "logsumexp(x[3,4], -1, false)")
    c.add("x", c.randn(3, 4)).run(lambda x: torch.logsumexp(x, -1))
    c = case("logsumexp_d1_keep", "logsumexp(x[2,3,4], 1, true)")
    c.add("x", c.randn(2, 3, 4)).run(lambda x: torch.logsumexp(x, 1, keepdim=True))
    c = case("logsumexp_d0", "logsumexp(x[5,7], 0, false)")
    c.add("x", c.randn(5, 7)).run(lambda x: torch.logsumexp(x, 0))
    # MoS logits reach magnitude 50+; a naive exp would overflow float32 at ~88.
    c = case("logsumexp_large", "logsumexp(x[5,7], -1, false), x ~ 30*N(0,1) +- 60")
    c.add("x", big_logits(c, 5, 7)).run(lambda x: torch.logsumexp(x, -1))


def big_logits(c, *shape):
    # Spread of ~30 around offsets of +-60 (and 100 in one row): exp(x) overflows float32 without
    # max subtraction, and several entries sit within a few units of the row max.
    x = c.randn(*shape, scale=30.0)
    x[0] += 60.0
    x[1] -= 60.0
    x[-1] += 100.0
    return x.float()


# ------------------------------------------------------------------ softmax family
def softmax_cases():
    for name, fn in [("softmax", torch.softmax), ("log_softmax", torch.log_softmax)]:
        c = case(name + "_dm1", "%s(x[3,4], -1)" % name)
        c.add("x", c.randn(3, 4, scale=2.0)).run(lambda x, fn=fn: fn(x, -1))
        c = case(name + "_d0", "%s(x[5,7], 0)" % name)
        c.add("x", c.randn(5, 7, scale=2.0)).run(lambda x, fn=fn: fn(x, 0))
        c = case(name + "_d1_3d", "%s(x[2,3,4], 1)" % name)
        c.add("x", c.randn(2, 3, 4, scale=2.0)).run(lambda x, fn=fn: fn(x, 1))
        c = case(name + "_large_dm1", "%s(x[5,7], -1), x ~ 30*N(0,1) +- 60" % name)
        c.add("x", big_logits(c, 5, 7)).run(lambda x, fn=fn: fn(x, -1))
        c = case(name + "_large_d0", "%s(x[7,5], 0), x ~ 30*N(0,1) +- 60" % name)
        c.add("x", big_logits(c, 5, 7).t().contiguous()).run(lambda x, fn=fn: fn(x, 0))


# ------------------------------------------------------------------ shape and layout
def shape_cases():
    c = case("reshape", "reshape(x[2,3,4], {4,-1}) -> [4,6]")
    c.add("x", c.randn(2, 3, 4)).run(lambda x: x.reshape(4, -1))
    c = case("reshape_flat", "reshape(x[3,4], {-1}) -> [12]")
    c.add("x", c.randn(3, 4)).run(lambda x: x.reshape(-1))
    c = case("reshape_of_transpose", "reshape(transpose(x[3,4], 0, 1), {2,6}): reshape of a strided view")
    c.add("x", c.randn(3, 4)).run(lambda x: x.t().reshape(2, 6))
    c = case("transpose_01", "transpose(x[3,4], 0, 1) -> [4,3]")
    c.add("x", c.randn(3, 4)).run(lambda x: x.transpose(0, 1))
    c = case("transpose_3d", "transpose(x[2,3,4], 0, 2) -> [4,3,2]")
    c.add("x", c.randn(2, 3, 4)).run(lambda x: x.transpose(0, 2))
    c = case("narrow_d1", "narrow(x[5,7], 1, 2, 3) -> [5,3]")
    c.add("x", c.randn(5, 7)).run(lambda x: x.narrow(1, 2, 3))
    c = case("narrow_d0_3d", "narrow(x[4,3,2], 0, 1, 2) -> [2,3,2]")
    c.add("x", c.randn(4, 3, 2)).run(lambda x: x.narrow(0, 1, 2))
    c = case("narrow_of_transpose", "narrow(transpose(x[5,7], 0, 1), 0, 3, 4) -> [4,5]")
    c.add("x", c.randn(5, 7)).run(lambda x: x.t().narrow(0, 3, 4))
    c = case("contiguous_of_transpose", "contiguous(transpose(x[3,4], 0, 1)) -> [4,3]")
    c.add("x", c.randn(3, 4)).run(lambda x: x.t().contiguous())
    c = case("contiguous_noop", "contiguous(x[3,4]): already row-major")
    c.add("x", c.randn(3, 4)).run(lambda x: x.contiguous())
    for suffix, dim in [("d0", 0), ("d2", 2), ("dm1", -1), ("d1", 1)]:
        c = case("unsqueeze_" + suffix, "unsqueeze(x[3,4], %d)" % dim)
        c.add("x", c.randn(3, 4)).run(lambda x, dim=dim: x.unsqueeze(dim))

    c = case("cat_d1", "cat({a[2,3], b[2,5]}, 1) -> [2,8]")
    c.add("a", c.randn(2, 3)).add("b", c.randn(2, 5)).run(lambda a, b: torch.cat([a, b], 1))
    c = case("cat_d0_3d", "cat({a[2,3,4], b[1,3,4], c[3,3,4]}, 0) -> [6,3,4]")
    c.add("a", c.randn(2, 3, 4)).add("b", c.randn(1, 3, 4)).add("c", c.randn(3, 3, 4))
    c.run(lambda a, b, cc: torch.cat([a, b, cc], 0))
    c = case("cat_dm1_3d", "cat({a[2,3,1], b[2,3,4]}, -1) -> [2,3,5]")
    c.add("a", c.randn(2, 3, 1)).add("b", c.randn(2, 3, 4)).run(lambda a, b: torch.cat([a, b], -1))
    for suffix, dim in [("d0", 0), ("d1", 1), ("dm1", -1)]:
        c = case("stack_" + suffix, "stack({a[3,4], b[3,4], c[3,4]}, %d)" % dim)
        c.add("a", c.randn(3, 4)).add("b", c.randn(3, 4)).add("c", c.randn(3, 4))
        c.run(lambda a, b, cc, dim=dim: torch.stack([a, b, cc], dim))


# ------------------------------------------------------------------ indexing and loss
def index_cases():
    c = case("index_select", "index_select(table[6,4], index{2,0,2,5,2,1}): repeated rows")
    c.add("table", c.randn(6, 4)).index("index", [2, 0, 2, 5, 2, 1])
    c.run(lambda t, i: torch.index_select(t, 0, i))
    c = case("index_select_one", "index_select(table[5,7], index{4}) -> [1,7]")
    c.add("table", c.randn(5, 7)).index("index", [4])
    c.run(lambda t, i: torch.index_select(t, 0, i))
    c = case("gather_rows", "gather_rows(x[5,7], index{3,0,6,3,1}) -> [5]")
    c.add("x", c.randn(5, 7)).index("index", [3, 0, 6, 3, 1])
    c.run(lambda x, i: x.gather(1, i.unsqueeze(1)).squeeze(1))
    c = case("nll_loss", "nll_loss(logp[5,7], target{3,0,6,3,1}) -> []")
    c.add("logp", c.randn(5, 7, scale=2.0, shift=-2.0)).index("target", [3, 0, 6, 3, 1])
    c.run(lambda lp, t: F.nll_loss(lp, t))
    c = case("nll_loss_repeat", "nll_loss(logp[6,4], target{2,2,2,2,0,3}) -> []")
    c.add("logp", c.randn(6, 4, scale=2.0, shift=-2.0)).index("target", [2, 2, 2, 2, 0, 3])
    c.run(lambda lp, t: F.nll_loss(lp, t))
    # The language-model loss as the model builds it: large logits through log_softmax into nll.
    c = case("log_softmax_nll_large", "nll_loss(log_softmax(x[5,7], -1), target{3,0,6,3,1}), x ~ 30*N(0,1) +- 60")
    c.add("x", big_logits(c, 5, 7)).index("target", [3, 0, 6, 3, 1])
    c.run(lambda x, t: F.nll_loss(torch.log_softmax(x, -1), t))


def main():
    binary_cases()
    unary_cases()
    matmul_cases()
    reduce_cases()
    softmax_cases()
    shape_cases()
    index_cases()
    header = [
        "# PyTorch reference numbers for every op in autograd/ops.h (dropout_mask excepted: random).",
        "# Generated by tools/gen_fixtures.py with torch %s (float64 reference on float32 inputs)." % torch.__version__,
        "# Regenerate: /usr/bin/python3 tools/gen_fixtures.py   Do not edit by hand.",
        "# Per case NAME: NAME.<input>, NAME.out, NAME.R, NAME.grad.<input> = d sum(out*R)/d input.",
        "# Line format: name rank d0 d1 ... : v0 v1 ...",
    ]
    text = "\n".join(header + lines) + "\n"
    with open(OUT_PATH, "w") as f:
        f.write(text)
    ncases = sum(1 for l in lines if l.startswith("# "))
    print("wrote %s: %d cases, %d bytes" % (os.path.normpath(OUT_PATH), ncases, len(text)), file=sys.stderr)


if __name__ == "__main__":
    main()
