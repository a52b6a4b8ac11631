// --precision bf16 on layers, heads and whole models, against FP32 (tensor/gemm.h), and
// mg::PackedB (the LSTM's W_hh packed once per sequence) against mg::gemm.
//
// Tolerances, from the rounding. bf16 keeps 8 significant bits: rounding a value changes it by at
// most u = 2^-9 relative, so a product of two rounded operands is within (2u + u²) of the exact
// product, and a bf16 dot product within (2u + u²) Σ|x·y| of the exact one (plus FP32's
// accumulation error gamma_K Σ|x·y|, which the FP32 result has too; denormal products are flushed,
// at most 2^-126 each, negligible here). A Linear layer is one such dot product per output, so it
// is checked element by element against that bound. A whole model chains such products (embedding
// -> LSTM layers -> latent -> logits, and as many again backwards); to first order their relative
// errors add, ~2u each, through nonlinearities whose slopes are at most 1, so for these models
// (2 LSTM layers, a head of two products) the loss moves by a few u and each gradient by up to
// ~16 u = 3% in relative L2 norm. We allow 4u for the loss and 16u for gradients, and check that
// bf16 does move the numbers (a silent FP32 run would pass the bounds and must not).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/lstm.h"
#include "nn/rnn_model.h"
#include "tensor/gemm.h"
#include "tensor/gemm_kernels.h"
#include "tensor/parallel.h"

using namespace mg;

namespace {

const double kU = std::ldexp(1.0, -9);  // bf16's unit roundoff

bool have_bf16() {
  return gemm_bf16_kernel_name() != nullptr;
}

double rel_l2(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  const float *g = got.data(), *w = want.data();
  for (int64_t i = 0; i < want.numel(); ++i) {
    num += (double(g[i]) - w[i]) * (double(g[i]) - w[i]);
    den += double(w[i]) * w[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// A new leaf holding t's values (the tests mutate grads, never the originals).
Tensor fresh(const Tensor& t) {
  return Tensor::from_vector(t.to_vector(), t.shape());
}

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return Tensor::uniform(shape, -1.0f, 1.0f, gen);
}

}  // namespace

// y = x Wᵀ and its two backward products, element by element within (2u + u² + 2 gamma_K) Σ|·|.
TEST(Bf16Model, LinearWithinTheRoundingBound) {
  if (!have_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const int64_t N = 37, In = 45, Out = 29;
  const Tensor x0 = random_tensor({N, In}, 1), w0 = random_tensor({Out, In}, 2),
               dy = random_tensor({N, Out}, 3);
  auto run = [&](GemmPrecision p, Tensor* dx, Tensor* dw) {
    const GemmPrecisionScope scope(p);
    Tensor x = fresh(x0).requires_grad_(), w = fresh(w0).requires_grad_();
    Tensor y = matmul(x, w, false, true);
    y.backward(dy);
    *dx = x.grad(), *dw = w.grad();
    return y;
  };
  Tensor dx32, dw32, dx16, dw16;
  const Tensor y32 = run(GemmPrecision::kFp32, &dx32, &dw32);
  const Tensor y16 = run(GemmPrecision::kBf16, &dx16, &dw16);
  // |a|, |b| sums of each output's products, and the bound for a K-term dot product.
  auto check = [&](const char* what, const Tensor& got, const Tensor& want, int64_t rows,
                   int64_t cols, int64_t K, auto a_at, auto b_at) {
    int bad = 0;
    for (int64_t i = 0; i < rows && bad < 3; ++i)
      for (int64_t j = 0; j < cols && bad < 3; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += std::fabs(double(a_at(i, k)) * b_at(k, j));
        const double tol = (2 * kU + kU * kU + 2 * (K + 4) * FLT_EPSILON) * s + 1e-30;
        const double d = std::fabs(double(got.data()[i * cols + j]) - want.data()[i * cols + j]);
        if (d > tol) {
          ADD_FAILURE() << what << "[" << i << "," << j << "]: bf16 and FP32 differ by " << d
                        << ", bound " << tol;
          ++bad;
        }
      }
  };
  const float *x = x0.data(), *w = w0.data(), *g = dy.data();
  check(
      "y", y16, y32, N, Out, In, [&](int64_t i, int64_t k) { return x[i * In + k]; },
      [&](int64_t k, int64_t j) { return w[j * In + k]; });
  check(
      "dx", dx16, dx32, N, In, Out, [&](int64_t i, int64_t k) { return g[i * Out + k]; },
      [&](int64_t k, int64_t j) { return w[k * In + j]; });
  check(
      "dW", dw16, dw32, Out, In, N, [&](int64_t i, int64_t k) { return g[k * Out + i]; },
      [&](int64_t k, int64_t j) { return x[k * In + j]; });
  EXPECT_GT(rel_l2(y16, y32), 0.0) << "bf16 gave FP32's bits: the bf16 GEMM did not run";
}

// The fused LSTM over several steps (forward, and BPTT through the packed W_hh).
TEST(Bf16Model, FusedLstmAgreesWithFp32) {
  if (!have_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const int64_t T = 7, B = 5, In = 40, H = 48;
  Generator gen(11);
  LSTMLayer layer(In, H, gen);
  const Tensor x0 = random_tensor({T, B, In}, 12), dy = random_tensor({T, B, H}, 13);
  auto run = [&](GemmPrecision p, std::vector<Tensor>* grads) {
    const GemmPrecisionScope scope(p);
    for (Tensor* t : {&layer.weight_ih, &layer.weight_hh, &layer.bias_ih, &layer.bias_hh})
      t->zero_grad();
    Tensor x = fresh(x0).requires_grad_();
    auto [y, state] = layer.forward(x, layer.zero_state(B), /*fused=*/true);
    y.backward(dy);
    *grads = {x.grad(), layer.weight_ih.grad(), layer.weight_hh.grad(), layer.bias_ih.grad()};
    return y;
  };
  std::vector<Tensor> g32, g16;
  const Tensor y32 = run(GemmPrecision::kFp32, &g32), y16 = run(GemmPrecision::kBf16, &g16);
  EXPECT_LE(rel_l2(y16, y32), 4 * kU);
  std::cout << "[          ] LSTM: output moved " << rel_l2(y16, y32) / kU << " u\n";
  EXPECT_GT(rel_l2(y16, y32), 0.0) << "bf16 gave FP32's bits";
  const char* names[] = {"dx", "dW_ih", "dW_hh", "db"};
  for (size_t i = 0; i < g32.size(); ++i) EXPECT_LE(rel_l2(g16[i], g32[i]), 16 * kU) << names[i];
}

// Every head in a whole model: the loss and every parameter's gradient.
TEST(Bf16Model, EveryHeadLossAndGradientsAgreeWithFp32) {
  if (!have_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  for (HeadKind head :
       {HeadKind::Softmax, HeadKind::MoS, HeadKind::Sigsoftmax, HeadKind::MoSig, HeadKind::MoC}) {
    ModelConfig mc;
    mc.ntoken = 300, mc.emsize = 32, mc.nhid = 48, mc.nhidlast = 40, mc.nlayers = 2;
    mc.n_experts = 3, mc.tied = true, mc.head = head;
    mc.dropout = mc.dropouth = mc.dropouti = mc.dropoute = mc.dropoutl = mc.wdrop = 0.0f;
    RNNModel model(mc, 5);
    model.train();
    const int64_t T = 6, B = 4;
    std::mt19937 rng(9);
    std::vector<int64_t> ids(T * B), targets(T * B);
    for (auto& v : ids) v = rng() % mc.ntoken;
    for (auto& v : targets) v = rng() % mc.ntoken;
    auto run = [&](GemmPrecision p, std::vector<Tensor>* grads) {
      const GemmPrecisionScope scope(p);
      for (auto& [name, t] : model.named_parameters()) t.zero_grad();
      const ModelOutput out = model.forward(ids, T, B, model.init_hidden(B), &targets);
      out.loss.backward();
      grads->clear();
      for (auto& [name, t] : model.named_parameters()) grads->push_back(fresh(t.grad()));
      return double(out.loss.item());
    };
    std::vector<Tensor> g32, g16;
    const double l32 = run(GemmPrecision::kFp32, &g32), l16 = run(GemmPrecision::kBf16, &g16);
    const std::string h = head_kind_name(head);
    EXPECT_LE(std::fabs(l16 - l32) / l32, 4 * kU) << h << ": loss " << l16 << " vs " << l32;
    EXPECT_NE(l16, l32) << h << ": bf16 gave FP32's loss to the bit";
    const auto named = model.named_parameters();
    double worst = 0;
    for (size_t i = 0; i < g32.size(); ++i) {
      EXPECT_LE(rel_l2(g16[i], g32[i]), 16 * kU) << h << " " << named[i].first;
      worst = std::max(worst, rel_l2(g16[i], g32[i]));
    }
    std::cout << "[          ] " << h << ": loss moved " << std::fabs(l16 - l32) / l32 / kU
              << " u, worst gradient " << worst / kU << " u (relative L2; u = 2^-9)\n";
  }
}

// PackedB gives mg::gemm's bits, in both precisions and on the reference path (a plain copy that
// gemm_reference reads), on one thread and on several, through the single-block path (the LSTM
// step) and the general one (many rows, several k blocks).
TEST(Bf16Model, PackedBGivesGemmsBits) {
  struct Mode {
    GemmPath path;
    GemmPrecision precision;
    const char* name;
  };
  std::vector<Mode> modes = {{GemmPath::kFast, GemmPrecision::kFp32, "fp32 "},
                             {GemmPath::kReference, GemmPrecision::kFp32, "reference "}};
  if (have_bf16()) modes.push_back({GemmPath::kFast, GemmPrecision::kBf16, "bf16 "});
  struct S {
    bool tb;
    int64_t M, N, K;
  };
  const int saved = num_threads();
  for (const Mode& mode : modes)
    for (const S& s :
         {S{false, 20, 200, 400}, S{true, 5, 77, 33}, S{false, 300, 130, 1100}, S{true, 1, 1, 1},
          // Wide enough that the packing itself is split between threads (slabs of 16 panels),
          // with an odd kc (bf16 pads a zero k) and two k blocks.
          S{true, 9, 1700, 71}, S{false, 9, 1601, 513},
          // At most two micro-panels of rows (2 mr: 16 on AVX-512, 12 on AVX2): A is read in
          // place (the head's forward tiles), here over two k blocks, with a ragged last slab.
          S{true, 8, 1700, 600}, S{false, 3, 500, 520},
          // More rows than that and more than 512 columns: A packed per block (pack_a + macro).
          S{false, 40, 1700, 300}}) {
      const GemmPathScope path(mode.path);
      const GemmPrecisionScope scope(mode.precision);
      const Tensor A = random_tensor({s.M, s.K}, 21),
                   B = random_tensor({s.tb ? s.N : s.K, s.tb ? s.K : s.N}, 22);
      const int64_t ldb = s.tb ? s.K : s.N;
      const Tensor C0 = random_tensor({s.M, s.N}, 23);
      Tensor want = fresh(C0), got = fresh(C0);
      // beta 0.75: C is read, scaled and added to, in every path (a beta dropped shows).
      gemm(false, s.tb, s.M, s.N, s.K, 0.5f, A.data(), s.K, B.data(), ldb, 0.75f, want.data(), s.N);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        const PackedB packed(s.tb, s.K, s.N, B.data(), ldb);  // packed on `threads` threads too
        Tensor out = fresh(C0);
        gemm_packed_b(s.M, s.N, s.K, 0.5f, A.data(), s.K, packed, 0.75f, out.data(), s.N);
        EXPECT_EQ(0, std::memcmp(out.data(), want.data(), sizeof(float) * want.numel()))
            << mode.name << s.M << "x" << s.K << "@" << s.K
            << "x" << s.N << (s.tb ? " NT" : "") << ", " << threads << " threads";
        // Slabs of columns (the head's forward): each gives the same bits as those columns of
        // the whole product; a slab may start on any packed panel and end anywhere.
        const int64_t step = 2 * packed.panel_cols() < s.N ? 2 * packed.panel_cols() : s.N;
        Tensor slabs = fresh(C0);
        for (int64_t j0 = 0; j0 < s.N; j0 += step)
          gemm_packed_b_cols(s.M, j0, std::min(step, s.N - j0), s.K, 0.5f, A.data(), s.K, packed,
                             0.75f, slabs.data() + j0, s.N);
        EXPECT_EQ(0, std::memcmp(slabs.data(), want.data(), sizeof(float) * want.numel()))
            << mode.name << "slabs of " << step << " columns: " << s.M << "x" << s.K << "@" << s.K << "x" << s.N
            << ", " << threads << " threads";
      }
    }
  set_num_threads(saved);
  // Used with the wrong sizes, or after the precision or path changed, it says so instead of
  // computing.
  const Tensor B = random_tensor({4, 6}, 1), A = random_tensor({3, 4}, 2);
  Tensor C = Tensor::zeros({3, 6});
  const PackedB packed(false, 4, 6, B.data(), 6);
  EXPECT_THROW(gemm_packed_b(3, 5, 4, 1.0f, A.data(), 4, packed, 0.0f, C.data(), 6),
               std::invalid_argument);
  if (packed.panel_cols() > 1) {  // a slab that does not start a packed panel
    EXPECT_THROW(gemm_packed_b_cols(3, 1, 5, 4, 1.0f, A.data(), 4, packed, 0.0f, C.data(), 6),
                 std::invalid_argument);
  }
  EXPECT_THROW(gemm_packed_b_cols(3, 0, 7, 4, 1.0f, A.data(), 4, packed, 0.0f, C.data(), 6),
               std::invalid_argument);
  if (have_bf16()) {
    const GemmPrecisionScope bf16(GemmPrecision::kBf16);
    EXPECT_THROW(gemm_packed_b(3, 6, 4, 1.0f, A.data(), 4, packed, 0.0f, C.data(), 6),
                 std::logic_error);
  }
  const GemmPathScope reference(GemmPath::kReference);
  EXPECT_THROW(gemm_packed_b(3, 6, 4, 1.0f, A.data(), 4, packed, 0.0f, C.data(), 6),
               std::logic_error);
  const PackedB plain(false, 4, 6, B.data(), 6);
  const GemmPathScope fast(GemmPath::kFast);
  EXPECT_THROW(gemm_packed_b(3, 6, 4, 1.0f, A.data(), 4, plain, 0.0f, C.data(), 6),
               std::logic_error);
}
