#include "lm/metrics.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

#include "io/atomic_file.h"
#include "io/json.h"
#include "io/read_file.h"

namespace mg {

namespace {

// printf into a std::string; every number the display and the files show goes through here.
std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string strf(const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, n);
  std::string out(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(&out[0], out.size(), fmt, ap);
  va_end(ap);
  out.resize(n);
  return out;
}

// JSON has no NaN or infinity (a diverged run has both), so those become null, which the plot skips.
std::string json_num(double v, int digits = 6) {
  if (!std::isfinite(v)) return "null";
  return strf("%.*g", digits, v);
}

// 2650 -> "2,650": throughput is easier to read at a glance with separators.
std::string thousands(double v) {
  if (!std::isfinite(v)) return "?";
  const long long n = std::llround(v);
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

// One line, flushed at once so a crash or Ctrl-C loses at most the line being written.
void write_line(std::FILE* f, const std::string& path, const std::string& line) {
  errno = 0;
  if (std::fputs(line.c_str(), f) < 0 || std::fputc('\n', f) == EOF || std::fflush(f) != 0)
    throw std::runtime_error("cannot write metrics file '" + path + "': " +
                             (errno ? std::strerror(errno) : "write error"));
}

// Blanks the bar line and returns the cursor to its start, so the next text starts clean.
void clear_bar(std::FILE* out, bool& open, size_t& width) {
  if (!open) return;
  std::fprintf(out, "\r%s\r", std::string(width, ' ').c_str());
  open = false;
  width = 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// MetricsWriter

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  // Append: a resumed run continues the same file, so one plot shows the whole history.
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw std::runtime_error("cannot open metrics file '" + path + "': " + std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const IntervalMetrics& m) {
  std::string s = "{\"kind\":\"interval\"";
  s += strf(",\"epoch\":%" PRId64 ",\"step\":%" PRId64 ",\"batch\":%" PRId64 ",\"tokens\":%" PRId64, m.epoch,
            m.step, m.batch, m.tokens);
  s += ",\"loss\":" + json_num(m.loss) + ",\"ppl\":" + json_num(std::exp(m.loss));
  s += ",\"lr\":" + json_num(m.lr) + ",\"tok_per_s\":" + json_num(m.tokens_per_s);
  // Elapsed keeps more digits: after a day of training %.6g would round to whole seconds.
  s += ",\"elapsed_s\":" + json_num(m.elapsed_s, 9) + ",\"grad_norm\":" + json_num(m.grad_norm) + "}";
  write_line(file_, path_, s);
}

void MetricsWriter::write(const EpochMetrics& m) {
  std::string s = "{\"kind\":\"epoch\"";
  s += strf(",\"epoch\":%" PRId64 ",\"step\":%" PRId64 ",\"tokens\":%" PRId64, m.epoch, m.step, m.tokens);
  s += ",\"train_loss\":" + json_num(m.train_loss) + ",\"train_ppl\":" + json_num(std::exp(m.train_loss));
  s += ",\"val_loss\":" + json_num(m.val_loss) + ",\"val_ppl\":" + json_num(std::exp(m.val_loss));
  s += ",\"elapsed_s\":" + json_num(m.elapsed_s, 9) + ",\"epoch_s\":" + json_num(m.epoch_s, 9);
  s += ",\"optimizer\":" + json_string(m.optimizer) + ",\"best\":" + (m.best ? "true" : "false") + "}";
  write_line(file_, path_, s);
}

// ---------------------------------------------------------------------------------------------
// ProgressDisplay

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  // Round once, so 59.6s shows as 1m00s rather than 60s.
  const long long s = std::llround(seconds);
  if (s >= 3600) return strf("%lldh%02lldm", s / 3600, (s % 3600) / 60);
  if (s >= 60) return strf("%lldm%02llds", s / 60, s % 60);
  return strf("%llds", s);
}

ProgressDisplay::ProgressDisplay(std::FILE* out, bool is_tty) : out_(out), tty_(is_tty) {
  if (!out_) throw std::runtime_error("ProgressDisplay: no output stream");
}

void ProgressDisplay::interval(const IntervalMetrics& m) {
  // The ETA extrapolates the current epoch's own pace: the pace since its first batch, not since
  // the run started, so warm-up or a slower earlier epoch does not skew it.
  if (m.epoch != eta_epoch_) {
    if (eta_epoch_ < 0 && m.epoch == 1) {
      // A first epoch starts at batch 0 at elapsed 0 (a run resumed inside it continues both).
      eta_batch_ = 0;
      eta_elapsed_s_ = 0;
    } else {
      // A run resumed in a later epoch: no earlier reference, so time from this interval on.
      eta_batch_ = m.batch;
      eta_elapsed_s_ = m.elapsed_s;
    }
    eta_epoch_ = m.epoch;
  }
  double eta = -1;
  if (m.batch > eta_batch_ && m.elapsed_s >= eta_elapsed_s_) {
    const double per_batch = (m.elapsed_s - eta_elapsed_s_) / static_cast<double>(m.batch - eta_batch_);
    eta = static_cast<double>(std::max<int64_t>(0, m.batches - m.batch)) * per_batch;
  }
  const double ppl = std::exp(m.loss);

  if (!tty_) {
    // One self-contained line per interval: logs from CI or nohup are read (and grepped) later.
    std::fprintf(out_,
                 "| epoch %" PRId64 " | %" PRId64 "/%" PRId64 " batches | step %" PRId64
                 " | lr %.4g | %s tok/s | loss %.2f | ppl %.1f | grad norm %.2f | ETA %s\n",
                 m.epoch, m.batch, m.batches, m.step, m.lr, thousands(m.tokens_per_s).c_str(), m.loss, ppl,
                 m.grad_norm, format_eta(eta).c_str());
    std::fflush(out_);
    return;
  }

  constexpr int kBarCells = 20;
  double frac = m.batches > 0 ? static_cast<double>(m.batch) / static_cast<double>(m.batches) : 0.0;
  frac = std::min(1.0, std::max(0.0, frac));
  const int filled = static_cast<int>(frac * kBarCells);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kBarCells) bar += '>';
  bar.resize(kBarCells, ' ');
  std::string line = strf("epoch %" PRId64 " [%s] %3d%%  %" PRId64 "/%" PRId64 "  %s tok/s  loss %.2f  ppl %.1f  ETA %s",
                          m.epoch, bar.c_str(), static_cast<int>(frac * 100), m.batch, m.batches,
                          thousands(m.tokens_per_s).c_str(), m.loss, ppl, format_eta(eta).c_str());
  const size_t width = line.size();
  // Spaces over whatever a longer previous bar left behind; \r alone does not erase.
  if (line.size() < bar_width_) line.append(bar_width_ - line.size(), ' ');
  bar_width_ = width;
  std::fprintf(out_, "\r%s", line.c_str());
  std::fflush(out_);
  bar_open_ = true;
}

void ProgressDisplay::epoch(const EpochMetrics& m) {
  // The summary replaces the bar: its figures are the epoch's final ones.
  clear_bar(out_, bar_open_, bar_width_);
  std::string line = strf("| end of epoch %" PRId64 " | time %.1fs | train ppl %.1f | valid loss %.2f | valid ppl %.1f",
                          m.epoch, m.epoch_s, std::exp(m.train_loss), m.val_loss, std::exp(m.val_loss));
  if (!m.optimizer.empty()) line += " | " + m.optimizer;
  if (m.best) line += " | saved best";
  // Rules above and below, as in the AWD-LSTM logs, so epoch ends stand out among interval lines.
  const std::string rule(line.size(), '-');
  std::fprintf(out_, "%s\n%s\n%s\n", rule.c_str(), line.c_str(), rule.c_str());
  std::fflush(out_);
  // The next epoch's timing starts where this one ended (its elapsed includes validation).
  eta_epoch_ = m.epoch + 1;
  eta_batch_ = 0;
  eta_elapsed_s_ = m.elapsed_s;
}

void ProgressDisplay::message(const std::string& line) {
  clear_bar(out_, bar_open_, bar_width_);
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void ProgressDisplay::finish() {
  // Keeps the last bar on screen (where an interrupted run stopped) and ends its line.
  if (bar_open_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  bar_open_ = false;
  bar_width_ = 0;
}

// ---------------------------------------------------------------------------------------------
// Learning-curve plot

namespace {

// Where a metrics line is, for its errors: "<file>:<line>: <what>".
struct LineRef {
  const std::string& path;
  size_t line_no;
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(path + ":" + std::to_string(line_no) + ": " + what);
  }
};

// One line: a flat JSON object of numbers, strings, booleans and nulls, as MetricsWriter writes and
// a person might type. Nested values are rejected as malformed.
JsonValue parse_line(const std::string& line, const LineRef& where) {
  if (line[line.find_first_not_of(" \t\r")] != '{')
    where.fail("expected '{' at the start of the line (one JSON object per line)");
  JsonValue obj;
  try {
    obj = parse_json(line);
  } catch (const JsonError& e) {
    where.fail(e.reason());
  }
  for (const auto& [key, value] : obj.members)
    if (value.kind == JsonValue::Array || value.kind == JsonValue::Object)
      where.fail("nested value for \"" + key + "\" (metrics lines are flat objects)");
  return obj;
}

struct Point {
  double x, y;
};

// Adds a point, first dropping any with as many tokens or more: after a resume the run repeats
// the stretch since its checkpoint, and the later measurements are the ones that count.
void add_point(std::vector<Point>& series, double x, double y) {
  if (!std::isfinite(x) || !std::isfinite(y) || y <= 0) return;  // diverged: nothing to draw
  while (!series.empty() && series.back().x >= x) series.pop_back();
  series.push_back({x, y});
}

// The field as a number: a required one must be present; null (a non-finite value) reads as NaN.
double number_field(const JsonValue& obj, const char* key, const LineRef& where) {
  const JsonValue* v = obj.find(key);
  if (!v) where.fail(std::string("no \"") + key + "\" field");
  if (v->kind == JsonValue::Null) return NAN;
  if (v->kind != JsonValue::Number) where.fail(std::string("\"") + key + "\" is not a number");
  return v->number;
}

// Perplexity from the ppl field, or exp(loss) when only the loss was written.
double ppl_field(const JsonValue& obj, const char* ppl_key, const char* loss_key, const LineRef& where) {
  if (obj.find(ppl_key)) return number_field(obj, ppl_key, where);
  return std::exp(number_field(obj, loss_key, where));
}

struct Curves {
  std::vector<Point> train, val;
};

Curves read_metrics(const std::string& path) {
  const std::string text = read_file(path, "metrics file");
  Curves c;
  std::vector<Point> epoch_train;  // the fallback training curve when there are no interval lines
  size_t records = 0;
  LineRef where{path, 0};
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    ++where.line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const JsonValue obj = parse_line(line, where);
    const JsonValue* kind = obj.find("kind");
    if (!kind || kind->kind != JsonValue::String) where.fail("no \"kind\" string field");
    ++records;
    const double tokens = number_field(obj, "tokens", where);
    if (kind->str == "interval") {
      add_point(c.train, tokens, ppl_field(obj, "ppl", "loss", where));
    } else if (kind->str == "epoch") {
      add_point(c.val, tokens, ppl_field(obj, "val_ppl", "val_loss", where));
      if (obj.find("train_ppl") || obj.find("train_loss"))
        add_point(epoch_train, tokens, ppl_field(obj, "train_ppl", "train_loss", where));
    } else {
      where.fail("unknown kind \"" + kind->str + "\" (expected \"interval\" or \"epoch\")");
    }
  }
  if (records == 0) throw std::runtime_error("metrics file '" + path + "' has no metrics lines");
  if (c.train.empty()) c.train = std::move(epoch_train);
  if (c.train.empty() && c.val.empty())
    throw std::runtime_error("metrics file '" + path + "' has no finite perplexity to plot");
  return c;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
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

// Token counts: 0, 500, 200k, 1.2M, 3B.
std::string format_tokens(double v) {
  const double a = std::fabs(v);
  if (a < 1e3) return strf("%.3g", v);
  if (a < 1e6 - 0.5) return strf("%.3gk", v / 1e3);
  if (a < 1e9 - 0.5) return strf("%.3gM", v / 1e6);
  return strf("%.3gB", v / 1e9);
}

std::string format_ppl(double v) { return v < 1e5 ? strf("%.6g", v) : format_tokens(v); }

// Ticks of a log axis over [lo, hi]: 1-2-5 per decade, only powers of ten over a wide range, and
// denser or plain linear steps over a narrow one (a short run moves ppl only a little).
std::vector<double> log_ticks(double lo, double hi) {
  auto with = [&](std::initializer_list<double> mantissas) {
    std::vector<double> t;
    for (int k = static_cast<int>(std::floor(std::log10(lo))); k <= static_cast<int>(std::ceil(std::log10(hi))); ++k)
      for (double m : mantissas) {
        const double v = m * std::pow(10.0, k);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) t.push_back(v);
      }
    return t;
  };
  for (const auto& mantissas : {std::initializer_list<double>{1, 2, 5}, {1, 2, 3, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
    std::vector<double> t = with(mantissas);
    if (t.size() > 8 && mantissas.size() == 3) return with({1});
    if (t.size() >= 4 && t.size() <= 9) return t;
  }
  std::vector<double> t;
  const double step = nice_step(hi - lo, 4);
  for (double v = std::ceil(lo / step) * step; v <= hi * (1 + 1e-9); v += step) t.push_back(v);
  return t;
}

std::string points_attr(const std::vector<Point>& s, const std::function<double(double)>& px,
                        const std::function<double(double)>& py) {
  std::string out;
  for (const Point& p : s) out += strf("%s%.1f,%.1f", out.empty() ? "" : " ", px(p.x), py(p.y));
  return out;
}

std::string render_svg(const Curves& c, const std::string& title) {
  constexpr double W = 820, H = 500, L = 78, R = 24, T = 48, B = 62;
  const double pw = W - L - R, ph = H - T - B;

  double xmax = 0, ylo = INFINITY, yhi = 0;
  for (const auto* s : {&c.train, &c.val})
    for (const Point& p : *s) {
      xmax = std::max(xmax, p.x);
      ylo = std::min(ylo, p.y);
      yhi = std::max(yhi, p.y);
    }
  // A single point or a single token count still gets a visible, non-degenerate range.
  if (xmax <= 0) xmax = 1;
  // The axis ends just past the data rather than at the next tick, which could waste a third of it.
  const double xend = xmax * 1.03;
  const double xstep = std::max(1.0, nice_step(xmax, 6));  // whole tokens
  ylo /= 1.08;
  yhi *= 1.08;
  if (yhi / ylo < 1.5) {  // a flat curve: widen around it so it does not look like a cliff
    const double mid = std::sqrt(ylo * yhi);
    ylo = mid / 1.22;
    yhi = mid * 1.22;
  }
  const double lylo = std::log(ylo), lyhi = std::log(yhi);
  auto px = [&](double x) { return L + x / xend * pw; };
  auto py = [&](double y) { return T + (lyhi - std::log(y)) / (lyhi - lylo) * ph; };

  std::string svg = strf(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n",
      W, H, W, H);
  svg += strf("<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", W, H);
  svg += strf("<text x=\"%.1f\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">%s</text>\n",
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
                   format_ppl(v).c_str());
  }
  const int nx = static_cast<int>(std::floor(xend / xstep + 1e-9));
  for (int i = 0; i <= nx; ++i) {
    const double x = px(i * xstep);
    if (i > 0) grid += line(x, T, x, T + ph);
    marks += line(x, T + ph, x, T + ph + 4);
    labels += strf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x, T + ph + 18,
                   format_tokens(i * xstep).c_str());
  }
  svg += "<g stroke=\"#e3e3e3\">\n" + grid + "</g>\n<g stroke=\"#333\">\n" + marks;
  // A path, not a polyline: polylines are the data series (tests count them).
  svg += strf("<path fill=\"none\" d=\"M%.1f,%.1f V%.1f H%.1f\"/>\n</g>\n", L, T, T + ph, L + pw);
  svg += "<g fill=\"#333\">\n" + labels + "</g>\n";
  svg += strf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">training tokens</text>\n", L + pw / 2,
              H - 18);
  svg += strf("<text transform=\"translate(20,%.1f) rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">"
              "perplexity (log scale)</text>\n",
              T + ph / 2);

  const char* kTrain = "#1f77b4";
  const char* kVal = "#d62728";
  if (!c.train.empty()) {
    svg += strf("<polyline class=\"train\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                "stroke-linejoin=\"round\" points=\"%s\"/>\n",
                kTrain, points_attr(c.train, px, py).c_str());
    if (c.train.size() == 1)  // a one-point polyline draws nothing
      svg += strf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", px(c.train[0].x), py(c.train[0].y), kTrain);
  }
  if (!c.val.empty()) {
    svg += strf("<polyline class=\"val\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", kVal,
                points_attr(c.val, px, py).c_str());
    svg += strf("<g fill=\"white\" stroke=\"%s\" stroke-width=\"2\">\n", kVal);
    for (const Point& p : c.val) svg += strf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/>\n", px(p.x), py(p.y));
    svg += "</g>\n";
  }

  // The legend goes in whichever top corner the curves leave emptier.
  struct Entry {
    const char* color;
    const char* label;
    bool marker;
  };
  std::vector<Entry> entries;
  if (!c.train.empty()) entries.push_back({kTrain, "training (per interval)", false});
  if (!c.val.empty()) entries.push_back({kVal, "validation (per epoch)", true});
  const double lw = 190, lh = 10 + 20 * static_cast<double>(entries.size());
  auto crowd = [&](double x0) {
    int n = 0;
    for (const auto* s : {&c.train, &c.val})
      for (const Point& p : *s)
        if (px(p.x) >= x0 - 10 && px(p.x) <= x0 + lw + 10 && py(p.y) <= T + 10 + lh + 10) ++n;
    return n;
  };
  const double right_x = L + pw - lw - 10, left_x = L + 10;
  const double lx = crowd(right_x) <= crowd(left_x) ? right_x : left_x, ly = T + 10;
  svg += strf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"white\" fill-opacity=\"0.9\" "
              "stroke=\"#bbb\"/>\n",
              lx, ly, lw, lh);
  for (size_t i = 0; i < entries.size(); ++i) {
    const double y = ly + 15 + 20 * static_cast<double>(i);
    svg += strf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n", lx + 10,
                y, lx + 40, y, entries[i].color);
    if (entries[i].marker)
      svg += strf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"white\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                  lx + 25, y, entries[i].color);
    svg += strf("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx + 48, y + 4, entries[i].label);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace

void plot_learning_curves(const std::string& metrics_path, const std::string& svg_path, const std::string& title) {
  const Curves curves = read_metrics(metrics_path);
  std::string shown = title;
  if (shown.empty()) {
    const size_t slash = metrics_path.find_last_of('/');
    shown = "Learning curves: " + (slash == std::string::npos ? metrics_path : metrics_path.substr(slash + 1));
  }
  const std::string svg = render_svg(curves, shown);

  // Atomic, so a viewer never sees half a file and a failure leaves any earlier plot intact.
  write_file_atomically(svg_path, svg);
}

}  // namespace mg
