// Every op in autograd/ops.h against PyTorch, continued from tests/autograd/test_ops_fixtures.cpp: softmax
// and log_softmax, shape and layout, indexing and the loss. Same fixture file and checks
// (tests/autograd/ops_case.h).
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "tests/autograd/ops_case.h"
#include "tests/test_util.h"

using Case = mgtest::OpsCase;

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
// out [1,3] got -0.0120048523, expected -0.0120066972; grad [4,6] got -0.00332606, expected
// -0.00332180.
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
// table[6,4], index {2,0,2,5,2,1} -> [6,4]; row 2 is picked three times, so its gradient sums three
// rows
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
