// What `mosgrad reproduce` (reproduce/reproduce.h, reproduce/reproduce_files.h) refuses to destroy or to draw
// from: a run directory it did not make, a table or figure it did not write, a results line or a
// metrics line out of range, no results at all, and more than one process. All before any work,
// so none of these needs PTB or trains anything.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>

#include "io/file_ops.h"
#include "io/own_output.h"
#include "io/run_lock.h"
#include "lm/corpus.h"
#include "lm/training_stop.h"
#include "reproduce/reproduce.h"
#include "reproduce/reproduce_files.h"
#include "reproduce/reproduce_results.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;
namespace fs = std::filesystem;
using mgtest::error_of;

namespace {

std::string refusal(const ReproduceOptions& o) {
  return error_of([&] { run_reproduce(o, nullptr, [](const std::string&) {}); });
}

ReproduceOptions quick(const std::string& out, std::vector<std::string> runs = {}) {
  ReproduceOptions o;
  o.plan = "quick", o.out = out, o.runs = std::move(runs);
  return o;
}

// One finished training line of the quick plan, as `reproduce` writes it; `edit` replaces a field.
std::string train_line(const std::string& run, const std::string& field = "",
                       const std::string& value = "") {
  JsonLine l;
  const std::string head = run.substr(0, run.rfind("-s"));
  l.add("plan", "quick").add("run", run).add("head", head).add("seed", int64_t{1});
  l.add("stage", "train").add("precision", "fp32").add("threads", int64_t{2});
  l.add("wall_s", 12.5).add("epochs", int64_t{2});
  l.add("valid_ppl", 900.0).add("test_ppl", 950.0);
  l.add("epoch_valid_ppl", std::vector<double>{1200, 900});
  l.add("epoch_elapsed_s", std::vector<double>{5, 10});
  std::string s = l.str();
  if (!field.empty()) {
    const size_t at = s.find("\"" + field + "\":");
    const size_t from = at + field.size() + 3;
    const size_t to = s[from] == '[' ? s.find(']', from) + 1 : s.find_first_of(",}", from);
    s.replace(from, to - from, value);
  }
  return s + "\n";
}

}  // namespace

// A user's own run at a plan run's name (`mosgrad train --save proj/runs/softmax-s1`) was once
// deleted and replaced without a word.
TEST(ReproduceFiles, ARunDirectoryItDidNotMakeIsRefusedAndKept) {
  const mgtest::TempDir d;
  const std::string out = d.str(), dir = out + "/runs/softmax-s1";
  fs::create_directories(dir);
  mgtest::write_bytes(dir + "/best.ckpt", "the user's model");
  mgtest::write_bytes(dir + "/metrics.jsonl", "{\"kind\":\"epoch\"}\n");
  std::string what = refusal(quick(out, {"softmax-s1"}));
  EXPECT_HAS(what, dir + " holds files reproduce did not write");
  EXPECT_HAS(what, "best.ckpt");
  EXPECT_HAS(what, "move it away");
  EXPECT_EQ(mgtest::read_bytes(dir + "/best.ckpt"), "the user's model");
  EXPECT_EQ(mgtest::read_bytes(dir + "/metrics.jsonl"), "{\"kind\":\"epoch\"}\n");
  EXPECT_FALSE(fs::exists(out + "/mosgrad.lock")) << "refused before any work";
  // So is a plain continuation of the whole plan, whose runs include softmax-s1.
  EXPECT_HAS(refusal(quick(out)), dir + " holds files reproduce did not write");

  // Another plan's run directory, copied in: its marker says whose it is.
  const PlanRun softmax{"softmax", 1};
  mark_run_dir(dir, "day", softmax);
  what = refusal(quick(out, {"softmax-s1"}));
  EXPECT_HAS(what, dir + " was made by reproduce for plan day, run softmax-s1");
  // A symlink at the run's name, to anywhere, is never written through.
  fs::remove_all(dir);
  fs::create_directory(out + "/elsewhere");
  fs::create_directory_symlink(out + "/elsewhere", dir);
  EXPECT_HAS(refusal(quick(out, {"softmax-s1"})), dir + " is a symlink");
  fs::remove(dir);
  // So is the runs' folder itself: through it, every run would go out of --out.
  fs::rename(out + "/runs", out + "/runs_kept");
  fs::create_directory_symlink(out + "/elsewhere", out + "/runs");
  EXPECT_HAS(refusal(quick(out, {"softmax-s1"})), out + "/runs is a symlink");
  EXPECT_TRUE(fs::is_empty(out + "/elsewhere"));
  fs::remove(out + "/runs");
  fs::rename(out + "/runs_kept", out + "/runs");

  // What proves a directory reproduce's: its marker, the precision file of a directory made
  // before the marker, a line of the run in results.jsonl; an empty one holds nothing to lose.
  fs::create_directories(dir);
  EXPECT_EQ(error_of([&] { check_run_dir_is_ours(out, "quick", softmax, {}); }), "");
  // So does one holding only the temporary of a killed save (reproduce killed before its first
  // rename there, the marker's), or the probe of a process killed while it checked the folder
  // takes files (io/own_output.h); a live process's temporary is not that.
  const int dead_pid = mgtest::dead_pid();
  const std::string dead_tmp = dir + "/" + kRunMarker + ".tmp." + std::to_string(dead_pid) + ".0";
  mgtest::write_bytes(dead_tmp, "plan quick, r");
  EXPECT_EQ(error_of([&] { check_run_dir_is_ours(out, "quick", softmax, {}); }), "");
  const std::string dead_probe = probe_file(dir, dead_pid, 0);
  mgtest::write_bytes(dead_probe, "");
  EXPECT_EQ(error_of([&] { check_run_dir_is_ours(out, "quick", softmax, {}); }), "");
  fs::remove(dead_probe);
  const std::string live_tmp = dir + "/" + kRunMarker + ".tmp.1.0";  // init never dies
  mgtest::write_bytes(live_tmp, "plan quick, r");
  EXPECT_HAS(error_of([&] { check_run_dir_is_ours(out, "quick", softmax, {}); }),
             "holds files reproduce did not write");
  fs::remove(live_tmp);
  mark_run_dir(dir, "quick", softmax);  // its save removes the dead temporary
  EXPECT_FALSE(fs::exists(dead_tmp));
  fs::remove(dir + "/" + kRunMarker);
  mgtest::write_bytes(dir + "/best.ckpt", "x");
  EXPECT_NE(error_of([&] { check_run_dir_is_ours(out, "quick", softmax, {}); }), "");
  mgtest::write_bytes(dir + "/precision", "fp32\n");
  EXPECT_EQ(error_of([&] { check_run_dir_is_ours(out, "quick", softmax, {}); }), "");
  fs::remove(dir + "/precision");
  mark_run_dir(dir, "quick", softmax);
  EXPECT_EQ(error_of([&] { check_run_dir_is_ours(out, "quick", softmax, {}); }), "");
  fs::remove(dir + "/" + kRunMarker);
  const StageRecord line{parse_json(train_line("softmax-s1"))};
  EXPECT_EQ(error_of([&] { check_run_dir_is_ours(out, "quick", softmax, {line}); }), "");

  // A start that left no checkpoint is cleared by name: what train and the stages write goes,
  // anything else stays.
  mgtest::write_bytes(dir + "/notes.txt", "mine");
  mgtest::write_bytes(dir + "/metrics.jsonl", "{}\n");
  clear_stopped_start(dir);
  EXPECT_FALSE(fs::exists(dir + "/best.ckpt"));
  EXPECT_FALSE(fs::exists(dir + "/metrics.jsonl"));
  EXPECT_EQ(mgtest::read_bytes(dir + "/notes.txt"), "mine");

  // The checkpoint copies (train_best.ckpt, finetune's best.ckpt) replace a symlink, never its
  // target.
  mgtest::write_bytes(out + "/victim", "keep");
  fs::create_symlink(out + "/victim", dir + "/train_best.ckpt");
  mgtest::write_bytes(dir + "/best.ckpt", "model");
  copy_file_atomically(dir + "/best.ckpt", dir + "/train_best.ckpt");
  EXPECT_EQ(mgtest::read_bytes(out + "/victim"), "keep");
  EXPECT_FALSE(fs::is_symlink(dir + "/train_best.ckpt"));
  EXPECT_EQ(mgtest::read_bytes(dir + "/train_best.ckpt"), "model");
}

// A training stage that starts again in its own directory (the last start was killed before its
// first checkpoint) clears the files train and the stages write, by name: a file someone put
// there stays, where the whole directory used to be removed.
TEST(ReproduceFiles, AStartThatLeftNoCheckpointIsClearedByNameOnly) {
  const std::string data = mgtest::ptb_dir();
  MG_SKIP_WITHOUT_PTB(data);
  const mgtest::TempDir d;
  const std::string out = d.str(), dir = out + "/runs/softmax-s1";
  mark_run_dir(dir, "quick", PlanRun{"softmax", 1});
  mgtest::write_bytes(dir + "/best.ckpt", "a killed start's");
  mgtest::write_bytes(dir + "/metrics.jsonl", "{\"kind\":\"interval\",\"tokens\":7,\"ppl\":9}\n");
  mgtest::write_bytes(dir + "/notes.txt", "mine");
  request_training_stop();  // as Ctrl-C: the first training step saves a checkpoint and stops
  const ReproduceSummary s =
      run_reproduce(quick(out, {"softmax-s1"}), nullptr, [](const std::string&) {});
  clear_training_stop();
  EXPECT_TRUE(s.interrupted);
  EXPECT_EQ(mgtest::read_bytes(dir + "/notes.txt"), "mine");
  EXPECT_TRUE(fs::exists(dir + "/checkpoint.ckpt"));
  EXPECT_EQ(mgtest::read_bytes(dir + "/metrics.jsonl").find("\"tokens\":7,"), std::string::npos)
      << "the killed start's records are gone, not set aside into this run's file";
  EXPECT_EQ(mgtest::read_bytes(dir + "/" + kRunMarker), "plan quick, run softmax-s1\n");
}

// A `mosgrad train --save` into a run's folder since reproduce started (the folder looks like
// reproduce's: a user may copy the marker in) is left as it is while that training holds it: its
// metrics.jsonl was once removed as a "stopped start" before the lock refused the stage.
TEST(ReproduceFiles, ARunFolderAnotherTrainingHoldsIsLeftAlone) {
  const std::string data = mgtest::ptb_dir();
  MG_SKIP_WITHOUT_PTB(data);
  const mgtest::TempDir d;
  const std::string out = d.str(), dir = out + "/runs/softmax-s1";
  mark_run_dir(dir, "quick", PlanRun{"softmax", 1});
  const std::string records = "{\"kind\":\"interval\",\"tokens\":7,\"ppl\":9}\n";
  mgtest::write_bytes(dir + "/metrics.jsonl", records);
  const RunLock other(dir, "mosgrad train --save " + dir);
  const std::string what = refusal(quick(out, {"softmax-s1"}));
  EXPECT_HAS(what, "run directory " + dir + " is in use by process");
  EXPECT_HAS(what, "choose another --out");
  EXPECT_EQ(mgtest::read_bytes(dir + "/metrics.jsonl"), records);
}

// A further seed is found by its directory only when reproduce made it: a user's runs/softmax-s7
// joins no table and no continuation.
TEST(ReproduceFiles, OnlyItsOwnDirectoriesAreFoundAsFurtherSeeds) {
  const mgtest::TempDir d;
  const std::string out = d.str();
  mgtest::write_bytes(out + "/results.jsonl", train_line("softmax-s1"));
  fs::create_directories(out + "/runs/softmax-s7");
  mgtest::write_bytes(out + "/runs/softmax-s7/best.ckpt", "the user's");
  mark_run_dir(out + "/runs/softmax-s8", "quick", PlanRun{"softmax", 8});
  ReproduceOptions o = quick(out);
  o.report = true;
  EXPECT_EQ(refusal(o), "");
  const std::string md = mgtest::read_bytes(out + "/results.md");
  EXPECT_HAS(md, "| softmax-s8 |");
  EXPECT_EQ(md.find("softmax-s7"), std::string::npos) << md;
}

// A table or figure is only redrawn from results that are there and in range, and only over a
// file mosgrad wrote.
TEST(ReproduceFiles, ReportsAreNeverRedrawnFromBadOrNoData) {
  const mgtest::TempDir d;
  const std::string out = d.str();
  ReproduceOptions o = quick(out);
  o.report = true;
  const std::string table = "## Plan `quick`: the good table\n";
  mgtest::write_bytes(out + "/results.md", table);
  std::string what = refusal(o);  // results.md without results.jsonl: not a table of dashes
  EXPECT_HAS(what, out + "/results.md is there but " + out + "/results.jsonl has no results");
  EXPECT_EQ(mgtest::read_bytes(out + "/results.md"), table);
  fs::remove(out + "/results.md");
  EXPECT_HAS(refusal(o), "has no results in " + out + "/results.jsonl");
  EXPECT_FALSE(fs::exists(out + "/results.md"));

  // A number out of its range names the line and the field; nothing is redrawn.
  const std::string good = train_line("mos-s1");
  const auto bad = [&](const std::string& second) {
    mgtest::write_bytes(out + "/results.jsonl", good + second);
    const std::string e = refusal(o);
    EXPECT_HAS(e, "results file " + out + "/results.jsonl, line 2: field ");
    EXPECT_FALSE(fs::exists(out + "/results.md")) << second;
    return e;
  };
  EXPECT_HAS(bad(train_line("softmax-s1", "valid_ppl", "-5")),
             "field \"valid_ppl\" is -5, expected a perplexity in [1, 1e300]");
  EXPECT_HAS(bad(train_line("softmax-s1", "test_ppl", "\"low\"")), "\"test_ppl\" is a string");
  EXPECT_HAS(bad(train_line("softmax-s1", "epoch_valid_ppl", "[0,900]")),
             "field \"epoch_valid_ppl[0]\" is 0, expected a perplexity");
  EXPECT_HAS(bad(train_line("softmax-s1", "epoch_valid_ppl", "[1.7e308,900]")),
             "field \"epoch_valid_ppl[0]\" is 1.7e+308");
  EXPECT_HAS(bad(train_line("softmax-s1", "epoch_elapsed_s", "[10,5]")),
             "field \"epoch_elapsed_s[1]\" is 5, expected a time after the epoch before's");
  EXPECT_HAS(bad(train_line("softmax-s1", "epoch_elapsed_s", "[5]")), "\"epoch_elapsed_s\"");
  EXPECT_HAS(bad(train_line("softmax-s1", "epochs", "3")), "field \"epochs\" is 3");
  EXPECT_HAS(bad(train_line("softmax-s1", "threads", "0")), "field \"threads\" is 0");
  EXPECT_HAS(error_of([&] {
               mgtest::write_bytes(out + "/results.jsonl", good + good);
               read_results(out + "/results.jsonl");
             }),
             "line 2: a second line of mos-s1's 'train' stage");
  // null is "not measured" (JsonLine writes NaN so): drawn as a dash, not refused.
  mgtest::write_bytes(out + "/results.jsonl", good + train_line("softmax-s1", "test_ppl", "null"));
  EXPECT_EQ(refusal(o), "");
  const std::string svg = mgtest::read_bytes(out + "/valid_curves.svg");
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_HAS(mgtest::read_bytes(out + "/results.md"), "| softmax | 900.00 | — |");

  // Someone else's table or figure at those names is never replaced.
  for (const char* name : {"results.md", "valid_curves.svg"}) {
    const std::string file = out + "/" + name, before = mgtest::read_bytes(file);
    mgtest::write_bytes(file, "<svg>mine</svg>\n");
    EXPECT_HAS(refusal(o), file + " is there and is not");
    EXPECT_EQ(mgtest::read_bytes(file), "<svg>mine</svg>\n");
    mgtest::write_bytes(file, before);
  }
  EXPECT_EQ(refusal(o), "");
}

// The per-epoch curve of a run's metrics file, read into its training line, is checked as well.
TEST(ReproduceFiles, ARunsMetricsAreCheckedWhenReadBack) {
  const mgtest::TempDir d;
  const std::string path = d.file("metrics.jsonl");
  const auto epoch = [](int e, double loss, double t) {
    return "{\"kind\":\"epoch\",\"epoch\":" + std::to_string(e) +
           ",\"val_loss\":" + std::to_string(loss) + ",\"elapsed_s\":" + std::to_string(t) + "}\n";
  };
  const auto error_for = [&](const std::string& text) {
    mgtest::write_bytes(path, text);
    std::vector<double> ppl, t;
    return error_of([&] { epoch_curves(path, ppl, t); });
  };
  EXPECT_EQ(error_for(epoch(1, 6, 5) + epoch(2, 5.5, 10)), "");
  EXPECT_HAS(error_for(epoch(1, 6, 5) + epoch(1, 5.5, 10)), path + ":2: \"epoch\" is 1");
  EXPECT_HAS(error_for(epoch(1, -6, 5)), path + ":1: \"val_loss\" is -6");
  EXPECT_HAS(error_for(epoch(1, 800, 5)), path + ":1: \"val_loss\" is 800");
  EXPECT_HAS(error_for(epoch(1, 6, 5) + epoch(2, 5.5, 4)), path + ":2: \"elapsed_s\" is 4");
}

// Continued with another --data, a directory's results were once mixed with the new corpus's in
// one table without a word.
TEST(ReproduceFiles, ResultsOfAnotherCorpusAreRefused) {
  const mgtest::TempDir d;
  const std::string out = d.str();
  const std::string data = mgtest::write_synthetic_corpus("reproduce_other_corpus");
  const std::string other = "V=3, 10/5/5 tokens, crc32 00000000";
  std::string line = train_line("softmax-s1");
  line.insert(1, "\"corpus\":\"" + other + "\",");
  mgtest::write_bytes(out + "/results.jsonl", line);
  ReproduceOptions o = quick(out, {"sigsoftmax-s1"});
  o.data = data;
  const std::string e = refusal(o);
  EXPECT_HAS(e, "holds results of softmax-s1 measured on another corpus (" + other +
                    ") than --data " + data + " (" + corpus_fingerprint(load_corpus(data)) + ")");
  EXPECT_FALSE(fs::exists(out + "/runs/sigsoftmax-s1"));
  EXPECT_EQ(mgtest::read_bytes(out + "/results.jsonl"), line);
}

// A line whose run or head was edited was once left out of the table (or counted under the
// run's name) without a word.
TEST(ReproduceFiles, ALineOfNoRunOfThePlanOrOfAnotherHeadIsRefused) {
  const mgtest::TempDir d;
  const std::string out = d.str();
  for (const auto& [line, expected] : std::vector<std::pair<std::string, std::string>>{
           {train_line("bogus-s1"),
            "has lines of run 'bogus-s1', which is neither a run of plan "
            "'quick' nor a further seed"},
           {train_line("softmax-s1", "head", "\"mos\""),
            "the train line of run 'softmax-s1' says head 'mos'; that run's head is 'softmax'"}}) {
    mgtest::write_bytes(out + "/results.jsonl", line);
    ReproduceOptions o = quick(out);
    o.report = true;
    EXPECT_HAS(refusal(o), expected);
    EXPECT_FALSE(fs::exists(out + "/results.md"));
  }
  // A further seed of a plan's head is a run of the plan.
  mgtest::write_bytes(out + "/results.jsonl", train_line("softmax-s7"));
  ReproduceOptions o = quick(out);
  o.report = true;
  EXPECT_EQ(refusal(o), "");
}

// A folder that takes no files is refused before any stage, not after a stage's work.
TEST(ReproduceFiles, AnOutFolderThatTakesNoFilesIsRefusedBeforeAnyStage) {
  const mgtest::TempDir d;
  ReproduceOptions o = quick(d.file("out"), {"softmax-s1"});
  o.data = mgtest::write_synthetic_corpus("reproduce_read_only");
  {
    io_fault::Scope hook({io_fault::kOpen, 1, EACCES});
    EXPECT_HAS(mgtest::error_of<std::exception>(
                   [&] { run_reproduce(o, nullptr, [](const std::string&) {}); }),
               "--out " + o.out + ": cannot create files in " + d.str());
  }
  EXPECT_FALSE(fs::exists(o.out));
  // And each selected run's folder, where its stages write: the second probe refused.
  const std::string run = o.out + "/runs/softmax-s1";
  fs::create_directories(run);
  io_fault::Scope second({io_fault::kOpen, 2, EACCES});
  EXPECT_HAS(mgtest::error_of<std::exception>(
                 [&] { run_reproduce(o, nullptr, [](const std::string&) {}); }),
             "--out " + run + ": cannot create files in " + run + " (");
  EXPECT_TRUE(fs::is_empty(run));
}

// Under mpirun -np 2 both processes once started, one blaming the lock the other held and the
// other --grad-groups 1 after a stage had begun; now the first check refuses any N > 1.
TEST(ReproduceFiles, MoreThanOneProcessIsRefusedWithTheDocumentedMessage) {
  EXPECT_EQ(error_of<std::invalid_argument>([] { require_one_process(1); }), "");
  EXPECT_EQ(error_of<std::invalid_argument>([] { require_one_process(2); }),
            "reproduce runs in one process: start it without mpirun (got -np 2)");
}
