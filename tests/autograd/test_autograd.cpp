// The engine: accumulation, zero_grad, no_grad, detach, graph freeing, deep graphs, graph dumps.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "tests/test_util.h"

using namespace mg;

TEST(Autograd, ChainRuleThroughSharedSubexpression) {
  // y = (a*b + a)^2 summed; dy/da = 2(ab + a)(b + 1), dy/db = 2(ab + a) a
  Tensor a = Tensor::from_vector({1, 2, 3}, {3}).requires_grad_();
  Tensor b = Tensor::from_vector({4, 5, 6}, {3}).requires_grad_();
  Tensor u = add(mul(a, b), a);
  sum(mul(u, u)).backward();
  const std::vector<float> ga = a.grad().to_vector(), gb = b.grad().to_vector();
  for (int i = 0; i < 3; ++i) {
    const float av = static_cast<float>(i + 1), bv = static_cast<float>(i + 4), uv = av * bv + av;
    EXPECT_FLOAT_EQ(ga[i], 2 * uv * (bv + 1));
    EXPECT_FLOAT_EQ(gb[i], 2 * uv * av);
  }
}

// u = exp(a) + a feeds v twice (v = u + 2u), so d(sum v)/da = 3 (exp(a) + 1): the engine must visit
// u once, after both of its users. Only ops whose backward is no course task (add, exp, mul_scalar,
// sum), so this checks the engine alone (task 2.1).
TEST(Autograd, EveryPathOfASharedInputIsSummedOnce) {
  Tensor a = Tensor::from_vector({0.5f, -1.0f, 2.0f}, {3}).requires_grad_();
  const Tensor u = add(exp(a), a);
  const Tensor v = add(u, mul_scalar(u, 2.0f));
  sum(add(v, v)).backward();  // and v twice as both inputs of one op
  const std::vector<float> x = a.to_vector(), g = a.grad().to_vector();
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(g[i], 6 * (std::exp(x[i]) + 1)) << i;
}

TEST(Autograd, GradientsAccumulateUntilZeroGrad) {
  Tensor w = Tensor::from_vector({2}, {1}).requires_grad_();
  sum(mul_scalar(w, 3)).backward();
  sum(mul_scalar(w, 3)).backward();
  EXPECT_FLOAT_EQ(w.grad().item(), 6.0f);
  w.zero_grad();
  EXPECT_FALSE(w.grad().defined());
  sum(mul(w, w)).backward();
  EXPECT_FLOAT_EQ(w.grad().item(), 4.0f);
}

TEST(Autograd, LeavesNeverShareAGradient) {
  // A leaf adopts a gradient tensor only when nothing else holds it. add's backward hands the same
  // tensor to both inputs, so each leaf must get its own copy: writing one must not change the
  // other.
  Tensor a = Tensor::from_vector({1, 2, 3}, {3}).requires_grad_();
  Tensor b = Tensor::from_vector({4, 5, 6}, {3}).requires_grad_();
  sum(add(a, b)).backward();
  a.grad().data()[0] = 100.0f;
  EXPECT_EQ(b.grad().to_vector(), (std::vector<float>{1, 1, 1}));
  EXPECT_NE(a.grad().impl().storage, b.grad().impl().storage);
  // An adopted gradient (the matmul's fresh one) still accumulates on the next backward.
  Tensor w = Tensor::from_vector({1, 2, 3, 4}, {2, 2}).requires_grad_();
  const Tensor x = Tensor::from_vector({1, 1}, {1, 2});
  sum(matmul(x, w)).backward();
  sum(matmul(x, w)).backward();
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{2, 2, 2, 2}));
  // backward() on a leaf with the caller's own gradient tensor: the leaf gets a copy, never the
  // caller's tensor (a second call must not double the caller's numbers).
  Tensor leaf = Tensor::from_vector({1, 2}, {2}).requires_grad_();
  const Tensor seed = Tensor::from_vector({3, 4}, {2});
  leaf.backward(seed);
  leaf.backward(seed);
  EXPECT_EQ(seed.to_vector(), (std::vector<float>{3, 4}));
  EXPECT_EQ(leaf.grad().to_vector(), (std::vector<float>{6, 8}));
}

TEST(Autograd, NoGradRecordsNothing) {
  Tensor w = Tensor::ones({2}).requires_grad_();
  {
    NoGradGuard no_grad;
    Tensor y = mul(w, w);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
    EXPECT_THROW(sum(y).backward(), std::logic_error);
  }
  EXPECT_TRUE(mul(w, w).requires_grad());
}

TEST(Autograd, DetachCutsTheGraphButSharesNumbers) {
  Tensor w = Tensor::from_vector({3}, {1}).requires_grad_();
  Tensor h = mul(w, w);  // 9
  Tensor hd = h.detach();
  EXPECT_TRUE(hd.is_leaf());
  EXPECT_FALSE(hd.requires_grad());
  EXPECT_EQ(hd.data(), h.data());
  // Truncated BPTT: the gradient stops at the detached state.
  sum(mul(hd, w)).backward();
  EXPECT_FLOAT_EQ(w.grad().item(), 9.0f);
}

TEST(Autograd, GraphIsFreedAfterBackward) {
  const int64_t before = live_node_count();
  Tensor w = Tensor::ones({4, 4}).requires_grad_();
  for (int step = 0; step < 50; ++step) {
    Tensor h = Tensor::ones({1, 4});
    for (int t = 0; t < 20; ++t) h = tanh(matmul(h, w));
    Tensor loss = sum(h);
    loss.backward();
    // The loss tensor still exists, but its graph has released every input and closure.
    EXPECT_EQ(loss.grad_fn()->inputs.size(), 0u);
  }
  EXPECT_LE(live_node_count(), before + 2);  // nothing accumulates over a long run
}

TEST(Autograd, SecondBackwardThroughFreedGraphIsAClearError) {
  Tensor w = Tensor::ones({2}).requires_grad_();
  Tensor y = sum(mul(w, w));
  y.backward();
  try {
    y.backward();
    FAIL() << "second backward through a freed graph did not throw";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("already freed"), std::string::npos) << e.what();
  }
}

TEST(Autograd, DeepGraphNeedsNoRecursion) {
  // 70 steps x 3 layers x ~30 ops of an unrolled LSTM is ~6k nodes; use 200k to be sure neither the
  // backward walk nor the graph's destruction recurses.
  Tensor w = Tensor::from_vector({1.0f}, {1}).requires_grad_();
  Tensor x = w;
  for (int i = 0; i < 200000; ++i) x = add_scalar(x, 0.0f);
  sum(x).backward();
  EXPECT_FLOAT_EQ(w.grad().item(), 1.0f);
  // And a deep graph dropped without backward.
  Tensor y = w;
  for (int i = 0; i < 200000; ++i) y = mul_scalar(y, 1.0f);
  y = Tensor();
  SUCCEED();
}

TEST(Autograd, RequiresGradOnlyOnLeaves) {
  Tensor w = Tensor::ones({2}).requires_grad_();
  Tensor y = mul(w, w);
  EXPECT_THROW(y.requires_grad_(), std::logic_error);
  EXPECT_THROW(mul(w, w).backward(), ShapeError);  // not a scalar and no gradient given
  y.backward(Tensor::ones({2}));
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{2, 2}));
}

TEST(Autograd, GraphDumpsNameOpsAndParameters) {
  Tensor w = Tensor::ones({3, 2}).requires_grad_();
  w.set_name("decoder.weight");
  Tensor x = Tensor::ones({4, 2});
  Tensor loss = mean(tanh(matmul(x, w, false, true)));
  const std::string text = graph_text(loss);
  EXPECT_NE(text.find("tanh"), std::string::npos) << text;
  EXPECT_NE(text.find("matmul"), std::string::npos) << text;
  EXPECT_NE(text.find("decoder.weight [3,2](leaf)"), std::string::npos) << text;
  const std::string dot = graph_dot(loss);
  EXPECT_EQ(dot.rfind("digraph autograd {", 0), 0u) << dot;
  EXPECT_NE(dot.find("label=\"decoder.weight [3,2]\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("->"), std::string::npos) << dot;
  EXPECT_NE(loss.debug_string().find("grad_fn=mul_scalar"), std::string::npos)
      << loss.debug_string();
}
