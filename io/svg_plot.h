// A line chart as hand-written SVG, no plotting dependency: a linear x axis from 0, a log-scale y
// axis, grid, ticks with readable labels (x: 500, 200k, 1.2M, 3B; y: 1-2-5 per decade), one
// polyline per series, a legend in whichever top corner the data leaves emptier, and a title.
// Used for the learning curves (lm/learning_curves.h), the rank spectrum and the bottleneck demo
// (analysis/) and the reproduction figure (reproduce/reproduce_results.cpp).
#pragma once

#include <string>
#include <vector>

namespace mg {

// The values a plot draws: beyond them a log axis's ends overflow (1.7e308 * 1.08 is infinite).
// The readers that feed a plot (lm/learning_curves.h, reproduce/reproduce_results.h) check their numbers
// against their own ranges first, naming the file and the line; these are the last limits.
constexpr double kPlotMin = 1e-300, kPlotMax = 1e300;

struct PlotPoint {
  double x, y;
};

struct PlotSeries {
  std::string name;   // the polyline's class attribute, by which a stylesheet or a test finds it
  std::string label;  // its legend entry (empty: drawn, not listed, e.g. the edges of a band)
  std::string color;  // an SVG colour, e.g. "#1f77b4"
  // A circle on every point and a thicker line: for sparse series (one point per epoch). Without,
  // a thin line, and a dot only when the series is a single point (which a polyline cannot draw).
  bool markers = false;
  std::vector<PlotPoint> points;  // x in [0, kPlotMax], y in [kPlotMin, kPlotMax]; in this order
};

struct LogPlot {
  std::string title, x_label, y_label;
  std::vector<PlotSeries> series;  // empty series are left out, legend included
  // When > 1: points above this many times the lowest y are drawn at that line, each with a small
  // triangle, and the title says so. One value that blew up (a valid perplexity of 89,027 beside
  // curves near 100) would otherwise stretch the log axis over decades and press every curve into
  // its bottom tenth. 0 (the default) draws every value where it is, as a learning curve from a
  // uniform start (ppl ~ V) must be. A value in (0, 1] would clip the lowest point itself:
  // render_log_plot_svg throws std::invalid_argument.
  double clip_above_times_lowest = 0;
};

// The whole SVG document. Degenerate data (one point, all x = 0, a flat series) still gets visible,
// non-empty axes. A point outside the ranges above (NaN, infinite, y <= 0, ...) is refused
// (std::invalid_argument naming the series and the point), and so, as a last guard, is any
// coordinate that would come out NaN or infinite: a plot with a "nan" in it is never returned.
std::string render_log_plot_svg(const LogPlot& plot);

// True when `text` begins as render_log_plot_svg's documents begin (its <svg> header, unchanged
// since the first one): how a command that redraws a plot in a folder (`plot`'s curves.svg,
// `reproduce`'s valid_curves.svg) knows that the file it would replace is one mosgrad drew.
bool drawn_by_mosgrad(const std::string& text);

}  // namespace mg
