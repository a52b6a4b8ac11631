#include "io/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "io/strf.h"

namespace mg {

namespace {

// The length of the well-formed UTF-8 sequence at s[i] (1-4 bytes), 0 when it is not one.
size_t utf8_length(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  const size_t n = b < 0x80           ? 1
                   : (b >> 5) == 0x6  ? 2
                   : (b >> 4) == 0xE  ? 3
                   : (b >> 3) == 0x1E ? 4
                                      : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((byte(i + k) >> 6) != 0x2) return 0;
  // Overlong forms, surrogates and code points above U+10FFFF are not UTF-8 either.
  if ((n == 2 && b < 0xC2) || (n == 3 && b == 0xE0 && byte(i + 1) < 0xA0) ||
      (n == 3 && b == 0xED && byte(i + 1) >= 0xA0) || (n == 4 && b == 0xF0 && byte(i + 1) < 0x90) ||
      (n == 4 && (b > 0xF4 || (b == 0xF4 && byte(i + 1) >= 0x90))))
    return 0;
  return n;
}

// s with the five XML special characters escaped and the control characters XML 1.0 forbids
// dropped.
std::string xml_escape(const std::string& raw) {
  // An SVG is UTF-8 XML: bytes that are not UTF-8 (a folder name in another encoding) become
  // U+FFFD, or no program could read the file.
  std::string s;
  for (size_t i = 0; i < raw.size();) {
    const size_t n = utf8_length(raw, i);
    s += n ? raw.substr(i, n) : "\xEF\xBF\xBD";
    i += n ? n : 1;
  }
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 forbids most control characters even when escaped.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

// 1, 2, 2.5 or 5 times a power of ten, near range / target: steps people read without effort.
double nice_step(double range, int target) {
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  return (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10) * mag;
}

// Counts (tokens): 0, 500, 200k, 1.2M, 3B.
std::string format_count(double v) {
  const double a = std::fabs(v);
  if (a < 1e3) return strf("%.3g", v);
  if (a < 1e6 - 0.5) return strf("%.3gk", v / 1e3);
  if (a < 1e9 - 0.5) return strf("%.3gM", v / 1e6);
  return strf("%.3gB", v / 1e9);
}

// y values: plain up to 1e5 (perplexities of a working model), then like counts.
std::string format_y(double v) {
  return v < 1e5 ? strf("%.6g", v) : format_count(v);
}

// Ticks of a log axis over [lo, hi]: 1-2-5 per decade, only powers of ten over a wide range, and
// denser or plain linear steps over a narrow one (a short run moves ppl only a little).
std::vector<double> log_ticks(double lo, double hi) {
  auto with = [&](std::initializer_list<double> mantissas) {
    std::vector<double> t;
    for (int k = static_cast<int>(std::floor(std::log10(lo)));
         k <= static_cast<int>(std::ceil(std::log10(hi))); ++k)
      for (double m : mantissas) {
        const double v = m * std::pow(10.0, k);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) t.push_back(v);
      }
    return t;
  };
  for (const auto& mantissas :
       {std::initializer_list<double>{1, 2, 5}, {1, 2, 3, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
    std::vector<double> t = with(mantissas);
    if (t.size() > 8 && mantissas.size() == 3) return with({1});
    if (t.size() >= 4 && t.size() <= 9) return t;
  }
  std::vector<double> t;
  const double step = nice_step(hi - lo, 4);
  for (double v = std::ceil(lo / step) * step; v <= hi * (1 + 1e-9); v += step) t.push_back(v);
  return t;
}

// The axis's bottom [lo, hi] lowered to the 1-2-5 value just below it when that stretches the
// axis by at most a fifth, so that the curves' lowest stretch reads against a labelled tick (115
// against 100, not only 200), but a flat curve centred by the widening above stays centred.
double lower_to_tick_below(double lo, double hi) {
  const double decade = std::pow(10.0, std::floor(std::log10(lo)));
  for (double m : {5.0, 2.0, 1.0})
    if (m * decade <= lo)
      return std::log(hi / (m * decade)) <= 1.2 * std::log(hi / lo) ? m * decade : lo;
  return lo;
}

std::string points_attr(const std::vector<PlotPoint>& s, const std::function<double(double)>& px,
                        const std::function<double(double)>& py) {
  std::string out;
  for (const PlotPoint& p : s) out += strf("%s%.1f,%.1f", out.empty() ? "" : " ", px(p.x), py(p.y));
  return out;
}

constexpr double W = 820, H = 500;  // the document's size, in its header

// The first line of every plot: what drawn_by_mosgrad recognises.
std::string svg_header() {
  return strf(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f "
      "%.0f\" "
      "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n",
      W, H, W, H);
}

// Every point inside the ranges of svg_plot.h, before anything is computed from them.
void check_points(const LogPlot& plot) {
  for (const PlotSeries& s : plot.series)
    for (const PlotPoint& p : s.points)
      if (!(p.x >= 0 && p.x <= kPlotMax && p.y >= kPlotMin && p.y <= kPlotMax))
        throw std::invalid_argument(
            strf("plot '%s': series '%s' has the point (%g, %g); a plot draws x in [0, %g] and y "
                 "in [%g, %g] (a log axis has no place for 0, a negative, NaN or infinity)",
                 plot.title.c_str(), s.name.c_str(), p.x, p.y, kPlotMax, kPlotMin, kPlotMax));
}

// A coordinate, refused when it is not finite: the last guard against an SVG with "nan" in it.
double finite_coordinate(double v, const char* axis, double value) {
  if (!std::isfinite(v))
    throw std::runtime_error(
        strf("plot: the %s value %g gives the coordinate %g; nothing drawn", axis, value, v));
  return v;
}

}  // namespace

bool drawn_by_mosgrad(const std::string& text) {
  return text.compare(0, svg_header().size(), svg_header()) == 0;
}

std::string render_log_plot_svg(const LogPlot& plot) {
  constexpr double L = 78, R = 24, T = 48, B = 62;
  check_points(plot);
  const double pw = W - L - R, ph = H - T - B;
  std::string title = plot.title;
  std::vector<PlotSeries> drawn = plot.series;
  std::vector<PlotPoint> clipped;  // where the triangles go
  if (plot.clip_above_times_lowest != 0) {
    if (!(plot.clip_above_times_lowest > 1))
      throw std::invalid_argument(strf(
          "LogPlot::clip_above_times_lowest is %g; it must be above 1 (or 0: no clip), else the "
          "lowest point itself would be clipped",
          plot.clip_above_times_lowest));
    double lowest = INFINITY;
    for (const PlotSeries& s : drawn)
      for (const PlotPoint& p : s.points) lowest = std::min(lowest, p.y);
    const double ceiling = plot.clip_above_times_lowest * lowest;
    for (PlotSeries& s : drawn)
      for (PlotPoint& p : s.points)
        if (p.y > ceiling) {
          p.y = ceiling;
          if (std::none_of(clipped.begin(), clipped.end(),
                           [&](const PlotPoint& q) { return q.x == p.x; }))
            clipped.push_back(p);  // one triangle where a mean and its band's edge both clip
        }
    // Four digits say where the line is (1149, 12.34) without the noise of a mean's decimals.
    const std::string at = ceiling < 1e5 ? strf("%.4g", ceiling) : format_count(ceiling);
    if (!clipped.empty())
      title += std::string(title.empty() ? "" : "; ") + "values above " + at + " drawn at " + at;
  }
  std::vector<const PlotSeries*> series;
  for (const PlotSeries& s : drawn)
    if (!s.points.empty()) series.push_back(&s);

  double xmax = 0, ylo = INFINITY, yhi = 0;
  for (const PlotSeries* s : series)
    for (const PlotPoint& p : s->points) {
      xmax = std::max(xmax, p.x);
      ylo = std::min(ylo, p.y);
      yhi = std::max(yhi, p.y);
    }
  // A single point or a single x still gets a visible, non-degenerate range.
  if (xmax <= 0) xmax = 1;
  if (series.empty()) ylo = yhi = 1;
  // The axis ends just past the data rather than at the next tick, which could waste a third of it.
  const double xend = xmax * 1.03;
  const double xstep = std::max(1.0, nice_step(xmax, 6));  // whole units (tokens)
  ylo /= 1.08;
  yhi *= 1.08;
  if (yhi / ylo < 1.5) {  // a flat curve: widen around it so it does not look like a cliff
    const double mid = std::sqrt(ylo * yhi);
    ylo = mid / 1.22;
    yhi = mid * 1.22;
  }
  ylo = lower_to_tick_below(ylo, yhi);
  const double lylo = std::log(ylo), lyhi = std::log(yhi);
  auto px = [&](double x) { return finite_coordinate(L + x / xend * pw, "x", x); };
  auto py = [&](double y) {
    return finite_coordinate(T + (lyhi - std::log(y)) / (lyhi - lylo) * ph, "y", y);
  };

  std::string svg = svg_header();
  svg += strf("<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", W, H);
  svg += strf(
      "<text x=\"%.1f\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" "
      "font-weight=\"bold\">%s</text>\n",
      L + pw / 2, xml_escape(title).c_str());

  // Grid, ticks and labels first, so the curves draw over them.
  auto line = [](double x1, double y1, double x2, double y2) {
    return strf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x1, y1, x2, y2);
  };
  std::string grid, marks, labels;
  for (double v : log_ticks(ylo, yhi)) {
    grid += line(L, py(v), L + pw, py(v));
    marks += line(L - 4, py(v), L, py(v));
    labels += strf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", L - 8, py(v) + 4,
                   format_y(v).c_str());
  }
  const int nx = static_cast<int>(std::floor(xend / xstep + 1e-9));
  for (int i = 0; i <= nx; ++i) {
    const double x = px(i * xstep);
    if (i > 0) grid += line(x, T, x, T + ph);
    marks += line(x, T + ph, x, T + ph + 4);
    labels += strf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x, T + ph + 18,
                   format_count(i * xstep).c_str());
  }
  svg += "<g stroke=\"#e3e3e3\">\n" + grid + "</g>\n<g stroke=\"#333\">\n" + marks;
  // A path, not a polyline: polylines are the data series (tests count them).
  svg += strf("<path fill=\"none\" d=\"M%.1f,%.1f V%.1f H%.1f\"/>\n</g>\n", L, T, T + ph, L + pw);
  svg += "<g fill=\"#333\">\n" + labels + "</g>\n";
  svg += strf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">%s</text>\n",
              L + pw / 2, H - 18, xml_escape(plot.x_label).c_str());
  svg += strf(
      "<text transform=\"translate(20,%.1f) rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">"
      "%s</text>\n",
      T + ph / 2, xml_escape(plot.y_label).c_str());

  for (const PlotSeries* s : series) {
    const char* color = s->color.c_str();
    if (!s->markers) {
      svg += strf(
          "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
          "stroke-linejoin=\"round\" points=\"%s\"/>\n",
          s->name.c_str(), color, points_attr(s->points, px, py).c_str());
      if (s->points.size() == 1)  // a one-point polyline draws nothing
        svg += strf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", px(s->points[0].x),
                    py(s->points[0].y), color);
    } else {
      svg += strf(
          "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n",
          s->name.c_str(), color, points_attr(s->points, px, py).c_str());
      svg += strf("<g fill=\"white\" stroke=\"%s\" stroke-width=\"2\">\n", color);
      for (const PlotPoint& p : s->points)
        svg += strf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/>\n", px(p.x), py(p.y));
      svg += "</g>\n";
    }
  }

  // A clipped point: a triangle pointing up from the line it was drawn at.
  for (const PlotPoint& p : clipped)
    svg += strf("<path class=\"clipped\" fill=\"#333\" d=\"M%.1f,%.1f l4,-7 l4,7 z\"/>\n",
                px(p.x) - 4, py(p.y) - 5);

  // The legend goes in whichever top corner the curves leave emptier; unlabelled series (a band's
  // edges) are drawn but not listed.
  std::vector<const PlotSeries*> legend;
  for (const PlotSeries* s : series)
    if (!s->label.empty()) legend.push_back(s);
  const double lw = 190, lh = 10 + 20 * static_cast<double>(legend.size());
  auto crowd = [&](double x0) {
    int n = 0;
    for (const PlotSeries* s : series)
      for (const PlotPoint& p : s->points)
        if (px(p.x) >= x0 - 10 && px(p.x) <= x0 + lw + 10 && py(p.y) <= T + 10 + lh + 10) ++n;
    return n;
  };
  const double right_x = L + pw - lw - 10, left_x = L + 10;
  const double lx = crowd(right_x) <= crowd(left_x) ? right_x : left_x, ly = T + 10;
  svg += strf(
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"white\" "
      "fill-opacity=\"0.9\" "
      "stroke=\"#bbb\"/>\n",
      lx, ly, lw, lh);
  for (size_t i = 0; i < legend.size(); ++i) {
    const PlotSeries& s = *legend[i];
    const double y = ly + 15 + 20 * static_cast<double>(i);
    svg += strf(
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
        "stroke-width=\"2\"/>\n",
        lx + 10, y, lx + 40, y, s.color.c_str());
    if (s.markers)
      svg += strf(
          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"white\" stroke=\"%s\" "
          "stroke-width=\"2\"/>\n",
          lx + 25, y, s.color.c_str());
    svg += strf("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx + 48, y + 4,
                xml_escape(s.label).c_str());
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace mg
