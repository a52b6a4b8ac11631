// `mosgrad reproduce` (reproduce/reproduce.h): the quick plan end to end on a PTB slice — every run
// through every stage, one line each in results.jsonl, the tables and the figure drawn from them;
// a second call redoes nothing; a plan stopped in a training stage continues exactly; a further
// seed joins its head's table; --device cuda trains on the GPU. Refusals and the results file's
// round trip are in tests/reproduce/test_reproduce_files.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "cuda/backend.h"
#include "io/read_file.h"
#include "lm/batching.h"
#include "lm/corpus.h"
#include "lm/dyneval.h"
#include "lm/evaluate.h"
#include "lm/model_io.h"
#include "lm/train.h"
#include "reproduce/reproduce.h"
#include "reproduce/reproduce_results.h"
#include "tensor/parallel.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;
namespace fs = std::filesystem;

namespace {

ReproduceSummary run_quick(const std::string& out, std::vector<std::string> runs = {}) {
  ReproduceOptions o;
  o.plan = "quick", o.out = out, o.runs = std::move(runs);
  return run_reproduce(o, nullptr, [](const std::string&) {});
}

}  // namespace

TEST(Reproduce, QuickPlanRunsEveryStageOnceAndRedoesNothing) {
  const std::string data = mgtest::ptb_dir();
  MG_SKIP_WITHOUT_PTB(data);
  const std::string out = mgtest::temp_dir("reproduce_quick");
  const ReproducePlan plan = reproduce_plan("quick");
  const ReproduceSummary first = run_quick(out);
  EXPECT_FALSE(first.interrupted);
  const int stages = static_cast<int>(plan.runs.size() * plan.stages.size());
  EXPECT_EQ(first.stages_run, stages);

  const std::vector<StageRecord> records = read_results(results_path(out));
  ASSERT_EQ(static_cast<int>(records.size()), stages);
  const std::string corpus_id = corpus_fingerprint(load_corpus(data));
  EXPECT_HAS(corpus_id, "ptb, V=10000, 929589/73760/82430 tokens, crc32 ");
  EXPECT_HAS(read_file(out + "/results.md", "table"), "Corpus: " + corpus_id + ".");
  std::set<std::string> seen;
  for (const StageRecord& r : records) {
    EXPECT_TRUE(seen.insert(r.text("run") + "/" + r.text("stage")).second) << "duplicated";
    EXPECT_EQ(r.text("plan"), "quick");
    for (const char* key : {"commit", "cpu", "precision", "command", "date"})
      EXPECT_FALSE(r.text(key).empty()) << key << " missing in " << r.text("run");
    EXPECT_GT(r.number("wall_s"), 0);
    // CPU seconds: some, and no more than its threads could spend in its wall time.
    EXPECT_GT(r.number("cpu_s"), 0) << r.text("run") << " " << r.text("stage");
    EXPECT_LE(r.number("cpu_s"), 1.05 * r.number("wall_s") * num_threads() + 0.05);
    EXPECT_EQ(r.number("threads"), static_cast<double>(num_threads()));
    EXPECT_EQ(r.text("device"), "cpu");
    EXPECT_EQ(r.text("corpus"), corpus_id);  // what a later run into `out` must match
    EXPECT_EQ(read_file(out + "/runs/" + r.text("run") + "/precision", "precision"),
              r.text("precision") + "\n");  // what a resume on another machine must match
    const std::string stage = r.text("stage");
    if (stage == "rank") {
      EXPECT_EQ(r.number("contexts"), 100);
      EXPECT_EQ(r.number("bound"), 18) << "d + 2 with d = E = 16";
      // One softmax of a d-dimensional context, however wide the layer before it.
      if (r.text("head") == "softmax" || r.text("head") == "moc" || r.text("head") == "mos-k1") {
        EXPECT_LE(r.number("rank"), 18) << r.text("run");
      }
      continue;
    }
    EXPECT_TRUE(std::isfinite(r.number("valid_ppl")) && r.number("valid_ppl") > 1) << stage;
    EXPECT_TRUE(std::isfinite(r.number("test_ppl")) && r.number("test_ppl") > 1) << stage;
    if (stage == "train") {
      EXPECT_EQ(r.numbers("epoch_valid_ppl").size(), 2u);
      EXPECT_EQ(r.numbers("epoch_elapsed_s").size(), 2u);
      EXPECT_NE(r.text("command").find("mosgrad train --preset tiny"), std::string::npos);
    }
    if (stage == "finetune") {  // finetuning keeps the better model: never worse on valid
      const StageRecord* train = find_record(records, r.text("run"), "train");
      ASSERT_NE(train, nullptr);
      EXPECT_LE(r.number("valid_ppl"), train->number("valid_ppl") * (1 + 1e-9));
    }
    if (stage == "pointer") {
      EXPECT_LE(r.number("valid_ppl"), r.number("model_valid_ppl") * (1 + 1e-9))
          << "the grid includes its best; the model alone is not better than the best λ > 0 here";
    }
  }
  // The test figures are the final model's at batch size 1 (the papers' convention).
  const LoadedModel final_model = load_model(out + "/runs/softmax-s1/best.ckpt");
  const Corpus corpus = load_corpus(data, 1000000);
  const std::vector<int64_t> test(corpus.test.begin(), corpus.test.begin() + plan.test_tokens);
  EXPECT_NEAR(find_record(records, "softmax-s1", "finetune")->number("test_ppl"),
              evaluate(*final_model.model, batchify(test, 1), 70).perplexity(), 1e-6);
  // dyneval measures its gradient statistics once for valid and test; test must still get what a
  // dynamic evaluation of test alone gives it (from the final weights, not valid's adapted ones).
  const LoadedModel fresh = load_model(out + "/runs/softmax-s1/best.ckpt");
  EXPECT_NEAR(find_record(records, "softmax-s1", "dyneval")->number("test_ppl"),
              dynamic_evaluate(*fresh.model, corpus.train, test, plan.dyneval).perplexity(), 1e-6);
  const std::string md = read_file(out + "/results.md", "table");
  for (const char* head :
       {"| softmax |", "| mos |", "| sigsoftmax |", "| mosig |", "| moc |", "| mos-k1 |"})
    EXPECT_NE(md.find(head), std::string::npos) << head;
  // mos-k1 is MoS with one component: the plan's --n_experts 2 overridden, the rest the plan's.
  const LoadedModel k1 = load_model(out + "/runs/mos-k1-s1/best.ckpt");
  EXPECT_EQ(k1.model->config.head, HeadKind::MoS);
  EXPECT_EQ(k1.model->config.n_experts, 1);
  EXPECT_EQ(k1.model->config.nhidlast, 24);
  EXPECT_NE(find_record(records, "mos-k1-s1", "train")
                ->text("command")
                .find("--head mos --n_experts 1 --seed 1"),
            std::string::npos);
  EXPECT_NE(md.find("(n=2)"), std::string::npos) << "mos has two seeds: mean ± sd (n=2)";
  const std::string svg = read_file(out + "/valid_curves.svg", "figure");
  EXPECT_NE(svg.find("class=\"mos\""), std::string::npos);
  EXPECT_NE(svg.find("class=\"mos-min\""), std::string::npos) << "the seed band";

  // A second call finds every stage done: nothing runs, the file is unchanged.
  const std::string before = read_file(results_path(out), "results");
  const ReproduceSummary again = run_quick(out);
  EXPECT_EQ(again.stages_run, 0);
  EXPECT_EQ(again.stages_skipped, stages);
  EXPECT_EQ(read_file(results_path(out), "results"), before);
}

TEST(Reproduce, AStopInATrainingStageContinuesExactly) {
  const std::string data = mgtest::ptb_dir();
  MG_SKIP_WITHOUT_PTB(data);
  const std::string straight = mgtest::temp_dir("reproduce_straight"),
                    stopped = mgtest::temp_dir("reproduce_stopped");
  run_quick(straight, {"mos-s1"});
  request_training_stop();  // as Ctrl-C: the first training step saves a checkpoint and stops
  const ReproduceSummary s = run_quick(stopped, {"mos-s1"});
  clear_training_stop();
  EXPECT_TRUE(s.interrupted);
  EXPECT_EQ(s.stages_run, 0);
  EXPECT_TRUE(read_results(results_path(stopped)).empty()) << "no line for an unfinished stage";
  EXPECT_TRUE(fs::exists(stopped + "/runs/mos-s1/checkpoint.ckpt"));
  EXPECT_EQ(run_quick(stopped, {"mos-s1"}).stages_run, 5);
  const auto a = read_results(results_path(straight)), b = read_results(results_path(stopped));
  for (const char* stage : {"train", "finetune", "dyneval", "pointer"})
    for (const char* key : {"valid_ppl", "test_ppl"})
      EXPECT_EQ(find_record(a, "mos-s1", stage)->number(key),
                find_record(b, "mos-s1", stage)->number(key))
          << stage << " " << key << ": a resumed plan gives the same numbers";

  // A stop asked while a stage that does not heed it runs (an evaluation; here asked before it)
  // stops the plan before the next stage; one asked while the last stage runs leaves nothing to
  // continue: the plan is complete, not "stopped".
  std::string lines = read_file(results_path(stopped), "results");
  for (int i = 0; i < 2; ++i) lines.erase(lines.rfind('\n', lines.size() - 2) + 1);
  mgtest::write_bytes(results_path(stopped), lines);  // without pointer's and rank's lines
  for (const bool last : {false, true}) {
    request_training_stop();
    const ReproduceSummary r = run_quick(stopped, {"mos-s1"});
    clear_training_stop();
    EXPECT_EQ(r.stages_run, 1) << (last ? "rank" : "pointer") << " ran alone";
    EXPECT_EQ(r.interrupted, !last);
  }
}

// More seeds than the plan lists: `--runs softmax-s2` trains a further seed of one of the plan's
// heads with the same flags, and the table counts it, also when it is redrawn from the results
// alone.
TEST(Reproduce, AFurtherSeedOfAPlansHeadJoinsItsTable) {
  const std::string data = mgtest::ptb_dir();
  MG_SKIP_WITHOUT_PTB(data);
  const std::string out = mgtest::temp_dir("reproduce_seeds");
  EXPECT_EQ(run_quick(out, {"softmax-s1", "softmax-s2"}).stages_run, 10);
  const std::vector<StageRecord> records = read_results(results_path(out));
  const StageRecord* train = find_record(records, "softmax-s2", "train");
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->number("seed"), 2);
  EXPECT_EQ(train->text("head"), "softmax");
  const std::string one = find_record(records, "softmax-s1", "train")->text("command");
  std::string two = train->text("command");
  EXPECT_NE(two.find("--seed 2"), std::string::npos) << two;
  two.replace(two.find("--seed 2"), 8, "--seed 1");       // the same flags but the seed ...
  two.replace(two.find("softmax-s2"), 10, "softmax-s1");  // ... and the run directory
  EXPECT_EQ(two, one);
  EXPECT_NE(find_record(records, "softmax-s2", "rank"), nullptr) << "every stage ran";
  EXPECT_NE(read_file(out + "/results.md", "table").find("(n=2)"), std::string::npos);
  ReproduceOptions report;
  report.plan = "quick", report.out = out, report.report = true;
  fs::remove(out + "/results.md");
  run_reproduce(report, nullptr, [](const std::string&) {});
  const std::string md = read_file(out + "/results.md", "table");
  EXPECT_NE(md.find("softmax-s2"), std::string::npos) << "the every-run table lists it";
  EXPECT_NE(md.find("(n=2)"), std::string::npos) << "softmax's mean is over both seeds";
  EXPECT_EQ(run_quick(out, {"softmax-s2"}).stages_skipped, 5) << "nothing runs twice";

  // A further seed stopped in its training stage has a directory but no line yet: the directory
  // alone keeps it in the plan (its table row, and a plain continuation goes on with it).
  request_training_stop();
  EXPECT_TRUE(run_quick(out, {"softmax-s3"}).interrupted);
  clear_training_stop();
  ASSERT_TRUE(fs::exists(out + "/runs/softmax-s3/checkpoint.ckpt"));
  report.runs = {"softmax-s9"};  // --report draws what is there: a name asked for adds no row
  run_reproduce(report, nullptr, [](const std::string&) {});
  const std::string redrawn = read_file(out + "/results.md", "table");
  EXPECT_NE(redrawn.find("softmax-s3"), std::string::npos) << "found by its directory";
  EXPECT_EQ(redrawn.find("softmax-s9"), std::string::npos);
}

// --device cuda: train and finetune on the GPU, the evaluation stages on the CPU, and every record
// says which. Without a GPU (or in a CPU-only build) it is refused before anything is written.
// The run is softmax-s1: at lr 20 a MoS head's clipped loss spikes amplify float rounding, and on
// an H200 the quick plan's mos-s1 followed the CPU's losses to 1e-5 for 12 steps, then parted
// (1.2e-3 at step 13, 0.06 by step 36); softmax-s1's losses and validation agreed in every printed
// digit (1e-5), so a stage that ran another recipe on the GPU shows at 1e-4.
TEST(Reproduce, DeviceCudaTrainsOnTheGpuAndEachRecordSaysWhere) {
  const std::string root = mgtest::temp_dir("reproduce_device");
  ReproduceOptions o;
  o.plan = "quick", o.out = root + "/gpu", o.runs = {"softmax-s1"}, o.device = "cuda";
  std::string why;
  if (!cuda_is_available(&why)) {
    try {
      run_reproduce(o, nullptr, [](const std::string&) {});
      ADD_FAILURE() << "--device cuda ran without a GPU";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("--device cuda: " + why), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(o.out)) << "refused before any work";
    return;
  }
  const std::string data = mgtest::ptb_dir();
  MG_SKIP_WITHOUT_PTB(data);
  EXPECT_FALSE(run_reproduce(o, nullptr, [](const std::string&) {}).interrupted);
  ReproduceOptions cpu = o;
  cpu.out = root + "/cpu", cpu.device = "cpu";
  EXPECT_FALSE(run_reproduce(cpu, nullptr, [](const std::string&) {}).interrupted);
  const std::vector<StageRecord> gpu_records = read_results(results_path(o.out)),
                                 cpu_records = read_results(results_path(cpu.out));
  ASSERT_EQ(gpu_records.size(), reproduce_plan("quick").stages.size());
  for (const StageRecord& r : gpu_records) {
    const std::string stage = r.text("stage");
    const bool trains = stage == "train" || stage == "finetune";
    EXPECT_EQ(r.text("device"), trains ? cuda_device_description() : "cpu") << stage;
    EXPECT_EQ(r.text("command").find("--device cuda") != std::string::npos, trains) << stage;
    const StageRecord* same = find_record(cpu_records, "softmax-s1", stage);
    ASSERT_NE(same, nullptr) << stage;
    EXPECT_EQ(same->text("device"), "cpu");
    for (const char* key : {"valid_ppl", "test_ppl", "rank"})
      if (std::isfinite(r.number(key)) || std::isfinite(same->number(key))) {
        EXPECT_NEAR(r.number(key) / same->number(key), 1.0, 1e-4) << stage << " " << key;
      }
  }
}

// A training stage stopped part-way continues on the device it started on (its record names one
// device, its epoch times add up across resumes); a finished stage's successor may use another.
TEST(Reproduce, AStoppedTrainingStageContinuesOnlyOnItsDevice) {
  const std::string out = mgtest::temp_dir("reproduce_resume_device");
  const ReproducePlan plan = reproduce_plan("quick");
  const std::string dir = out + "/runs/softmax-s1";
  write_run_precision(dir, "fp32");
  write_run_device(dir, "cuda");
  mgtest::write_bytes(dir + "/checkpoint.ckpt", "a stopped train stage");
  const auto check = [&](const std::vector<StageRecord>& records, const std::string& device) {
    try {
      check_runs_can_continue(plan, out, records, {"softmax-s1"}, "fp32", device);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string refused = check({}, "cpu");
  EXPECT_NE(refused.find("softmax-s1's train stage started with --device cuda and would continue "
                         "with --device cpu: continue it with --device cuda"),
            std::string::npos)
      << refused;
  EXPECT_EQ(check({}, "cuda"), "accepted");
  fs::remove(dir + "/device");  // a directory from before --device: it trained on the CPU
  EXPECT_EQ(check({}, "cpu"), "accepted");
  EXPECT_NE(check({}, "cuda").find("started with --device cpu"), std::string::npos);
  // Train finished on the GPU, finetune not started: either device may run it.
  write_run_device(dir, "cuda");
  mgtest::write_bytes(dir + "/train_best.ckpt", "the trained model");
  const std::vector<StageRecord> trained = {
      StageRecord{parse_json("{\"plan\":\"quick\",\"run\":\"softmax-s1\",\"head\":\"softmax\","
                             "\"stage\":\"train\",\"precision\":\"fp32\",\"device\":\"GPU\"}")}};
  EXPECT_EQ(check(trained, "cpu"), "accepted");
  // ... until its finetune has begun
  mgtest::write_bytes(dir + "/finetune.ckpt", "a stopped finetune");
  mgtest::write_bytes(dir + "/best.ckpt", "its best model so far");
  EXPECT_NE(check(trained, "cpu").find("softmax-s1's finetune stage started with --device cuda"),
            std::string::npos);
}
