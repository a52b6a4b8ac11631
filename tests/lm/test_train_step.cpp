// One training step, written out: the AR and TAR terms of the loss (Merity et al. 2017, §4.6), and
// the trainer's first update, which must be SGD on that loss, clipped, at the learning rate
// variable-length BPTT scales by seq_len / bptt (AWD-LSTM's main.py).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/ops.h"
#include "io/checkpoint.h"
#include "lm/batching.h"
#include "lm/recipe_rules.h"
#include "lm/train.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;

namespace {

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return Tensor::uniform(shape, -1, 1, gen);
}

// mean of x^2 over all elements, in double.
double mean_square(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return s / static_cast<double>(x.size());
}

}  // namespace

TEST(Regularisation, ArOnTheDroppedOutputTarOnTheRawOne) {
  // AR = alpha mean(dropped^2) of the last layer; TAR = beta mean((raw_t - raw_{t-1})^2) of its raw
  // output. A first layer with other values must not enter either term.
  const int64_t T = 4, B = 3, H = 5;
  ModelOutput out;
  out.loss = Tensor::scalar(1.25f);
  out.raw_outputs = {random_tensor({T, B, 7}, 1), random_tensor({T, B, H}, 2)};
  out.dropped_outputs = {random_tensor({T, B, 7}, 3), random_tensor({T, B, H}, 4)};
  const float alpha = 2.0f, beta = 3.0f;
  const std::vector<float> raw = out.raw_outputs[1].to_vector(),
                           dropped = out.dropped_outputs[1].to_vector();
  std::vector<double> ar(dropped.begin(), dropped.end()), tar;
  for (int64_t t = 1; t < T; ++t)
    for (int64_t i = 0; i < B * H; ++i)
      tar.push_back(double{raw[t * B * H + i]} - raw[(t - 1) * B * H + i]);
  const double expected = 1.25 + alpha * mean_square(ar) + beta * mean_square(tar);
  EXPECT_NEAR(regularised_loss(out, alpha, beta).item(), expected, 1e-6 * expected);
  // One time step has no differences: no TAR term.
  ModelOutput one;
  one.loss = out.loss;
  one.raw_outputs = {random_tensor({1, B, H}, 5)};
  one.dropped_outputs = {random_tensor({1, B, H}, 6)};
  const std::vector<float> d1 = one.dropped_outputs[0].to_vector();
  const double expected1 = 1.25 + alpha * mean_square(std::vector<double>(d1.begin(), d1.end()));
  EXPECT_NEAR(regularised_loss(one, alpha, beta).item(), expected1, 1e-6 * expected1);
}

TEST(TrainStep, TheFirstUpdateIsClippedSgdOnTheRegularisedLossAtTheScaledLearningRate) {
  // Train one step (stopping saves the weights and the position reached, i.e. seq_len), then
  // redo that step by hand: the same model and batch, loss + AR + TAR, backward, clip the global
  // norm to `clip`, and p -= lr * seq_len / bptt * (g + wdecay p).
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("train_step"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("train_step"));
  cfg.model.dropout = cfg.model.dropouth = cfg.model.dropouti = cfg.model.dropoute = 0;
  cfg.model.dropoutl = cfg.model.wdrop = 0;  // no masks, so the step can be redone exactly
  cfg.alpha = 3, cfg.beta = 5, cfg.wdecay = 1e-3f, cfg.clip = 0.25f, cfg.lr = 5;
  cfg.variable_bptt = true, cfg.max_steps = 1;
  const TrainResult r = train_lm(cfg, corpus);
  ASSERT_TRUE(r.stopped);
  const Checkpoint after = load_checkpoint(cfg.save + "/checkpoint.ckpt");
  const int64_t seq_len = std::stoll(after.string("batch_pos"));
  ASSERT_NE(seq_len, cfg.bptt)
      << "pick a seed whose first segment is not bptt long, or lr scaling is not tested";

  ModelConfig mc = cfg.model;
  mc.ntoken = corpus.vocab.size();
  RNNModel model(mc, cfg.seed);  // the trainer's initial weights
  model.train();
  const Batch batch = get_batch(batchify(corpus.train, cfg.batch_size), 0, seq_len);
  ASSERT_EQ(batch.seq_len, seq_len);
  ModelOutput out = model.forward(batch.input, batch.seq_len, batch.batch,
                                  model.init_hidden(cfg.batch_size), &batch.target);
  regularised_loss(out, cfg.alpha, cfg.beta).backward();
  double norm2 = 0;
  for (const Tensor& p : model.parameters())
    for (float g : p.grad().to_vector()) norm2 += double{g} * g;
  const double norm = std::sqrt(norm2), scale = cfg.clip / (norm + 1e-6);
  ASSERT_GT(norm, cfg.clip) << "the step must be clipped for this test to check clipping";
  const double lr = double{cfg.lr} * seq_len / cfg.bptt;
  for (const auto& [name, p] : model.named_parameters()) {
    const std::vector<float> before = p.to_vector(), g = p.grad().to_vector();
    std::vector<float> update(before.size()), expected(before.size());
    const std::vector<float> reached = after.tensor("model." + name).to_vector();
    for (size_t i = 0; i < before.size(); ++i) {
      update[i] = reached[i] - before[i];
      expected[i] = static_cast<float>(-lr * (g[i] * scale + double{cfg.wdecay} * before[i]));
    }
    const int64_t n = static_cast<int64_t>(before.size());
    // The update is a difference of floats near 0.1: compare to their rounding (1e-8), not better.
    const std::string report =
        compare_tensors("update of " + name, Tensor::from_vector(update, {n}),
                        Tensor::from_vector(expected, {n}), 1e-3, 2e-8);
    EXPECT_TRUE(report.empty()) << report;
  }
}
