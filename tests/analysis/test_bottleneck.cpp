// The softmax bottleneck instruments: the double-precision head (analysis/head_double.h) agrees
// with the float heads, and bottleneck-demo (analysis/bottleneck_demo.h) shows what the softmax
// bottleneck predicts: MoS ends closer to a high-rank truth than Softmax and MoC at equal d, and Softmax / MoC
// never exceed d+2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "analysis/bottleneck_demo.h"
#include "analysis/head_double.h"
#include "analysis/spectrum.h"
#include "autograd/ops.h"
#include "tensor/parallel.h"

using namespace mg;

TEST(Bottleneck, DoubleHeadMatchesEveryFloatHead) {
  const int64_t N = 12, V = 30, H = 6, E = 5, K = 3;
  for (HeadKind kind :
       {HeadKind::Softmax, HeadKind::Sigsoftmax, HeadKind::MoS, HeadKind::MoSig, HeadKind::MoC}) {
    Generator gen(3);
    const bool mixture = is_mixture(kind);
    std::shared_ptr<OutputHead> head =
        make_head(kind, V, mixture ? H : E, E, K, 0.0f, Tensor(), gen);
    head->eval();
    // Non-zero decoder bias, so the bias path is exercised.
    head->decoder_bias.data()[0] = 0.7f, head->decoder_bias.data()[V - 1] = -1.3f;
    const Tensor h = Tensor::normal({N, mixture ? H : E}, 0.0f, 2.0f, gen);
    const std::vector<float> want = head->log_prob(h, N, gen).to_vector();
    const std::vector<float> hv = h.to_vector();
    const std::vector<double> got = DoubleHead(*head).log_probs(hv.data(), N);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2e-5) << head_kind_name(kind) << " entry " << i;
  }
}

TEST(Bottleneck, MixtureInProbabilitiesMatchesTheLogsumexps) {
  // log Σ_k π_k p_k against the logsumexp reference, for logits of ordinary size and for logits
  // in the thousands, where probabilities underflow double and the rows must fall back to the
  // reference (the second case has log-probabilities below log 1e-280 ≈ −645).
  const int64_t N = 20, V = 40, H = 6, E = 5, K = 3;
  for (HeadKind kind : {HeadKind::MoS, HeadKind::MoSig})
    for (float scale : {1.0f, 3000.0f}) {
      Generator gen(7);
      std::shared_ptr<OutputHead> head = make_head(kind, V, H, E, K, 0.0f, Tensor(), gen);
      head->eval();
      float* w = head->decoder_weight.data();
      for (int64_t i = 0; i < V * E; ++i) w[i] *= scale;
      head->decoder_bias.data()[1] = 0.9f;
      const std::vector<float> hv = Tensor::normal({N, H}, 0.0f, 2.0f, gen).to_vector();
      const DoubleHead dh(*head);
      const std::vector<double> got = dh.log_probs(hv.data(), N);
      const std::vector<double> want = dh.log_probs(hv.data(), N, /*log_domain=*/true);
      double lowest = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-12 * std::max(1.0, std::fabs(want[i])))
            << head_kind_name(kind) << " x" << scale << " entry " << i;
        lowest = std::min(lowest, want[i]);
      }
      if (scale > 1) {
        EXPECT_LT(lowest, -700) << "the fallback was not exercised";
      }
      // At ordinary logits the probability domain must have run: its rounding differs somewhere.
      if (scale == 1) {
        EXPECT_NE(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(double)))
            << head_kind_name(kind) << ": every row took the log-domain path";
      }
    }
}

TEST(Bottleneck, MixtureInProbabilitiesKeepsFarBelowWordsExact) {
  // Logits from the bias alone, 12 words a step apart: a word 363 below a largest logit of 100
  // (MoSig's p ≈ e^-626, still in double's range), and every logit far below zero (a largest of
  // −700, e^{−m} near overflow, words 2 apart): products that would pass through the subnormal
  // range on the way to a value in range must not, or log p drifts.
  const int64_t V = 12, H = 4, E = 3, K = 2;
  for (HeadKind kind : {HeadKind::MoS, HeadKind::MoSig})
    for (auto [top, step] : {std::pair<float, float>{100, 33}, {-700, 2}}) {
      Generator gen(9);
      std::shared_ptr<OutputHead> head = make_head(kind, V, H, E, K, 0.0f, Tensor(), gen);
      head->eval();
      float* w = head->decoder_weight.data();
      for (int64_t i = 0; i < V * E; ++i) w[i] = 0;
      float* b = head->decoder_bias.data();
      for (int64_t v = 0; v < V; ++v) b[v] = top - step * static_cast<float>(v);
      const std::vector<float> hv = Tensor::normal({2, H}, 0.0f, 1.0f, gen).to_vector();
      const DoubleHead dh(*head);
      const std::vector<double> got = dh.log_probs(hv.data(), 2);
      const std::vector<double> want = dh.log_probs(hv.data(), 2, /*log_domain=*/true);
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-12 * std::max(1.0, std::fabs(want[i])))
            << head_kind_name(kind) << " top " << top << " entry " << i;
    }
}

TEST(Bottleneck, ComponentKlIsZeroForIdenticalComponentsAndPositiveOtherwise) {
  Generator gen(5);
  std::shared_ptr<OutputHead> head = make_head(HeadKind::MoS, 20, 6, 4, 3, 0.0f, Tensor(), gen);
  auto* mos = dynamic_cast<MixtureHead*>(head.get());
  const Tensor h = Tensor::normal({4, 6}, 0.0f, 1.0f, gen);
  const std::vector<float> hv = h.to_vector();
  EXPECT_GT(DoubleHead(*head).mean_component_kl(hv.data(), 4), 1e-4);
  // Every expert's latent rows equal to expert 0's: the K softmaxes coincide, KL = 0.
  float* w = mos->latent_weight.data();
  float* b = mos->latent_bias.data();
  for (int64_t k = 1; k < 3; ++k)
    for (int64_t e = 0; e < 4; ++e) {
      for (int64_t i = 0; i < 6; ++i) w[(k * 4 + e) * 6 + i] = w[e * 6 + i];
      b[k * 4 + e] = b[e];
    }
  EXPECT_NEAR(DoubleHead(*head).mean_component_kl(hv.data(), 4), 0.0, 1e-12);
  std::shared_ptr<OutputHead> softmax =
      make_head(HeadKind::Softmax, 20, 4, 4, 1, 0.0f, Tensor(), gen);
  EXPECT_TRUE(std::isnan(DoubleHead(*softmax).mean_component_kl(hv.data(), 1)));
}

TEST(Bottleneck, DemoMosBeatsSoftmaxAndMocWhoseRankStaysAtMostDPlus2) {
  DemoConfig c;
  c.steps = 400;  // the command runs 1500; the order is settled well before
  const int before = num_threads();
  set_num_threads(1);  // as the command: tensors this small run slower split over a busy machine
  const DemoResult r = run_bottleneck_demo(c);
  set_num_threads(before);
  ASSERT_EQ(r.curves.size(), 4u);
  EXPECT_GE(r.true_rank, c.vocab - 1);  // P* is (nearly) full rank, far above d+2
  double kl[4];
  for (size_t i = 0; i < 4; ++i) {
    const DemoCurve& curve = r.curves[i];
    ASSERT_EQ(curve.points.size(), 5u);  // steps 0, 100, 200, 300, 400
    kl[i] = curve.points.back().kl;
    if (curve.head == HeadKind::Softmax || curve.head == HeadKind::MoC) {
      for (const DemoPoint& p : curve.points)
        EXPECT_LE(p.rank, c.d + 2) << head_kind_name(curve.head) << " step " << p.step;
    }
    EXPECT_LT(curve.points.back().kl, curve.points.front().kl)
        << head_kind_name(curve.head) << " did not learn";
  }
  EXPECT_EQ(r.curves[0].head, HeadKind::Softmax);
  EXPECT_EQ(r.curves[1].head, HeadKind::MoC);
  EXPECT_EQ(r.curves[3].head, HeadKind::MoS);
  EXPECT_LT(kl[3], kl[0]);  // MoS closer to the truth than Softmax ...
  EXPECT_LT(kl[3], kl[1]);  // ... and than MoC, at the same d
  EXPECT_GT(r.curves[3].points.back().rank, c.d + 2);
}

TEST(Bottleneck, DemoIsTheSameForAnyThreadCount) {
  DemoConfig c;
  c.steps = 10, c.eval_every = 5;
  const int before = num_threads();
  set_num_threads(1);
  const std::string one = demo_csv(run_bottleneck_demo(c));
  set_num_threads(2);
  const std::string two = demo_csv(run_bottleneck_demo(c));
  set_num_threads(before);
  EXPECT_EQ(one, two);
  EXPECT_NE(one.find("mos,10,"), std::string::npos) << one;
}

TEST(Bottleneck, DemoRejectsImpossibleSettings) {
  DemoConfig c;
  c.d = c.vocab;
  EXPECT_THROW(run_bottleneck_demo(c), std::invalid_argument);
  c = DemoConfig();
  c.support = c.vocab + 1;
  EXPECT_THROW(run_bottleneck_demo(c), std::invalid_argument);
}
