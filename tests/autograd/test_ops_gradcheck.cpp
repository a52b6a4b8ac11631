// Every op's backward against central finite differences, and a proof that the check catches a
// wrong backward.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/dropout.h"
#include "tests/test_util.h"

using namespace mg;
using Inputs = std::vector<Tensor>;

namespace {
Tensor rand_leaf(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Generator gen(seed);
  return Tensor::uniform(shape, lo, hi, gen).requires_grad_();
}
// Away from 0, for relu/div/log whose derivative jumps or explodes there.
Tensor rand_positive(const Shape& shape, uint64_t seed) {
  return rand_leaf(shape, seed, 0.5f, 2.0f);
}
}  // namespace

// The binary ops one test each: the course grades each op's backward as its own task
// (docs/course/tasks.txt), so a wrong backward of one op must fail only that op's test. The
// inputs are the same seeds in every test: a, b [3,4], row [4], col [3,1], s [], pos [3,4] and
// pos_row [4] positive.
TEST(Gradcheck, Add) {
  const Tensor a = rand_leaf({3, 4}, 1), b = rand_leaf({3, 4}, 2), row = rand_leaf({4}, 3);
  EXPECT_GRADCHECK(
      "add", [](const Inputs& x) { return add(x[0], x[1]); }, (Inputs{a, b}));
  EXPECT_GRADCHECK(
      "add [3,4]+[4]", [](const Inputs& x) { return add(x[0], x[1]); }, (Inputs{a, row}));
}

TEST(Gradcheck, Sub) {
  const Tensor row = rand_leaf({4}, 3), col = rand_leaf({3, 1}, 4);
  EXPECT_GRADCHECK(
      "sub [3,1]-[4]", [](const Inputs& x) { return sub(x[0], x[1]); }, (Inputs{col, row}));
}

TEST(Gradcheck, Mul) {
  const Tensor a = rand_leaf({3, 4}, 1), col = rand_leaf({3, 1}, 4), s = rand_leaf({}, 5);
  EXPECT_GRADCHECK(
      "mul [3,4]*[3,1]", [](const Inputs& x) { return mul(x[0], x[1]); }, (Inputs{a, col}));
  EXPECT_GRADCHECK(
      "mul by scalar tensor", [](const Inputs& x) { return mul(x[0], x[1]); }, (Inputs{a, s}));
}

TEST(Gradcheck, Div) {
  const Tensor a = rand_leaf({3, 4}, 1), pos = rand_positive({3, 4}, 6),
               pos_row = rand_positive({4}, 7);
  EXPECT_GRADCHECK(
      "div", [](const Inputs& x) { return div(x[0], x[1]); }, (Inputs{a, pos}));
  EXPECT_GRADCHECK(
      "div [3,4]/[4]", [](const Inputs& x) { return div(x[0], x[1]); }, (Inputs{a, pos_row}));
}

TEST(Gradcheck, ScalarOpsAndSumTo) {
  const Tensor a = rand_leaf({3, 4}, 1);
  EXPECT_GRADCHECK(
      "add_scalar", [](const Inputs& x) { return add_scalar(x[0], 2.0f); }, (Inputs{a}));
  EXPECT_GRADCHECK(
      "mul_scalar", [](const Inputs& x) { return mul_scalar(x[0], -3.0f); }, (Inputs{a}));
  EXPECT_GRADCHECK(
      "neg", [](const Inputs& x) { return neg(x[0]); }, (Inputs{a}));
  const Tensor big = rand_leaf({2, 3, 4}, 8);
  EXPECT_GRADCHECK(
      "sum_to [2,3,4]->[3,1]",
      [](const Inputs& x) {
        return sum_to(x[0], {3, 1});
      },
      (Inputs{big}));
}

TEST(Gradcheck, Unary) {
  const Tensor x = rand_leaf({4, 5}, 10, -3.0f, 3.0f), pos = rand_positive({4, 5}, 11);
  EXPECT_GRADCHECK(
      "tanh", [](const Inputs& v) { return tanh(v[0]); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "sigmoid", [](const Inputs& v) { return sigmoid(v[0]); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "log_sigmoid", [](const Inputs& v) { return log_sigmoid(v[0]); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "exp", [](const Inputs& v) { return exp(v[0]); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "log", [](const Inputs& v) { return log(v[0]); }, (Inputs{pos}));
  EXPECT_GRADCHECK(
      "relu", [](const Inputs& v) { return relu(v[0]); }, (Inputs{pos}));
  EXPECT_GRADCHECK(
      "relu negative side", [](const Inputs& v) { return relu(neg(v[0])); }, (Inputs{pos}));
  EXPECT_GRADCHECK(
      "square", [](const Inputs& v) { return square(v[0]); }, (Inputs{x}));
  // log_sigmoid far in both tails, where a naive log(sigmoid(x)) gives -inf or loses all precision.
  const Tensor tails = Tensor::from_vector({-60, -20, 20, 60}, {4}).requires_grad_();
  EXPECT_GRADCHECK(
      "log_sigmoid tails", [](const Inputs& v) { return log_sigmoid(v[0]); }, (Inputs{tails}));
}

TEST(Gradcheck, Matmul) {
  const Tensor a = rand_leaf({3, 4}, 20), at = rand_leaf({4, 3}, 21), b = rand_leaf({4, 5}, 22),
               bt = rand_leaf({5, 4}, 23);
  EXPECT_GRADCHECK(
      "matmul NN", [](const Inputs& x) { return matmul(x[0], x[1]); }, (Inputs{a, b}));
  EXPECT_GRADCHECK(
      "matmul NT", [](const Inputs& x) { return matmul(x[0], x[1], false, true); },
      (Inputs{a, bt}));
  EXPECT_GRADCHECK(
      "matmul TN", [](const Inputs& x) { return matmul(x[0], x[1], true, false); },
      (Inputs{at, b}));
  EXPECT_GRADCHECK(
      "matmul TT", [](const Inputs& x) { return matmul(x[0], x[1], true, true); },
      (Inputs{at, bt}));
  const Tensor ba = rand_leaf({2, 3, 4}, 24), bb = rand_leaf({2, 4, 5}, 25),
               bbt = rand_leaf({2, 5, 4}, 26);
  EXPECT_GRADCHECK(
      "bmm", [](const Inputs& x) { return bmm(x[0], x[1]); }, (Inputs{ba, bb}));
  EXPECT_GRADCHECK(
      "bmm NT", [](const Inputs& x) { return bmm(x[0], x[1], false, true); }, (Inputs{ba, bbt}));
}

TEST(Gradcheck, Reductions) {
  const Tensor x = rand_leaf({2, 3, 4}, 30, -2.0f, 2.0f);
  EXPECT_GRADCHECK(
      "sum", [](const Inputs& v) { return sum(v[0]); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "sum dim 1", [](const Inputs& v) { return sum(v[0], 1); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "sum dim -1 keepdim", [](const Inputs& v) { return sum(v[0], -1, true); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "mean", [](const Inputs& v) { return mean(v[0]); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "mean dim 0", [](const Inputs& v) { return mean(v[0], 0); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "logsumexp dim 2", [](const Inputs& v) { return logsumexp(v[0], 2); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "logsumexp dim 1 keepdim", [](const Inputs& v) { return logsumexp(v[0], 1, true); },
      (Inputs{x}));
  const Tensor large =
      Tensor::from_vector({50, 52, -60, 49, 80, 81, 79, -80}, {2, 4}).requires_grad_();
  EXPECT_GRADCHECK(
      "logsumexp large logits", [](const Inputs& v) { return logsumexp(v[0], 1); },
      (Inputs{large}));
}

TEST(Gradcheck, Softmax) {
  const Tensor x = rand_leaf({3, 5}, 40, -3.0f, 3.0f), y = rand_leaf({2, 3, 4}, 41, -3.0f, 3.0f);
  EXPECT_GRADCHECK(
      "softmax -1", [](const Inputs& v) { return softmax(v[0], -1); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "softmax 0", [](const Inputs& v) { return softmax(v[0], 0); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "log_softmax -1", [](const Inputs& v) { return log_softmax(v[0], -1); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "log_softmax middle dim", [](const Inputs& v) { return log_softmax(v[0], 1); }, (Inputs{y}));
  const Tensor large =
      Tensor::from_vector({50, 52, -60, 49, 80, 81, 79, -80}, {2, 4}).requires_grad_();
  EXPECT_GRADCHECK(
      "log_softmax large logits", [](const Inputs& v) { return log_softmax(v[0], 1); },
      (Inputs{large}));
}

TEST(Gradcheck, ShapeOps) {
  const Tensor x = rand_leaf({2, 3, 4}, 50), y = rand_leaf({2, 1, 4}, 51),
               m = rand_leaf({3, 4}, 52);
  EXPECT_GRADCHECK(
      "reshape",
      [](const Inputs& v) {
        return reshape(v[0], {6, -1});
      },
      (Inputs{x}));
  EXPECT_GRADCHECK(
      "transpose", [](const Inputs& v) { return transpose(v[0], 0, 2); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "contiguous of transpose", [](const Inputs& v) { return contiguous(transpose(v[0], 1, 2)); },
      (Inputs{x}));
  EXPECT_GRADCHECK(
      "narrow", [](const Inputs& v) { return narrow(v[0], 1, 1, 2); }, (Inputs{x}));
  EXPECT_GRADCHECK(
      "narrow of transpose then matmul",
      [](const Inputs& v) { return matmul(narrow(transpose(v[0], 0, 1), 0, 1, 3), v[0]); },
      (Inputs{m}));
  EXPECT_GRADCHECK(
      "unsqueeze", [](const Inputs& v) { return unsqueeze(v[0], 0); }, (Inputs{m}));
  EXPECT_GRADCHECK(
      "cat dim 1",
      [](const Inputs& v) {
        return cat({v[0], v[1]}, 1);
      },
      (Inputs{x, y}));
  EXPECT_GRADCHECK(
      "stack",
      [](const Inputs& v) {
        return stack({v[0], v[0], v[1]}, 0);
      },
      (Inputs{m, rand_leaf({3, 4}, 53)}));
}

TEST(Gradcheck, IndexAndLoss) {
  const Tensor table = rand_leaf({5, 3}, 60), logits = rand_leaf({4, 6}, 61, -2.0f, 2.0f);
  const std::vector<int64_t> ids{4, 0, 4, 2, 1, 4}, targets{5, 0, 3, 3};
  EXPECT_GRADCHECK(
      "index_select (repeated rows)", [&](const Inputs& v) { return index_select(v[0], ids); },
      (Inputs{table}));
  EXPECT_GRADCHECK(
      "gather_rows", [&](const Inputs& v) { return gather_rows(v[0], targets); }, (Inputs{logits}));
  EXPECT_GRADCHECK(
      "nll_loss(log_softmax)",
      [&](const Inputs& v) { return nll_loss(log_softmax(v[0], 1), targets); }, (Inputs{logits}));
  Generator gen(9);
  const Tensor mask = dropout_mask({4, 6}, 0.3f, gen);
  EXPECT_GRADCHECK(
      "mul by dropout mask", [&](const Inputs& v) { return mul(v[0], mask); }, (Inputs{logits}));
}

// An op whose backward is deliberately wrong (it forgets the factor 2 of d(x^2)/dx): gradcheck must
// reject it, or the checks above prove nothing.
namespace {
Tensor broken_square(const Tensor& x) {
  Tensor y = mul(x.detach(), x.detach());
  return record("broken_square", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{mul(g, x)};  // should be 2 * g * x
  });
}
}  // namespace

TEST(Gradcheck, CatchesAWrongBackward) {
  const Tensor x = rand_leaf({3, 2}, 70);
  const GradcheckResult result =
      gradcheck("broken_square", [](const Inputs& v) { return broken_square(v[0]); }, {x});
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.message.find("first bad index"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("[3,2]"), std::string::npos) << result.message;
  EXPECT_GT(result.max_abs_diff, 0.01);
}
