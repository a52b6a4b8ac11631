// The learning-curve plot of a run, `mosgrad plot`: its metrics file (lm/metrics.h) drawn as SVG.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "io/svg_plot.h"

namespace mg {

// The curves in a metrics file's text: training perplexity per interval (or per epoch when there
// are no interval lines) and validation perplexity per epoch, against training tokens; a null
// value (the writer's NaN or infinity: diverged) is left out, and where a resumed run repeated a
// stretch the later points count. Every number read is checked, and one out of its range is an
// error naming `path`, the line and the field: tokens a whole number >= 0, a perplexity in
// [1, 1e300], a loss in [0, 690] nats, a perplexity that disagrees with exp of its loss on the
// same line, a --log-stats norm or spread < 0, a saturated fraction outside [0, 1]. A last line
// without its newline (a crash mid-write) is skipped; any other line that does not parse is an
// error naming `path` and the line.
struct LearningCurves {
  std::vector<PlotPoint> train, val;
  // The "stats" lines of --log-stats (lm/health_stats.h): each number's key ("grad_norm.
  // decoder.bias", "sat_f.0", ...) against training tokens.
  std::map<std::string, std::vector<PlotPoint>> stats;
};
LearningCurves parse_metrics(const std::string& text, const std::string& path);

// Reads a metrics.jsonl file and writes an SVG of the learning curves: training perplexity per
// interval and validation perplexity per epoch against training tokens (log-scale y axis), with
// axes, ticks, a legend and a title. Hand-written SVG, no plotting dependency.
// With --log-stats lines, the training-health plots too, beside svg_path and named after it
// (curves.svg: health_*.svg; finetune_curves.svg: finetune_health_*.svg): health_grad_norm.svg
// (each parameter's gradient norm before clipping), health_update_ratio.svg (each update's size
// against its weight; ~1e-3 is the usual healthy range) and health_layers.svg (each LSTM layer's
// output spread and its saturated gates). Returns the files written. Throws std::runtime_error
// naming the file when it is missing, empty or has a malformed line, and before writing anything:
// every plot is drawn first, and a file at one of their names that mosgrad did not draw
// (require_drawn_by_mosgrad) is refused, so a bad input never replaces a good plot and a plot
// never replaces someone else's file.
// Nothing at `path`, or a plot render_log_plot_svg drew (io/svg_plot.h: drawn_by_mosgrad): what a
// command that redraws a plot may replace. Otherwise throws std::runtime_error naming the path
// and what to do (a symlink, whatever it points to, a folder, another program's SVG: mosgrad
// cannot prove it wrote them).
void require_drawn_by_mosgrad(const std::string& path);

std::vector<std::string> plot_learning_curves(const std::string& metrics_path,
                                              const std::string& svg_path,
                                              const std::string& title = "");

}  // namespace mg
