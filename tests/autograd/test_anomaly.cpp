// Anomaly mode (autograd/anomaly.h): the first op whose forward or backward makes a NaN or an Inf
// is named with its node id, its inputs' shapes and where in the model it was made; with the guard
// off nothing is checked and nothing changes; `mosgrad train --detect-anomaly` passes it through.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "autograd/anomaly.h"
#include "autograd/ops.h"
#include "cli/commands.h"
#include "nn/rnn_model.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;

namespace {
Tensor leaf(const std::vector<float>& values, const Shape& shape) {
  Tensor t = Tensor::from_vector(values, shape);
  t.requires_grad_();
  return t;
}
}  // namespace

TEST(Anomaly, ForwardNaNFromLogOfANegativeNamesTheOpAndShapes) {
  const Tensor x = leaf({1, 2, -3, 4, 5, 6}, {2, 3});
  const AnomalyGuard guard;
  const std::string e = mgtest::error_of([&] { log(mul_scalar(x, 2.0f)); });
  EXPECT_HAS(e, "the forward of 'log' (node #");
  EXPECT_HAS(e, "produced NaN at [0,2] of its output [2,3]");
  EXPECT_HAS(e, "input 0 [2,3] (from mul_scalar #");
  EXPECT_EQ(e.find("already non-finite"), std::string::npos) << e;  // log made it, not mul_scalar
}

TEST(Anomaly, ForwardOfAnUnrecordedOpIsCheckedToo) {
  const Tensor x = Tensor::from_vector({0, 1}, {2});  // needs no grad: no node
  const AnomalyGuard guard;
  const std::string e = mgtest::error_of([&] { div(x, x); });  // 0/0
  EXPECT_HAS(e, "the forward of 'div' (not recorded");
  EXPECT_HAS(e, "NaN at [0]");
}

TEST(Anomaly, BackwardInfIsCaughtInTheBackwardThatMadeIt) {
  // x*y = 1 and (x*y)*w = 1e10 are finite; d/dx of x*y is w*y = 1e40, which overflows float.
  const Tensor x = leaf({1e-30f}, {1});
  const Tensor y = Tensor::from_vector({1e30f}, {1}), w = Tensor::from_vector({1e10f}, {1});
  const AnomalyGuard guard;
  const Tensor loss = sum(mul(mul(x, y), w));
  const std::string e = mgtest::error_of([&] { loss.backward(); });
  EXPECT_HAS(e, "the backward of 'mul' (node #");
  EXPECT_HAS(e, "inputs: input 0 [1], input 1 [1])");
  EXPECT_HAS(e, "produced +Inf at [0] of the gradient of input 0 [1]");
}

TEST(Anomaly, WithTheGuardOffNothingIsThrownAndResultsAreIdentical) {
  const Tensor x = leaf({1, -2, 3}, {3});
  EXPECT_TRUE(std::isnan(log(x).to_vector()[1]));  // no guard: NaN flows on, as before
  auto grads = [](bool guarded) {
    ModelConfig m;
    m.ntoken = 20, m.emsize = m.nhid = m.nhidlast = 6, m.nlayers = 2, m.head = HeadKind::MoS,
    m.n_experts = 2, m.dropout = 0.3f, m.wdrop = 0.2f;
    RNNModel model(m, 3);
    std::vector<int64_t> ids = {1, 2, 3, 4, 5, 6}, targets = {2, 3, 4, 5, 6, 7};
    std::optional<AnomalyGuard> guard;
    if (guarded) guard.emplace();
    model.forward(ids, 3, 2, model.init_hidden(2), &targets).loss.backward();
    std::vector<uint32_t> bits;
    for (const Tensor& p : model.parameters())
      for (uint32_t b : mgtest::bits_of(p.grad())) bits.push_back(b);
    return bits;
  };
  EXPECT_EQ(grads(false), grads(true));
}

TEST(Anomaly, AModelsMessageSaysWhichLayerAndWhichParameter) {
  ModelConfig m;
  m.ntoken = 20, m.emsize = m.nhid = m.nhidlast = 6, m.nlayers = 2, m.dropout = m.dropouth = 0,
  m.wdrop = m.dropoute = 0;
  RNNModel model(m, 3);
  model.name_parameters();
  Tensor w = model.rnns[1]->weight_hh;
  w.data()[5] = std::numeric_limits<float>::infinity();  // as a blown-up optimizer step leaves it
  std::vector<int64_t> ids = {1, 2, 3, 4}, targets = {2, 3, 4, 5};
  const AnomalyGuard guard;
  const std::string e = mgtest::error_of(
      [&] { model.forward(ids, 2, 2, model.init_hidden(2), &targets).loss.backward(); });
  EXPECT_HAS(e, "made in rnns.1)");
  EXPECT_HAS(e, "rnns.1.weight_hh [24,6] (already non-finite)");
}

TEST(Anomaly, TrainDetectAnomalyParsesAndLeavesANormalRunUnchanged) {
  EXPECT_TRUE(parse_command({"mosgrad", "train", "--detect-anomaly", "--preset", "tiny"})
                  .train.detect_anomaly);

  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("anomaly"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("anomaly_plain"));
  cfg.epochs = 1, cfg.max_steps = 4;
  const std::vector<double> plain = mgtest::run_collecting(cfg, corpus);
  cfg.save = mgtest::temp_dir("anomaly_checked"), cfg.detect_anomaly = true;
  EXPECT_EQ(mgtest::run_collecting(cfg, corpus), plain);
  EXPECT_FALSE(anomaly_enabled());  // the run's guard ended with it
}
