// Dynamic evaluation (Krause et al. 2018, "Dynamic Evaluation of Neural Sequence Models"), as used
// for the MoS paper's best PTB numbers: while reading the evaluation text, take a gradient step on
// every segment just scored, with an RMS-normalised step and a decay back towards the trained
// weights:
//   θ ← θ + λ·decrate ⊙ (θ₀ − θ) − η·∇/(MS + ε)
// where MS = sqrt(Σ ∇²) is each weight's gradient scale measured on training data (gradstat), and
// decrate = MS / Σ_params mean(MS), clipped at 1/λ so the decay cannot overshoot.
#pragma once

#include <vector>

#include "lm/evaluate.h"

namespace mg {

struct DynevalConfig {
  float lr = 0.002f;    // η
  float lamb = 0.075f;  // λ (the MoS README's PTB setting; Krause et al.'s script defaults to 0.02)
  float epsilon = 0.001f;         // ε
  int64_t bptt = 5;               // segment length of the adaptation steps
  int64_t stat_batch_size = 100;  // batch size of the gradient statistics pass over training data
  int64_t max_stat_batches = -1;  // > 0: gradient statistics on at most this many training segments
  bool mean_squares = false;      // MS = sqrt(mean ∇²) instead of sqrt(Σ ∇²)
};

// The gradient statistics, measured once on the training text from the trained weights. They
// depend on those weights, the training text and the statistics settings (bptt, stat_batch_size,
// max_stat_batches, mean_squares), not on the text evaluated, λ, η or ε: every text evaluated from
// the same weights (valid and test) shares them, and `reproduce` measures them once for both.
struct DynevalStats {
  std::vector<std::vector<float>> ms;     // per parameter, per weight: MS (as the update reads it)
  std::vector<std::vector<float>> ratio;  // per parameter, per weight: MS / Σ_params mean(MS)
  int64_t segments = 0;                   // training segments the statistics ran over
};

// The gradient statistics pass: forward and backward over `train_ids` batchified into
// cfg.stat_batch_size columns, in eval mode (no dropout), cfg.bptt tokens at a time.
DynevalStats gradient_statistics(RNNModel& model, const std::vector<int64_t>& train_ids,
                                 const DynevalConfig& cfg);

// Dynamically evaluates `eval_ids` with batch size 1 from the model's current weights, which must
// be the weights `stats` was measured on (θ₀ is read from the model). Modifies the model's weights
// (they end adapted to the evaluated text): reload to reuse. Returns the loss per target over the
// evaluated text, weighting the last short segment like the reference (by seq_len / bptt).
// Throws std::runtime_error as soon as that loss cannot have a finite perplexity (a segment's
// loss NaN or infinite, or the losses so far already too large for any finite mean): diverged
// steps, named by the flags that set them (--lr, --epsilon, ...), or, before the first step, the
// model itself.
EvalResult dynamic_evaluate(RNNModel& model, const DynevalStats& stats,
                            const std::vector<int64_t>& eval_ids, const DynevalConfig& cfg);

// Both at once: the statistics on `train_ids`, then `eval_ids`.
EvalResult dynamic_evaluate(RNNModel& model, const std::vector<int64_t>& train_ids,
                            const std::vector<int64_t>& eval_ids, const DynevalConfig& cfg);

}  // namespace mg
