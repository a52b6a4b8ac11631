// The trainer end to end on a small synthetic corpus (always) and on a slice of PTB (when present):
// exact resume, clean stops, checkpoint errors, safetensors round trip, dynamic evaluation,
// sampling.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "autograd/ops.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/read_file.h"
#include "io/strf.h"
#include "lm/dyneval.h"
#include "lm/evaluate.h"
#include "lm/generate.h"
#include "lm/model_io.h"
#include "lm/progress.h"
#include "lm/train.h"
#include "tensor/gemm.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;
namespace fs = std::filesystem;

using mgtest::run_collecting;
using mgtest::small_config;
using mgtest::temp_dir;
using mgtest::write_synthetic_corpus;

namespace {

// The interval lines of a run's metrics.jsonl without their timing: "step loss grad_norm".
std::vector<std::string> interval_lines(const std::string& dir) {
  std::vector<std::string> lines;
  std::ifstream in(dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const JsonValue v = parse_json(line);
    if (v.find("kind")->str != "interval") continue;
    lines.push_back(strf("%.0f %.17g %.17g", v.find("step")->number, v.find("loss")->number,
                         v.find("grad_norm")->number));
  }
  return lines;
}

}  // namespace

TEST(Trainer, ResumeContinuesExactlyLikeAnUninterruptedRun) {
  const Corpus corpus = load_corpus(write_synthetic_corpus("resume"));
  // Straight: 3 epochs (crossing epoch ends: validation, best-model saves, the NT-ASGD test).
  TrainConfig straight = small_config(corpus.dir, temp_dir("straight"));
  straight.log_interval = 4;  // the first stop (step 7) falls inside an interval
  TrainResult full;
  const std::vector<double> expected = run_collecting(straight, corpus, &full);
  ASSERT_GT(expected.size(), 20u);
  // Interrupted twice (once mid-epoch, once in a later epoch), resumed each time.
  TrainConfig part = small_config(corpus.dir, temp_dir("parts"));
  part.log_interval = 4;
  std::vector<double> got;
  for (int64_t stop : {int64_t{7}, static_cast<int64_t>(expected.size()) - 5, int64_t{0}}) {
    part.max_steps = stop;
    TrainResult r;
    const std::vector<double> piece = run_collecting(part, corpus, &r);
    got.insert(got.end(), piece.begin(), piece.end());
    if (stop) {
      EXPECT_TRUE(r.stopped) << "run did not stop at step " << stop;
    }
    part.resume = true;
  }
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(got[i], expected[i]) << "loss of step " << i + 1 << " differs after resume";
  // The log too: an interval cut by a stop is summed across it, not restarted at the resume.
  const std::vector<std::string> logged = interval_lines(straight.save);
  ASSERT_GT(logged.size(), 5u);
  EXPECT_EQ(interval_lines(part.save), logged);
  EXPECT_TRUE(fs::exists(straight.save + "/best.ckpt"));
  EXPECT_TRUE(fs::exists(straight.save + "/metrics.jsonl"));
  EXPECT_TRUE(fs::exists(straight.save + "/curves.svg"));
}

TEST(Trainer, StopRequestSavesACheckpointAndReturns) {
  const Corpus corpus = load_corpus(write_synthetic_corpus("stop"));
  TrainConfig cfg = small_config(corpus.dir, temp_dir("stop"));
  TrainHooks hooks;
  hooks.on_step = [](int64_t step, double) {
    if (step == 3) request_training_stop();
  };  // as Ctrl-C does
  const TrainResult r = train_lm(cfg, corpus, hooks);
  clear_training_stop();
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.steps, 3);
  EXPECT_NE(r.stop_reason.find("Ctrl-C"), std::string::npos) << r.stop_reason;
  EXPECT_TRUE(fs::exists(cfg.save + "/checkpoint.ckpt"));
  EXPECT_TRUE(mgtest::temporaries_of(cfg.save + "/checkpoint.ckpt").empty());  // written atomically
}

TEST(Trainer, CorruptCheckpointIsAClearError) {
  const Corpus corpus = load_corpus(write_synthetic_corpus("corrupt"));
  TrainConfig cfg = small_config(corpus.dir, temp_dir("corrupt"));
  cfg.max_steps = 2;
  train_lm(cfg, corpus);
  const std::string path = cfg.save + "/checkpoint.ckpt";
  fs::resize_file(path, fs::file_size(path) / 2);
  cfg.resume = true, cfg.max_steps = 4;
  try {
    train_lm(cfg, corpus);
    FAIL() << "resuming from a truncated checkpoint did not throw";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  }
}

TEST(Trainer, FinetuneStartsFromTheBestModel) {
  const Corpus corpus = load_corpus(write_synthetic_corpus("finetune"));
  TrainConfig cfg = small_config(corpus.dir, temp_dir("finetune"));
  cfg.epochs = 2;
  const TrainResult trained = train_lm(cfg, corpus);
  cfg.epochs = 2;
  const TrainResult tuned = train_lm(cfg, corpus, {}, true);
  EXPECT_TRUE(fs::exists(cfg.save + "/finetune.ckpt"));
  EXPECT_LE(tuned.best_val_loss, trained.best_val_loss);  // starts from it, keeps only improvements
}

// A finetune saves its state before its first step: killed later, even between a new best.ckpt
// and its finetune.ckpt, it resumes from that state; it never restarts from a best.ckpt it has
// already finetuned as if that were the trained model.
TEST(Trainer, AFinetuneStoppedAnywhereResumesFromItsStart) {
  const Corpus corpus = load_corpus(write_synthetic_corpus("finetune_crash"));
  TrainConfig cfg = small_config(corpus.dir, temp_dir("finetune_crash_whole"));
  cfg.epochs = 1;
  train_lm(cfg, corpus);
  TrainConfig crashed = cfg;
  crashed.save = temp_dir("finetune_crash_cut");
  fs::copy(cfg.save, crashed.save, fs::copy_options::recursive);
  cfg.epochs = crashed.epochs = 2;
  train_lm(cfg, corpus, {}, true);  // uninterrupted
  TrainHooks crash;
  crash.on_step = [](int64_t, double) { throw std::runtime_error("killed"); };
  EXPECT_EQ(mgtest::error_of([&] { train_lm(crashed, corpus, crash, true); }), "killed");
  ASSERT_TRUE(fs::exists(crashed.save + "/finetune.ckpt"));  // the start, saved before any step
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>([&] { train_lm(crashed, corpus, {}, true); }),
             "continue it with --resume");  // not a second finetune of the same model
  crashed.resume = true;
  train_lm(crashed, corpus, {}, true);
  EXPECT_EQ(read_file(crashed.save + "/best.ckpt", "model"),
            read_file(cfg.save + "/best.ckpt", "model"));
}

// A finetune ends when validation stops improving, which no flag records: resumed after that end
// (reproduce rerun after a kill before its results line), it trains no further epoch, and its
// records and best model stay as they were.
TEST(Trainer, AFinishedFinetuneResumedTrainsNoFurtherEpoch) {
  const Corpus corpus = load_corpus(write_synthetic_corpus("finetune_finished"));
  TrainConfig cfg = small_config(corpus.dir, temp_dir("finetune_finished"));
  cfg.epochs = 1;
  train_lm(cfg, corpus);
  cfg.epochs = 40, cfg.nonmono = 0, cfg.lr = 10;  // ends at the first epoch worse than the best
  const TrainResult tuned = train_lm(cfg, corpus, {}, true);
  ASSERT_LT(tuned.epochs_done, cfg.epochs) << "the finetune ran to its epoch cap";
  const std::string metrics = read_file(cfg.save + "/metrics.jsonl", "metrics");
  const std::string best = read_file(cfg.save + "/best.ckpt", "model");
  cfg.resume = true;
  const TrainResult resumed = train_lm(cfg, corpus, {}, true);
  EXPECT_EQ(resumed.steps, tuned.steps);
  EXPECT_EQ(resumed.epochs_done, tuned.epochs_done);
  EXPECT_EQ(read_file(cfg.save + "/metrics.jsonl", "metrics"), metrics);
  EXPECT_EQ(read_file(cfg.save + "/best.ckpt", "model"), best);
}

// A finetune's state holds its weights and their average (ASGD); the finetune validates, and keeps
// as best.ckpt, the average, so eval, export or generate of finetune.ckpt mean that model, not the
// last step's weights (which once scored 10% worse than the finetune said).
TEST(Trainer, AStateInItsAveragingPhaseStandsForItsAveragedWeights) {
  const Corpus corpus = load_corpus(write_synthetic_corpus("finetune_average"));
  TrainConfig cfg = small_config(corpus.dir, temp_dir("finetune_average"));
  cfg.epochs = 1;
  const TrainResult trained = train_lm(cfg, corpus);
  const TrainResult tuned = train_lm(cfg, corpus, {}, true);
  ASSERT_LT(tuned.best_val_loss, trained.best_val_loss) << "best.ckpt is the finetune's epoch";
  const LoadedModel state = load_model(cfg.save + "/finetune.ckpt");
  const LoadedModel best = load_model(cfg.save + "/best.ckpt");
  const auto s = state.model->named_parameters(), b = best.model->named_parameters();
  ASSERT_EQ(s.size(), b.size());
  for (size_t i = 0; i < s.size(); ++i)
    EXPECT_EQ(s[i].second.to_vector(), b[i].second.to_vector()) << s[i].first;
  // Not the weights of the last step, which the state holds beside them.
  const Checkpoint ck = load_checkpoint(cfg.save + "/finetune.ckpt");
  bool differs = false;
  for (const auto& [name, t] : ck.tensors)
    if (name.rfind("model.", 0) == 0)
      for (size_t i = 0; i < s.size(); ++i)
        if ("model." + s[i].first == name) differs |= t.to_vector() != s[i].second.to_vector();
  EXPECT_TRUE(differs);
}

TEST(Trainer, SafetensorsRoundTripGivesTheSameLogProbs) {
  ModelConfig mc;
  mc.ntoken = 17, mc.emsize = 6, mc.nhid = 7, mc.nhidlast = 5, mc.nlayers = 2, mc.n_experts = 3,
  mc.head = HeadKind::MoSig;
  RNNModel model(mc, 4);
  Vocab vocab;
  for (int i = 0; i < 17; ++i) vocab.add("w" + std::to_string(i));
  const std::string path = temp_dir("st") + "/model.safetensors";
  export_safetensors(path, model, vocab);
  const LoadedModel back = import_safetensors(path);
  EXPECT_EQ(back.vocab.size(), 17);
  EXPECT_EQ(back.model->config.summary(), mc.summary());
  const std::vector<int64_t> ids = {1, 5, 9, 16, 0, 3};
  model.eval(), back.model->eval();
  EXPECT_EQ(model.forward(ids, 3, 2, model.init_hidden(2)).log_prob.to_vector(),
            back.model->forward(ids, 3, 2, back.model->init_hidden(2)).log_prob.to_vector());
}

TEST(Trainer, EvaluationScoresEveryTargetOnce) {
  ModelConfig mc;
  mc.ntoken = 11, mc.emsize = 4, mc.nhid = 4, mc.nhidlast = 4, mc.nlayers = 1;
  RNNModel model(mc, 1);
  std::vector<int64_t> ids(103);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 7 % 11);
  const Batched data = batchify(ids, 10);  // 10 rows of 10
  const EvalResult r = evaluate(model, data, 4);
  EXPECT_EQ(r.targets, eval_target_count(data));
  EXPECT_EQ(r.targets, 90);
  // The loss is the mean over those targets: compare with one long segment.
  EXPECT_NEAR(evaluate(model, data, 100).loss, r.loss, 1e-5);
}

TEST(Trainer, DynamicEvaluationAdaptsToRepeatedText) {
  const Corpus corpus = load_corpus(write_synthetic_corpus("dyneval"));
  TrainConfig cfg = small_config(corpus.dir, temp_dir("dyneval"));
  cfg.epochs = 1;
  train_lm(cfg, corpus);
  // A text the model has never seen, repeated: adapting to it must lower its loss.
  std::vector<int64_t> text;
  for (int rep = 0; rep < 40; ++rep)
    for (const char* w : {"the", "fish", "buys", "N", "shares", "<eos>"})
      text.push_back(corpus.vocab.id(w));
  LoadedModel a = load_model(cfg.save + "/best.ckpt");
  const double static_loss = evaluate(*a.model, batchify(text, 1), 5).loss;
  DynevalConfig d;
  d.max_stat_batches = 20, d.stat_batch_size = 4, d.lr = 0.01f;
  const EvalResult dyn = dynamic_evaluate(*a.model, corpus.train, text, d);
  EXPECT_LT(dyn.loss, static_loss * 0.9) << "static " << static_loss << " dynamic " << dyn.loss;
}

TEST(Trainer, GenerationIsSeededAndUsesTheVocabulary) {
  const Corpus corpus = load_corpus(write_synthetic_corpus("generate"));
  TrainConfig cfg = small_config(corpus.dir, temp_dir("generate"));
  cfg.epochs = 1;
  train_lm(cfg, corpus);
  LoadedModel m = load_model(cfg.save + "/best.ckpt");
  GenerateConfig g;
  g.words = 20, g.seed = 3, g.prompt = "the cat";
  const auto a = generate(*m.model, m.vocab, g), b = generate(*m.model, m.vocab, g);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 20u);
  for (const auto& w : a) EXPECT_TRUE(corpus.vocab.contains(w)) << w;
  // Word by word as they are drawn (mosgrad generate prints each sentence as it ends): the same.
  std::vector<std::string> streamed;
  EXPECT_TRUE(
      generate(*m.model, m.vocab, g, [&](const std::string& w) { streamed.push_back(w); }).empty());
  EXPECT_EQ(streamed, a);
  g.seed = 4;
  EXPECT_NE(generate(*m.model, m.vocab, g), a);
  g.temperature = 0;
  EXPECT_THROW(generate(*m.model, m.vocab, g), std::invalid_argument);
}

TEST(Trainer, TinyPresetLearnsPennTreebank) {
  const std::string dir = mgtest::ptb_dir();
  MG_SKIP_WITHOUT_PTB(dir);
  const Corpus corpus = load_corpus(dir);
  TrainConfig cfg = preset_config("tiny");
  cfg.save = temp_dir("ptb_tiny");
  cfg.max_train_tokens = 150000;  // the first ~6,500 lines
  cfg.max_eval_tokens = 20000;
  cfg.epochs = 2, cfg.test_at_end = false, cfg.log_interval = 100000;
  const TrainResult r = train_lm(cfg, corpus);
  const double ppl = std::exp(r.best_val_loss);
  // A uniform guess is ppl 10,000; unigram frequencies alone give ~700 on PTB.
  EXPECT_LT(ppl, 450.0) << "validation perplexity after 2 epochs of 150k tokens";
  std::printf("tiny on 150k PTB tokens, 2 epochs: valid ppl %.1f (first 20k valid tokens)\n", ppl);
}

// --precision bf16 runs wherever the CPU has AVX512_BF16, but on Intel's it multiplies at about
// half the FP32 rate (mg::gemm_bf16_faster_than_fp32): the run's first lines say so, rather than
// leave a user believing bf16 is the fast path there.
TEST(Trainer, Bf16RunSaysWhenItIsSlowerThanFp32) {
  if (!gemm_bf16_kernel_name()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const Corpus corpus = load_corpus(write_synthetic_corpus("bf16_note"));
  TrainConfig cfg = small_config(corpus.dir, temp_dir("bf16_note"));
  cfg.max_steps = 1, cfg.paths.precision = "bf16";
  char* text = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&text, &size);
  ASSERT_NE(out, nullptr);
  ProgressDisplay display(out, false);
  TrainHooks hooks;
  hooks.display = &display;
  train_lm(cfg, corpus, hooks);
  std::fclose(out);
  const std::string printed(text, size);
  std::free(text);
  const bool slower = printed.find("bf16 (slower than fp32 on this CPU") != std::string::npos;
  EXPECT_EQ(slower, !gemm_bf16_faster_than_fp32()) << printed;
  EXPECT_NE(printed.find("threads, bf16"), std::string::npos) << printed;
}

// The speedrun presets (docs/speedrun.md) are whole recipes: budgeted in epochs, averaging (ASGD)
// from a fixed epoch inside the budget, bf16 exactly where it is faster; and they train.
TEST(Trainer, SpeedrunPresetsAreWholeRecipesThatTrain) {
  const Corpus corpus = load_corpus(write_synthetic_corpus("speedrun_presets"));
  for (const std::string name : {"ptb-1h", "ptb-3h"}) {
    TrainConfig cfg = preset_config(name);
    EXPECT_GT(cfg.asgd_epoch, 1) << name;
    EXPECT_LT(cfg.asgd_epoch, cfg.epochs) << name << ": the average starts inside the budget";
    EXPECT_EQ(cfg.paths.precision, gemm_bf16_faster_than_fp32() ? "bf16" : "fp32") << name;
    EXPECT_EQ(cfg.model.head, HeadKind::MoS) << name;
    cfg.data = corpus.dir, cfg.save = temp_dir("speedrun_" + name);
    cfg.max_steps = 3, cfg.max_eval_tokens = 200, cfg.test_at_end = false;
    const TrainResult r = train_lm(cfg, corpus, {});
    EXPECT_EQ(r.steps, 3) << name;
    EXPECT_TRUE(std::isfinite(r.best_val_loss)) << name;
  }
  EXPECT_GT(preset_config("ptb-3h").epochs, 2 * preset_config("ptb-1h").epochs);
}

// A finetune may use other dropouts than the model's training (they shape the steps, not the
// weights), but its first lines name each one that differs, with the trained value; the same
// flags print no such line.
TEST(Trainer, AFinetuneNamesTheDropoutsThatDifferFromTraining) {
  const Corpus corpus = load_corpus(write_synthetic_corpus("finetune_dropouts"));
  TrainConfig cfg = small_config(corpus.dir, temp_dir("finetune_dropouts"));
  cfg.epochs = 1;
  train_lm(cfg, corpus);
  auto finetune_prints = [&](const TrainConfig& ft) {
    const std::string save = temp_dir("finetune_dropouts_ft");
    std::filesystem::copy_file(cfg.save + "/best.ckpt", save + "/best.ckpt");
    TrainConfig run = ft;
    run.save = save, run.max_steps = 1;
    char* text = nullptr;
    size_t size = 0;
    std::FILE* out = open_memstream(&text, &size);
    ProgressDisplay display(out, false);
    TrainHooks hooks;
    hooks.display = &display;
    train_lm(run, corpus, hooks, true);
    std::fclose(out);
    const std::string printed(text, size);
    std::free(text);
    return printed;
  };
  EXPECT_EQ(finetune_prints(cfg).find("other dropouts"), std::string::npos);
  TrainConfig changed = cfg;
  changed.model.dropout = 0, changed.model.wdrop = 0.5f;
  EXPECT_HAS(
      finetune_prints(changed),
      "finetuning with other dropouts than " + temp_dir("finetune_dropouts_ft") +
          "/best.ckpt was trained with: --dropout 0 (trained with 0.2), --wdrop 0.5 (trained "
          "with 0.2)");
}
