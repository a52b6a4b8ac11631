// `mosgrad rank`: the softmax bottleneck measured on a trained model (Yang et al. 2017, Table 5).
// Run the model (eval mode) over a split with the hidden state carried, take the last layer's
// output h for the first N contexts, recompute the head's log-probabilities in double
// (analysis/head_double.h), stack them into A [N,V] and count A's singular values (from A itself,
// analysis/svd.h) above the standard tolerance σ_max·max(N,V)·ε (analysis/spectrum.h). A softmax or
// MoC head cannot exceed d+2; MoS can reach min(N,V).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/spectrum.h"
#include "nn/rnn_model.h"

namespace mg {

struct RankOptions {
  int64_t contexts = 0;     // N; 0: every target of the split (PTB valid at B=10: 73,750)
  int64_t batch_size = 10;  // columns the split is cut into (the papers' validation B)
  int64_t bptt = 70;        // segment length of the forward passes
};

struct RankReport {
  int64_t N = 0, V = 0, d = 0;  // d: the decoder's input size (the bound is d+2)
  Spectrum model;               // singular values of A [N,V]
  Spectrum decoder;             // singular values of the decoder weight [V,d]
  double component_kl = 0;      // mean pairwise KL between MoS components (NaN for other heads)
  double seconds_contexts = 0, seconds_log_probs = 0, seconds_spectrum = 0;
};

// ids: the split's token ids. Throws std::invalid_argument naming --contexts when the split has
// fewer targets than asked for.
RankReport model_rank(RNNModel& model, const std::vector<int64_t>& ids, const RankOptions& options);

// The spectrum as CSV ("i,sigma,sigma_rel,decoder_sigma,decoder_sigma_rel") and as an SVG plot of
// σ_i/σ_max against i (log scale), the model's beside the decoder's, with the threshold drawn.
std::string rank_csv(const RankReport& report);
std::string rank_plot_svg(const RankReport& report, const std::string& title);

}  // namespace mg
