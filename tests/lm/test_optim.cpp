// The optimizers' update rules against the formulas written out in double, and gradient clipping:
// its norm, its scaling, and its independence from the thread count.
#include <gtest/gtest.h>

#include <cmath>

#include "lm/optim.h"
#include "tensor/parallel.h"
#include "tests/test_util.h"

using namespace mg;

namespace {

// A parameter [n] with values and gradient given by formulas of the index.
Tensor param_with_grad(int64_t n, double value_scale, double grad_scale) {
  std::vector<float> v(static_cast<size_t>(n)), g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(value_scale * std::sin(0.7 * i + 0.3));
    g[i] = static_cast<float>(grad_scale * std::cos(1.3 * i + 0.1));
  }
  Tensor p = Tensor::from_vector(v, {n}).requires_grad_();
  p.impl().grad = Tensor::from_vector(g, {n}).impl_ptr();
  return p;
}

}  // namespace

TEST(Optim, SgdAsgdAndAdamFollowTheirFormulas) {
  const int64_t n = 37;
  const float lr = 0.5f, wd = 0.01f;
  for (OptimizerKind kind : {OptimizerKind::SGD, OptimizerKind::ASGD, OptimizerKind::Adam}) {
    SCOPED_TRACE(optimizer_kind_name(kind));
    Tensor p = param_with_grad(n, 1.0, 0.2);
    const std::vector<float> x0 = p.to_vector();
    std::vector<double> x(x0.begin(), x0.end());
    const std::vector<float> g = p.grad().to_vector();
    std::vector<double> avg(n, 0.0), m(n, 0.0), v(n, 0.0);
    Optimizer opt(kind, {{"w", p}}, wd);
    for (int step = 1; step <= 3; ++step) {  // the same gradient three times
      opt.step(lr);
      for (int64_t i = 0; i < n; ++i) {
        const double gi = g[i] + double{wd} * x[i];
        if (kind == OptimizerKind::Adam) {
          m[i] = 0.9 * m[i] + 0.1 * gi;
          v[i] = 0.999 * v[i] + 0.001 * gi * gi;
          const double mh = m[i] / (1 - std::pow(0.9, step)),
                       vh = v[i] / (1 - std::pow(0.999, step));
          x[i] -= lr * mh / (std::sqrt(vh) + 1e-8);
        } else {
          x[i] -= lr * gi;
        }
        avg[i] += (x[i] - avg[i]) / step;  // mean of the iterates (ASGD)
      }
    }
    const Tensor expect = Tensor::from_vector(std::vector<float>(x.begin(), x.end()), {n});
    const std::string report = compare_tensors("parameter after 3 steps", p, expect, 1e-5, 1e-6);
    EXPECT_TRUE(report.empty()) << report;
    if (kind == OptimizerKind::ASGD) {
      opt.swap_in_average();
      const Tensor expect_avg =
          Tensor::from_vector(std::vector<float>(avg.begin(), avg.end()), {n});
      const std::string r2 = compare_tensors("averaged parameter", p, expect_avg, 1e-5, 1e-6);
      EXPECT_TRUE(r2.empty()) << r2;
      opt.swap_out_average();
    }
  }
}

TEST(Optim, ClipGradNormScalesToTheLimitAndIgnoresThreadCount) {
  const int saved = num_threads();
  std::vector<uint32_t> bits[2];
  double norms[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    // 100,003 elements: several 8192-element blocks and a ragged tail, in two parameters.
    const std::vector<Tensor> params = {param_with_grad(100003, 1.0, 1.0),
                                        param_with_grad(5, 1.0, 3.0)};
    double expect = 0;
    for (const Tensor& p : params)
      for (float gi : p.grad().to_vector()) expect += double{gi} * gi;
    expect = std::sqrt(expect);
    const double norm = clip_grad_norm(params, 0.25);
    EXPECT_NEAR(norm, expect, 1e-12 * expect);
    double after = 0;
    for (const Tensor& p : params)
      for (float gi : p.grad().to_vector()) after += double{gi} * gi;
    EXPECT_NEAR(std::sqrt(after), 0.25, 1e-6);
    norms[threads - 1] = norm;
    bits[threads - 1] = mgtest::bits_of(params[0].grad());
  }
  set_num_threads(saved);
  EXPECT_EQ(norms[0], norms[1]);
  EXPECT_EQ(bits[0], bits[1]);
  // Below the limit nothing changes.
  const std::vector<Tensor> small = {param_with_grad(10, 1.0, 1e-3)};
  const std::vector<float> before = small[0].grad().to_vector();
  clip_grad_norm(small, 0.25);
  EXPECT_EQ(small[0].grad().to_vector(), before);
}

TEST(Optim, AdamAddsEpsilonToTheRootNotUnderIt) {
  // Adam divides by sqrt(v_hat) + eps (Kingma & Ba 2015, Algorithm 1; torch.optim.Adam). With
  // gradients of 1e-6, sqrt(v_hat + eps) would be 1e-4 instead of ~1e-6: a step 100 times too
  // short, which gradients of ordinary size (as in the test above) cannot show.
  const int64_t n = 9;
  const float lr = 0.01f, eps = 1e-8f;
  Tensor p = param_with_grad(n, 1.0, 1e-6);
  const std::vector<float> x0 = p.to_vector(), g = p.grad().to_vector();
  Optimizer opt(OptimizerKind::Adam, {{"w", p}}, 0.0f, 0.9f, 0.999f, eps);
  opt.step(lr);
  std::vector<float> expect(n);
  for (int64_t i = 0; i < n; ++i)  // one step: m_hat = g, v_hat = g^2
    expect[i] = static_cast<float>(x0[i] - lr * double{g[i]} / (std::fabs(double{g[i]}) + eps));
  const std::string report = compare_tensors("parameter after one Adam step", p,
                                             Tensor::from_vector(expect, {n}), 1e-5, 1e-7);
  EXPECT_TRUE(report.empty()) << report;
}
