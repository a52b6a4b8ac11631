// The log-scale line chart behind the learning curves and the reproduction figure: the clip of a
// value that blew up, and a labelled tick just below the lowest curve.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "io/svg_plot.h"

namespace {

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

mg::LogPlot two_curves(double first_of_b) {
  mg::LogPlot plot;
  plot.title = "valid";
  plot.series = {{"a", "a", "#1f77b4", true, {{1, 130}, {2, 100}}},
                 {"b", "b", "#d62728", true, {{1, first_of_b}, {2, 150}}}};
  return plot;
}

}  // namespace

TEST(SvgPlot, ValuesAboveTheCeilingAreDrawnAtItWithATriangle) {
  mg::LogPlot plot = two_curves(89027);
  const std::string unclipped = mg::render_log_plot_svg(plot);
  EXPECT_EQ(count_of(unclipped, "class=\"clipped\""), 0u) << "no ceiling by default";
  EXPECT_NE(unclipped.find(">10000<"), std::string::npos) << "the axis spans the blow-up";

  plot.clip_above_times_lowest = 10;
  const std::string svg = mg::render_log_plot_svg(plot);
  EXPECT_NE(svg.find("valid; values above 1000 drawn at 1000"), std::string::npos) << svg;
  EXPECT_EQ(count_of(svg, "class=\"clipped\""), 1u);
  EXPECT_EQ(svg.find(">10000<"), std::string::npos) << "no tick far above the curves";

  plot.clip_above_times_lowest = 1;
  EXPECT_THROW(mg::render_log_plot_svg(plot), std::invalid_argument) << "would clip the lowest";

  plot = two_curves(900);  // within ten times 100
  plot.clip_above_times_lowest = 10;
  const std::string within = mg::render_log_plot_svg(plot);
  EXPECT_EQ(within.find("drawn at"), std::string::npos);
  EXPECT_EQ(count_of(within, "class=\"clipped\""), 0u);
}

TEST(SvgPlot, TheLowestCurveReadsAgainstATickBelowIt) {
  // Curves ending at 100–150 over an axis up to ~1,000: a 100 tick, not only 200 and up.
  mg::LogPlot plot = two_curves(900);
  plot.series[0].points[1].y = 115;
  const std::string svg = mg::render_log_plot_svg(plot);
  EXPECT_NE(svg.find(">100<"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">200<"), std::string::npos);
}

TEST(SvgPlot, AFlatCurveStaysCentredRatherThanGainATickFarBelow) {
  mg::LogPlot plot;
  plot.series = {{"a", "a", "#1f77b4", true, {{1, 170}, {2, 165}, {3, 160}}}};
  const std::string svg = mg::render_log_plot_svg(plot);
  EXPECT_EQ(svg.find(">100<"), std::string::npos)
      << "a 100 tick would leave two thirds of the plot empty under curves at 160-170";
}
