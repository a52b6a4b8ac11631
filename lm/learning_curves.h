// The learning-curve plot of a run, `mosgrad plot`: its metrics file (lm/metrics.h) drawn as SVG.
#pragma once

#include <string>

namespace mg {

// Reads a metrics.jsonl file and writes an SVG of the learning curves: training perplexity per
// interval and validation perplexity per epoch against training tokens (log-scale y axis), with
// axes, ticks, a legend and a title. Hand-written SVG, no plotting dependency.
// Throws std::runtime_error naming the file when it is missing, empty or has a malformed line.
void plot_learning_curves(const std::string& metrics_path, const std::string& svg_path,
                          const std::string& title = "");

}  // namespace mg
