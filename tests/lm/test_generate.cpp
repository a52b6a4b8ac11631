// Sampling (lm/generate.cpp) against an independent oracle, not a copy of the sampler. Kills
// plausible bugs that leave every gradient check green (tools/mutations.txt, generate.*).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "lm/generate.h"
#include "tests/test_trainer_util.h"

using namespace mg;

// generate against an independent oracle: the model's own log-probabilities, tempered by hand,
// p_T(w) = p(w)^(1/T) / Σ_v p(v)^(1/T), give what the sampler should draw, and the words drawn
// under many seeds must follow it. Nothing of the sampler's inverse CDF is retyped here, so a
// bug in it (an off-by-one in the cumulative sum, T multiplied instead of divided, the first word
// drawn from the wrong row of log_prob, the hidden state not carried from the first word to the
// second) shows as a frequency far from the oracle's.
namespace {

// p_T over the vocabulary from one row of log-probabilities.
std::vector<double> tempered(const float* logp, int64_t V, double T) {
  double mx = -INFINITY, z = 0;
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(logp[v]));
  std::vector<double> p(V);
  for (int64_t v = 0; v < V; ++v) z += p[v] = std::exp((logp[v] - mx) / T);
  for (double& x : p) x /= z;
  return p;
}

// The model's distribution of the next word after `words`, read one word at a time from `hidden`
// (generate reads its prompt in one pass: this checks that too); `hidden` is left after them.
std::vector<double> next_word_after(RNNModel& model, const std::vector<int64_t>& words,
                                    Hidden& hidden, double T) {
  ModelOutput out;
  for (int64_t w : words) out = model.forward({w}, 1, 1, hidden), hidden = out.hidden;
  const Tensor lp = contiguous(out.log_prob);
  return tempered(lp.data(), lp.size(1), T);
}

// Pearson's χ² of counts against probabilities over n draws; cells expected below 5 draws are
// pooled into one. Sets df to the cells compared less one.
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p, int64_t n,
                  int* df) {
  double chi2 = 0, pooled_expected = 0;
  int64_t pooled_count = 0;
  int cells = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = n * p[i];
    if (e < 5) {
      pooled_expected += e, pooled_count += counts[i];
      continue;
    }
    chi2 += (counts[i] - e) * (counts[i] - e) / e, ++cells;
  }
  if (pooled_expected > 0 || pooled_count > 0) {
    const double e = std::max(pooled_expected, 1e-9);
    chi2 += (pooled_count - e) * (pooled_count - e) / e, ++cells;
  }
  *df = cells - 1;
  return chi2;
}

// The χ² value a correct sampler exceeds with probability about 3e-7 (z = 5; Wilson and
// Hilferty's cube-root approximation of the χ² quantile).
double chi_square_bound(int df) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + 5.0 * std::sqrt(a), 3);
}

std::string table(const std::vector<int64_t>& counts, const std::vector<double>& p, int64_t n) {
  std::ostringstream os;
  for (size_t i = 0; i < p.size(); ++i)
    os << "  cell " << i << ": drawn " << counts[i] << ", expected " << n * p[i] << "\n";
  return os.str();
}

}  // namespace

TEST(Generate, WordsFollowTheTemperedDistributionOfTheirContext) {
  const int64_t V = 6, kDraws = 3000;
  const double T = 0.5;
  Vocab vocab;
  for (int64_t w = 0; w < V; ++w) vocab.add(w == 0 ? "<eos>" : "w" + std::to_string(w));
  // Weights at 12 times the init's scale: distributions far from uniform, and the next word's
  // depends on the words before it (checked below), so a wrong context shows.
  auto model = mgtest::scaled_tiny_model(V, 12);
  model->eval();
  NoGradGuard no_grad;
  const std::vector<int64_t> prompt = {5, 5, 3};  // word 0 is likely next: see the off-by-one

  // The oracle: p_T(first | prompt) and p_T(second | prompt, first) for every first word.
  Hidden after_prompt = model->init_hidden(1);
  const std::vector<double> first = next_word_after(*model, prompt, after_prompt, T);
  std::vector<std::vector<double>> second(V);
  std::vector<double> joint(V * V);
  for (int64_t a = 0; a < V; ++a) {
    Hidden h = after_prompt;
    second[a] = next_word_after(*model, {a}, h, T);
    for (int64_t b = 0; b < V; ++b) joint[a * V + b] = first[a] * second[a][b];
  }

  // kDraws samples of two words each, seeds 1..kDraws (fixed: the test draws the same words on
  // every run, so it cannot flake).
  std::vector<int64_t> first_counts(V, 0), joint_counts(V * V, 0);
  for (int64_t seed = 1; seed <= kDraws; ++seed) {
    GenerateConfig cfg;
    cfg.words = 2, cfg.temperature = static_cast<float>(T), cfg.seed = static_cast<uint64_t>(seed);
    cfg.prompt = "w5 w5 w3";
    const std::vector<std::string> got = generate(*model, vocab, cfg);
    ASSERT_EQ(got.size(), 2u);
    const int64_t a = vocab.id(got[0]), b = vocab.id(got[1]);
    ++first_counts[a], ++joint_counts[a * V + b];
  }

  int df = 0;
  const double chi2_first = chi_square(first_counts, first, kDraws, &df);
  EXPECT_LT(chi2_first, chi_square_bound(df))
      << "the first word does not follow p_T(w | prompt), T = " << T << " (chi-square, " << df
      << " df)\n"
      << table(first_counts, first, kDraws);
  const double chi2_joint = chi_square(joint_counts, joint, kDraws, &df);
  EXPECT_LT(chi2_joint, chi_square_bound(df))
      << "the pairs (first, second) do not follow p_T(first | prompt) p_T(second | prompt, first)"
      << " (chi-square, " << df << " df; cell = " << V << " * first + second)\n"
      << table(joint_counts, joint, kDraws);

  // The test can see each bug: under it, the expected counts are far from the oracle's (a χ² of
  // the expected counts themselves, many times the bound).
  const auto distance = [&](const std::vector<double>& q, const std::vector<double>& p) {
    double d = 0;
    for (size_t i = 0; i < p.size(); ++i) d += kDraws * (q[i] - p[i]) * (q[i] - p[i]) / p[i];
    return d;
  };
  const double bound = chi_square_bound(static_cast<int>(V) - 1);
  Hidden h = model->init_hidden(1);
  EXPECT_GT(distance(next_word_after(*model, prompt, h, 1 / T), first), 10 * bound)
      << "T multiplied instead of divided";
  h = model->init_hidden(1);
  EXPECT_GT(distance(next_word_after(*model, {prompt[0]}, h, T), first), 10 * bound)
      << "the first word drawn after the prompt's first word";
  std::vector<double> shifted = first;  // the cumulative sum started at word 1: word 0's band
  shifted[V - 1] += shifted[0], shifted[0] = 0;  // is dropped, the last word's widened by it
  EXPECT_GT(distance(shifted, first), 10 * bound) << "an off-by-one in the inverse CDF";
  std::vector<double> forgetful(V * V);  // the second word drawn after the first word alone
  for (int64_t a = 0; a < V; ++a) {
    h = model->init_hidden(1);
    const std::vector<double> alone = next_word_after(*model, {a}, h, T);
    for (int64_t b = 0; b < V; ++b) forgetful[a * V + b] = first[a] * alone[b];
  }
  EXPECT_GT(distance(forgetful, joint), 10 * chi_square_bound(static_cast<int>(V * V) - 1))
      << "the hidden state not carried from the first word to the second";
}

