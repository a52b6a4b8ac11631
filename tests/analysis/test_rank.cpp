// `mosgrad rank` on small models (analysis/rank.h): a softmax and a MoC head stay within d+2
// whatever the weights, a MoS head with weights at a trained model's scale goes far above, on
// either Gram side; the outputs name what they show; impossible requests are refused before any
// work.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/rank.h"
#include "analysis/svd.h"
#include "autograd/node.h"
#include "lm/batching.h"
#include "tensor/parallel.h"
#include "tests/test_util.h"

using namespace mg;

namespace {

constexpr int64_t kV = 60, kE = 6;

std::shared_ptr<RNNModel> small_model(HeadKind head) {
  ModelConfig c;
  c.ntoken = kV, c.emsize = kE, c.nhid = 16, c.nhidlast = 16, c.nlayers = 1, c.n_experts = 4,
  c.head = head;
  c.dropout = c.dropouth = c.dropouti = c.dropoute = c.dropoutl = c.wdrop = 0;
  c.tied = head == HeadKind::Softmax;  // tied softmax: the last layer has E
  auto model = std::make_shared<RNNModel>(c, 7);
  // A trained model's weights are far larger than the init's U(±0.1): scale up, so the heads'
  // nonlinearities (tanh, the mixture's log-sum-exp) actually bend.
  for (auto& [name, p] : model->named_parameters())
    if (name == "decoder.weight" || name == "encoder.weight" || name == "latent.weight" ||
        name == "prior.weight")
      for (float *x = p.data(), *end = x + p.numel(); x != end; ++x) *x *= 20;
  return model;
}

std::vector<int64_t> token_stream(int64_t n) {
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int64_t>(philox_uniform(99, i) * kV) % kV;
  return ids;
}

}  // namespace

TEST(Rank, SoftmaxAndMocStayWithinDPlus2AndMosGoesFarAbove) {
  const std::vector<int64_t> ids = token_stream(2000);
  for (int64_t N :
       {40, 150}) {  // N < V: the contexts' Gram; N > V: the vocabulary's, summed in blocks
    RankOptions o;
    o.contexts = N, o.batch_size = 4, o.bptt = 9;
    const RankReport softmax = model_rank(*small_model(HeadKind::Softmax), ids, o);
    const RankReport moc = model_rank(*small_model(HeadKind::MoC), ids, o);
    const RankReport mos = model_rank(*small_model(HeadKind::MoS), ids, o);
    EXPECT_EQ(softmax.N, N);
    EXPECT_EQ(softmax.d, kE);
    EXPECT_LE(softmax.model.rank, kE + 2) << "N=" << N;
    EXPECT_GE(softmax.model.rank, kE) << "N=" << N;  // the bound is reached, not undershot
    EXPECT_LE(moc.model.rank, kE + 2) << "N=" << N;
    EXPECT_GE(mos.model.rank, 3 * (kE + 2)) << "N=" << N;
    EXPECT_EQ(static_cast<int64_t>(mos.model.sigma.size()), std::min<int64_t>(N, kV));
    EXPECT_EQ(softmax.decoder.rank, kE);
    EXPECT_TRUE(std::isnan(softmax.component_kl));
    EXPECT_GT(mos.component_kl, 0);
  }
}

TEST(Rank, SameNumbersForAnyThreadCount) {
  const std::vector<int64_t> ids = token_stream(1000);
  RankOptions o;
  o.contexts = 100, o.batch_size = 4, o.bptt = 9;
  const int before = num_threads();
  set_num_threads(1);
  const std::string one = rank_csv(model_rank(*small_model(HeadKind::MoS), ids, o));
  set_num_threads(2);
  const std::string two = rank_csv(model_rank(*small_model(HeadKind::MoS), ids, o));
  set_num_threads(before);
  EXPECT_EQ(one, two);
}

TEST(Rank, OutputsAndRefusals) {
  const std::vector<int64_t> ids = token_stream(200);
  RankOptions o;
  o.batch_size = 4, o.contexts = 1000;  // 200 tokens at B=4: 50 rows, 49*4 = 196 targets
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>(
                 [&] { model_rank(*small_model(HeadKind::Softmax), ids, o); }),
             "--contexts 1000: the split has only 196 targets at --batch_size 4");
  o.contexts = 0;  // all of them
  const RankReport r = model_rank(*small_model(HeadKind::Softmax), ids, o);
  EXPECT_EQ(r.N, 196);
  const std::string csv = rank_csv(r);
  EXPECT_EQ(csv.rfind("i,sigma,sigma_rel,decoder_sigma,decoder_sigma_rel\n1,", 0), 0u) << csv;
  EXPECT_HAS(csv, "\n60,");  // min(N,V) = 60 rows; the decoder's 6 values only in the first rows
  const std::string svg = rank_plot_svg(r, "a title");
  EXPECT_HAS(svg, "class=\"log-probs\"");
  EXPECT_HAS(svg, "class=\"decoder\"");
  EXPECT_HAS(svg, "rank " + std::to_string(r.model.rank));
}

// N > 2V: the contexts are folded in by blocks of 2V (TallQR); the singular values must be those of
// the whole matrix, which here is small enough to build directly from the model's own
// log-probabilities (singular values do not depend on the order of the rows).
TEST(Rank, BlockedContextsGiveTheWholeMatrixsSpectrum) {
  const std::vector<int64_t> ids = token_stream(4 * 70);  // B=4: 69 * 4 = 276 targets > 2V = 120
  RankOptions o;
  o.batch_size = 4, o.bptt = 9;
  auto model = small_model(HeadKind::MoS);
  const RankReport r = model_rank(*model, ids, o);
  ASSERT_EQ(r.N, 276);
  model->eval();
  NoGradGuard no_grad;
  const Batched data = batchify(ids, 4);
  Hidden hidden = model->init_hidden(4);
  std::vector<double> a;
  for (int64_t i = 0; i < data.rows - 1;) {
    const Batch b = get_batch(data, i, 9);
    const ModelOutput out = model->forward(b.input, b.seq_len, b.batch, hidden);
    const std::vector<float> lp = out.log_prob.to_vector();
    a.insert(a.end(), lp.begin(), lp.end());
    hidden = out.hidden, i += b.seq_len;
  }
  const Spectrum whole = singular_values(a, 276, kV);
  ASSERT_EQ(r.model.sigma.size(), whole.sigma.size());
  for (size_t i = 0; i < whole.sigma.size(); ++i)
    EXPECT_NEAR(r.model.sigma[i], whole.sigma[i], 1e-4 * whole.sigma[0]) << "sigma " << i;
}
