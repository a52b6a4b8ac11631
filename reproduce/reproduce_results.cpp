#include "reproduce/reproduce_results.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>

#include "io/atomic_file.h"
#include "io/read_file.h"
#include "io/strf.h"
#include "io/svg_plot.h"

namespace mg {

namespace {

std::string number_text(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

JsonLine& JsonLine::add(const std::string& key, const std::string& value) {
  body_ += (body_.empty() ? "" : ",") + json_string(key) + ":" + json_string(value);
  return *this;
}
JsonLine& JsonLine::add(const std::string& key, const char* value) {
  return add(key, std::string(value));
}
JsonLine& JsonLine::add(const std::string& key, double value) {
  body_ += (body_.empty() ? "" : ",") + json_string(key) + ":" + number_text(value);
  return *this;
}
JsonLine& JsonLine::add(const std::string& key, int64_t value) {
  body_ += (body_.empty() ? "" : ",") + json_string(key) + ":" + std::to_string(value);
  return *this;
}
JsonLine& JsonLine::add(const std::string& key, const std::vector<double>& values) {
  std::string list;
  for (double v : values) list += (list.empty() ? "" : ",") + number_text(v);
  body_ += (body_.empty() ? "" : ",") + json_string(key) + ":[" + list + "]";
  return *this;
}
std::string JsonLine::str() const {
  return "{" + body_ + "}";
}

std::string StageRecord::text(const std::string& key) const {
  const JsonValue* v = json.find(key);
  return v && v->kind == JsonValue::String ? v->str : "";
}
double StageRecord::number(const std::string& key) const {
  const JsonValue* v = json.find(key);
  return v && v->kind == JsonValue::Number ? v->number : kNaN;
}
std::vector<double> StageRecord::numbers(const std::string& key) const {
  std::vector<double> out;
  const JsonValue* v = json.find(key);
  if (v && v->kind == JsonValue::Array)
    for (const JsonValue& x : v->items)
      out.push_back(x.kind == JsonValue::Number ? x.number : kNaN);
  return out;
}

std::vector<StageRecord> read_results(const std::string& path) {
  std::vector<StageRecord> records;
  if (!std::filesystem::exists(path)) return records;
  std::istringstream lines(read_file(path, "results file"));
  int64_t n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    if (line.empty()) continue;
    StageRecord r;
    try {
      r.json = parse_json(line);
    } catch (const JsonError& e) {
      throw std::runtime_error("results file " + path + ", line " + std::to_string(n) + ": " +
                               e.what() + " (the file is written whole; was it edited?)");
    }
    const std::string where = "results file " + path + ", line " + std::to_string(n);
    for (const char* key : {"plan", "run", "head", "stage"})
      if (r.json.kind != JsonValue::Object || r.text(key).empty())
        throw std::runtime_error(where + ": not a stage record (no \"" + key + "\")");
    check_stage_record(r, where);
    if (find_record(records, r.text("run"), r.text("stage")))
      throw std::runtime_error(where + ": a second line of " + r.text("run") + "'s '" +
                               r.text("stage") +
                               "' stage (the file is written whole; was it "
                               "edited, or two files concatenated?): keep one of them");
    records.push_back(std::move(r));
  }
  return records;
}

void append_result(const std::string& path, const std::string& line) {
  std::string text = std::filesystem::exists(path) ? read_file(path, "results file") : "";
  if (!text.empty() && text.back() != '\n') text += '\n';
  write_file_atomically(path, text + line + "\n");
}

const StageRecord* find_record(const std::vector<StageRecord>& records, const std::string& run,
                               const std::string& stage) {
  for (const StageRecord& r : records)
    if (r.text("run") == run && r.text("stage") == stage) return &r;
  return nullptr;
}

namespace {

// The plan's heads in first-appearance order, with their runs' names.
std::vector<std::pair<std::string, std::vector<std::string>>> heads_of(const ReproducePlan& plan) {
  std::vector<std::pair<std::string, std::vector<std::string>>> heads;
  for (const PlanRun& r : plan.runs) {
    auto it =
        std::find_if(heads.begin(), heads.end(), [&](const auto& h) { return h.first == r.head; });
    if (it == heads.end()) heads.push_back({r.head, {}}), it = heads.end() - 1;
    it->second.push_back(r.name());
  }
  return heads;
}

// "mean ± sd (n=N)" of the finite values; "—" when there are none; no ± for one value.
std::string summary(const std::vector<double>& values, int digits = 2) {
  std::vector<double> v;
  for (double x : values)
    if (std::isfinite(x)) v.push_back(x);
  if (v.empty()) return "—";
  double mean = 0;
  for (double x : v) mean += x;
  mean /= v.size();
  if (v.size() == 1) return strf("%.*f", digits, mean);
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return strf("%.*f ± %.*f (n=%zu)", digits, mean, digits, std::sqrt(ss / (v.size() - 1)),
              v.size());
}

double field(const std::vector<StageRecord>& records, const std::string& run,
             const std::string& stage, const std::string& key) {
  const StageRecord* r = find_record(records, run, stage);
  return r ? r->number(key) : kNaN;
}

// A training record from `reproduce --device cuda` (records older than the field ran on the CPU).
bool on_gpu(const StageRecord* r) {
  return r && !r->text("device").empty() && r->text("device") != "cpu";
}

// Which of a run's training stages ran on a GPU: "" (none), "GPU" (both), "GPU train" or
// "GPU finetune".
std::string gpu_stages(const std::vector<StageRecord>& records, const std::string& run) {
  const bool train = on_gpu(find_record(records, run, "train")),
             finetune = on_gpu(find_record(records, run, "finetune"));
  return train && finetune ? "GPU" : train ? "GPU train" : finetune ? "GPU finetune" : "";
}

// The best validation perplexity a run had reached after `minutes` of training (NaN when its
// first epoch ended later, or it has no train record, or it trained on a GPU: minutes on a GPU
// are not minutes on a CPU).
double best_by(const std::vector<StageRecord>& records, const std::string& run, double minutes) {
  const StageRecord* r = find_record(records, run, "train");
  if (!r || on_gpu(r)) return kNaN;
  const std::vector<double> ppl = r->numbers("epoch_valid_ppl"), t = r->numbers("epoch_elapsed_s");
  double best = kNaN;
  for (size_t i = 0; i < std::min(ppl.size(), t.size()); ++i)
    if (t[i] <= minutes * 60 && !(ppl[i] >= best)) best = ppl[i];
  return best;
}

// The share of its cores a stage's process had: CPU seconds over wall seconds times threads (NaN
// for a line written before cpu_s was recorded, or a stage that ran on a GPU). A run alone keeps
// it near 1, since OpenMP's waiting threads spin (reproduce/provenance.h).
double core_share(const StageRecord* r) {
  if (!r || on_gpu(r)) return kNaN;
  const double cpu = r->number("cpu_s"), wall = r->number("wall_s"), threads = r->number("threads");
  return cpu >= 0 && wall > 0 && threads >= 1 ? cpu / (wall * threads) : kNaN;
}

// Below this share a training stage did not have its cores to itself: alone, the day plan's
// MoS and softmax kept 0.98 on 2 cores; beside one busy loop MoS kept 0.62 and took 3.3 times as
// long (docs/reproduction.md has the commands).
constexpr double kSharedCores = 0.9;

std::string minutes_text(double seconds) {
  const double minutes = seconds / 60;
  if (minutes < 60) return strf("%.1f min", minutes);
  const long whole = std::lround(minutes);
  return strf("%ld h %02ld min", whole / 60, whole % 60);
}

// What the plan cost so far, for "does it fit an afternoon?": every finished stage's wall time,
// summed per machine (runs carried between machines have one sum for each), with the runs one
// after another as `reproduce` runs them. A GPU-trained stage counts on its GPU's line.
std::string wall_time_note(const std::vector<StageRecord>& records, const ReproducePlan& plan) {
  std::vector<std::pair<std::string, std::pair<double, int>>> machines;  // name: seconds, stages
  int complete = 0;
  for (const PlanRun& pr : plan.runs) {
    int stages = 0;
    for (const std::string& stage : plan.stages) {
      const StageRecord* r = find_record(records, pr.name(), stage);
      if (!r || !(r->number("wall_s") >= 0)) continue;
      ++stages;
      const std::string name = on_gpu(r)
                                   ? r->text("device")
                                   : (r->text("cpu").empty() ? "an unnamed CPU" : r->text("cpu")) +
                                         strf(", %.0f threads", r->number("threads"));
      auto at = std::find_if(machines.begin(), machines.end(),
                             [&](const auto& m) { return m.first == name; });
      if (at == machines.end()) at = machines.insert(machines.end(), {name, {0.0, 0}});
      at->second.first += r->number("wall_s"), at->second.second += 1;
    }
    complete += stages == static_cast<int>(plan.stages.size());
  }
  if (machines.empty()) return "";
  std::string note = strf(
      "\nWall time of the finished stages, summed (the runs one after another, as `reproduce` "
      "runs them; %d of %zu runs have every stage): ",
      complete, plan.runs.size());
  for (size_t i = 0; i < machines.size(); ++i)
    note +=
        (i ? "; " : "") + minutes_text(machines[i].second.first) + " on " + machines[i].first +
        strf(" (%d stage%s)", machines[i].second.second, machines[i].second.second == 1 ? "" : "s");
  return note + ".\n";
}

}  // namespace

std::string results_markdown(const std::vector<StageRecord>& records, const ReproducePlan& plan) {
  const auto heads = heads_of(plan);
  std::string md = "## Plan `" + plan.name + "`: " + plan.description + "\n\n";
  for (const StageRecord& r : records)  // one corpus per folder (check_results_corpus)
    if (!r.text("corpus").empty()) {
      md += "Corpus: " + r.text("corpus") + ".\n\n";
      break;
    }
  md +=
      "Perplexities: mean ± standard deviation over the seeds (n = how many). Valid at B=10, test "
      "at B=1.\n\n";
  md +=
      "| head | valid | test | finetuned valid | finetuned test | dyneval valid | dyneval test "
      "| pointer valid | pointer test | rank [bound d+2] "
      "|\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& [head, runs] : heads) {
    auto col = [&, &runs = runs](const std::string& stage, const std::string& key, int digits = 2) {
      std::vector<double> v;
      for (const std::string& run : runs) v.push_back(field(records, run, stage, key));
      return summary(v, digits);
    };
    const double bound = [&, &runs = runs] {
      for (const std::string& run : runs)
        if (std::isfinite(field(records, run, "rank", "bound")))
          return field(records, run, "rank", "bound");
      return kNaN;
    }();
    md += "| " + head + " | " + col("train", "valid_ppl") + " | " + col("train", "test_ppl") +
          " | " + col("finetune", "valid_ppl") + " | " + col("finetune", "test_ppl") + " | " +
          col("dyneval", "valid_ppl") + " | " + col("dyneval", "test_ppl") + " | " +
          col("pointer", "valid_ppl") + " | " + col("pointer", "test_ppl") + " | " +
          col("rank", "rank", 0) + (std::isfinite(bound) ? strf(" [%.0f]", bound) : "") + " |\n";
  }
  std::string on_gpus;
  for (const PlanRun& pr : plan.runs)
    if (const std::string gpu = gpu_stages(records, pr.name()); !gpu.empty())
      on_gpus += (on_gpus.empty() ? "" : ", ") + pr.name() + " (" + gpu + ")";
  if (!on_gpus.empty())
    md += "\nTrained on a GPU (fp32, the same recipe to float rounding): " + on_gpus +
          "; every other stage on a CPU.\n";
  md +=
      "\nAt equal wall-clock: the best validation perplexity reached within each budget of "
      "training time on a CPU (runs trained on a GPU are left out).\n\n| head | 15 min | 60 min | "
      "180 min |\n|---|---|---|---|\n";
  for (const auto& [head, runs] : heads) {
    md += "| " + head;
    for (double minutes : {15.0, 60.0, 180.0}) {
      std::vector<double> v;
      for (const std::string& run : runs) v.push_back(best_by(records, run, minutes));
      md += " | " + summary(v);
    }
    md += " |\n";
  }
  std::string shared;
  for (const PlanRun& pr : plan.runs)
    if (const double share = core_share(find_record(records, pr.name(), "train"));
        share < kSharedCores)
      shared += (shared.empty() ? "" : ", ") + pr.name() + strf(" (%.0f%%)", 100 * share);
  if (!shared.empty())
    md +=
        "\nTrained with under 90% of their threads' CPU time (another job on the cores, or more "
        "threads than cores), so their minutes may overstate what the run needs (the training "
        "stage's CPU time over its threads' wall time, its last process's when it was resumed; a "
        "run alone keeps ~98%): " +
        shared + ".\n";
  md +=
      "\nEvery run (— : not run yet):\n\n| run | epochs | train min | all stages min | valid | "
      "test "
      "| finetuned test | dyneval test | pointer test (θ, λ) | rank | precision | commit |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const PlanRun& pr : plan.runs) {
    const std::string run = pr.name();
    const StageRecord* train = find_record(records, run, "train");
    const StageRecord* ptr = find_record(records, run, "pointer");
    const std::string gpu = gpu_stages(records, run);
    auto num = [&](const std::string& stage, const std::string& key, int digits = 2) {
      return summary({field(records, run, stage, key)}, digits);
    };
    double all_stages = 0;  // of the finished stages
    for (const std::string& stage : plan.stages)
      if (const double w = field(records, run, stage, "wall_s"); w >= 0) all_stages += w;
    md += "| " + run + " | " + num("train", "epochs", 0) + " | " +
          (train ? strf("%.1f", train->number("train_s") / 60) : "—") + " | " +
          (all_stages > 0 ? strf("%.1f", all_stages / 60) : "—") + " | " +
          num("train", "valid_ppl") + " | " + num("train", "test_ppl") + " | " +
          num("finetune", "test_ppl") + " | " + num("dyneval", "test_ppl") + " | " +
          num("pointer", "test_ppl") +
          (ptr ? strf(" (%.3g, %.3g%s)", ptr->number("theta"), ptr->number("lambda"),
                      ptr->text("grid_edge").empty() ? "" : ", grid edge")
               : "") +
          " | " + num("rank", "rank", 0) + " | " +
          (train ? train->text("precision") + (gpu.empty() ? "" : " (" + gpu + ")") : "—") + " | " +
          (train ? train->text("commit") : "—") + " |\n";
  }
  return md + wall_time_note(records, plan);
}

std::string results_figure_svg(const std::vector<StageRecord>& records, const ReproducePlan& plan) {
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  LogPlot p;
  p.title =
      "plan " + plan.name + ": validation perplexity per epoch (mean of seeds, band: min-max)";
  p.x_label = "epoch", p.y_label = "valid ppl";
  size_t c = 0;
  for (const auto& [head, runs] : heads_of(plan)) {
    std::vector<std::vector<double>> curves;
    for (const std::string& run : runs)
      if (const StageRecord* r = find_record(records, run, "train"))
        curves.push_back(r->numbers("epoch_valid_ppl"));
    const std::string color = colors[c++ % 6];
    if (curves.empty()) continue;
    size_t epochs = 0;
    for (const auto& cv : curves) epochs = std::max(epochs, cv.size());
    PlotSeries mean{head,
                    head + strf(" (%zu seed%s)", curves.size(), curves.size() > 1 ? "s" : ""),
                    color,
                    true,
                    {}};
    PlotSeries low{head + "-min", "", color, false, {}}, high{head + "-max", "", color, false, {}};
    for (size_t e = 0; e < epochs; ++e) {
      double sum = 0, lo = INFINITY, hi = -INFINITY;
      size_t n = 0;
      for (const auto& cv : curves)
        if (e < cv.size() && std::isfinite(cv[e]))
          sum += cv[e], ++n, lo = std::min(lo, cv[e]), hi = std::max(hi, cv[e]);
      if (n == 0) continue;
      const double x = static_cast<double>(e + 1);
      mean.points.push_back({x, sum / n});
      if (curves.size() > 1) low.points.push_back({x, lo}), high.points.push_back({x, hi});
    }
    p.series.push_back(mean);
    if (!low.points.empty()) p.series.push_back(low), p.series.push_back(high);
  }
  // One seed whose first epoch blew up (mos-k1-s2: 89,027) would stretch the log axis over three
  // decades: values above ten times the lowest are drawn at that line.
  p.clip_above_times_lowest = 10;
  return render_log_plot_svg(p);
}

}  // namespace mg
