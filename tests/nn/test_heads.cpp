// Output heads: gradcheck, normalisation (every row's log-probs sum to 1) including logits of
// magnitude 50+, and the mixtures' defining identities.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/heads.h"
#include "tests/test_util.h"

using namespace mg;
using Inputs = std::vector<Tensor>;

namespace {
const HeadKind kAllHeads[] = {HeadKind::Softmax, HeadKind::MoS, HeadKind::Sigsoftmax,
                              HeadKind::MoSig, HeadKind::MoC};

// A head with V=11, H=5 (and E=4, K=3 for the mixtures), its weights scaled by `scale`.
std::shared_ptr<OutputHead> small_head(HeadKind kind, float scale, uint64_t seed) {
  Generator gen(seed);
  auto head = make_head(kind, 11, 5, 4, 3, 0.0f, Tensor(), gen);
  NoGradGuard no_grad;
  for (Tensor p : head->parameters()) {
    Generator g(seed + p.numel());
    const Tensor r = Tensor::uniform(p.shape(), -scale, scale, g);
    std::copy(r.data(), r.data() + r.numel(), p.data());
  }
  return head;
}

void expect_rows_normalised(const std::string& name, const Tensor& logp) {
  const Tensor lse = logsumexp(logp, 1);
  EXPECT_TENSOR_NEAR(lse, Tensor::zeros(lse.shape()), 0.0, 1e-5);
  for (float v : logp.to_vector())
    ASSERT_TRUE(std::isfinite(v)) << name << ": non-finite log-prob " << v;
}
}  // namespace

TEST(Heads, GradcheckEveryHead) {
  for (HeadKind kind : kAllHeads) {
    auto head = small_head(kind, 0.7f, 1);
    Generator gen(2);
    const Tensor h = Tensor::uniform({6, 5}, -1, 1, gen).requires_grad_();
    Inputs inputs = {h};
    for (const Tensor& p : head->parameters()) inputs.push_back(p);
    auto fn = [&](const Inputs& v) {
      return head->log_prob(v[0], 3, gen);
    };  // params are read from the head
    EXPECT_GRADCHECK(head_kind_name(kind), fn, inputs);
  }
}

TEST(Heads, LogProbsSumToOneIncludingExtremeLogits) {
  for (HeadKind kind : kAllHeads)
    for (float scale : {0.5f, 30.0f}) {  // scale 30 gives logits of magnitude 50-300
      auto head = small_head(kind, scale, 5);
      Generator gen(6);
      const Tensor h = Tensor::uniform({8, 5}, -2, 2, gen);
      const Tensor logp = head->log_prob(h, 4, gen);
      expect_rows_normalised(head_kind_name(kind) + " scale " + std::to_string(scale), logp);
      // The logits really are extreme at the large scale.
      if (scale > 1 && kind == HeadKind::Softmax) {
        const Tensor z = add(matmul(h, head->decoder_weight, false, true), head->decoder_bias);
        float zmax = 0;
        for (float v : z.to_vector()) zmax = std::max(zmax, std::fabs(v));
        EXPECT_GT(zmax, 50.0f);
      }
    }
}

TEST(Heads, MosWithOneExpertIsSoftmaxOfTheLatent) {
  // K = 1: π = 1, so MoS is a plain softmax of tanh(latent) W^T + b.
  Generator gen(7);
  MixtureHead mos(HeadKind::MoS, 11, 5, 4, 1, 0.0f, Tensor(), gen);
  const Tensor h = Tensor::uniform({6, 5}, -1, 1, gen);
  const Tensor latent = tanh(add(matmul(h, mos.latent_weight, false, true), mos.latent_bias));
  const Tensor expected =
      log_softmax(add(matmul(latent, mos.decoder_weight, false, true), mos.decoder_bias), 1);
  EXPECT_TENSOR_NEAR(mos.log_prob(h, 2, gen), expected, 1e-5, 1e-6);
}

TEST(Heads, MosIsTheMixtureOfComponentProbabilities) {
  // p = sum_k π_k softmax(z_k), computed directly in probability space at moderate logits.
  Generator gen(8);
  MixtureHead mos(HeadKind::MoS, 11, 5, 4, 3, 0.0f, Tensor(), gen);
  const Tensor h = Tensor::uniform({6, 5}, -1, 1, gen);
  const Tensor pi = exp(mos.log_prior(h));  // [N,K]
  const Tensor z =
      add(matmul(mos.contexts(h, 2, gen), mos.decoder_weight, false, true), mos.decoder_bias);
  const Tensor comp = reshape(softmax(z, 1), {6, 3, 11});      // [N,K,V]
  const Tensor p = sum(mul(comp, reshape(pi, {6, 3, 1})), 1);  // [N,V]
  EXPECT_TENSOR_NEAR(exp(mos.log_prob(h, 2, gen)), p, 1e-5, 1e-7);
}

TEST(Heads, SigsoftmaxMatchesItsDefinition) {
  // p_i = exp(z_i) sigmoid(z_i) / sum_j exp(z_j) sigmoid(z_j)
  const Tensor z = Tensor::from_vector({1, -2, 0.5f, 3, 0, -1}, {2, 3});
  const Tensor w = mul(exp(z), sigmoid(z));
  EXPECT_TENSOR_NEAR(exp(log_sigsoftmax(z)), div(w, sum(w, 1, true)), 1e-6, 1e-7);
}

TEST(Heads, TiedDecoderSharesTheEncoderWeight) {
  Generator gen(9);
  const Tensor encoder = Tensor::uniform({11, 4}, -0.1f, 0.1f, gen).requires_grad_();
  MixtureHead mos(HeadKind::MoS, 11, 5, 4, 3, 0.0f, encoder, gen);
  EXPECT_TRUE(mos.decoder_weight.same_as(encoder));
  for (const auto& [name, p] : mos.named_parameters()) EXPECT_NE(name, "decoder.weight");
  EXPECT_THROW(SoftmaxHead(HeadKind::Softmax, 11, 5, encoder, gen), ShapeError);  // H=5 != E=4
  EXPECT_THROW(parse_head_kind("mixture"), std::invalid_argument);
}

TEST(Heads, MosLatentDropoutIsLockedOverTime) {
  // dropoutl is locked dropout on the latent [T,B,K*E] (rows n = t*B + b): each (b, unit) is kept
  // or dropped, scaled by 1/(1-p), for every t alike. T != B, so reading the rows as [B,T] shows.
  const int64_t T = 4, B = 3, K = 3, E = 4;
  const float p = 0.5f;
  Generator gen(10);
  MixtureHead mos(HeadKind::MoS, 11, 5, E, K, p, Tensor(), gen);
  const Tensor h = Tensor::uniform({T * B, 5}, -1, 1, gen);
  mos.eval();
  const std::vector<float> plain = mos.contexts(h, B, gen).to_vector();  // [N*K,E] = [T,B,K*E]
  mos.train();
  const std::vector<float> dropped = mos.contexts(h, B, gen).to_vector();
  const int64_t row = K * E;  // one (t, b): K experts of E units
  int64_t kept = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < row; ++j) {
      const int64_t first = b * row + j;  // t = 0
      ASSERT_NE(plain[first], 0.0f);
      const float mask = dropped[first] / plain[first];
      EXPECT_TRUE(mask == 0.0f || std::fabs(mask - 1.0f / (1.0f - p)) < 1e-5f) << mask;
      kept += mask != 0.0f;
      for (int64_t t = 1; t < T; ++t) {
        const int64_t at = (t * B + b) * row + j;
        ASSERT_EQ(dropped[at] == 0.0f, mask == 0.0f)
            << "the mask of b=" << b << " unit " << j << " changes at t=" << t;
      }
    }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, B * row);
}
