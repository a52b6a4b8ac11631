// Every op in autograd/ops.h against PyTorch (arithmetic, unary, matmul, reductions here; the rest
// in tests/autograd/test_ops_fixtures_layout.cpp): forward output and the gradient of sum(out * R) for each
// input, read from tests/fixtures/ops.txt (written by tools/gen_fixtures.py; regenerate with
// `/usr/bin/python3 tools/gen_fixtures.py`). One TEST per fixture case, named after it: the
// case "add_bcast" holds add_bcast.a, add_bcast.b, add_bcast.out, add_bcast.R, add_bcast.grad.a,
// ... Non-tensor arguments (dims, flags, scalars) are repeated here from the case's '#' line there.
// Tolerances and the check itself: tests/autograd/ops_case.h.
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "tests/autograd/ops_case.h"
#include "tests/test_util.h"

using Case = mgtest::OpsCase;

// ---------------------------------------------------------------- add / sub / mul / div
// Shapes per suffix: same a[3,4] b[3,4]; bcast a[3,4] b[4]; bcast3 a[2,3,4] b[3,1];
// bcast_both a[3,1] b[1,4]; bcast_lhs a[4] b[2,3,4]; rank0 a[3,4] b[]; rank0_both a[] b[].
#define OPS_BINARY_TEST(TestName, case_name, op) \
  TEST(OpsVsPyTorch, TestName) {                 \
    Case c(case_name, {"a", "b"});               \
    c.check(mg::op(c["a"], c["b"]));             \
  }

// a[3,4] + b[3,4] -> [3,4]
OPS_BINARY_TEST(AddSame, "add_same", add)
// a[3,4] + b[4] -> [3,4]
OPS_BINARY_TEST(AddBcast, "add_bcast", add)
// a[2,3,4] + b[3,1] -> [2,3,4]
OPS_BINARY_TEST(AddBcast3, "add_bcast3", add)
// a[3,1] + b[1,4] -> [3,4]
OPS_BINARY_TEST(AddBcastBoth, "add_bcast_both", add)
// a[4] + b[2,3,4] -> [2,3,4]
OPS_BINARY_TEST(AddBcastLhs, "add_bcast_lhs", add)
// a[3,4] + b[] -> [3,4]
OPS_BINARY_TEST(AddRank0, "add_rank0", add)
// a[] + b[] -> []
OPS_BINARY_TEST(AddRank0Both, "add_rank0_both", add)

// a[3,4] - b[3,4] -> [3,4]
OPS_BINARY_TEST(SubSame, "sub_same", sub)
// a[3,4] - b[4] -> [3,4]
OPS_BINARY_TEST(SubBcast, "sub_bcast", sub)
// a[2,3,4] - b[3,1] -> [2,3,4]
OPS_BINARY_TEST(SubBcast3, "sub_bcast3", sub)
// a[3,1] - b[1,4] -> [3,4]
OPS_BINARY_TEST(SubBcastBoth, "sub_bcast_both", sub)
// a[4] - b[2,3,4] -> [2,3,4]
OPS_BINARY_TEST(SubBcastLhs, "sub_bcast_lhs", sub)
// a[3,4] - b[] -> [3,4]
OPS_BINARY_TEST(SubRank0, "sub_rank0", sub)
// a[] - b[] -> []
OPS_BINARY_TEST(SubRank0Both, "sub_rank0_both", sub)

// a[3,4] * b[3,4] -> [3,4]
OPS_BINARY_TEST(MulSame, "mul_same", mul)
// a[3,4] * b[4] -> [3,4]
OPS_BINARY_TEST(MulBcast, "mul_bcast", mul)
// a[2,3,4] * b[3,1] -> [2,3,4]
OPS_BINARY_TEST(MulBcast3, "mul_bcast3", mul)
// a[3,1] * b[1,4] -> [3,4]
OPS_BINARY_TEST(MulBcastBoth, "mul_bcast_both", mul)
// a[4] * b[2,3,4] -> [2,3,4]
OPS_BINARY_TEST(MulBcastLhs, "mul_bcast_lhs", mul)
// a[3,4] * b[] -> [3,4]
OPS_BINARY_TEST(MulRank0, "mul_rank0", mul)
// a[] * b[] -> []
OPS_BINARY_TEST(MulRank0Both, "mul_rank0_both", mul)

// Divisors have |b| in [0.5, 2): the reference is well conditioned.
// a[3,4] / b[3,4] -> [3,4]
OPS_BINARY_TEST(DivSame, "div_same", div)
// a[3,4] / b[4] -> [3,4]
OPS_BINARY_TEST(DivBcast, "div_bcast", div)
// a[2,3,4] / b[3,1] -> [2,3,4]
OPS_BINARY_TEST(DivBcast3, "div_bcast3", div)
// a[3,1] / b[1,4] -> [3,4]
OPS_BINARY_TEST(DivBcastBoth, "div_bcast_both", div)
// a[4] / b[2,3,4] -> [2,3,4]
OPS_BINARY_TEST(DivBcastLhs, "div_bcast_lhs", div)
// a[3,4] / b[] -> [3,4]
OPS_BINARY_TEST(DivRank0, "div_rank0", div)
// a[] / b[] -> []
OPS_BINARY_TEST(DivRank0Both, "div_rank0_both", div)

#undef OPS_BINARY_TEST

// a[3,4] + 2.5 -> [3,4]
TEST(OpsVsPyTorch, AddScalar) {
  Case c("add_scalar", {"a"});
  c.check(mg::add_scalar(c["a"], 2.5f));
}

// a[2,3,4] * -1.75 -> [2,3,4]
TEST(OpsVsPyTorch, MulScalar) {
  Case c("mul_scalar", {"a"});
  c.check(mg::mul_scalar(c["a"], -1.75f));
}

// -a[3,4] -> [3,4]
TEST(OpsVsPyTorch, Neg) {
  Case c("neg", {"a"});
  c.check(mg::neg(c["a"]));
}

// g[2,3,4] -> [3,1]: drops the leading dim and sums the last
TEST(OpsVsPyTorch, SumTo3dTo31) {
  Case c("sum_to_3d_to_31", {"g"});
  c.check(mg::sum_to(c["g"], {3, 1}));
}

// g[2,3,4] -> [4]
TEST(OpsVsPyTorch, SumTo3dTo4) {
  Case c("sum_to_3d_to_4", {"g"});
  c.check(mg::sum_to(c["g"], {4}));
}

// g[3,4] -> [1,4]
TEST(OpsVsPyTorch, SumToTo14) {
  Case c("sum_to_to_14", {"g"});
  c.check(mg::sum_to(c["g"], {1, 4}));
}

// g[3,4] -> []
TEST(OpsVsPyTorch, SumToToScalar) {
  Case c("sum_to_to_scalar", {"g"});
  c.check(mg::sum_to(c["g"], {}));
}

// ---------------------------------------------------------------- elementwise unary
// x[5,7] -> [5,7]
TEST(OpsVsPyTorch, Tanh) {
  Case c("tanh", {"x"});
  c.check(mg::tanh(c["x"]));
}

// x[3,4] with |x| up to ~20 (saturated: y rounds to +-1 and the gradient to 0 in float32, below
// atol)
TEST(OpsVsPyTorch, TanhLarge) {
  Case c("tanh_large", {"x"});
  c.check(mg::tanh(c["x"]));
}

// x[5,7] -> [5,7]
TEST(OpsVsPyTorch, Sigmoid) {
  Case c("sigmoid", {"x"});
  c.check(mg::sigmoid(c["x"]));
}

// x[2,4] = +-30, +-60, +-88, +-5: exp must not overflow on either side
TEST(OpsVsPyTorch, SigmoidLarge) {
  Case c("sigmoid_large", {"x"});
  c.check(mg::sigmoid(c["x"]));
}

// x[5,7] -> [5,7]
TEST(OpsVsPyTorch, LogSigmoid) {
  Case c("log_sigmoid", {"x"});
  c.check(mg::log_sigmoid(c["x"]));
}

// x[2,4] = +-60, +-100, +-20, +-1e-3: log(0) and exp overflow at the extremes
TEST(OpsVsPyTorch, LogSigmoidLarge) {
  Case c("log_sigmoid_large", {"x"});
  c.check(mg::log_sigmoid(c["x"]));
}

// x[5,7] -> [5,7]
TEST(OpsVsPyTorch, Exp) {
  Case c("exp", {"x"});
  c.check(mg::exp(c["x"]));
}

// x[5,7] in [0.05, 5) -> [5,7]
TEST(OpsVsPyTorch, Log) {
  Case c("log", {"x"});
  c.check(mg::log(c["x"]));
}

// x[5,7] with |x| >= 0.1 (off the kink, where the subgradient is a convention) -> [5,7]
TEST(OpsVsPyTorch, Relu) {
  Case c("relu", {"x"});
  c.check(mg::relu(c["x"]));
}

// x[2,3,4] -> [2,3,4]
TEST(OpsVsPyTorch, Square) {
  Case c("square", {"x"});
  c.check(mg::square(c["x"]));
}

// ---------------------------------------------------------------- matmul / bmm
// M=3, K=5, N=4, G=2; a is [K,M] when transpose_a, b is [N,K] when transpose_b.
#define OPS_MATMUL_TEST(TestName, case_name, op, ta, tb) \
  TEST(OpsVsPyTorch, TestName) {                         \
    Case c(case_name, {"a", "b"});                       \
    c.check(mg::op(c["a"], c["b"], ta, tb));             \
  }

// a[3,5] x b[5,4] -> [3,4]
OPS_MATMUL_TEST(MatmulNN, "matmul_NN", matmul, false, false)
// a[3,5] x b[4,5]^T -> [3,4]
OPS_MATMUL_TEST(MatmulNT, "matmul_NT", matmul, false, true)
// a[5,3]^T x b[5,4] -> [3,4]
OPS_MATMUL_TEST(MatmulTN, "matmul_TN", matmul, true, false)
// a[5,3]^T x b[4,5]^T -> [3,4]
OPS_MATMUL_TEST(MatmulTT, "matmul_TT", matmul, true, true)
// a[2,3,5] x b[2,5,4] -> [2,3,4]
OPS_MATMUL_TEST(BmmNN, "bmm_NN", bmm, false, false)
// a[2,3,5] x b[2,4,5]^T -> [2,3,4]
OPS_MATMUL_TEST(BmmNT, "bmm_NT", bmm, false, true)
// a[2,5,3]^T x b[2,5,4] -> [2,3,4]
OPS_MATMUL_TEST(BmmTN, "bmm_TN", bmm, true, false)
// a[2,5,3]^T x b[2,4,5]^T -> [2,3,4]
OPS_MATMUL_TEST(BmmTT, "bmm_TT", bmm, true, true)

#undef OPS_MATMUL_TEST

// ---------------------------------------------------------------- sum / mean / logsumexp
// x[3,4] -> []
TEST(OpsVsPyTorch, SumAll) {
  Case c("sum_all", {"x"});
  c.check(mg::sum(c["x"]));
}

// x[2,3,4] -> [2,4]
TEST(OpsVsPyTorch, SumD1) {
  Case c("sum_d1", {"x"});
  c.check(mg::sum(c["x"], 1, false));
}

// x[2,3,4] -> [1,3,4]
TEST(OpsVsPyTorch, SumD0Keep) {
  Case c("sum_d0_keep", {"x"});
  c.check(mg::sum(c["x"], 0, true));
}

// x[2,3,4] -> [2,3]
TEST(OpsVsPyTorch, SumDm1) {
  Case c("sum_dm1", {"x"});
  c.check(mg::sum(c["x"], -1, false));
}

// x[2,3,4] -> [2,1,4]
TEST(OpsVsPyTorch, SumD1Keep) {
  Case c("sum_d1_keep", {"x"});
  c.check(mg::sum(c["x"], 1, true));
}

// x[5,7] -> []
TEST(OpsVsPyTorch, MeanAll) {
  Case c("mean_all", {"x"});
  c.check(mg::mean(c["x"]));
}

// x[2,3,4] -> [2,4]
TEST(OpsVsPyTorch, MeanD1) {
  Case c("mean_d1", {"x"});
  c.check(mg::mean(c["x"], 1, false));
}

// x[2,3,4] -> [1,3,4]
TEST(OpsVsPyTorch, MeanD0Keep) {
  Case c("mean_d0_keep", {"x"});
  c.check(mg::mean(c["x"], 0, true));
}

// x[2,3,4] -> [2,3,1]
TEST(OpsVsPyTorch, MeanDm1Keep) {
  Case c("mean_dm1_keep", {"x"});
  c.check(mg::mean(c["x"], -1, true));
}

// x[3,4] -> [3]
TEST(OpsVsPyTorch, LogsumexpDm1) {
  Case c("logsumexp_dm1", {"x"});
  c.check(mg::logsumexp(c["x"], -1, false));
}

// x[2,3,4] -> [2,1,4]
TEST(OpsVsPyTorch, LogsumexpD1Keep) {
  Case c("logsumexp_d1_keep", {"x"});
  c.check(mg::logsumexp(c["x"], 1, true));
}

// x[5,7] -> [7]
TEST(OpsVsPyTorch, LogsumexpD0) {
  Case c("logsumexp_d0", {"x"});
  c.check(mg::logsumexp(c["x"], 0, false));
}

// x[5,7], logits ~30*N(0,1) +-60 (exp overflows float32 without max subtraction) -> [5]
TEST(OpsVsPyTorch, LogsumexpLarge) {
  Case c("logsumexp_large", {"x"});
  c.check(mg::logsumexp(c["x"], -1, false));
}
