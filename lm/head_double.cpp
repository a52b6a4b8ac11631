#include "lm/head_double.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace mg {

namespace {

std::vector<double> to_double(const Tensor& t) {
  const std::vector<float> f = t.cpu().to_vector();
  return std::vector<double>(f.begin(), f.end());
}

// x [n] <- x − logsumexp(x)
void normalise_log(double* x, int64_t n) {
  double mx = -std::numeric_limits<double>::infinity(), s = 0;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - mx);
  const double lse = mx + std::log(s);
  for (int64_t i = 0; i < n; ++i) x[i] -= lse;
}

}  // namespace

DoubleHead::DoubleHead(const OutputHead& head) : kind(head.kind()) {
  W = to_double(head.decoder_weight);
  b = to_double(head.decoder_bias);
  V = head.decoder_weight.size(0);
  E = head.decoder_weight.size(1);
  H = E;
  if (const auto* m = dynamic_cast<const MixtureHead*>(&head)) {
    K = m->experts;
    H = m->prior_weight.size(1);
    prior = to_double(m->prior_weight);
    latent = to_double(m->latent_weight);
    latent_bias = to_double(m->latent_bias);
  }
}

void DoubleHead::decode(const double* ctx, double* out) const {
  for (int64_t v = 0; v < V; ++v) {
    const double* w = &W[v * E];
    double z = b[v];
#pragma omp simd reduction(+ : z)
    for (int64_t e = 0; e < E; ++e) z += w[e] * ctx[e];
    // sigsoftmax: z + log σ(z), with log σ(z) = min(z,0) − log1p(exp(−|z|)) (no overflow)
    out[v] = (kind == HeadKind::Sigsoftmax || kind == HeadKind::MoSig)
                 ? z + std::min(z, 0.0) - std::log1p(std::exp(-std::fabs(z)))
                 : z;
  }
  normalise_log(out, V);
}

void DoubleHead::row(const float* hf, double* out, double* components) const {
  std::vector<double> h(hf, hf + H);
  if (!is_mixture(kind)) return decode(h.data(), out);
  std::vector<double> log_pi(K), ctx(K * E);
  for (int64_t k = 0; k < K; ++k) {
    double s = 0;
    for (int64_t i = 0; i < H; ++i) s += prior[k * H + i] * h[i];
    log_pi[k] = s;
  }
  normalise_log(log_pi.data(), K);
  for (int64_t j = 0; j < K * E; ++j) {
    double s = latent_bias[j];
    const double* w = &latent[j * H];
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < H; ++i) s += w[i] * h[i];
    ctx[j] = std::tanh(s);
  }
  if (kind == HeadKind::MoC) {  // one softmax of the π-weighted mean context
    std::vector<double> mixed(E, 0.0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t e = 0; e < E; ++e) mixed[e] += std::exp(log_pi[k]) * ctx[k * E + e];
    return decode(mixed.data(), out);
  }
  std::vector<double> own;
  if (!components) own.resize(K * V), components = own.data();
  for (int64_t k = 0; k < K; ++k) decode(&ctx[k * E], components + k * V);
  for (int64_t v = 0; v < V; ++v) {  // logsumexp_k(log π_k + log p_k[v])
    double mx = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t k = 0; k < K; ++k) mx = std::max(mx, log_pi[k] + components[k * V + v]);
    for (int64_t k = 0; k < K; ++k) s += std::exp(log_pi[k] + components[k * V + v] - mx);
    out[v] = mx + std::log(s);
  }
}

std::vector<double> DoubleHead::log_probs(const float* h, int64_t N) const {
  std::vector<double> a(static_cast<size_t>(N * V));
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) row(h + n * H, &a[n * V], nullptr);
  return a;
}

double DoubleHead::mean_component_kl(const float* h, int64_t N) const {
  if ((kind != HeadKind::MoS && kind != HeadKind::MoSig) || K < 2 || N < 1)
    return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> per_row(N);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> out(V), c(K * V);
    row(h + n * H, out.data(), c.data());
    double kl = 0;  // Σ over ordered pairs k ≠ l of Σ_v p_k (log p_k − log p_l)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t l = 0; l < K; ++l) {
        if (k == l) continue;
        for (int64_t v = 0; v < V; ++v)
          kl += std::exp(c[k * V + v]) * (c[k * V + v] - c[l * V + v]);
      }
    per_row[n] = kl / static_cast<double>(K * (K - 1));
  }
  double total = 0;  // summed in row order: the same for any thread count
  for (double x : per_row) total += x;
  return total / static_cast<double>(N);
}

}  // namespace mg
