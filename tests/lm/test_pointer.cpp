// The neural cache pointer (lm/pointer.h) against a direct, slow reference written from Grave et
// al.'s formula: the model run one word at a time, the whole mixture distribution over V built
// for each target, its probability of the target read off. Also: the cache helps on repeated text
// and λ = 0 is the model alone.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "lm/pointer.h"
#include "tensor/philox.h"

using namespace mg;

namespace {

constexpr int64_t kV = 30;

std::shared_ptr<RNNModel> tiny_model(HeadKind head, float scale = 1) {
  ModelConfig c;
  c.ntoken = kV, c.emsize = 8, c.nhid = 12, c.nhidlast = 12, c.nlayers = 2, c.n_experts = 3,
  c.head = head, c.tied = head == HeadKind::Softmax;
  c.dropout = c.dropouth = c.dropouti = c.dropoute = c.dropoutl = c.wdrop = 0.3f;  // off in eval
  auto model = std::make_shared<RNNModel>(c, 11);
  for (auto& [name, p] : model->named_parameters())
    for (float *x = p.data(), *end = x + p.numel(); x != end; ++x) *x *= scale;
  model->train();  // pointer_stream must switch to eval itself
  return model;
}

std::vector<int64_t> token_stream(int64_t n, uint64_t seed) {
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int64_t>(philox_uniform(seed, i) * kV) % kV;
  return ids;
}

// Grave et al. eqs. 2-3, one target at a time: run the model on x_t alone (hidden carried),
// p_model from its log-probabilities, the cache's distribution over V from the previous
// min(t, L) (h_i, x_{i+1}) pairs, their mixture, its value at the target.
double reference_pointer_loss(RNNModel& model, const std::vector<int64_t>& ids, int64_t window,
                              double theta, double lambda) {
  model.eval();
  NoGradGuard no_grad;
  Hidden hidden = model.init_hidden(1);
  std::vector<std::vector<double>> keys;
  std::vector<int64_t> next_words;
  double total = 0;
  const int64_t N = static_cast<int64_t>(ids.size()) - 1;
  for (int64_t t = 0; t < N; ++t) {
    ModelOutput out = model.forward({ids[t]}, 1, 1, hidden);
    hidden = out.hidden;
    const Tensor lp = contiguous(out.log_prob);
    const Tensor h = contiguous(out.raw_outputs.back());
    std::vector<double> ht(h.data(), h.data() + h.numel());
    std::vector<double> p(kV);
    for (int64_t w = 0; w < kV; ++w) p[w] = std::exp(static_cast<double>(lp.data()[w]));
    if (!keys.empty()) {
      const size_t first = keys.size() > static_cast<size_t>(window) ? keys.size() - window : 0;
      std::vector<double> score;
      for (size_t i = first; i < keys.size(); ++i) {
        double d = 0;
        for (size_t c = 0; c < ht.size(); ++c) d += ht[c] * keys[i][c];
        score.push_back(std::exp(theta * d));
      }
      double z = 0;
      for (double e : score) z += e;
      std::vector<double> cache(kV, 0.0);
      for (size_t i = first; i < keys.size(); ++i) cache[next_words[i]] += score[i - first] / z;
      for (int64_t w = 0; w < kV; ++w) p[w] = (1 - lambda) * p[w] + lambda * cache[w];
    }
    total -= std::log(p[ids[t + 1]]);
    keys.push_back(ht);
    next_words.push_back(ids[t + 1]);
  }
  return total / N;
}

}  // namespace

TEST(Pointer, MatchesTheDirectFormulaOneWordAtATime) {
  const std::vector<int64_t> ids = token_stream(160, 5);
  // At the init's scale every h_t is nearly the same vector, so the attention hardly tells one
  // position from another; at 20 times it (weights of a trained model's size) h_t depends on the
  // context, and a key stored or read at the wrong time changes the numbers.
  const std::vector<std::pair<HeadKind, float>> models = {
      {HeadKind::Softmax, 1.0f}, {HeadKind::MoS, 1.0f}, {HeadKind::MoS, 20.0f}};
  for (const auto& [head, scale] : models) {
    auto model = tiny_model(head, scale);
    const PointerStream s = pointer_stream(*model, ids, 7);  // segments of 7: the carry matters
    EXPECT_TRUE(model->is_training()) << "pointer_stream restores the model's mode";
    ASSERT_EQ(s.size(), 159);
    for (int64_t window : {1, 10, 500}) {  // 500 > N: the whole history
      const std::vector<double> thetas = {0.3, 1.7};
      const auto p = pointer_probabilities(s, window, thetas);
      for (size_t a = 0; a < thetas.size(); ++a)
        for (double lambda : {0.0, 0.1, 0.6}) {
          const double ref = reference_pointer_loss(*model, ids, window, thetas[a], lambda);
          EXPECT_NEAR(pointer_mixture_loss(s, p[a], lambda), ref, 1e-6 * std::fabs(ref))
              << "head " << static_cast<int>(head) << " scale " << scale << " window " << window
              << " theta " << thetas[a] << " lambda " << lambda;
        }
    }
    const double ref = reference_pointer_loss(*model, ids, 5, 1.0, 0.0);
    EXPECT_NEAR(model_only_loss(s), ref, 1e-6 * std::fabs(ref)) << "scale " << scale;
  }
}

// Grave et al.'s eq. 2, p_ptr(w | t) = Σ_{i=t−L}^{t−1} softmax_i(θ h_tᵀ h_i) 1[x_{i+1} = w], on a
// stream made by hand, its values worked out on paper: the keys are one-hot, so h_tᵀ h_i is 1 where
// position i has t's key and 0 elsewhere, and with θ = ln 4 the attention weights are 4 and 1. A
// query taken from another position than t, or a window one entry short, gives other fractions.
// (The model's own keys cannot show these: at the init's scale every h_t is nearly the same
// vector, so any query attends alike.)
TEST(Pointer, AttentionOverAHandMadeCacheGivesTheFractionsWorkedOutByHand) {
  // t:       0   1   2   3   4   5
  // key:     e0  e1  e0  e1  e0  e1
  // target:  A   B   C   A   B   B      (x_{t+1}: the word cached with h_t, and the one scored)
  constexpr int64_t A = 7, B = 8, C = 9;
  PointerStream s;
  s.H = 2;
  s.keys = {1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1};
  s.targets = {A, B, C, A, B, B};
  s.p_model.assign(6, 0.5);
  const double ln4 = std::log(4.0);
  struct Case {
    int64_t window;
    double theta;
    std::vector<double> p;  // p_ptr[t] for t = 1..5 (t = 0: the cache is empty)
  };
  const std::vector<Case> cases = {
      // The whole history. t = 1, 2: the target is not in the cache yet. t = 3, query e1: the
      // cached words A (position 0, key e0) weigh 1, B 4, C 1: p(A) = 1/6.
      // t = 4, query e0: A 4, B 1, C 4, A 1: p(B) = 1/10. t = 5, query e1: A 1, B 4, C 1, A 4,
      // B 1: p(B) = (4 + 1)/11.
      {500, ln4, {0, 0, 1.0 / 6, 1.0 / 10, 5.0 / 11}},
      // The last 3 positions. t = 3: positions 0-2, as above. t = 4 (1-3, query e0): B 1, C 4, A 1:
      // p(B) = 1/6. t = 5 (2-4, query e1): C 1, A 4, B 1: p(B) = 1/6.
      {3, ln4, {0, 0, 1.0 / 6, 1.0 / 6, 1.0 / 6}},
      // The last position alone: the pointer is 1 where x_t = x_{t+1} (t = 5), else 0.
      {1, ln4, {0, 0, 0, 0, 1}},
      // θ = 0: every cached position weighs the same, so p is the target's share of the window.
      {500, 0, {0, 0, 1.0 / 3, 1.0 / 4, 2.0 / 5}},
  };
  for (const Case& c : cases) {
    const auto p = pointer_probabilities(s, c.window, {c.theta});
    ASSERT_EQ(p.size(), 1u);
    ASSERT_EQ(p[0].size(), 6u);
    EXPECT_EQ(p[0][0], -1) << "nothing is cached before the first target";
    for (int64_t t = 1; t < 6; ++t)
      EXPECT_NEAR(p[0][t], c.p[t - 1], 1e-12)
          << "window " << c.window << ", theta " << c.theta << ", t = " << t;
  }
}

TEST(Pointer, TheCacheHelpsOnRepeatedTextAndTheGridFindsIt) {
  // A text that repeats a 25-word passage: the cache has seen every next word before.
  const std::vector<int64_t> passage = token_stream(25, 9);
  std::vector<int64_t> ids;
  for (int r = 0; r < 8; ++r) ids.insert(ids.end(), passage.begin(), passage.end());
  // At the init's U(±0.1) every h is nearly the same vector; weights at a trained model's scale
  // make h depend on the context, so the attention can find where the same context was before.
  auto model = tiny_model(HeadKind::MoS, 20);
  const PointerStream s = pointer_stream(*model, ids, 20);
  const PointerGrid g = pointer_grid(s, 100, {0.01, 100.0}, {0.0, 0.1, 0.5});
  ASSERT_EQ(g.scores.size(), 6u);
  EXPECT_DOUBLE_EQ(g.scores[0].loss, model_only_loss(s)) << "λ = 0 is the model alone";
  EXPECT_LT(g.best.loss, model_only_loss(s) - 0.5);
  EXPECT_EQ(g.best.lambda, 0.5);
  for (const PointerScore& sc : g.scores) EXPECT_GE(sc.loss, g.best.loss);
  // The best θ and λ are both on the grid's edge: said, so that a user widens the grid.
  EXPECT_EQ(g.edge, "theta " +
                        std::string(g.best.theta == 100.0 ? "100 is the grid's largest"
                                                          : "0.01 is the grid's smallest") +
                        ", lambda 0.5 is the grid's largest");
  const PointerGrid low = pointer_grid(s, 100, {100.0, 200.0}, {0.5, 0.6});
  EXPECT_NE(low.edge.find("is the grid's smallest"), std::string::npos) << low.edge;
  EXPECT_EQ(pointer_grid(s, 100, {1.0}, {0.1}).edge, "") << "one value has no edge to speak of";
  EXPECT_EQ(pointer_grid(s, 100, {1.0, 1.0}, {0.1, 0.1}).edge, "") << "nor two equal ones";
}

TEST(Pointer, BadArgumentsAreClearErrors) {
  auto model = tiny_model(HeadKind::Softmax);
  EXPECT_THROW(pointer_stream(*model, {3}, 5), std::invalid_argument);
  const PointerStream s = pointer_stream(*model, token_stream(20, 1), 5);
  EXPECT_THROW(pointer_probabilities(s, 0, {1.0}), std::invalid_argument);
  EXPECT_THROW(pointer_grid(s, 10, {1.0}, {1.5}), std::invalid_argument);
  EXPECT_THROW(pointer_grid(s, 10, {}, {0.1}), std::invalid_argument);
}
