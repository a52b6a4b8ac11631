// What `mosgrad reproduce` may replace or remove in its --out DIR (reproduce/reproduce_files.h).
#include "reproduce/reproduce_files.h"

#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "io/atomic_file.h"
#include "io/json.h"
#include "io/read_file.h"
#include "io/strf.h"
#include "lm/learning_curves.h"

namespace mg {

namespace fs = std::filesystem;

namespace {

std::string marker_line(const std::string& plan, const PlanRun& run) {
  return "plan " + plan + ", run " + run.name();
}

// Up to three of a directory's entries, for an error message: "best.ckpt, metrics.jsonl, ...".
std::string some_entries(const std::string& dir) {
  std::string names;
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (n++ == 3) return names + ", ...";
    names += (names.empty() ? "" : ", ") + e.path().filename().string();
  }
  return names;
}

// Nothing in `dir` but temporaries a killed save left (reproduce killed before the rename of its
// first file there, the run marker): a folder reproduce had only begun to make, still empty.
bool holds_nothing_but_dead_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (!is_dead_temporary(e.path().string())) return false;
  return !ec;
}

}  // namespace

void mark_run_dir(const std::string& dir, const std::string& plan, const PlanRun& run) {
  fs::create_directories(dir);
  write_file_atomically(dir + "/" + kRunMarker, marker_line(plan, run) + "\n");
}

bool run_dir_made_here(const std::string& dir, const std::string& plan, const PlanRun& run) {
  std::error_code ec;
  if (fs::is_symlink(dir, ec) || !fs::is_directory(dir, ec)) return false;
  const std::string marker = dir + "/" + kRunMarker;
  if (fs::is_symlink(marker, ec)) return false;
  if (!fs::exists(marker, ec)) return fs::is_regular_file(fs::symlink_status(dir + "/precision"));
  std::string line = read_file(marker, "run marker");
  line.erase(line.find_last_not_of(" \n\r\t") + 1);
  return line == marker_line(plan, run);
}

void check_run_dir_is_ours(const std::string& out, const std::string& plan, const PlanRun& run,
                           const std::vector<StageRecord>& records) {
  const std::string dir = out + "/runs/" + run.name();
  std::error_code ec;
  const std::string away =
      ": move it away (or choose another --out) and run the same command again";
  // The runs' folder itself: a link there would take every run out of --out.
  if (fs::is_symlink(fs::symlink_status(out + "/runs", ec)))
    throw std::runtime_error(
        out + "/runs is a symlink, and reproduce writes its runs only inside " + out + away);
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return;
  if (fs::is_symlink(st) || !fs::is_directory(st))
    throw std::runtime_error(dir + " is " + (fs::is_symlink(st) ? "a symlink" : "not a directory") +
                             ", and reproduce writes run " + run.name() +
                             " only into a directory it makes" + away);
  if (holds_nothing_but_dead_temporaries(dir) || run_dir_made_here(dir, plan, run)) return;
  for (const StageRecord& r : records)
    if (r.text("run") == run.name()) return;  // reproduce ran its stages here
  const std::string marker = dir + "/" + kRunMarker;
  if (fs::exists(fs::symlink_status(marker)) && !fs::is_symlink(marker)) {
    std::string line = read_file(marker, "run marker");
    line.erase(line.find_last_not_of(" \n\r\t") + 1);
    throw std::runtime_error(dir + " was made by reproduce for " + line + " (" + marker +
                             "), not for " + marker_line(plan, run) + away);
  }
  throw std::runtime_error(dir + " holds files reproduce did not write (" + some_entries(dir) +
                           "; no " + marker + ", no line of " + run.name() + " in " + out +
                           "/results.jsonl), and running " + run.name() +
                           " there would replace them" + away);
}

void check_report_files(const std::string& out, const std::vector<StageRecord>& records) {
  const std::string md = out + "/results.md", svg = out + "/valid_curves.svg";
  for (const std::string& file : {md, svg}) {
    if (!fs::exists(fs::symlink_status(file))) continue;
    if (records.empty())
      throw std::runtime_error(file + " is there but " + out +
                               "/results.jsonl has no results it could have been drawn from: "
                               "mosgrad redraws no table or figure from nothing; restore "
                               "results.jsonl, or move " +
                               file + " away");
  }
  if (fs::exists(fs::symlink_status(md))) {
    const bool ours = !fs::is_symlink(md) && fs::is_regular_file(md) &&
                      read_file(md, "results table").rfind("## Plan `", 0) == 0;
    if (!ours)
      throw std::runtime_error(md +
                               " is there and is not a table mosgrad wrote (it begins with "
                               "\"## Plan `\"): move it away, then run the same command again");
  }
  require_drawn_by_mosgrad(svg);
}

void clear_stopped_start(const std::string& dir) {
  for (const char* name :
       {"best.ckpt", "train_best.ckpt", "finetune.ckpt", "metrics.jsonl", "finetune_metrics.jsonl",
        "curves.svg", "finetune_curves.svg", "health_grad_norm.svg", "health_update_ratio.svg",
        "health_layers.svg", "finetune_health_grad_norm.svg", "finetune_health_update_ratio.svg",
        "finetune_health_layers.svg", "spectrum.csv"})
    fs::remove(dir + "/" + name);  // a symlink itself, never its target
}

void copy_file_atomically(const std::string& src, const std::string& dst) {
  const std::string bytes = read_file(src, "checkpoint");
  AtomicFileWriter w(dst);
  w.write(bytes.data(), bytes.size());
  w.commit();
}

void epoch_curves(const std::string& metrics, std::vector<double>& ppl, std::vector<double>& t) {
  const std::string text = read_file(metrics, "metrics file");
  size_t line_no = 0;
  double last_epoch = 0, last_t = 0;
  for (size_t begin = 0; begin < text.size();) {
    const size_t nl = text.find('\n', begin);
    const bool unterminated = nl == std::string::npos;
    const std::string line = text.substr(begin, unterminated ? std::string::npos : nl - begin);
    begin = unterminated ? text.size() : nl + 1;
    ++line_no;
    const auto fail = [&](const std::string& what) {
      throw std::runtime_error(metrics + ":" + std::to_string(line_no) + ": " + what);
    };
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    JsonValue v;
    try {
      v = parse_json(line);
    } catch (const std::exception& e) {
      if (unterminated) continue;
      fail(e.what());
    }
    const JsonValue *kind = v.find("kind"), *at_stop = v.find("at_stop");
    if (!kind || kind->kind != JsonValue::String || kind->str != "epoch" ||
        (at_stop && at_stop->kind == JsonValue::Bool && at_stop->boolean))
      continue;
    const JsonValue *loss = v.find("val_loss"), *elapsed = v.find("elapsed_s"),
                    *epoch = v.find("epoch");
    if (!loss || loss->kind != JsonValue::Number || !elapsed || elapsed->kind != JsonValue::Number)
      fail("an epoch record without the numbers val_loss and elapsed_s");
    // Training stops as diverged long before 690 nats (lm/run_checks.h), and exp(690) is finite.
    if (!(loss->number >= -1e-6 && loss->number <= 690))  // >= 0 within rounding
      fail(strf("\"val_loss\" is %g, expected a loss in [0, 690] nats per word", loss->number));
    if (!(elapsed->number >= last_t && std::isfinite(elapsed->number)))
      fail(strf("\"elapsed_s\" is %g, expected a finite time >= the epoch before's (%g s)",
                elapsed->number, last_t));
    if (epoch) {  // --resume drops the records after its checkpoint: epochs never repeat
      if (epoch->kind != JsonValue::Number || !(epoch->number > last_epoch) ||
          epoch->number != std::floor(epoch->number))
        fail("\"epoch\" is " +
             (epoch->kind == JsonValue::Number ? strf("%g", epoch->number)
                                               : json_kind_name(epoch->kind)) +
             strf(", expected a whole number after the epoch before (%g)", last_epoch));
      last_epoch = epoch->number;
    }
    last_t = elapsed->number;
    ppl.push_back(std::exp(loss->number));
    t.push_back(elapsed->number);
  }
}

}  // namespace mg
