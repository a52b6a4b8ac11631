// A line chart as hand-written SVG, no plotting dependency: a linear x axis from 0, a log-scale y
// axis, grid, ticks with readable labels (x: 500, 200k, 1.2M, 3B; y: 1-2-5 per decade), one
// polyline per series, a legend in whichever top corner the data leaves emptier, and a title.
// Used for the learning curves (lm/learning_curves.h), the rank spectrum and the bottleneck demo
// (analysis/) and the reproduction figure (cli/reproduce_results.cpp).
#pragma once

#include <string>
#include <vector>

namespace mg {

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
  std::vector<PlotPoint> points;  // finite, y > 0; drawn in this order
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
// non-empty axes.
std::string render_log_plot_svg(const LogPlot& plot);

}  // namespace mg
