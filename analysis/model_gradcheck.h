// `mosgrad gradcheck`: a small model built from the usual model flags, its autograd gradient of
// one batch's loss compared, parameter by parameter, with central differences.
//
// The engine computes in float, so "in double" here means: the loss of every perturbed forward is
// read as a double and the differences and their Richardson extrapolation are taken in double, over
// the float step actually applied. The float forward itself rounds the loss at ~1e-7 relative; that
// noise, divided by the step, is what a finite difference cannot resolve (see noise_floor in
// model_gradcheck.cpp), so relative errors are measured against max(|autograd|, |numeric|, floor).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lm/train_config.h"

namespace mg {

struct ModelGradcheckOptions {
  int64_t entries = 24;     // per parameter: half the largest |gradient|, half at random (0: all)
  double tolerance = 1e-2;  // max relative error allowed (see model_gradcheck.cpp)
  std::vector<std::string> params;              // dotted names to check; empty: all
  uint64_t seed = 1;                            // the batch and the random entries
  std::function<void(Module&)> after_backward;  // tests: corrupt a gradient, watch it fail
};

struct ParamGradcheck {
  std::string name;  // "rnns.0.weight_hh"
  Shape shape;
  int64_t checked = 0, numel = 0;
  double max_grad = 0;              // the largest |autograd gradient| of all entries: the scale
  double max_abs = 0, max_rel = 0;  // over the checked entries
  bool ok = true;
};

struct ModelGradcheckReport {
  std::string model;  // ModelConfig::summary() and the batch
  double loss = 0;
  std::vector<ParamGradcheck> rows;
  bool ok = true;  // every row within the tolerance
};

// cfg.model (ntoken included), cfg.batch_size, cfg.bptt and cfg.seed; CPU only. The dropouts stay
// on as configured: every forward replays the same masks, so they are checked too. Throws for an
// unknown name in options.params, listing the parameters.
ModelGradcheckReport gradcheck_model(const TrainConfig& cfg, const ModelGradcheckOptions& options);

// The report as a table, one parameter a line, and a last line saying ok or how many failed.
std::string gradcheck_table(const ModelGradcheckReport& report, double tolerance);

}  // namespace mg
