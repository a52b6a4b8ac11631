#include "lm/learning_curves.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "io/atomic_file.h"
#include "io/json.h"
#include "io/read_file.h"
#include "io/svg_plot.h"

namespace mg {

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

// The field as a number: a required one must be present; null (a non-finite value) reads as NaN.
double number_field(const JsonValue& obj, const char* key, const LineRef& where) {
  const JsonValue* v = obj.find(key);
  if (!v) where.fail(std::string("no \"") + key + "\" field");
  if (v->kind == JsonValue::Null) return NAN;
  if (v->kind != JsonValue::Number) where.fail(std::string("\"") + key + "\" is not a number");
  return v->number;
}

// Perplexity from the ppl field, or exp(loss) when only the loss was written.
double ppl_field(const JsonValue& obj, const char* ppl_key, const char* loss_key,
                 const LineRef& where) {
  if (obj.find(ppl_key)) return number_field(obj, ppl_key, where);
  return std::exp(number_field(obj, loss_key, where));
}

// Adds a point, first dropping any with as many tokens or more: after a resume the run repeats
// the stretch since its checkpoint, and the later measurements are the ones that count.
void add_point(std::vector<PlotPoint>& series, double x, double y) {
  if (!std::isfinite(x) || !std::isfinite(y) || y <= 0) return;  // diverged: nothing to draw
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
    const double tokens = number_field(obj, "tokens", where);
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
          add_point(c.stats[key], tokens, number_field(obj, key.c_str(), where));
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
// rest of its key. Returns false (and writes nothing) when there is none.
bool plot_stats(const LearningCurves& c, const std::vector<std::string>& prefixes,
                const std::string& title, const std::string& y_label, const std::string& path) {
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
  if (plot.series.empty()) return false;
  write_file_atomically(path, render_log_plot_svg(plot));
  return true;
}

}  // namespace

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
  // Atomic, so a viewer never sees half a file and a failure leaves any earlier plot intact.
  write_file_atomically(svg_path, render_log_plot_svg(plot));
  std::vector<std::string> written = {svg_path};
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
  if (plot_stats(curves, {"grad_norm."}, "Gradient norm per parameter, before clipping",
                 "‖∇‖ (log scale)", dir + "health_grad_norm.svg"))
    written.push_back(dir + "health_grad_norm.svg");
  if (plot_stats(curves, {"update_ratio."}, "Update size against weight size (~1e-3 is healthy)",
                 "‖Δw‖ / ‖w‖ (log scale)", dir + "health_update_ratio.svg"))
    written.push_back(dir + "health_update_ratio.svg");
  if (plot_stats(curves, {"act_std.", "sat_"},
                 "LSTM layers: output spread (act_std) and saturated gates (sat_i/f/g/o)",
                 "std / fraction saturated (log scale)", dir + "health_layers.svg"))
    written.push_back(dir + "health_layers.svg");
  return written;
}

}  // namespace mg
