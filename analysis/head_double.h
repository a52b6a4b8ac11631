// An output head's log-probabilities recomputed in double precision from its (float) parameters,
// for measuring the rank of the log-probability matrix (analysis/spectrum.h): in float, rounding
// noise of ~1e-7 relative would fill the null space of a softmax head and every model would look
// full rank.
//
// The same equations as nn/heads.cpp in eval mode (no dropout), for blocks of contexts, the logits
// of a block as one double matrix product (tensor/gemm_f64.h):
//   softmax     log p = log_softmax(W h + b)
//   sigsoftmax  log p = s − logsumexp(s), s = z + log σ(z), z = W h + b    (Kanai 2018, eq. 9)
//   mos/mosig   log p = logsumexp_k(log π_k + log p_k), π = softmax(W_π h),
//               h_k = tanh(W_h h + b_h)_k, p_k = (sig)softmax(W h_k + b)    (Yang 2017, eq. 3)
//   moc         log p = log_softmax(W Σ_k π_k h_k + b)
// A mixture's log p is computed in the probability domain (log Σ_k π_k p_k, one exp per component
// entry) where every value stays in double's range, else by those logsumexps, the reference.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/heads.h"
#include "tensor/gemm_f64.h"

namespace mg {

class DoubleHead {
 public:
  explicit DoubleHead(const OutputHead& head);  // copies the parameters to double (CPU)

  // h [N,H] row-major floats -> A [N,V] row-major log-probabilities. Each value is computed by
  // one thread in a fixed order, so the result does not depend on the thread count.
  // log_domain: every mixture row by the logsumexps (the reference the faster probability-domain
  // path is tested against).
  std::vector<double> log_probs(const float* h, int64_t N, bool log_domain = false) const;
  // The MoS components' mean pairwise KL(p_k || p_l) over k ≠ l, averaged over the N contexts: near
  // zero when the K softmaxes say the same thing, large when they specialise. NaN unless the head
  // is mos or mosig with K ≥ 2.
  double mean_component_kl(const float* h, int64_t N) const;

  HeadKind kind;
  int64_t V = 0, H = 0, E = 0, K = 1;  // E: the decoder's input size (= H for softmax heads)
  std::vector<double> W, b;            // decoder [V,E], [V]
  std::vector<double> prior, latent, latent_bias;  // mixtures: [K,H], [K*E,H], [K*E]

 private:
  // `rows` contexts h [rows,H]: out [rows,V] = log p; components [rows*K,V] receives the K
  // components' log p (mos/mosig; may be null).
  void block(const float* h, int64_t rows, double* out, double* components,
             bool log_domain = false) const;
  // One mos/mosig row: z [K,V] its components' logits (without b), log_pi [K] -> out [V] = log p
  // in the probability domain; false (out unset) where a value leaves double's range. e, p: [V].
  bool mixture_in_probabilities(const double* z, const double* log_pi, double* out,
                                std::vector<double>& e, std::vector<double>& p) const;
  void normalise_logits(double* z) const;  // z [V] = W ctx -> log (sig)softmax(z + b)
  PanelsF64 W_panels;                      // W packed for gemm_f64_panels
};

}  // namespace mg
