// Weight drop (DropConnect on weight_hh, AWD-LSTM's WeightDrop): the mask, its scale, when it is
// drawn, the gradient that reaches the raw weight, and a whole model in training mode against
// PyTorch (tests/fixtures/weight_drop.txt, written by tools/gen_weight_drop_fixtures.py).
//
// PyTorch's semantics, which AWD-LSTM's WeightDrop gets from F.dropout(weight_hh_raw, p) before
// every forward pass: one Bernoulli(1-p) mask over the whole [4H,H] matrix, kept weights scaled by
// 1/(1-p), the same mask at every time step, a fresh one per forward pass and per layer, weight_ih
// untouched, the identity in eval mode, and d loss/d raw = mask * d loss/d dropped.
#include <gtest/gtest.h>

#include <memory>

#include "autograd/ops.h"
#include "nn/dropout.h"
#include "nn/rnn_model.h"
#include "tests/test_util.h"

using namespace mg;

namespace {

// The mask weight drop must use for `n` weights drawn at `first` of stream `seed`, written out from
// the definition (tensor/philox.h: a weight is kept when its uniform is >= p) rather than taken
// from dropout_mask, so that a wrong dropout_mask cannot agree with itself.
std::vector<float> expected_mask(uint64_t seed, uint64_t first, int64_t n, float p) {
  std::vector<float> mask(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    mask[i] =
        philox_uniform(seed, first + static_cast<uint64_t>(i)) >= p ? 1.0f / (1.0f - p) : 0.0f;
  return mask;
}

Tensor random_weight(int64_t H, uint64_t seed) {
  Generator gen(seed);
  return Tensor::uniform({4 * H, H}, -1, 1, gen).requires_grad_();
}

}  // namespace

TEST(WeightDrop, EveryWeightHasItsOwnScaledMaskFreshOnEveryCall) {
  // [4H,H] = [40,10]: a mask of whole rows or columns, one without the 1/(1-p), or one drawn again
  // from the same positions shows at some element.
  const float p = 0.3f;
  const Tensor w = random_weight(10, 1);
  const int64_t n = w.numel();
  Generator gen(77);
  gen.advance(5);  // not at the start of the stream
  for (int call = 0; call < 2; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    const uint64_t first = gen.offset;
    const Tensor dropped = weight_drop(w, p, gen, true);
    EXPECT_EQ(gen.offset, first + static_cast<uint64_t>(n)) << "one draw per weight";
    const std::vector<float> mask = expected_mask(77, first, n, p), raw = w.to_vector(),
                             got = dropped.to_vector();
    ASSERT_EQ(dropped.shape(), w.shape());
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], raw[i] * mask[i])
          << "weight " << i << " (row " << i / 10 << ", column " << i % 10 << ")";
      kept += mask[i] != 0.0f;
    }
    EXPECT_GT(kept, 0);
    EXPECT_LT(kept, n);
  }
}

TEST(WeightDrop, IdentityInEvalModeAndAtPZero) {
  const Tensor w = random_weight(4, 2);
  Generator gen(3);
  EXPECT_TRUE(weight_drop(w, 0.5f, gen, false).same_as(w));
  EXPECT_TRUE(weight_drop(w, 0.0f, gen, true).same_as(w));
  EXPECT_EQ(gen.offset, 0u) << "no random numbers drawn";
}

TEST(WeightDrop, TheRawWeightGetsTheGradientThroughTheMask) {
  const float p = 0.5f;
  const Tensor w = random_weight(5, 4);
  Generator gen(11), r_gen(12);
  const Tensor R = Tensor::uniform(w.shape(), -1, 1, r_gen);
  sum(mul(weight_drop(w, p, gen, true), R)).backward();  // d/dw sum(mask * w * R) = mask * R
  ASSERT_TRUE(w.grad().defined()) << "no gradient reached the raw weight";
  const std::vector<float> mask = expected_mask(11, 0, w.numel(), p), r = R.to_vector(),
                           g = w.grad().to_vector();
  for (int64_t i = 0; i < w.numel(); ++i) ASSERT_FLOAT_EQ(g[i], mask[i] * r[i]) << "weight " << i;
}

namespace {

const mgtest::Fixtures& fx() {
  static const mgtest::Fixtures f("weight_drop.txt");
  return f;
}

// The fixture's model: tied softmax, two layers with weight_ih and weight_hh of one shape, only
// weight drop on. Its dropout generator starts at Generator(cfg.seed).
std::unique_ptr<RNNModel> fixture_model(bool fused) {
  ModelConfig mc;
  mc.ntoken = static_cast<int64_t>(fx().get("cfg.ntoken").item());
  mc.emsize = static_cast<int64_t>(fx().get("cfg.emsize").item());
  mc.nhid = mc.nhidlast = static_cast<int64_t>(fx().get("cfg.nhid").item());
  mc.nlayers = static_cast<int64_t>(fx().get("cfg.nlayers").item());
  mc.head = HeadKind::Softmax, mc.tied = true;
  mc.dropout = mc.dropouth = mc.dropouti = mc.dropoute = mc.dropoutl = 0.0f;
  mc.wdrop = fx().get("cfg.wdrop").item();
  auto model = std::make_unique<RNNModel>(mc, 1);
  model->paths.fused_lstm = fused;
  for (auto& [name, t] : model->named_parameters()) copy_into(t, fx().get("param." + name));
  model->dropout_gen = Generator(static_cast<uint64_t>(fx().get("cfg.seed").item()));
  return model;
}

}  // namespace

TEST(WeightDropVsPyTorch, TwoTrainingPassesAndEvalMatchAwdLstmsWeightDrop) {
  // Each pass's loss and every parameter's gradient, the raw weight_hh's included; the second pass
  // must have drawn fresh masks; eval mode must drop nothing and draw nothing.
  const int64_t T = 5, B = 2;
  const std::vector<int64_t> input = fx().ints("input"), target = fx().ints("target");
  for (bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused LSTM" : "step-by-step LSTM");
    auto model = fixture_model(fused);
    model->train();
    for (int pass = 1; pass <= 2; ++pass) {
      const std::string p = "train" + std::to_string(pass) + ".";
      SCOPED_TRACE(p);
      model->zero_grad();
      ModelOutput out = model->forward(input, T, B, model->init_hidden(B), &target);
      EXPECT_TENSOR_NEAR(out.loss, fx().get(p + "loss"), 1e-5, 1e-6);
      out.loss.backward();
      for (auto& [name, t] : model->named_parameters()) {
        ASSERT_TRUE(t.grad().defined()) << name << " got no gradient";
        EXPECT_TENSOR_NEAR(t.grad(), fx().get(p + "grad." + name), 1e-4, 1e-6);
      }
    }
    const uint64_t drawn = model->dropout_gen.offset;
    model->eval();
    NoGradGuard no_grad;
    EXPECT_TENSOR_NEAR(model->forward(input, T, B, model->init_hidden(B), &target).loss,
                       fx().get("eval.loss"), 1e-5, 1e-6);
    EXPECT_EQ(model->dropout_gen.offset, drawn) << "eval mode drew random numbers";
  }
}

TEST(WeightDropVsPyTorch, TheFixtureMasksAreMosgradsStream) {
  // The generator script redraws mosgrad's Philox stream in Python; if it ever drifted from
  // tensor/philox.cpp, the test above would compare against masks mosgrad never draws.
  const float p = fx().get("cfg.wdrop").item();
  const uint64_t seed = static_cast<uint64_t>(fx().get("cfg.seed").item());
  uint64_t first = 0;
  for (const char* name : {"train1.mask.0", "train1.mask.1", "train2.mask.0", "train2.mask.1"}) {
    const Tensor& mask = fx().get(name);
    EXPECT_EQ(mask.to_vector(), expected_mask(seed, first, mask.numel(), p)) << name;
    first += static_cast<uint64_t>(mask.numel());
  }
}
