// Every number of a results.jsonl line that the tables and the figure read, checked against its
// range (reproduce/reproduce_results.h: check_stage_record). The file is written whole by `reproduce`,
// so a number out of range means it was edited or damaged: an error naming the line and the
// field, rather than a table showing -5.00 or a figure with NaN coordinates.
#include <cmath>
#include <stdexcept>

#include "io/strf.h"
#include "io/svg_plot.h"
#include "reproduce/reproduce_results.h"

namespace mg {

namespace {

struct Range {
  double lo, hi;
  const char* what;
  bool whole = false;  // a count
};

// A perplexity is exp of a loss >= 0, and beyond 1e300 a figure cannot draw it.
const Range kPerplexity{1, kPlotMax, "a perplexity in [1, 1e300]"};
const Range kSeconds{0, kPlotMax, "a time in seconds >= 0"};
const Range kCount{0, 9e15, "a whole number >= 0", true};
const Range kPositiveCount{1, 9e15, "a whole number >= 1", true};
const Range kNonNegative{0, kPlotMax, "a number >= 0"};

// The ranges of the numbers a line may hold; a field that is absent or null ("not measured":
// JsonLine writes NaN as null) is shown as "—", never checked.
struct Field {
  const char* key;
  Range range;
};
const Field kFields[] = {
    {"valid_ppl", kPerplexity},
    {"test_ppl", kPerplexity},
    {"model_valid_ppl", kPerplexity},
    {"model_test_ppl", kPerplexity},
    {"seed", kPositiveCount},
    {"threads", kPositiveCount},
    {"epochs", kCount},
    {"steps", kCount},
    {"contexts", kCount},
    {"rank", kCount},
    {"bound", kCount},
    {"window", kCount},
    {"wall_s", kSeconds},
    {"cpu_s", kSeconds},
    {"train_s", kSeconds},
    {"lr", kNonNegative},
    {"lamb", kNonNegative},
    {"theta", kNonNegative},
    {"lambda", {0, 1, "a weight in [0, 1]"}},
    {"sigma_max", kNonNegative},
    {"threshold", kNonNegative},
};

bool in_range(double x, const Range& r) {
  return x >= r.lo && x <= r.hi && (!r.whole || x == std::floor(x));
}

std::string shown(const JsonValue& v) {
  return v.kind == JsonValue::Number ? strf("%g", v.number) : json_kind_name(v.kind);
}

}  // namespace

void check_stage_record(const StageRecord& r, const std::string& where) {
  const auto fail = [&](const std::string& key, const std::string& is, const char* expected) {
    throw std::runtime_error(where + ": field \"" + key + "\" is " + is + ", expected " + expected +
                             " (the file is written whole; was it edited?)");
  };
  for (const Field& f : kFields) {
    const JsonValue* v = r.json.find(f.key);
    if (!v || v->kind == JsonValue::Null) continue;
    if (v->kind != JsonValue::Number || !in_range(v->number, f.range))
      fail(f.key, shown(*v), f.range.what);
  }
  // The training curve: one validation perplexity and one elapsed time per epoch, the times
  // increasing, as many of each as "epochs" says.
  const char* kCurves[] = {"epoch_valid_ppl", "epoch_elapsed_s"};
  size_t lengths[2] = {0, 0};
  for (int c = 0; c < 2; ++c) {
    const JsonValue* v = r.json.find(kCurves[c]);
    if (!v) continue;
    if (v->kind != JsonValue::Array) fail(kCurves[c], shown(*v), "an array of numbers");
    lengths[c] = v->items.size();
    double before = 0;
    for (size_t i = 0; i < v->items.size(); ++i) {
      const JsonValue& x = v->items[i];
      const std::string key = strf("%s[%zu]", kCurves[c], i);
      if (x.kind != JsonValue::Number) fail(key, shown(x), c == 0 ? kPerplexity.what : "a time");
      if (c == 0 && !in_range(x.number, kPerplexity)) fail(key, shown(x), kPerplexity.what);
      if (c == 1 && !((i == 0 ? x.number >= 0 : x.number > before) && x.number <= kPlotMax))
        fail(key, shown(x),
             i == 0 ? "a time in seconds >= 0"
                    : "a time after the epoch before's (epochs in order)");
      before = x.number;
    }
  }
  const bool both = r.json.find(kCurves[0]) && r.json.find(kCurves[1]);
  if (both && lengths[0] != lengths[1])
    fail(kCurves[1], strf("%zu long", lengths[1]),
         strf("as long as epoch_valid_ppl (%zu: one of each per epoch)", lengths[0]).c_str());
  const double epochs = r.number("epochs");
  if (both && std::isfinite(epochs) && epochs != static_cast<double>(lengths[0]))
    fail("epochs", strf("%g", epochs),
         strf("the number of epochs in epoch_valid_ppl (%zu)", lengths[0]).c_str());
}

}  // namespace mg
