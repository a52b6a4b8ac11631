// The fused head loss (nn/fused_head_loss.cpp) against the plain path nll_loss(log_prob(h)) it
// replaces in training, on sizes that span several row chunks, and against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/heads.h"
#include "tests/test_util.h"

using namespace mg;
using Inputs = std::vector<Tensor>;

// N = 140 rows (T=35, B=4), K=3 -> 420 context rows: when recomputed, four chunks of 128 with a
// ragged tail; when kept, one GEMM over all of them. V = 1700: the forward's slabs of 768
// vocabulary columns, two whole and a ragged one, with targets in each (or, with
// first_target, in [first_target, V) only). edit_bias changes the decoder bias after the noise.
void expect_fused_matches_plain(HeadKind kind, int64_t keep_limit, float scale,
                                const std::function<void(float* bias, int64_t V)>& edit_bias,
                                int64_t first_target = 0) {
  const int64_t N = 140, B = 4, H = 9, E = 6, K = 3, V = 1700;
  SCOPED_TRACE(head_kind_name(kind) + " scale " + std::to_string(scale) +
               (keep_limit ? " kept" : " recomputed"));
  Generator gen(21);
  auto head = make_head(kind, V, H, E, K, 0.0f, Tensor(), gen);
  head->fused_options.keep_logits_floats = keep_limit, head->fused_options.stream_chunk_rows = 128;
  {
    // The noise makes every parameter non-zero: the decoder bias starts at zero, and a
    // bias the fused path dropped would go unseen.
    NoGradGuard no_grad;
    for (Tensor p : head->parameters()) {
      const Tensor noise = Tensor::uniform(p.shape(), -0.1f, 0.1f, gen);
      float* d = p.data();
      for (int64_t i = 0; i < p.numel(); ++i) d[i] = (d[i] + noise.data()[i]) * scale;
    }
    if (edit_bias)
      for (const auto& [name, p] : head->named_parameters())
        if (name == "decoder.bias") edit_bias(Tensor(p).data(), V);
  }
  const Tensor h = Tensor::uniform({N, H}, -1, 1, gen).requires_grad_();
  std::vector<int64_t> targets(N);
  for (int64_t n = 0; n < N; ++n) targets[n] = first_target + (n * 37 + 11) % (V - first_target);
  std::vector<std::vector<float>> grads[2];
  float losses[2];
  for (int fused = 0; fused < 2; ++fused) {
    head->zero_grad();
    h.impl().grad.reset();
    const Tensor loss =
        fused == 1 ? head->nll(h, B, targets, gen) : head->reference_nll(h, B, targets, gen);
    losses[fused] = loss.item();
    loss.backward();
    grads[fused].push_back(h.grad().to_vector());
    for (const Tensor& p : head->parameters()) grads[fused].push_back(p.grad().to_vector());
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-5 * std::fabs(losses[0]));
  for (size_t i = 0; i < grads[0].size(); ++i) {
    const int64_t n = static_cast<int64_t>(grads[0][i].size());
    const std::string report = compare_tensors(
        "gradient " + std::to_string(i) + " (fused vs plain)",
        Tensor::from_vector(grads[1][i], {n}), Tensor::from_vector(grads[0][i], {n}), 1e-4, 1e-7);
    EXPECT_TRUE(report.empty()) << report;
  }
}

const HeadKind kEveryHead[] = {HeadKind::Softmax, HeadKind::MoS, HeadKind::Sigsoftmax,
                               HeadKind::MoSig, HeadKind::MoC};
const int64_t kKept = int64_t{64} << 20, kRecomputed = 0;

TEST(FusedLoss, MatchesThePlainPathForEveryHead) {
  for (int64_t keep_limit : {kKept, kRecomputed})  // logits kept for backward / recomputed
    for (HeadKind kind : kEveryHead)
      for (float scale : {1.0f, 8.0f})  // scale 8: logits of magnitude ~50
        expect_fused_matches_plain(kind, keep_limit, scale, nullptr);
}

// The forward's exp(z - shift) uses a shift that trails a row's max by up to 64 (RunningLse): it
// moves, rescaling the sum and the exponentials kept so far, only when a slab's max passes it by
// more. Here the second slab's logits jump by 100 and the third's by 200 more, so it moves twice
// after the first slab; and a first slab of -inf logits (a masked-out range of the vocabulary)
// leaves no shift at all until the second. The plain mixture path gives NaN gradients there (its
// logsumexp over K of -inf, as PyTorch's does): for MoS and MoSig the first slab is -1000 instead.
TEST(FusedLoss, TrailingShiftMovesWhenALaterSlabJumps) {
  for (int64_t keep_limit : {kKept, kRecomputed})
    for (HeadKind kind : kEveryHead) {
      expect_fused_matches_plain(kind, keep_limit, 1.0f, [](float* b, int64_t) {
        for (int64_t j = 800; j < 820; ++j) b[j] += 100.0f;
        for (int64_t j = 1600; j < 1610; ++j) b[j] += 300.0f;
      });
      const bool mixture = kind == HeadKind::MoS || kind == HeadKind::MoSig;
      expect_fused_matches_plain(
          kind, keep_limit, 1.0f,
          [mixture](float* b, int64_t) {
            for (int64_t j = 0; j < 768; ++j) b[j] = mixture ? -1000.0f : -INFINITY;
          },
          /*first_target=*/768);
    }
}

TEST(FusedLoss, Gradcheck) {
  const int64_t N = 4, K = 2, E = 3, V = 7;
  Generator gen(3);
  const std::vector<int64_t> targets = {6, 0, 3, 3};
  const Tensor ctx = Tensor::uniform({N * K, E}, -1, 1, gen).requires_grad_();
  const Tensor W = Tensor::uniform({V, E}, -1, 1, gen).requires_grad_();
  const Tensor b = Tensor::uniform({V}, -1, 1, gen).requires_grad_();
  const Tensor prior_logits = Tensor::uniform({N, K}, -1, 1, gen).requires_grad_();
  for (bool sig : {false, true}) {
    auto fn = [&](const Inputs& v) {
      return fused_mixture_nll(v[0], v[1], v[2], log_softmax(v[3], 1), targets, K, sig);
    };
    EXPECT_GRADCHECK(sig ? "fused mosig nll" : "fused mos nll", fn,
                     (Inputs{ctx, W, b, prior_logits}));
    auto single = [&](const Inputs& v) {
      return fused_mixture_nll(v[0], v[1], v[2], Tensor(), {1, 5, 2, 0, 6, 6, 3, 4}, 1, sig);
    };
    EXPECT_GRADCHECK(sig ? "fused sigsoftmax nll" : "fused softmax nll", single,
                     (Inputs{ctx, W, b}));
  }
}

TEST(FusedLoss, RejectsMismatchedShapes) {
  const Tensor ctx = Tensor::zeros({6, 3}), W = Tensor::zeros({5, 3}), b = Tensor::zeros({5});
  EXPECT_THROW(fused_mixture_nll(ctx, W, b, Tensor::zeros({3, 2}), {0, 1}, 2, false),
               ShapeError);  // 2 targets, 6 rows
  EXPECT_THROW(fused_mixture_nll(ctx, W, b, Tensor::zeros({3, 2}), {0, 1, 5}, 2, false),
               ShapeError);  // target 5 >= V
  EXPECT_THROW(
      fused_mixture_nll(ctx, Tensor::zeros({5, 4}), b, Tensor(), {0, 1, 2, 3, 4, 0}, 1, false),
      ShapeError);
}
