// `mosgrad bottleneck-demo`: the softmax bottleneck (Yang et al. 2017, §2.2) on synthetic data,
// small enough for a lecture. A true conditional distribution P*(word | context) over V words for N
// contexts is drawn with a log-probability matrix of rank r ≫ d (each context has a few likely next
// words, different ones per context); then four heads of the same d are
// fitted to it, each with its own free context vectors h_n [d] (Adam, full-distribution cross
// entropy): Softmax and MoC are bound to rank ≤ d+2 and stall, Sigsoftmax and MoS are not.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/heads.h"

namespace mg {

struct DemoConfig {
  int64_t contexts = 256;   // N
  int64_t vocab = 64;       // V
  int64_t support = 3;      // likely next words per context
  double smoothing = 0.02;  // α: the mass spread uniformly over all V words
  int64_t d = 4;            // every head's context / decoder size (H = E = d)
  int64_t experts = 4;      // K of the mixtures (≥ support: one peaked component per likely word)
  int64_t hidden = 32;      // H of the mixtures' free context vectors (their latent maps H -> K·d)
  int64_t steps = 1500;     // Adam steps per head
  int64_t eval_every = 100;  // measure KL and rank every so many steps (and at the end)
  float lr = 0.05f;
  uint64_t seed = 1;
};

struct DemoPoint {
  int64_t step;
  double kl;     // mean over contexts of KL(P* || model), nats, computed in double
  int64_t rank;  // numerical rank of the model's log-probability matrix [N,V] (analysis/spectrum.h)
};

struct DemoCurve {
  HeadKind head;
  std::vector<DemoPoint> points;
};

struct DemoResult {
  int64_t true_rank = 0;          // measured rank of log P*
  double true_entropy = 0;        // mean entropy of P*, nats: what a KL is small against
  std::vector<DemoCurve> curves;  // softmax, moc, sigsoftmax, mos
};

// Runs the fits; `progress` (optional) receives one line per measurement. Deterministic: the same
// config gives the same numbers for any thread count.
DemoResult run_bottleneck_demo(const DemoConfig& config,
                               const std::function<void(const std::string&)>& progress = {});

// The SVG plot of the KL curves (log-scale y) and the CSV "head,step,kl,rank" of every point.
std::string demo_plot_svg(const DemoResult& result, const DemoConfig& config);
std::string demo_csv(const DemoResult& result);

}  // namespace mg
