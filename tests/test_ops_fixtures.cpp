// Every op in autograd/ops.h against PyTorch: forward output and the gradient of sum(out * R) for
// each input, read from tests/fixtures/ops.txt (written by tools/gen_fixtures.py; regenerate with
// `/usr/bin/python3 tools/gen_fixtures.py`). One TEST per fixture case, named after it: the
// case "add_bcast" holds add_bcast.a, add_bcast.b, add_bcast.out, add_bcast.R, add_bcast.grad.a, ...
// Non-tensor arguments (dims, flags, scalars) are repeated here from the case's '#' line there.
//
// Tolerances: the reference is float64 on the same float32 inputs, so the error measured is
// mosgrad's float32 arithmetic alone; rtol 1e-5 is ~80 float32 ulps. The atol covers results that
// cancel to near 0 (a sum of O(1) terms keeps an absolute error of a few ulps of the terms).
#include <map>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "tests/test_util.h"

namespace {

constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-6;

const mgtest::Fixtures& fixtures() {
  static const mgtest::Fixtures f("ops.txt");  // read once for the whole suite
  return f;
}

// One fixture case: its differentiable inputs as fresh leaves requiring grad.
class Case {
 public:
  Case(const std::string& name, std::initializer_list<const char*> inputs);
  const mg::Tensor& operator[](const std::string& key) const;  // the leaf NAME.<key>
  std::vector<int64_t> ints(const std::string& key) const;     // indices/targets NAME.<key>
  // Compares out with NAME.out, backpropagates sum(out * NAME.R) and compares every input's
  // gradient with NAME.grad.<key>.
  void check(const mg::Tensor& out, double rtol = kRtol, double atol = kAtol) const;

 private:
  std::string name_;
  std::vector<std::string> keys_;
  std::map<std::string, mg::Tensor> leaves_;
};

Case::Case(const std::string& name, std::initializer_list<const char*> inputs) : name_(name) {
  for (const char* key : inputs) {
    keys_.push_back(key);
    leaves_[key] = fixtures().leaf(name + "." + key);
  }
}

const mg::Tensor& Case::operator[](const std::string& key) const {
  auto it = leaves_.find(key);
  if (it == leaves_.end()) throw std::runtime_error("case " + name_ + " has no input '" + key + "'");
  return it->second;
}

std::vector<int64_t> Case::ints(const std::string& key) const { return fixtures().ints(name_ + "." + key); }

void Case::check(const mg::Tensor& out, double rtol, double atol) const {
  SCOPED_TRACE("fixture case '" + name_ + "' in tests/fixtures/ops.txt");
  const mg::Tensor& expected_out = fixtures().get(name_ + ".out");
  EXPECT_TENSOR_NEAR(out, expected_out, rtol, atol);
  if (out.shape() != expected_out.shape()) return;  // the gradients would only repeat the shape error

  const mg::Tensor R = fixtures().get(name_ + ".R");  // [out's shape]
  mg::sum(mg::mul(out, R)).backward();
  for (const std::string& key : keys_) {
    SCOPED_TRACE("gradient " + name_ + ".grad." + key);
    const mg::Tensor grad = operator[](key).grad();
    ASSERT_TRUE(grad.defined()) << "backward never reached input '" << key << "'";
    EXPECT_TENSOR_NEAR(grad, fixtures().get(name_ + ".grad." + key), rtol, atol);
  }
}

}  // namespace

// ---------------------------------------------------------------- add / sub / mul / div
// Shapes per suffix: same a[3,4] b[3,4]; bcast a[3,4] b[4]; bcast3 a[2,3,4] b[3,1];
// bcast_both a[3,1] b[1,4]; bcast_lhs a[4] b[2,3,4]; rank0 a[3,4] b[]; rank0_both a[] b[].
#define OPS_BINARY_TEST(TestName, case_name, op)      \
  TEST(OpsVsPyTorch, TestName) {                       \
    Case c(case_name, {"a", "b"});                     \
    c.check(mg::op(c["a"], c["b"]));                   \
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

// x[3,4] with |x| up to ~20 (saturated: y rounds to +-1 and the gradient to 0 in float32, below atol)
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

// ---------------------------------------------------------------- softmax / log_softmax
// x[3,4] -> [3,4]
TEST(OpsVsPyTorch, SoftmaxDm1) {
  Case c("softmax_dm1", {"x"});
  c.check(mg::softmax(c["x"], -1));
}

// x[5,7] over dim 0 (strided lines) -> [5,7]
TEST(OpsVsPyTorch, SoftmaxD0) {
  Case c("softmax_d0", {"x"});
  c.check(mg::softmax(c["x"], 0));
}

// x[2,3,4] over the middle dim -> [2,3,4]
TEST(OpsVsPyTorch, SoftmaxD1_3d) {
  Case c("softmax_d1_3d", {"x"});
  c.check(mg::softmax(c["x"], 1));
}

// KNOWN DISAGREEMENT WITH PYTORCH (reported, not hidden by a looser tolerance): with logits of
// magnitude ~100-160, mosgrad's softmax_kernel (autograd/ops_softmax.cpp) rounds lse = m + log(acc)
// to float32 and then forms x - lse, so every log-prob carries an absolute error of up to
// ulp(|max logit|)/2 (7.6e-6 at 128..256) however small it is. PyTorch's own float32 softmax and
// log_softmax pass these cases with 0 bad elements, so float32 is not the limit. Forming
// (x - m) - float(log(acc)) and never rounding lse (simulated in numpy float32) passes all three.
// x[5,7], logits ~30*N(0,1) +-60 -> [5,7]. FAILS (see above): grad [0,1] got 1.84743e-4, expected
// 1.83448e-4 (the argmax entry, whose g - sum(g*y) cancels and exposes y's 7.6e-6 relative error).
TEST(OpsVsPyTorch, SoftmaxLargeDm1) {
  Case c("softmax_large_dm1", {"x"});
  c.check(mg::softmax(c["x"], -1));
}

// x[7,5], logits ~30*N(0,1) +-60, over dim 0 -> [7,5]. Passes, but narrowly (grad max |diff|
// 8.1e-7 against atol 1e-6) for the same reason as SoftmaxLargeDm1.
TEST(OpsVsPyTorch, SoftmaxLargeD0) {
  Case c("softmax_large_d0", {"x"});
  c.check(mg::softmax(c["x"], 0));
}

// x[3,4] -> [3,4]
TEST(OpsVsPyTorch, LogSoftmaxDm1) {
  Case c("log_softmax_dm1", {"x"});
  c.check(mg::log_softmax(c["x"], -1));
}

// x[5,7] over dim 0 -> [5,7]
TEST(OpsVsPyTorch, LogSoftmaxD0) {
  Case c("log_softmax_d0", {"x"});
  c.check(mg::log_softmax(c["x"], 0));
}

// x[2,3,4] over the middle dim -> [2,3,4]
TEST(OpsVsPyTorch, LogSoftmaxD1_3d) {
  Case c("log_softmax_d1_3d", {"x"});
  c.check(mg::log_softmax(c["x"], 1));
}

// x[5,7], logits ~30*N(0,1) +-60 -> [5,7]. FAILS (known disagreement, see SoftmaxLargeDm1):
// out [1,3] got -0.0120048523, expected -0.0120066972; grad [4,6] got -0.00332606, expected -0.00332180.
TEST(OpsVsPyTorch, LogSoftmaxLargeDm1) {
  Case c("log_softmax_large_dm1", {"x"});
  c.check(mg::log_softmax(c["x"], -1));
}

// x[7,5], logits ~30*N(0,1) +-60, over dim 0 -> [7,5]. FAILS (known disagreement, see
// SoftmaxLargeDm1): out [2,3] got -4.57763672e-05 (3 ulps of 128), expected -4.82932664e-05.
TEST(OpsVsPyTorch, LogSoftmaxLargeD0) {
  Case c("log_softmax_large_d0", {"x"});
  c.check(mg::log_softmax(c["x"], 0));
}

// ---------------------------------------------------------------- shape and layout
// x[2,3,4] -> [4,6]
TEST(OpsVsPyTorch, Reshape) {
  Case c("reshape", {"x"});
  c.check(mg::reshape(c["x"], {4, -1}));
}

// x[3,4] -> [12]
TEST(OpsVsPyTorch, ReshapeFlat) {
  Case c("reshape_flat", {"x"});
  c.check(mg::reshape(c["x"], {-1}));
}

// x[3,4] -> transpose [4,3] (a strided view, so reshape must copy) -> [2,6]
TEST(OpsVsPyTorch, ReshapeOfTranspose) {
  Case c("reshape_of_transpose", {"x"});
  c.check(mg::reshape(mg::transpose(c["x"], 0, 1), {2, 6}));
}

// x[3,4] -> [4,3]
TEST(OpsVsPyTorch, Transpose01) {
  Case c("transpose_01", {"x"});
  c.check(mg::transpose(c["x"], 0, 1));
}

// x[2,3,4] -> [4,3,2]
TEST(OpsVsPyTorch, Transpose3d) {
  Case c("transpose_3d", {"x"});
  c.check(mg::transpose(c["x"], 0, 2));
}

// x[5,7] -> columns [2,5): [5,3]
TEST(OpsVsPyTorch, NarrowD1) {
  Case c("narrow_d1", {"x"});
  c.check(mg::narrow(c["x"], 1, 2, 3));
}

// x[4,3,2] -> rows [1,3): [2,3,2]
TEST(OpsVsPyTorch, NarrowD0_3d) {
  Case c("narrow_d0_3d", {"x"});
  c.check(mg::narrow(c["x"], 0, 1, 2));
}

// x[5,7] -> transpose [7,5] -> rows [3,7): [4,5], a narrow of a strided view
TEST(OpsVsPyTorch, NarrowOfTranspose) {
  Case c("narrow_of_transpose", {"x"});
  c.check(mg::narrow(mg::transpose(c["x"], 0, 1), 0, 3, 4));
}

// x[3,4] -> transpose [4,3] -> a row-major copy [4,3]
TEST(OpsVsPyTorch, ContiguousOfTranspose) {
  Case c("contiguous_of_transpose", {"x"});
  const mg::Tensor t = mg::transpose(c["x"], 0, 1);
  ASSERT_FALSE(t.is_contiguous());  // else this would not test the copying path
  c.check(mg::contiguous(t));
}

// x[3,4], already row-major: contiguous returns x itself
TEST(OpsVsPyTorch, ContiguousNoop) {
  Case c("contiguous_noop", {"x"});
  c.check(mg::contiguous(c["x"]));
}

// x[3,4] -> [1,3,4]
TEST(OpsVsPyTorch, UnsqueezeD0) {
  Case c("unsqueeze_d0", {"x"});
  c.check(mg::unsqueeze(c["x"], 0));
}

// x[3,4] -> [3,1,4]
TEST(OpsVsPyTorch, UnsqueezeD1) {
  Case c("unsqueeze_d1", {"x"});
  c.check(mg::unsqueeze(c["x"], 1));
}

// x[3,4] -> [3,4,1]
TEST(OpsVsPyTorch, UnsqueezeD2) {
  Case c("unsqueeze_d2", {"x"});
  c.check(mg::unsqueeze(c["x"], 2));
}

// x[3,4] -> [3,4,1] (dim -1 counts in the output's rank)
TEST(OpsVsPyTorch, UnsqueezeDm1) {
  Case c("unsqueeze_dm1", {"x"});
  c.check(mg::unsqueeze(c["x"], -1));
}

// a[2,3], b[2,5] -> [2,8]
TEST(OpsVsPyTorch, CatD1) {
  Case c("cat_d1", {"a", "b"});
  c.check(mg::cat({c["a"], c["b"]}, 1));
}

// a[2,3,4], b[1,3,4], c[3,3,4] -> [6,3,4]
TEST(OpsVsPyTorch, CatD0_3d) {
  Case c("cat_d0_3d", {"a", "b", "c"});
  c.check(mg::cat({c["a"], c["b"], c["c"]}, 0));
}

// a[2,3,1], b[2,3,4] -> [2,3,5]
TEST(OpsVsPyTorch, CatDm1_3d) {
  Case c("cat_dm1_3d", {"a", "b"});
  c.check(mg::cat({c["a"], c["b"]}, -1));
}

// a, b, c [3,4] -> [3,3,4]
TEST(OpsVsPyTorch, StackD0) {
  Case c("stack_d0", {"a", "b", "c"});
  c.check(mg::stack({c["a"], c["b"], c["c"]}, 0));
}

// a, b, c [3,4] -> [3,3,4] (inserted in the middle)
TEST(OpsVsPyTorch, StackD1) {
  Case c("stack_d1", {"a", "b", "c"});
  c.check(mg::stack({c["a"], c["b"], c["c"]}, 1));
}

// a, b, c [3,4] -> [3,4,3]
TEST(OpsVsPyTorch, StackDm1) {
  Case c("stack_dm1", {"a", "b", "c"});
  c.check(mg::stack({c["a"], c["b"], c["c"]}, -1));
}

// ---------------------------------------------------------------- indexing and loss
// table[6,4], index {2,0,2,5,2,1} -> [6,4]; row 2 is picked three times, so its gradient sums three rows
TEST(OpsVsPyTorch, IndexSelect) {
  Case c("index_select", {"table"});
  c.check(mg::index_select(c["table"], c.ints("index")));
}

// table[5,7], index {4} -> [1,7]; the other rows' gradient stays 0
TEST(OpsVsPyTorch, IndexSelectOne) {
  Case c("index_select_one", {"table"});
  c.check(mg::index_select(c["table"], c.ints("index")));
}

// x[5,7], index {3,0,6,3,1} -> [5]
TEST(OpsVsPyTorch, GatherRows) {
  Case c("gather_rows", {"x"});
  c.check(mg::gather_rows(c["x"], c.ints("index")));
}

// logp[5,7], target {3,0,6,3,1} -> []
TEST(OpsVsPyTorch, NllLoss) {
  Case c("nll_loss", {"logp"});
  c.check(mg::nll_loss(c["logp"], c.ints("target")));
}

// logp[6,4], target {2,2,2,2,0,3} -> []
TEST(OpsVsPyTorch, NllLossRepeat) {
  Case c("nll_loss_repeat", {"logp"});
  c.check(mg::nll_loss(c["logp"], c.ints("target")));
}

// x[5,7] logits ~30*N(0,1) +-60 -> log_softmax over -1 -> nll_loss with target {3,0,6,3,1} -> []:
// the language-model loss as the model composes it
TEST(OpsVsPyTorch, LogSoftmaxNllLarge) {
  Case c("log_softmax_nll_large", {"x"});
  c.check(mg::nll_loss(mg::log_softmax(c["x"], -1), c.ints("target")));
}
