// Output heads: from the last LSTM layer's output to log-probabilities over the vocabulary. The
// softmax bottleneck (Yang et al. 2017): a single softmax of h W^T gives a log-prob matrix of rank
// <= H+2 (H + bias + normaliser; the paper counts H+1); the mixtures (MoS, MoSig) break that bound,
// MoC (mixing contexts before one softmax) does not and is the low-rank control.
//
// Every head takes h [N,H] (N = T*B rows in [T,B] order) and returns log p [N,V]; B is needed for
// the locked dropout on the MoS latent. Parameter names are the PyTorch exchange names:
// decoder.weight [V,in] (absent when tied to encoder.weight), decoder.bias [V], and for the
// mixtures prior.weight [K,H], latent.weight [K*E,H], latent.bias [K*E].
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "nn/module.h"
#include "tensor/philox.h"

namespace mg {

enum class HeadKind { Softmax, MoS, Sigsoftmax, MoSig, MoC };
HeadKind parse_head_kind(
    const std::string& name);  // "softmax" | "mos" | "sigsoftmax" | "mosig" | "moc"
std::string head_kind_name(HeadKind kind);
bool is_mixture(HeadKind kind);  // mos, mosig, moc: have prior + latent

// How the fused loss trades memory for a recompute; tests set both to run every path.
struct FusedLossOptions {
  // Logits [N*K,V] up to this many floats (1 GiB, on the CPU and the GPU alike) are kept from
  // forward to backward; larger ones are recomputed chunk by chunk, which costs a fourth
  // N*K x E x V GEMM but keeps memory bounded. mos-paper's 126M logits (504 MB; 198M at variable
  // BPTT's longest segment, 110) are kept: recomputing them costs its step a fourth large GEMM
  // (docs/performance.md).
  int64_t keep_logits_floats = int64_t{256} << 20;
  // Rows per chunk when the logits stream; 0: about 8M logits per chunk (128M on the GPU).
  int64_t stream_chunk_rows = 0;
};

class OutputHead : public Module {
 public:
  // h [N,H] -> log p [N,V]
  virtual Tensor log_prob(const Tensor& h, int64_t B, Generator& gen) const = 0;
  // Mean negative log-likelihood of targets [N], the plain way: nll_loss(log_prob(h)), the
  // reference that the fused loss is tested against (RNNModel takes it when paths.fused_head is
  // false).
  Tensor reference_nll(const Tensor& h, int64_t B, const std::vector<int64_t>& targets,
                       Generator& gen) const;
  // The same loss; the heads override it with the fused target-only loss (nn/fused_head_loss.cpp).
  virtual Tensor nll(const Tensor& h, int64_t B, const std::vector<int64_t>& targets,
                     Generator& gen) const;
  virtual HeadKind kind() const = 0;
  FusedLossOptions fused_options;  // memory / recompute trade-off of the fused loss
  Tensor decoder_weight;           // [V,in]: our own parameter, or the encoder's weight when tied
  Tensor decoder_bias;             // [V]
};

// Log-space sigsoftmax (Kanai et al. 2018, eq. 9): p_i ∝ exp(z_i) sigmoid(z_i), so
// log p = z + log_sigmoid(z) - logsumexp(z + log_sigmoid(z)). z [N,V] -> [N,V]
Tensor log_sigsoftmax(const Tensor& z);

// Softmax or Sigsoftmax of h W^T + b.
class SoftmaxHead : public OutputHead {
 public:
  // tied_weight: the encoder's weight [V,H] to share, or undefined for an own U(-0.1,0.1) decoder.
  SoftmaxHead(HeadKind kind, int64_t V, int64_t H, const Tensor& tied_weight, Generator& gen);
  Tensor log_prob(const Tensor& h, int64_t B, Generator& gen) const override;
  Tensor nll(const Tensor& h, int64_t B, const std::vector<int64_t>& targets,
             Generator& gen) const override;
  HeadKind kind() const override { return kind_; }

 private:
  HeadKind kind_;
};

// The fused mean NLL of targets [N] for K components per row: contexts ctx [N*K,E] (row n*K + k is
// component k of row n), decoder W [V,E], b [V], log π [N,K] (undefined when K = 1), components
// softmax or sigsoftmax (sig). Keeps the logits for backward, or (past options.keep_logits_floats)
// streams over them in row chunks and recomputes them in backward; the same loss as the plain path
// to float rounding (tested against it).
Tensor fused_mixture_nll(const Tensor& ctx, const Tensor& W, const Tensor& b, const Tensor& log_pi,
                         const std::vector<int64_t>& targets, int64_t K, bool sig,
                         const FusedLossOptions& options = {});
// Its GPU path (nn/fused_head_loss_cuda.cpp), called by fused_mixture_nll for CUDA inputs once the
// arguments are checked: keep the logits for backward, or stream them in chunks of chunk_rows.
Tensor fused_mixture_nll_cuda(const Tensor& ctx, const Tensor& W, const Tensor& b,
                              const Tensor& log_pi, const std::vector<int64_t>& targets, int64_t K,
                              bool sig, bool keep, int64_t chunk_rows);

// Which inputs of the fused loss need a gradient: its backward computes only those.
struct FusedHeadGrads {
  bool ctx = false, W = false, b = false, pi = false;
};
FusedHeadGrads fused_head_grads(const Tensor& ctx, const Tensor& W, const Tensor& b,
                                const Tensor& log_pi);
// The fused loss's node, for both devices' paths: out recorded as "fused_mixture_nll" (or
// "fused_mixture_nll(sigsoftmax)") over {ctx, W, b, log_pi} with backward; out alone when grad
// mode is off (evaluation: what backward saved is dropped at once).
Tensor record_fused_head(bool sig, const Tensor& out, const Tensor& ctx, const Tensor& W,
                         const Tensor& b, const Tensor& log_pi, BackwardFn backward);

// MoS / MoSig / MoC with K experts of size E.
class MixtureHead : public OutputHead {
 public:
  MixtureHead(HeadKind kind, int64_t V, int64_t H, int64_t E, int64_t K, float dropoutl,
              const Tensor& tied_weight, Generator& gen);
  Tensor log_prob(const Tensor& h, int64_t B, Generator& gen) const override;
  Tensor nll(const Tensor& h, int64_t B, const std::vector<int64_t>& targets,
             Generator& gen) const override;
  HeadKind kind() const override { return kind_; }

  // The pieces, for tests and analysis tools. h [N,H]:
  Tensor log_prior(const Tensor& h) const;  // log π [N,K]
  Tensor contexts(const Tensor& h, int64_t B,
                  Generator& gen) const;  // tanh latent [N*K,E] (dropped)
  // MoC: the K contexts mixed by π, one context per row: log_pi [N,K], ctx [N*K,E] -> [N,E]
  Tensor mixed_context(const Tensor& log_pi, const Tensor& ctx) const;

  Tensor prior_weight;   // [K,H]
  Tensor latent_weight;  // [K*E,H]
  Tensor latent_bias;    // [K*E]
  int64_t experts, embedding;
  float dropoutl;

 private:
  HeadKind kind_;
};

// Builds the head for `kind`. E = K experts' context size (the embedding size when tied).
std::shared_ptr<OutputHead> make_head(HeadKind kind, int64_t V, int64_t H, int64_t E, int64_t K,
                                      float dropoutl, const Tensor& tied_weight, Generator& gen);

}  // namespace mg
