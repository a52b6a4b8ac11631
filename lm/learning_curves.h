// The learning-curve plot of a run, `mosgrad plot`: its metrics file (lm/metrics.h) drawn as SVG.
#pragma once

#include <string>
#include <vector>

#include "io/svg_plot.h"

namespace mg {

// The curves in a metrics file's text: training perplexity per interval (or per epoch when there
// are no interval lines) and validation perplexity per epoch, against training tokens; points
// that are not finite are left out, and where a resumed run repeated a stretch the later points
// count. A last line without its newline (a crash mid-write) is skipped; any other line that does
// not parse is an error naming `path` and the line.
struct LearningCurves {
  std::vector<PlotPoint> train, val;
};
LearningCurves parse_metrics(const std::string& text, const std::string& path);

// Reads a metrics.jsonl file and writes an SVG of the learning curves: training perplexity per
// interval and validation perplexity per epoch against training tokens (log-scale y axis), with
// axes, ticks, a legend and a title. Hand-written SVG, no plotting dependency.
// Throws std::runtime_error naming the file when it is missing, empty or has a malformed line.
void plot_learning_curves(const std::string& metrics_path, const std::string& svg_path,
                          const std::string& title = "");

}  // namespace mg
