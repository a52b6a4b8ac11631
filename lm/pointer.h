// The neural cache pointer (Grave et al. 2017, "Improving Neural Language Models with a Continuous
// Cache"; AWD-LSTM's pointer.py): at test time, remember the last `window` positions' last-layer
// LSTM outputs h_i with the word that followed each, x_{i+1}, and mix a distribution over those
// words into the model's:
//   p(w | t) = (1 − λ) p_model(w | t) + λ Σ_{i=t−L}^{t−1} softmax_i(θ h_tᵀ h_i) 1[x_{i+1} = w]
// (Grave et al., eqs. 2–3). Nothing is trained; θ and λ are chosen on valid (a small grid).
//
// How: one pass of the model at batch size 1 with the hidden state carried (PointerStream keeps,
// for each target, h_t and p_model(target)); the cache is then scored from those alone, so a grid
// of θ and λ costs one pass of the model, N·L·H multiply-adds once and N·L exponentials per θ.
//
// Two choices, both documented differences from pointer.py: the cache is used from the second
// target on, with the min(t, L) entries it has (pointer.py waits until it holds more than L); the
// first target, with an empty cache, scores p_model alone. The loss is averaged over the targets
// (pointer.py divides by the number of tokens, one more).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/rnn_model.h"

namespace mg {

struct PointerStream {
  int64_t H = 0;                 // the last LSTM layer's size
  std::vector<float> keys;       // [N,H]: h_t, the last layer's output where target t is predicted
  std::vector<int64_t> targets;  // [N]: x_{t+1}
  std::vector<double> p_model;   // [N]: the model's probability of targets[t]
  int64_t size() const { return static_cast<int64_t>(targets.size()); }
};

// Runs the model (eval mode, no graph) over ids at batch size 1 in segments of `bptt`, the hidden
// state carried across them. N = ids.size() − 1 targets.
PointerStream pointer_stream(RNNModel& model, const std::vector<int64_t>& ids, int64_t bptt);

// For each θ of `thetas`, the pointer's probability of each target, p_ptr[θ][t] (0 where the cache
// holds no earlier occurrence of the target; −1 at t = 0, where the cache is empty).
std::vector<std::vector<double>> pointer_probabilities(const PointerStream& s, int64_t window,
                                                       const std::vector<double>& thetas);

// The mean NLL per target of the mixture with weight λ, from p_model and one row of
// pointer_probabilities.
double pointer_mixture_loss(const PointerStream& s, const std::vector<double>& p_ptr,
                            double lambda);

struct PointerScore {
  double theta = 0, lambda = 0, loss = 0;  // loss: mean NLL per target (nats)
};

// Every (θ, λ) of the grid, in grid order (θ outer), and the best of them (the lowest loss; the
// first on a tie). edge: empty, or which of the best's values is the grid's largest or smallest
// (of two or more distinct values), e.g. "theta 4 is the grid's largest": the optimum may then lie
// outside the grid (never said of λ at 0 or 1, its bounds).
struct PointerGrid {
  std::vector<PointerScore> scores;
  PointerScore best;
  std::string edge;
};
PointerGrid pointer_grid(const PointerStream& s, int64_t window, const std::vector<double>& thetas,
                         const std::vector<double>& lambdas);

// `mosgrad pointer`'s settings: AWD-LSTM's PTB values (window 500, θ 1, λ 0.1), or with grid the
// θ and λ that score best on valid (the grid below), then applied to the split asked for.
struct PointerOptions {
  int64_t window = 500;  // L
  double theta = 1.0;    // θ
  double lambda = 0.1;   // λ (pointer.py's --lambdasm)
  bool grid = false;     // choose θ, λ on valid from pointer_thetas() × pointer_lambdas()
  int64_t bptt = 70;     // segment length of the model's pass (any length gives the same numbers)
};
// The grid searched on valid. Grave et al.'s Fig. 2 spans θ 0–1.5 and λ 0.05–0.3 for their
// models, but θ multiplies h_tᵀ h_i, whose scale comes with the model: the day plan's
// models all chose θ 1.5, that grid's largest, and over a wider one the softmax-sized ones θ 4–6
// and a mixture θ 24 (docs/reproduction.md). So θ goes up to 64, by steps of about 1.5x, and λ
// down to 0.02.
const std::vector<double>& pointer_thetas();   // 0.25, 0.5, 1, 1.5, 2, 3, ..., 32, 48, 64
const std::vector<double>& pointer_lambdas();  // 0.02, 0.03, 0.05, 0.075, 0.1, ..., 0.3

// The model alone on the same stream: mean NLL of p_model (the baseline the cache is compared to).
double model_only_loss(const PointerStream& s);

}  // namespace mg
