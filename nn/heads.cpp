#include "nn/heads.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "tensor/not_implemented.h"

namespace mg {

HeadKind parse_head_kind(const std::string& name) {
  if (name == "softmax") return HeadKind::Softmax;
  if (name == "mos") return HeadKind::MoS;
  if (name == "sigsoftmax") return HeadKind::Sigsoftmax;
  if (name == "mosig") return HeadKind::MoSig;
  if (name == "moc") return HeadKind::MoC;
  throw std::invalid_argument("unknown head '" + name +
                              "': choose softmax, mos, sigsoftmax, mosig or moc");
}

std::string head_kind_name(HeadKind kind) {
  switch (kind) {
    case HeadKind::Softmax:
      return "softmax";
    case HeadKind::MoS:
      return "mos";
    case HeadKind::Sigsoftmax:
      return "sigsoftmax";
    case HeadKind::MoSig:
      return "mosig";
    case HeadKind::MoC:
      return "moc";
  }
  return "?";
}

bool is_mixture(HeadKind kind) {
  return kind == HeadKind::MoS || kind == HeadKind::MoSig || kind == HeadKind::MoC;
}

Tensor OutputHead::reference_nll(const Tensor& h, int64_t B, const std::vector<int64_t>& targets,
                                 Generator& gen) const {
  return nll_loss(log_prob(h, B, gen), targets);
}

Tensor OutputHead::nll(const Tensor& h, int64_t B, const std::vector<int64_t>& targets,
                       Generator& gen) const {
  return reference_nll(h, B, targets, gen);
}

Tensor log_sigsoftmax(const Tensor& z) {
  const Tensor s = add(z, log_sigmoid(z));  // log(exp(z) sigmoid(z))
  return sub(s, logsumexp(s, 1, true));
}

SoftmaxHead::SoftmaxHead(HeadKind kind, int64_t V, int64_t H, const Tensor& tied_weight,
                         Generator& gen)
    : kind_(kind) {
  // When tied, the decoder is the encoder's weight and is not registered here: it is counted and
  // saved once, as encoder.weight.
  if (kind != HeadKind::Softmax && kind != HeadKind::Sigsoftmax)
    throw std::invalid_argument("SoftmaxHead: kind must be softmax or sigsoftmax");
  if (tied_weight.defined()) {
    if (tied_weight.shape() != Shape{V, H})
      throw ShapeError("softmax head: tied encoder weight is " + shape_str(tied_weight.shape()) +
                       " but the last LSTM layer has H=" + std::to_string(H) +
                       " (tying needs H == E)");
    decoder_weight = tied_weight;
  } else {
    decoder_weight =
        register_parameter("decoder.weight", Tensor::uniform({V, H}, -0.1f, 0.1f, gen));
  }
  decoder_bias = register_parameter("decoder.bias", Tensor::zeros({V}));
}

Tensor SoftmaxHead::log_prob(const Tensor& h, int64_t, Generator&) const {
  const Tensor z = linear(h, decoder_weight, decoder_bias);  // [N,V]
  return kind_ == HeadKind::Softmax ? log_softmax(z, 1) : log_sigsoftmax(z);
}

MixtureHead::MixtureHead(HeadKind kind, int64_t V, int64_t H, int64_t E, int64_t K, float dropoutl_,
                         const Tensor& tied_weight, Generator& gen)
    : experts(K), embedding(E), dropoutl(dropoutl_), kind_(kind) {
  if (!is_mixture(kind)) throw std::invalid_argument("MixtureHead: kind must be mos, mosig or moc");
  if (K < 1)
    throw std::invalid_argument("mixture head: needs at least one expert, got K=" +
                                std::to_string(K));
  // Linear's default init for prior and latent, as the MoS reference (nn.Linear defaults).
  const float bound = 1.0f / std::sqrt(static_cast<float>(H));
  prior_weight = register_parameter("prior.weight", Tensor::uniform({K, H}, -bound, bound, gen));
  latent_weight =
      register_parameter("latent.weight", Tensor::uniform({K * E, H}, -bound, bound, gen));
  latent_bias = register_parameter("latent.bias", Tensor::uniform({K * E}, -bound, bound, gen));
  if (tied_weight.defined()) {
    if (tied_weight.shape() != Shape{V, E})
      throw ShapeError("mixture head: tied encoder weight is " + shape_str(tied_weight.shape()) +
                       ", expected " + shape_str({V, E}));
    decoder_weight = tied_weight;
  } else {
    decoder_weight =
        register_parameter("decoder.weight", Tensor::uniform({V, E}, -0.1f, 0.1f, gen));
  }
  decoder_bias = register_parameter("decoder.bias", Tensor::zeros({V}));
}

Tensor SoftmaxHead::nll(const Tensor& h, int64_t /*B*/, const std::vector<int64_t>& targets,
                        Generator& /*gen: no dropout in this head*/) const {
  return fused_mixture_nll(h, decoder_weight, decoder_bias, Tensor(), targets, 1,
                           kind_ == HeadKind::Sigsoftmax, fused_options);
}

Tensor MixtureHead::nll(const Tensor& h, int64_t B, const std::vector<int64_t>& targets,
                        Generator& gen) const {
  check_rank("mixture head", h, 2, "h [N,H]");
  const Tensor log_pi = log_prior(h);      // [N,K]
  const Tensor ctx = contexts(h, B, gen);  // [N*K,E]
  if (kind_ == HeadKind::MoC)
    return fused_mixture_nll(mixed_context(log_pi, ctx), decoder_weight, decoder_bias, Tensor(),
                             targets, 1, false, fused_options);
  return fused_mixture_nll(ctx, decoder_weight, decoder_bias, log_pi, targets, experts,
                           kind_ == HeadKind::MoSig, fused_options);
}

Tensor MixtureHead::log_prior(const Tensor& h) const {
  // π = softmax(h W_π^T) (MoS eq. 3's prior), kept in log space.
  return log_softmax(matmul(h, prior_weight, false, true), 1);  // [N,K]
}

Tensor MixtureHead::mixed_context(const Tensor& log_pi, const Tensor& ctx) const {
  // Mixture of contexts: mix the K context vectors by π, then one softmax follows (so the rank of
  // the log-probabilities stays <= E+2, like a softmax's: the control of the MoS paper).
  const int64_t N = log_pi.size(0);
  return sum(mul(reshape(ctx, {N, experts, embedding}), reshape(exp(log_pi), {N, experts, 1})),
             1);  // [N,E]
}

Tensor MixtureHead::contexts(const Tensor& h, int64_t B, Generator& gen) const {
  const int64_t N = h.size(0), T = N / B;
  // h_k = tanh(W_h h + b) split into K vectors of size E; locked dropout `dropoutl` on the latent.
  Tensor latent = tanh(linear(h, latent_weight, latent_bias));  // [N,K*E]
  latent = reshape(
      locked_dropout(reshape(latent, {T, B, experts * embedding}), dropoutl, gen, is_training()),
      {N * experts, embedding});  // row n*K + k is expert k of row n
  return latent;
}

Tensor MixtureHead::log_prob(const Tensor& h, int64_t B, Generator& gen) const {
  check_rank("mixture head", h, 2, "h [N,H]");
  if (B <= 0 || h.size(0) % B != 0)
    throw ShapeError("mixture head: " + std::to_string(h.size(0)) +
                     " rows are not T*B for B=" + std::to_string(B));
  const int64_t N = h.size(0), K = experts, V = decoder_weight.size(0);
  const Tensor log_pi = log_prior(h);      // [N,K]
  const Tensor ctx = contexts(h, B, gen);  // [N*K,E]
  if (kind_ == HeadKind::MoC)
    return log_softmax(linear(mixed_context(log_pi, ctx), decoder_weight, decoder_bias), 1);
  // MoS (Yang et al. 2017, eq. 3) in log space: log p = logsumexp_k(log π_k + log softmax(h_k W^T +
  // b)). Exact and stable for any logit magnitude (the reference's log(p + 1e-8) is not).
  // TASK 6.1: log p = logsumexp over k of (log π_k + log softmax(ctx_k W^T + b)), [N,V]
  const Tensor z = linear(ctx, decoder_weight, decoder_bias);  // [N*K,V]
  const Tensor log_components = kind_ == HeadKind::MoS ? log_softmax(z, 1) : log_sigsoftmax(z);
  return logsumexp(add(reshape(log_components, {N, K, V}), reshape(log_pi, {N, K, 1})), 1);
  // END TASK 6.1
}

std::shared_ptr<OutputHead> make_head(HeadKind kind, int64_t V, int64_t H, int64_t E, int64_t K,
                                      float dropoutl, const Tensor& tied_weight, Generator& gen) {
  if (is_mixture(kind))
    return std::make_shared<MixtureHead>(kind, V, H, E, K, dropoutl, tied_weight, gen);
  return std::make_shared<SoftmaxHead>(kind, V, H, tied_weight, gen);
}

FusedHeadGrads fused_head_grads(const Tensor& ctx, const Tensor& W, const Tensor& b,
                                const Tensor& log_pi) {
  return {ctx.requires_grad(), W.requires_grad(), b.requires_grad(),
          log_pi.defined() && log_pi.requires_grad()};
}

Tensor record_fused_head(bool sig, const Tensor& out, const Tensor& ctx, const Tensor& W,
                         const Tensor& b, const Tensor& log_pi, BackwardFn backward) {
  if (!is_grad_enabled()) return out;  // evaluation: nothing to keep
  return record(sig ? "fused_mixture_nll(sigsoftmax)" : "fused_mixture_nll", out,
                {ctx, W, b, log_pi}, std::move(backward));
}

}  // namespace mg
