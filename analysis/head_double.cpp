#include "analysis/head_double.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "tensor/gemm_f64.h"

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
  W_panels = pack_rows_f64(W.data(), E, V, E);  // packed once: every block multiplies it
  H = E;
  if (const auto* m = dynamic_cast<const MixtureHead*>(&head)) {
    K = m->experts;
    H = m->prior_weight.size(1);
    prior = to_double(m->prior_weight);
    latent = to_double(m->latent_weight);
    latent_bias = to_double(m->latent_bias);
  }
}

// z [V] (the logits W ctx, without b) -> log (sig)softmax(z + b).
void DoubleHead::normalise_logits(double* z) const {
  for (int64_t v = 0; v < V; ++v) {
    const double zv = z[v] + b[v];
    // sigsoftmax: z + log σ(z), with log σ(z) = min(z,0) − log1p(exp(−|z|)) (no overflow)
    z[v] = (kind == HeadKind::Sigsoftmax || kind == HeadKind::MoSig)
               ? zv + std::min(zv, 0.0) - std::log1p(std::exp(-std::fabs(zv)))
               : zv;
  }
  normalise_log(z, V);
}

bool DoubleHead::mixture_in_probabilities(const double* z, const double* log_pi, double* out,
                                          std::vector<double>& e, std::vector<double>& p) const {
  // Component k's unnormalised probabilities e_v = exp(z_v + b_v − m) (m: the largest logit, so
  // e ≤ 1), times σ(z_v + b_v) for sigsoftmax, which is t / (t + c) with t = exp(z_v + b_v − m) and
  // c = exp(−m): one exp per entry, where the log domain takes two (MoS) or four (MoSig). MoSig's
  // e is scaled by 1 + c (the largest then ≤ 1, the scale cancels in p) and formed as t·(t·(1 +
  // c)/(t + c)), each factor at least the result, so nothing passes through the subnormal range
  // on its way to a value in range. Then p_v = Σ_k π_k e_kv / Σ_v e_kv and log p_v. A row with a
  // value out of range (logits beyond ±700, a p below 1e-280) goes back to the log-domain path.
  const bool sig = kind == HeadKind::MoSig;
  std::fill(p.begin(), p.end(), 0.0);
  for (int64_t k = 0; k < K; ++k) {
    const double* zk = z + k * V;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t v = 0; v < V; ++v) m = std::max(m, zk[v] + b[v]);
    const double c = std::exp(-m), scale = 1 + c;
    if (sig && !(c > 0 && scale < std::numeric_limits<double>::infinity())) return false;
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double t = std::exp(zk[v] + b[v] - m);
      e[v] = sig ? t * (t * scale / (t + c)) : t;
      sum += e[v];
    }
    const double w = std::exp(log_pi[k]) / sum;
    if (!(sum > 0 && w < std::numeric_limits<double>::infinity())) return false;
    for (int64_t v = 0; v < V; ++v) p[v] += w * e[v];
  }
  for (int64_t v = 0; v < V; ++v) {
    if (!(p[v] > 1e-280)) return false;
    out[v] = std::log(p[v]);
  }
  return true;
}

void DoubleHead::block(const float* hf, int64_t rows, double* out, double* components,
                       bool log_domain) const {
  // The vectors the decoder multiplies: h itself (softmax heads), the K contexts h_k (mos, mosig:
  // rows*K of them, row n*K + k), or their π-weighted mean (moc).
  const bool mixture = is_mixture(kind);
  const int64_t per_row = mixture && kind != HeadKind::MoC ? K : 1;
  std::vector<double> vecs(static_cast<size_t>(rows * per_row * E)), log_pi(rows * K);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const float* h = hf + n * H;
    double* dst = &vecs[n * per_row * E];
    if (!mixture) {
      for (int64_t e = 0; e < E; ++e) dst[e] = h[e];
      continue;
    }
    double* lp = &log_pi[n * K];
    for (int64_t k = 0; k < K; ++k) {
      double s = 0;
      for (int64_t i = 0; i < H; ++i) s += prior[k * H + i] * h[i];
      lp[k] = s;
    }
    normalise_log(lp, K);
    std::vector<double> ctx(K * E);
    for (int64_t j = 0; j < K * E; ++j) {
      double s = latent_bias[j];
      const double* w = &latent[j * H];
      for (int64_t i = 0; i < H; ++i) s += w[i] * h[i];
      ctx[j] = std::tanh(s);
    }
    if (kind == HeadKind::MoC) {  // one softmax of the π-weighted mean context
      for (int64_t e = 0; e < E; ++e) dst[e] = 0;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t e = 0; e < E; ++e) dst[e] += std::exp(lp[k]) * ctx[k * E + e];
    } else {
      std::copy(ctx.begin(), ctx.end(), dst);
    }
  }
  // All their logits in one double product (tensor/gemm_f64.h), then each row normalised.
  const int64_t lanes = rows * per_row;
  std::vector<double> own;
  double* z = per_row == 1 ? out : components;
  if (!z) own.resize(static_cast<size_t>(lanes * V)), z = own.data();
  gemm_f64_panels(pack_rows_f64(vecs.data(), E, lanes, E), W_panels, z, V);
  // A mixture's rows in the probability domain where they stay in range (log_probs: no
  // components wanted); `done` marks them.
  std::vector<char> done(rows, 0);
  if (per_row > 1 && !components && !log_domain) {
#pragma omp parallel
    {
      std::vector<double> e(V), p(V);
#pragma omp for schedule(static)
      for (int64_t n = 0; n < rows; ++n)
        done[n] = mixture_in_probabilities(z + n * K * V, &log_pi[n * K], out + n * V, e, p);
    }
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < lanes; ++r)
    if (!done[r / per_row]) normalise_logits(z + r * V);
  if (per_row == 1) return;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t v = 0; v < V && !done[n]; ++v) {  // logsumexp_k(log π_k + log p_k[v])
      const double* lp = &log_pi[n * K];
      const double* c = z + n * K * V + v;
      double mx = -std::numeric_limits<double>::infinity(), s = 0;
      for (int64_t k = 0; k < K; ++k) mx = std::max(mx, lp[k] + c[k * V]);
      for (int64_t k = 0; k < K; ++k) s += std::exp(lp[k] + c[k * V] - mx);
      out[n * V + v] = mx + std::log(s);
    }
}

std::vector<double> DoubleHead::log_probs(const float* h, int64_t N, bool log_domain) const {
  std::vector<double> a(static_cast<size_t>(N * V));
  // Blocks of contexts: their K·rows logits [K·rows, V] are the working set (64 x 15 x 10,000
  // doubles, 77 MB, for mos-paper).
  constexpr int64_t kRows = 64;
  for (int64_t n = 0; n < N; n += kRows)
    block(h + n * H, std::min(kRows, N - n), &a[n * V], nullptr, log_domain);
  return a;
}

double DoubleHead::mean_component_kl(const float* h, int64_t N) const {
  if ((kind != HeadKind::MoS && kind != HeadKind::MoSig) || K < 2 || N < 1)
    return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> per_row(N);
  constexpr int64_t kRows = 64;
  std::vector<double> out(kRows * V), c(kRows * K * V);
  for (int64_t n0 = 0; n0 < N; n0 += kRows) {
    const int64_t rows = std::min(kRows, N - n0);
    block(h + n0 * H, rows, out.data(), c.data(), true);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const double* cr = &c[r * K * V];
      double kl = 0;  // Σ over ordered pairs k ≠ l of Σ_v p_k (log p_k − log p_l)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t l = 0; l < K; ++l) {
          if (k == l) continue;
          for (int64_t v = 0; v < V; ++v)
            kl += std::exp(cr[k * V + v]) * (cr[k * V + v] - cr[l * V + v]);
        }
      per_row[n0 + r] = kl / static_cast<double>(K * (K - 1));
    }
  }
  double total = 0;  // summed in row order: the same for any thread count
  for (double x : per_row) total += x;
  return total / static_cast<double>(N);
}

}  // namespace mg
