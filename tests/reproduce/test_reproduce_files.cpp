// `mosgrad reproduce` (reproduce/reproduce.h) refusing what it cannot do and reading back what it wrote:
// bad requests and a damaged results file are clear errors before any work, a results directory
// keeps one precision, and results.jsonl round-trips into the tables that summarise seeds. The
// quick plan end to end is in tests/reproduce/test_reproduce.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "io/run_lock.h"
#include "lm/corpus.h"
#include "reproduce/reproduce.h"
#include "reproduce/reproduce_results.h"
#include "tensor/gemm.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;
namespace fs = std::filesystem;

TEST(Reproduce, BadRequestsAndDamagedFilesAreClearErrors) {
  const std::string out = mgtest::temp_dir("reproduce_errors");
  ReproduceOptions o;
  o.plan = "weekend", o.out = out;
  EXPECT_THROW(run_reproduce(o, nullptr, [](const std::string&) {}), std::invalid_argument);
  o.plan = "quick";
  for (const char* run : {"lstm-s1", "mos-s0", "mos-s", "mos-s01", "mos-s1x", "mos"}) {
    o.runs = {"softmax-s1", run};  // a head the plan does not train, or not a seed >= 1
    try {
      run_reproduce(o, nullptr, [](const std::string&) {});
      ADD_FAILURE() << "an unknown run was accepted: " << run;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("has no run '" + std::string(run) + "'"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("a further seed of one of its heads (softmax, mos, "
                                           "sigsoftmax, mosig, moc, mos-k1) as <head>-s<seed> (a "
                                           "seed from 1 to 999999999, no leading zero)"),
                std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(fs::exists(out + "/runs")) << "refused before any work";
  }
  o.runs.clear();
  ReproduceOptions report = o;  // --report on a directory that is not there: not a file error
  report.report = true, report.out = out + "/nowhere";
  try {
    run_reproduce(report, nullptr, [](const std::string&) {});
    ADD_FAILURE() << "--report on a missing directory was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--out " + report.out + " does not exist"),
              std::string::npos)
        << e.what();
  }
  report.device = "cuda";  // --report trains nothing: a --device beside it is a mistake
  try {
    run_reproduce(report, nullptr, [](const std::string&) {});
    ADD_FAILURE() << "--report with --device cuda was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--report true redraws the tables and trains nothing"),
              std::string::npos)
        << e.what();
  }
  mgtest::write_bytes(
      out + "/results.jsonl",
      "{\"plan\":\"afternoon\",\"run\":\"mos-s1\",\"head\":\"mos\",\"stage\":\"train\"}\n");
  EXPECT_THROW(run_reproduce(o, nullptr, [](const std::string&) {}), std::runtime_error)
      << "another plan's directory";
  mgtest::write_bytes(out + "/results.jsonl",
                      "{\"plan\":\"quick\",\"run\":\"mos-s1\",\"head\":\"mos\",\"sta");
  try {
    run_reproduce(o, nullptr, [](const std::string&) {});
    ADD_FAILURE() << "a torn line was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 1"), std::string::npos) << e.what();
  }
  // A later stage without an earlier one: the file was edited, the order cannot be trusted.
  const auto message = [&](const std::string& results) {
    mgtest::write_bytes(out + "/results.jsonl", results);
    try {
      run_reproduce(o, nullptr, [](const std::string&) {});
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string line = "{\"plan\":\"quick\",\"run\":\"softmax-s1\",\"head\":\"softmax\",";
  std::string what = message(line + "\"stage\":\"rank\",\"precision\":\"fp32\"}\n");
  EXPECT_NE(what.find("has later stages of softmax-s1 but not 'pointer'"), std::string::npos)
      << what;
  // A plan resized since its lines were written (as the afternoon plan's d = 64 became the day
  // plan): its finished runs would be skipped and two sizes mixed in one table.
  what = message(line +
                 "\"stage\":\"train\",\"precision\":\"fp32\",\"command\":\"mosgrad train --preset "
                 "tiny --emsize 32 --nhid 24 --head softmax --seed 1\"}\n");
  EXPECT_NE(what.find("holds a train result of softmax-s1 measured with other flags than plan "
                      "'quick' has now"),
            std::string::npos)
      << what;
  EXPECT_EQ(what.find("--plan day"), std::string::npos)
      << "only the afternoon plan became the day plan";
  o.plan = "afternoon";  // whose old size lives on as the day plan: the message says how to move
  what = message(
      "{\"plan\":\"afternoon\",\"run\":\"softmax-s1\",\"head\":\"softmax\",\"stage\":"
      "\"train\",\"precision\":\"fp32\",\"command\":\"mosgrad train --emsize 64\"}\n");
  EXPECT_NE(what.find("--plan day"), std::string::npos) << what;
  o.plan = "quick";
  what = message(line + "\"stage\":\"train\"}\n");  // every line names its precision
  EXPECT_NE(what.find("without its precision"), std::string::npos) << what;
  // A results file carried to a new machine without the run directories (checkpoints are never
  // committed): a run between stages cannot continue, and says what to do, before any work.
  const auto refusal = [&](const std::string& more) {
    return message(line + "\"stage\":\"train\",\"precision\":\"fp32\"}\n" + more);
  };
  what = refusal("");
  EXPECT_NE(what.find("softmax-s1 has finished 'train' but its 'finetune' stage needs " + out +
                      "/runs/softmax-s1/train_best.ckpt"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("remove softmax-s1's lines"), std::string::npos) << what;
  what = refusal(
      "{\"plan\":\"quick\",\"run\":\"softmax-s1\",\"head\":\"softmax\",\"stage\":"
      "\"finetune\",\"precision\":\"fp32\"}\n");
  EXPECT_NE(what.find("'dyneval' stage needs " + out + "/runs/softmax-s1/best.ckpt"),
            std::string::npos)
      << what;
  EXPECT_FALSE(fs::exists(out + "/runs")) << "work started before the refusal";
  // A finetune that resumes reads the best model so far too.
  const std::string dir = out + "/runs/softmax-s1";
  fs::create_directories(dir);
  mgtest::write_bytes(dir + "/finetune.ckpt", "");
  what = refusal("");
  EXPECT_NE(what.find("'finetune' stage needs " + dir + "/best.ckpt"), std::string::npos) << what;
  // A run started in another precision (on another CPU) does not continue in this one.
  mgtest::write_bytes(dir + "/precision", "bf16\n");
  what = refusal("");
  EXPECT_NE(what.find(dir + " was started in bf16 and would continue in fp32"), std::string::npos)
      << what;
  fs::remove_all(out + "/runs");
  // A second process on the same directory is refused.
  const RunLock other(out, "mosgrad reproduce --plan quick (another process)");
  o.runs = {"mos-s1"};  // only another run of the plan: softmax-s1's files are not needed
  what = refusal("");
  EXPECT_NE(what.find("another process"), std::string::npos) << what;
  o.runs.clear();
  fs::remove(out + "/results.jsonl");
  if (mgtest::has_ptb(mgtest::ptb_dir())) {
    try {
      run_reproduce(o, nullptr, [](const std::string&) {});
      ADD_FAILURE() << "two processes on one directory";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("another process"), std::string::npos) << e.what();
    }
  }
}

// One precision per results directory: the day plan's first runs were fp32 (AVX2), and a
// bf16 run on an AVX512_BF16 CPU would put a precision change into a 2-perplexity comparison.
TEST(Reproduce, AResultsDirectoryKeepsOnePrecision) {
  const auto record = [](const std::string& precision) {
    return StageRecord{
        parse_json("{\"plan\":\"paper\",\"run\":\"mos-s1\",\"head\":\"mos\","
                   "\"stage\":\"train\",\"precision\":\"" +
                   precision + "\"}")};
  };
  const auto message = [](const std::vector<StageRecord>& records, const ReproducePlan& plan) {
    try {
      results_precision(records, plan, "DIR");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(reproduce_plan("afternoon").precision, "fp32");
  const ReproducePlan afternoon = reproduce_plan("afternoon"), paper = reproduce_plan("paper");
  ASSERT_EQ(paper.precision, "auto");
  EXPECT_EQ(results_precision({}, afternoon, "DIR"), "fp32");
  EXPECT_EQ(results_precision({record("fp32")}, afternoon, "DIR"), "fp32");
  const std::string refused = message({record("bf16")}, afternoon);
  EXPECT_NE(refused.find("DIR holds results measured in bf16"), std::string::npos) << refused;
  EXPECT_NE(refused.find("runs in fp32"), std::string::npos) << refused;
  const std::string mixed = message({record("fp32"), record("bf16")}, paper);
  EXPECT_NE(mixed.find("mixes precisions (fp32 and bf16)"), std::string::npos) << mixed;
  // auto: this CPU's precision for a new directory, the directory's own after that.
  EXPECT_EQ(results_precision({}, paper, "DIR"), resolve_precision("auto"));
  EXPECT_EQ(results_precision({record("fp32"), record("fp32")}, paper, "DIR"), "fp32");
  if (gemm_bf16_kernel_name()) {
    EXPECT_EQ(results_precision({record("bf16")}, paper, "DIR"), "bf16");
  } else {
    const std::string no_bf16 = message({record("bf16")}, paper);
    EXPECT_NE(no_bf16.find("needs a CPU with AVX512_BF16"), std::string::npos) << no_bf16;
  }
}

TEST(Reproduce, ResultsFileRoundTripsAndTablesSummariseSeeds) {
  const std::string out = mgtest::temp_dir("reproduce_table");
  const std::string path = results_path(out);
  fs::create_directories(out);
  auto line = [](const std::string& run, const std::string& head, double valid, double test,
                 const std::string& device = "cpu") {
    return JsonLine()
        .add("plan", "quick")
        .add("run", run)
        .add("head", head)
        .add("seed", int64_t{1})
        .add("stage", "train")
        .add("precision", "fp32")
        .add(device.empty() ? "no_device" : "device", device)  // "": a line from before --device
        .add("valid_ppl", valid)
        .add("test_ppl", test)
        .add("epoch_valid_ppl", std::vector<double>{valid + 10, valid})
        .add("epoch_elapsed_s", std::vector<double>{600, 1200})
        .str();
  };
  append_result(path, line("mos-s1", "mos", 100, 98, ""));
  append_result(path, line("mos-s2", "mos", 104, 102));
  append_result(path, line("softmax-s1", "softmax", 120, std::nan("")));
  append_result(path, line("moc-s1", "moc", 110, 108, "NVIDIA H200 (sm_90, 139.8 GiB)"));
  // A pointer record whose best sits on its grid's edge, with a λ of three digits.
  append_result(path, JsonLine()
                          .add("plan", "quick")
                          .add("run", "mos-s2")
                          .add("head", "mos")
                          .add("seed", int64_t{2})
                          .add("stage", "pointer")
                          .add("theta", 1.5)
                          .add("lambda", 0.125)
                          .add("grid", "6 x 6")
                          .add("grid_edge", "theta 1.5 is the grid's largest")
                          .add("test_ppl", 90.0)
                          .str());
  const auto records = read_results(path);
  ASSERT_EQ(records.size(), 5u);
  EXPECT_TRUE(std::isnan(records[2].number("test_ppl"))) << "NaN is written as null";
  const std::string md = results_markdown(records, reproduce_plan("quick"));
  EXPECT_NE(md.find("| mos | 102.00 ± 2.83 (n=2) | 100.00 ± 2.83 (n=2) |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| softmax | 120.00 | — |"), std::string::npos) << md;
  // Equal wall-clock: by 15 min only the first epoch (600 s) has ended, by 60 min both.
  EXPECT_NE(md.find("| mos | 112.00 ± 2.83 (n=2) | 102.00 ± 2.83 (n=2) | 102.00 ± 2.83 (n=2) |"),
            std::string::npos)
      << md;
  // A run trained on a GPU: in the perplexity tables, not in the CPU wall-clock one, and marked;
  // mos-s1's line has no device (written before the field): a CPU run, counted and unmarked.
  EXPECT_NE(md.find("| moc | 110.00 | 108.00 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| moc | — | — | — |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 108.00 | — | — | — | — | fp32 (GPU train) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 98.00 | — | — | — | — | fp32 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 90.00 (1.5, 0.125, grid edge) |"), std::string::npos) << md;
  EXPECT_NE(md.find("Trained on a GPU (fp32, the same recipe to float rounding): moc-s1 (GPU "
                    "train); every other stage on a CPU."),
            std::string::npos)
      << md;
}

// The equal-wall-clock table's minutes are only a machine's own when the run had its cores: a
// training stage whose CPU time fell short of its threads' wall time is named under the table (not
// one trained on a GPU, whose CPU mostly waits).
TEST(Reproduce, ARunThatSharedItsCoresIsNamedUnderTheWallClockTable) {
  const std::string out = mgtest::temp_dir("reproduce_shared");
  const std::string path = results_path(out);
  fs::create_directories(out);
  auto line = [](const std::string& run, const std::string& head, double cpu_s,
                 const std::string& device = "cpu") {
    JsonLine l;
    l.add("plan", "quick").add("run", run).add("head", head).add("seed", int64_t{1});
    l.add("stage", "train").add("precision", "fp32").add("threads", int64_t{2});
    l.add("device", device);
    l.add("valid_ppl", 100.0).add("wall_s", 1000.0);
    if (cpu_s >= 0) l.add("cpu_s", cpu_s);  // < 0: a line from before cpu_s
    return l.str();
  };
  append_result(path, line("mos-s1", "mos", 1960));          // alone: 98%
  append_result(path, line("softmax-s1", "softmax", 1240));  // beside another job: 62%
  append_result(path, line("moc-s1", "moc", -1));            // no cpu_s: not judged
  const std::string md = results_markdown(read_results(path), reproduce_plan("quick"));
  const size_t note = md.find("Trained with under 90% of their threads' CPU time");
  ASSERT_NE(note, std::string::npos) << md;
  const std::string rest = md.substr(note, md.find('\n', note) - note);
  EXPECT_NE(rest.find(": softmax-s1 (62%)."), std::string::npos) << rest;
  EXPECT_EQ(rest.find("mos-s1"), std::string::npos) << rest;
  EXPECT_EQ(rest.find("moc-s1"), std::string::npos) << rest;
  EXPECT_EQ(rest.find("mos-s2"), std::string::npos) << rest;
  // Every run alone (or unjudged): no note at all.
  fs::remove(path);
  append_result(path, line("mos-s1", "mos", 1960));
  append_result(path, line("moc-s1", "moc", -1));
  EXPECT_EQ(results_markdown(read_results(path), reproduce_plan("quick")).find("under 90%"),
            std::string::npos);
}

// "Does the plan fit an afternoon?" is read off results.md: each run's stages summed, and the
// whole plan's, per machine (a GPU-trained stage on its GPU's line).
TEST(Reproduce, TheTableSumsTheWallTimeOfTheFinishedStagesPerMachine) {
  const std::string out = mgtest::temp_dir("reproduce_wall_time");
  const std::string path = results_path(out);
  fs::create_directories(out);
  auto line = [](const std::string& run, const std::string& stage, double wall_s,
                 const std::string& device = "cpu") {
    JsonLine l;
    l.add("plan", "quick").add("run", run).add("head", run.substr(0, run.rfind("-s")));
    l.add("seed", int64_t{1}).add("stage", stage).add("precision", "fp32");
    l.add("cpu", "AMD EPYC (AVX2)").add("threads", int64_t{2}).add("device", device);
    if (stage == "train") l.add("train_s", wall_s);  // the trainer's own clock
    return l.add("wall_s", wall_s).str();
  };
  for (const char* stage : {"train", "finetune", "dyneval", "pointer", "rank"})
    append_result(path, line("mos-s1", stage, 1500));  // 5 x 25 min
  append_result(path, line("softmax-s1", "train", 300, "NVIDIA H200 (sm_90, 139.8 GiB)"));
  append_result(path, line("softmax-s1", "finetune", 420));
  const std::string md = results_markdown(read_results(path), reproduce_plan("quick"));
  EXPECT_NE(md.find("| train min | all stages min |"), std::string::npos) << md;
  EXPECT_NE(md.find("| mos-s1 | — | 25.0 | 125.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| softmax-s1 | — | 5.0 | 12.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| moc-s1 | — | — | — |"), std::string::npos) << md;
  // Machines in the order the plan's runs first met them (softmax-s1 comes before mos-s1).
  EXPECT_NE(md.find("1 of 7 runs have every stage): 5.0 min on NVIDIA H200 (sm_90, 139.8 GiB) (1 "
                    "stage); 2 h 12 min on AMD EPYC (AVX2), 2 threads (6 stages)."),
            std::string::npos)
      << md;
  fs::remove(path);
  EXPECT_EQ(results_markdown({}, reproduce_plan("quick")).find("Wall time"), std::string::npos)
      << "nothing finished: nothing to sum";
}
