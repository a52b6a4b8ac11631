// The plot's last guard (io/svg_plot.h): a point it cannot draw on a log axis is refused, naming
// the series, so no SVG with a NaN or infinite coordinate is ever returned; and the header by
// which a command knows a plot it may replace.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "io/svg_plot.h"
#include "tests/test_util.h"

namespace {

mg::LogPlot one_curve(double x, double y) {
  mg::LogPlot plot;
  plot.title = "valid";
  plot.series = {{"good", "good", "#1f77b4", true, {{1, 130}, {2, 100}}},
                 {"bad", "bad", "#d62728", true, {{1, 120}, {x, y}}}};
  return plot;
}

}  // namespace

TEST(SvgPlot, APointALogAxisCannotDrawIsRefused) {
  for (const auto& [x, y] : std::vector<std::pair<double, double>>{{2, 0},
                                                                   {2, -5},
                                                                   {2, NAN},
                                                                   {2, INFINITY},
                                                                   {2, 1.7e308},
                                                                   {-1, 100},
                                                                   {NAN, 100},
                                                                   {1.7e308, 100}}) {
    const std::string e =
        mgtest::error_of<std::invalid_argument>([&] { mg::render_log_plot_svg(one_curve(x, y)); });
    EXPECT_HAS(e, "series 'bad' has the point");
  }
  // The largest values it draws still give finite coordinates (1e300 * 1.08 does not overflow).
  for (const auto& [x, y] :
       std::vector<std::pair<double, double>>{{2, 1e300}, {2, 1e-300}, {1e300, 100}}) {
    const std::string svg = mg::render_log_plot_svg(one_curve(x, y));
    EXPECT_EQ(svg.find("nan"), std::string::npos) << x << " " << y;
    EXPECT_EQ(svg.find("inf"), std::string::npos) << x << " " << y;
  }
}

TEST(SvgPlot, ItsOwnPlotsAreKnownByTheirHeader) {
  EXPECT_TRUE(mg::drawn_by_mosgrad(mg::render_log_plot_svg(one_curve(2, 90))));
  EXPECT_FALSE(mg::drawn_by_mosgrad("<svg xmlns=\"http://www.w3.org/2000/svg\">mine</svg>\n"));
  EXPECT_FALSE(mg::drawn_by_mosgrad(""));
}

// A title from a folder name in another encoding once made an SVG no XML reader would open: bytes
// that are not UTF-8 become U+FFFD, and well-formed UTF-8 (θ, λ, ✓) stays as it is.
TEST(SvgPlot, TextThatIsNotUtf8BecomesTheReplacementCharacter) {
  mg::LogPlot plot = one_curve(2, 90);
  const std::string fffd = "\xEF\xBF\xBD";
  for (const auto& [title, drawn] : std::vector<std::pair<std::string, std::string>>{
           {"run\xff\xfe", "run" + fffd + fffd},
           {"\xC0\xAF", fffd + fffd},             // an overlong '/'
           {"\xED\xA0\x80", fffd + fffd + fffd},  // a UTF-16 surrogate
           {"cut \xCE", "cut " + fffd},           // a sequence cut short
           {"θ λ \xE2\x9C\x93", "θ λ \xE2\x9C\x93"}}) {
    plot.title = title;
    const std::string svg = mg::render_log_plot_svg(plot);
    EXPECT_HAS(svg, ">" + drawn + "</text>");
  }
}
