#include "lm/learning_curves.h"

#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "io/atomic_file.h"
#include "io/json.h"
#include "io/read_file.h"
#include "io/strf.h"
#include "io/svg_plot.h"

namespace mg {

namespace fs = std::filesystem;

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

// What a field may hold: a number in [lo, hi] (a whole one when `whole`), or null where
// `null_ok` (the writer's NaN and infinity: a diverged measurement, drawn as nothing).
struct Range {
  double lo, hi;
  const char* what;  // for the error: "a perplexity", ...
  bool null_ok = true, whole = false;
};
// A perplexity is exp(loss) and a loss is >= 0 (within rounding); training stops as diverged at
// max(20, 4 ln V) nats per word, far below 690 (exp(690) < kPlotMax, so every value draws).
const Range kPerplexity{1 - 1e-6, kPlotMax, "a perplexity in [1, 1e300]"};
const Range kLoss{-1e-6, 690, "a loss in [0, 690] nats per word"};
const Range kTokens{0, 9e15, "a token count (a whole number >= 0)", false, true};
// The writer's "epoch" and "step" are counts too; the plot does not draw them, but a line where one
// is not a count was not written by mosgrad, and is refused like any other edited number.
const Range kCount{0, 9e15, "a whole number >= 0", false, true};

// The field as a number inside its range; NaN for null. An absent required field, another kind of
// value or a number outside the range is an error naming the line and the field.
double number_field(const JsonValue& obj, const std::string& key, const Range& range,
                    const LineRef& where) {
  const JsonValue* v = obj.find(key);
  if (!v) where.fail("no \"" + key + "\" field");
  if (v->kind == JsonValue::Null && range.null_ok) return NAN;
  if (v->kind != JsonValue::Number)
    where.fail("\"" + key + "\" is " + json_kind_name(v->kind) + ", expected " + range.what);
  const double x = v->number;
  if (!(x >= range.lo && x <= range.hi) || (range.whole && x != std::floor(x)))
    where.fail(strf("\"%s\" is %g, expected %s", key.c_str(), x, range.what));
  return x;
}

// Perplexity from the ppl field, or exp(loss) when only the loss was written. When both are there
// they must agree: to 1% of (1 + loss) in log space, loose enough for a file typed with rounded
// numbers (ppl 148 for loss 5), tight enough to catch a perplexity that is not its loss's at all.
double ppl_field(const JsonValue& obj, const char* ppl_key, const char* loss_key,
                 const LineRef& where) {
  if (!obj.find(ppl_key)) return std::exp(number_field(obj, loss_key, kLoss, where));
  const double loss = obj.find(loss_key) ? number_field(obj, loss_key, kLoss, where) : NAN;
  const double ppl = number_field(obj, ppl_key, kPerplexity, where);
  if (std::isfinite(ppl) && std::isfinite(loss) &&
      !(std::fabs(std::log(ppl) - loss) <= 0.01 * (1 + std::fabs(loss))))
    where.fail(strf("\"%s\" is %g but \"%s\" is %g, whose exp is %g: one of them was edited",
                    ppl_key, ppl, loss_key, loss, std::exp(loss)));
  return ppl;
}

// The range of a --log-stats number, by its key's prefix (lm/health_stats.h): norms, ratios and
// spreads are >= 0, a saturated fraction is in [0, 1], a mean any finite number.
Range stats_range(const std::string& key) {
  if (key.rfind("sat_", 0) == 0) return {0, 1, "a fraction in [0, 1]"};
  if (key.rfind("grad_norm.", 0) == 0 || key.rfind("update_ratio.", 0) == 0 ||
      key.rfind("act_std.", 0) == 0)
    return {0, kPlotMax, "a number in [0, 1e300]"};
  return {-kPlotMax, kPlotMax, "a number in [-1e300, 1e300]"};
}

// Adds a point, first dropping any with as many tokens or more: after a resume the run repeats
// the stretch since its checkpoint, and the later measurements are the ones that count.
void add_point(std::vector<PlotPoint>& series, double x, double y) {
  if (!std::isfinite(x) || !(y >= kPlotMin)) return;  // diverged (null), or a 0 stat: not drawn
  while (!series.empty() && series.back().x >= x) series.pop_back();
  series.push_back({x, y});
}

}  // namespace

LearningCurves parse_metrics(const std::string& text, const std::string& path) {
  LearningCurves c;
  std::vector<PlotPoint>
      epoch_train;  // the fallback training curve when there are no interval lines
  size_t records = 0;
  LineRef where{path, 0};
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    const bool unterminated = end == text.size();  // every whole line ends with '\n'
    begin = end + 1;
    ++where.line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    JsonValue obj;
    try {
      obj = parse_line(line, where);
    } catch (const std::runtime_error&) {
      // A last line without its newline is what a crash mid-write leaves: not a record, skipped.
      // Anywhere else a line that does not parse is an error (someone edited the file).
      if (unterminated) continue;
      throw;
    }
    const JsonValue* kind = obj.find("kind");
    if (!kind || kind->kind != JsonValue::String) where.fail("no \"kind\" string field");
    ++records;
    const double tokens = number_field(obj, "tokens", kTokens, where);
    for (const char* count : {"epoch", "step"})
      if (obj.find(count)) number_field(obj, count, kCount, where);
    if (kind->str == "interval") {
      add_point(c.train, tokens, ppl_field(obj, "ppl", "loss", where));
    } else if (kind->str == "epoch") {
      add_point(c.val, tokens, ppl_field(obj, "val_ppl", "val_loss", where));
      if (obj.find("train_ppl") || obj.find("train_loss"))
        add_point(epoch_train, tokens, ppl_field(obj, "train_ppl", "train_loss", where));
    } else if (kind->str == "stats") {
      --records;  // health statistics alone are no learning curve
      for (const auto& [key, value] : obj.members)
        if (key != "epoch" && key != "step" && key != "tokens" && key != "kind")
          add_point(c.stats[key], tokens, number_field(obj, key, stats_range(key), where));
    } else {
      where.fail("unknown kind \"" + kind->str +
                 "\" (expected \"interval\", \"epoch\" or \"stats\")");
    }
  }
  if (records == 0) throw std::runtime_error("metrics file '" + path + "' has no metrics lines");
  if (c.train.empty()) c.train = std::move(epoch_train);
  if (c.train.empty() && c.val.empty())
    throw std::runtime_error("metrics file '" + path + "' has no finite perplexity to plot");
  return c;
}

namespace {

// One health plot: every stats series whose key starts with one of `prefixes`, labelled by the
// rest of its key; "" when there is none.
std::string plot_stats(const LearningCurves& c, const std::vector<std::string>& prefixes,
                       const std::string& title, const std::string& y_label) {
  static const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  LogPlot plot;
  plot.title = title, plot.x_label = "training tokens", plot.y_label = y_label;
  for (const std::string& prefix : prefixes)
    for (const auto& [key, points] : c.stats)
      if (key.rfind(prefix, 0) == 0 && !points.empty()) {
        const size_t n = plot.series.size();
        plot.series.push_back({key, key, kColors[n % 10], false, points});
      }
  return plot.series.empty() ? "" : render_log_plot_svg(plot);
}

}  // namespace

void require_drawn_by_mosgrad(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (!fs::exists(st)) return;  // nothing there to lose
  // mosgrad never makes a symlink, so one at a plot's name is never its own, whatever it points to.
  const bool ours = fs::is_regular_file(st) && drawn_by_mosgrad(read_file(path, "plot"));
  if (!ours)
    throw std::runtime_error(
        path + " is there and is not a plot mosgrad drew" +
        (fs::is_symlink(st) ? " (it is a symlink)" : "") +
        ": mosgrad replaces only its own plots; move it away, then draw again");
}

std::vector<std::string> plot_learning_curves(const std::string& metrics_path,
                                              const std::string& svg_path,
                                              const std::string& title) {
  LearningCurves curves = parse_metrics(read_file(metrics_path, "metrics file"), metrics_path);
  LogPlot plot;
  plot.title = title;
  if (plot.title.empty()) {
    const size_t slash = metrics_path.find_last_of('/');
    plot.title = "Learning curves: " +
                 (slash == std::string::npos ? metrics_path : metrics_path.substr(slash + 1));
  }
  plot.x_label = "training tokens";
  plot.y_label = "perplexity (log scale)";
  plot.series.push_back(
      {"train", "training (per interval)", "#1f77b4", false, std::move(curves.train)});
  plot.series.push_back({"val", "validation (per epoch)", "#d62728", true, std::move(curves.val)});
  // Every plot drawn before any is written: a failure leaves every earlier file as it was.
  std::vector<std::pair<std::string, std::string>> plots = {{svg_path, render_log_plot_svg(plot)}};
  // Beside svg_path, named after it: curves.svg -> health_*.svg, finetune_curves.svg ->
  // finetune_health_*.svg, run.svg -> run_health_*.svg, plot -> plot_health_*.svg.
  const size_t slash = svg_path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "" : svg_path.substr(0, slash + 1);
  std::string base = svg_path.substr(dir.size());
  auto ends_with = [&](const std::string& tail) {
    return base.size() >= tail.size() &&
           base.compare(base.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (base == "curves.svg")
    base.clear();
  else if (ends_with("_curves.svg"))
    base.resize(base.size() - 10);  // keeps the '_'
  else
    base = (ends_with(".svg") ? base.substr(0, base.size() - 4) : base) + "_";
  dir += base;
  const auto health = [&](const std::string& name, const std::string& svg) {
    if (!svg.empty()) plots.push_back({dir + name, svg});
  };
  health("health_grad_norm.svg",
         plot_stats(curves, {"grad_norm."}, "Gradient norm per parameter, before clipping",
                    "‖∇‖ (log scale)"));
  health("health_update_ratio.svg",
         plot_stats(curves, {"update_ratio."}, "Update size against weight size (~1e-3 is healthy)",
                    "‖Δw‖ / ‖w‖ (log scale)"));
  health("health_layers.svg",
         plot_stats(curves, {"act_std.", "sat_"},
                    "LSTM layers: output spread (act_std) and saturated gates (sat_i/f/g/o)",
                    "std / fraction saturated (log scale)"));
  for (const auto& [path, svg] : plots) require_drawn_by_mosgrad(path);
  std::vector<std::string> written;
  // Atomic, so a viewer never sees half a file and a failure leaves any earlier plot intact.
  for (const auto& [path, svg] : plots) write_file_atomically(path, svg), written.push_back(path);
  return written;
}

}  // namespace mg
