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

void plot_learning_curves(const std::string& metrics_path, const std::string& svg_path,
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
}

}  // namespace mg
