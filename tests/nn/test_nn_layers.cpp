// Layers: gradcheck of each, the fused LSTM against the step-by-step one, the dropout family's
// statistics and train/eval behaviour, and the model's parameter names and shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/lstm.h"
#include "nn/rnn_model.h"
#include "tensor/parallel.h"
#include "tests/test_util.h"

using namespace mg;
using Inputs = std::vector<Tensor>;

namespace {
Tensor rand_leaf(const Shape& shape, uint64_t seed, float range = 1.0f) {
  Generator gen(seed);
  return Tensor::uniform(shape, -range, range, gen).requires_grad_();
}
}  // namespace

TEST(Layers, LinearAndEmbeddingGradcheck) {
  const Tensor x = rand_leaf({5, 4}, 1), w = rand_leaf({3, 4}, 2), b = rand_leaf({3}, 3),
               table = rand_leaf({7, 4}, 4);
  EXPECT_GRADCHECK(
      "linear", [](const Inputs& v) { return linear(v[0], v[1], v[2]); }, (Inputs{x, w, b}));
  const std::vector<int64_t> ids{6, 0, 6, 3, 3, 1};
  EXPECT_GRADCHECK(
      "embedding", [&](const Inputs& v) { return embedding_lookup(v[0], ids, 3, 2); },
      (Inputs{table}));
}

TEST(Layers, LstmGradcheckBothPaths) {
  const int64_t T = 3, B = 2, In = 3, H = 4;
  const Inputs inputs = {rand_leaf({T, B, In}, 10),       rand_leaf({B, H}, 11),
                         rand_leaf({B, H}, 12),           rand_leaf({4 * H, In}, 13, 0.5f),
                         rand_leaf({4 * H, H}, 14, 0.5f), rand_leaf({4 * H}, 15, 0.5f),
                         rand_leaf({4 * H}, 16, 0.5f)};
  for (bool fused : {false, true}) {
    // Output, final h and final c all enter the checked function, so every gradient path is tested.
    auto fn = [fused](const Inputs& v) {
      const LSTMWeights w{v[3], v[4], v[5], v[6]};
      auto [out, s] = fused ? lstm_fused(v[0], {v[1], v[2]}, w) : lstm_steps(v[0], {v[1], v[2]}, w);
      return cat({reshape(out, {-1}), reshape(s.h, {-1}), reshape(s.c, {-1})}, 0);
    };
    EXPECT_GRADCHECK(fused ? "lstm_fused" : "lstm_steps", fn, inputs);
  }
}

TEST(Layers, FusedLstmMatchesStepByStep) {
  const int64_t T = 7, B = 5, In = 6, H = 8;
  const Tensor x = rand_leaf({T, B, In}, 20), h0 = rand_leaf({B, H}, 21),
               c0 = rand_leaf({B, H}, 22);
  Generator gen(23);
  LSTMLayer layer(In, H, gen);
  const Tensor R = rand_leaf({T, B, H}, 24), Rc = rand_leaf({B, H}, 25);
  std::vector<std::vector<float>> results[2];
  for (int fused = 0; fused < 2; ++fused) {
    Tensor xs = x, hs = h0, cs = c0;
    for (Tensor t : {xs, hs, cs}) t.zero_grad();
    layer.zero_grad();
    auto [out, s] = layer.forward(x, {h0, c0}, fused == 1);
    add(sum(mul(out, R)), sum(mul(s.c, Rc))).backward();
    results[fused] = {out.to_vector(),      s.h.to_vector(),       s.c.to_vector(),
                      x.grad().to_vector(), h0.grad().to_vector(), c0.grad().to_vector()};
    for (const Tensor& p : layer.parameters()) results[fused].push_back(p.grad().to_vector());
  }
  const char* names[] = {"out", "h", "c", "dx", "dh0", "dc0", "dW_ih", "dW_hh", "db_ih", "db_hh"};
  for (size_t k = 0; k < results[0].size(); ++k) {
    const Tensor a =
        Tensor::from_vector(results[1][k], {static_cast<int64_t>(results[1][k].size())});
    const Tensor b =
        Tensor::from_vector(results[0][k], {static_cast<int64_t>(results[0][k].size())});
    const std::string report =
        compare_tensors(std::string("fused vs steps: ") + names[k], a, b, 1e-5, 1e-6);
    EXPECT_TRUE(report.empty()) << report;
  }
}

TEST(Layers, FusedLstmTeamMatchesStepByStepAndIgnoresThreadCount) {
  // Big enough (B x 4H x H >= 2^20 multiply-adds) that the fused LSTM runs its steps in a thread
  // team: H = 128 splits into whole 16-unit blocks, H = 100 leaves a tail of 4 units. Every output
  // and gradient must match the step-by-step path, and be bitwise the same for 1, 2 and 3 threads.
  const int saved_threads = num_threads();
  for (int64_t H : {128, 100}) {
    const int64_t T = 4, B = 32, In = 24;
    SCOPED_TRACE("H = " + std::to_string(H));
    const Tensor x = rand_leaf({T, B, In}, 30), h0 = rand_leaf({B, H}, 31),
                 c0 = rand_leaf({B, H}, 32);
    Generator gen(33);
    LSTMLayer layer(In, H, gen);
    const Tensor R = rand_leaf({T, B, H}, 34), Rc = rand_leaf({B, H}, 35);
    auto run = [&](bool fused, int threads) {
      set_num_threads(threads);
      for (Tensor t : {x, h0, c0}) t.zero_grad();
      layer.zero_grad();
      auto [out, s] = layer.forward(x, {h0, c0}, fused);
      add(sum(mul(out, R)), sum(mul(s.c, Rc))).backward();
      std::vector<Tensor> r = {out, s.h, s.c, x.grad(), h0.grad(), c0.grad()};
      for (const Tensor& p : layer.parameters()) r.push_back(p.grad());
      return r;
    };
    const char* names[] = {"out", "h", "c", "dx", "dh0", "dc0", "dW_ih", "dW_hh", "db_ih", "db_hh"};
    const std::vector<Tensor> steps = run(false, 1), one = run(true, 1);
    for (size_t k = 0; k < steps.size(); ++k) {
      const std::string report =
          compare_tensors(std::string("fused vs steps: ") + names[k], one[k], steps[k], 1e-5, 1e-6);
      EXPECT_TRUE(report.empty()) << report;
    }
    for (int threads : {2, 3}) {
      const std::vector<Tensor> many = run(true, threads);
      for (size_t k = 0; k < one.size(); ++k)
        EXPECT_EQ(mgtest::bits_of(many[k]), mgtest::bits_of(one[k]))
            << names[k] << " differs with " << threads << " threads";
    }
  }
  set_num_threads(saved_threads);
}

TEST(Layers, LstmRejectsBadShapes) {
  Generator gen(1);
  LSTMLayer layer(3, 4, gen);
  EXPECT_THROW(layer.forward(Tensor::zeros({2, 5, 3}), layer.zero_state(4)), ShapeError);
  EXPECT_THROW(layer.forward(Tensor::zeros({2, 4, 2}), layer.zero_state(4)), ShapeError);
  EXPECT_THROW(layer.forward(Tensor::zeros({0, 4, 3}), layer.zero_state(4)), ShapeError);
}

TEST(Dropout, IdentityInEvalOrWithZeroP) {
  Generator gen(1);
  const Tensor x = rand_leaf({4, 3, 5}, 2);
  EXPECT_TRUE(dropout(x, 0.5f, gen, false).same_as(x));
  EXPECT_TRUE(locked_dropout(x, 0.5f, gen, false).same_as(x));
  EXPECT_TRUE(locked_dropout(x, 0.0f, gen, true).same_as(x));
  EXPECT_TRUE(embedding_dropout(reshape(x, {12, 5}), 0.5f, gen, false).shape() == (Shape{12, 5}));
  EXPECT_EQ(gen.offset, 0u);  // no random numbers drawn either
}

TEST(Dropout, LockedMaskIsSharedOverTime) {
  Generator gen(3);
  const int64_t T = 10, B = 50, H = 40;
  const Tensor y = locked_dropout(Tensor::ones({T, B, H}), 0.3f, gen, true);
  int64_t kept = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const float first = y.at({0, b, h});
      kept += first != 0.0f;
      for (int64_t t = 1; t < T; ++t)
        ASSERT_EQ(y.at({t, b, h}), first) << "mask differs over time at b=" << b;
    }
  EXPECT_NEAR(static_cast<double>(kept) / (B * H), 0.7, 0.04);
  EXPECT_NEAR(sum(y).item() / (T * B * H), 1.0, 0.06);  // scaled by 1/(1-p)
}

TEST(Dropout, EmbeddingDropoutDropsWholeRows) {
  Generator gen(4);
  const int64_t V = 2000, E = 8;
  const Tensor w = embedding_dropout(Tensor::ones({V, E}), 0.25f, gen, true);
  int64_t dropped = 0;
  for (int64_t v = 0; v < V; ++v) {
    const float first = w.at({v, 0});
    EXPECT_TRUE(first == 0.0f || std::fabs(first - 1.0f / 0.75f) < 1e-6f);
    for (int64_t e = 1; e < E; ++e)
      ASSERT_EQ(w.at({v, e}), first) << "row " << v << " partly dropped";
    dropped += first == 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / V, 0.25, 0.03);
}

// The model's embedding dropout scales only the looked-up rows (embedding_dropout_lookup,
// index_select_scaled). It must give the two-step reference's bits, forward and backward, with
// repeated ids (their gradients summed before the scale) and dropped rows among them, and draw
// the same random numbers; in evaluation it is the plain lookup.
TEST(Dropout, EmbeddingDropoutLookupIsTheTwoStepFormBitForBit) {
  const int64_t V = 40, E = 6, T = 4, B = 5;
  std::vector<int64_t> ids(T * B);
  for (int64_t i = 0; i < T * B; ++i) ids[i] = (i * 7) % 13;  // 13 distinct rows, most repeated
  const Tensor w_ref = rand_leaf({V, E}, 31), w = rand_leaf({V, E}, 31);
  const Tensor upstream = rand_leaf({T, B, E}, 32).detach();
  Generator g_ref(5), g(5);
  const Tensor y_ref = embedding_lookup(embedding_dropout(w_ref, 0.4f, g_ref, true), ids, T, B);
  const Tensor y = embedding_dropout_lookup(w, 0.4f, g, true, ids, T, B);
  EXPECT_EQ(g.offset, g_ref.offset);
  ASSERT_EQ(y.shape(), (Shape{T, B, E}));
  for (int64_t i = 0; i < y.numel(); ++i)
    ASSERT_EQ(std::memcmp(y.data() + i, y_ref.data() + i, sizeof(float)), 0) << "output " << i;
  sum(mul(y_ref, upstream)).backward();
  sum(mul(y, upstream)).backward();
  int64_t dropped = 0, kept = 0;
  for (int64_t r = 0; r < V; ++r) {
    for (int64_t c = 0; c < E; ++c)
      ASSERT_EQ(std::memcmp(w.grad().data() + r * E + c, w_ref.grad().data() + r * E + c, 4), 0)
          << "d weight[" << r << "," << c << "]: " << w.grad().at({r, c}) << " vs "
          << w_ref.grad().at({r, c});
    if (r < 13) (w.grad().at({r, 0}) == 0.0f ? dropped : kept) += 1;
  }
  EXPECT_GT(dropped, 0);  // the check covered dropped rows among the ids
  EXPECT_GT(kept, 0);
  Generator g_eval(5);
  const Tensor y_eval = embedding_dropout_lookup(w, 0.4f, g_eval, false, ids, T, B);
  EXPECT_EQ(g_eval.offset, 0u);
  EXPECT_EQ(y_eval.at({1, 2, 3}), w.at({ids[1 * B + 2], 3}));
  EXPECT_THROW(index_select_scaled(w, ids, Tensor::ones({V})), ShapeError);
}

TEST(Dropout, MaskMeanAndDeterminism) {
  Generator g1(9), g2(9);
  const Tensor a = dropout(Tensor::ones({100000}), 0.4f, g1, true),
               b = dropout(Tensor::ones({100000}), 0.4f, g2, true);
  EXPECT_EQ(a.to_vector(), b.to_vector());
  EXPECT_NEAR(mean(a).item(), 1.0, 0.02);
}

TEST(Model, ParameterNamesAndShapes) {
  ModelConfig cfg;
  cfg.ntoken = 50, cfg.emsize = 6, cfg.nhid = 7, cfg.nhidlast = 5, cfg.nlayers = 3,
  cfg.n_experts = 3;
  cfg.head = HeadKind::MoS;
  RNNModel mos(cfg, 1);
  std::vector<std::pair<std::string, Shape>> expected = {
      {"encoder.weight", {50, 6}},   {"rnns.0.weight_ih", {28, 6}}, {"rnns.0.weight_hh", {28, 7}},
      {"rnns.0.bias_ih", {28}},      {"rnns.0.bias_hh", {28}},      {"rnns.1.weight_ih", {28, 7}},
      {"rnns.1.weight_hh", {28, 7}}, {"rnns.1.bias_ih", {28}},      {"rnns.1.bias_hh", {28}},
      {"rnns.2.weight_ih", {20, 7}}, {"rnns.2.weight_hh", {20, 5}}, {"rnns.2.bias_ih", {20}},
      {"rnns.2.bias_hh", {20}},      {"prior.weight", {3, 5}},      {"latent.weight", {18, 5}},
      {"latent.bias", {18}},         {"decoder.bias", {50}}};
  const auto named = mos.named_parameters();
  ASSERT_EQ(named.size(), expected.size());
  for (size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(named[i].first, expected[i].first);
    EXPECT_EQ(named[i].second.shape(), expected[i].second) << named[i].first;
    EXPECT_EQ(named[i].second.name(), expected[i].first);
  }
  // Untied softmax: own decoder.weight [V,nhidlast].
  cfg.head = HeadKind::Softmax, cfg.tied = false, cfg.nlayers = 1;
  RNNModel untied(cfg, 1);
  EXPECT_EQ(untied.parameter("decoder.weight").shape(), (Shape{50, 5}));
  EXPECT_EQ(untied.parameter("rnns.0.weight_hh").shape(), (Shape{20, 5}));
  EXPECT_THROW(untied.parameter("decoder.weights"), std::invalid_argument);
  // Tied softmax: the last layer has H = E and the decoder is the encoder.
  cfg.tied = true;
  RNNModel tied(cfg, 1);
  EXPECT_EQ(tied.parameter("rnns.0.weight_hh").shape(), (Shape{24, 6}));
  EXPECT_TRUE(tied.head->decoder_weight.same_as(tied.encoder->weight));
  EXPECT_EQ(tied.parameter_count(), 50 * 6 + 24 * 6 * 2 + 24 * 2 + 50);
}

TEST(Model, TrainModeDrawsMasksEvalModeIsDeterministic) {
  ModelConfig cfg;
  cfg.ntoken = 30, cfg.emsize = 6, cfg.nhid = 8, cfg.nhidlast = 6, cfg.nlayers = 2,
  cfg.n_experts = 2;
  cfg.head = HeadKind::MoS, cfg.dropoutl = 0.3f, cfg.dropouti = 0.2f;
  RNNModel model(cfg, 3);
  std::vector<int64_t> ids(4 * 3);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 7 % 30);
  model.eval();
  const auto e1 = model.forward(ids, 4, 3, model.init_hidden(3)).log_prob.to_vector();
  const auto e2 = model.forward(ids, 4, 3, model.init_hidden(3)).log_prob.to_vector();
  EXPECT_EQ(e1, e2);
  EXPECT_EQ(model.dropout_gen.offset, 0u);
  model.train();
  const auto t1 = model.forward(ids, 4, 3, model.init_hidden(3)).log_prob.to_vector();
  EXPECT_GT(model.dropout_gen.offset, 0u);
  EXPECT_NE(t1, e1);
}
