// Files a careless or hostile user can hand mosgrad, one test per class of failure, each failing
// without the check it guards. "The same file" is decided by the file; best.ckpt is only
// replaced by a better model for the same words; metrics.jsonl holds whole lines of one history and
// is never written through a symlink; no targets is an error, not perplexity 1; a crafted state
// field is named in the error.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "analysis/rank.h"
#include "io/checkpoint.h"
#include "io/read_file.h"
#include "io/same_file.h"
#include "io/strf.h"
#include "lm/batching.h"
#include "lm/dyneval.h"
#include "lm/evaluate.h"
#include "lm/learning_curves.h"
#include "lm/metrics.h"
#include "lm/model_io.h"
#include "lm/train.h"
#include "lm/train_summary.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;
namespace fs = std::filesystem;

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The checkpoint's recorded validation loss of a model file.
double recorded_val_loss(const std::string& path) {
  return std::stod(load_checkpoint(path).string("val_loss"));
}

}  // namespace

// ---- "The same file" is decided by the file, not by how its path is spelled ----

TEST(FileIdentity, SpellingsLinksAndPathsThroughDotDotAreOneFile) {
  const mgtest::TempDir dir;
  const std::string x = dir.file("x.ckpt");
  write_text(x, "model");
  fs::create_directories(dir.file("sub"));
  fs::create_hard_link(x, dir.file("hard.ckpt"));
  fs::create_symlink(x, dir.file("soft.ckpt"));
  for (const std::string& other : {x, dir.file("./x.ckpt"), dir.file("sub/../x.ckpt"),
                                   dir.file("hard.ckpt"), dir.file("soft.ckpt")})
    EXPECT_TRUE(same_file(other, x)) << other;
  // Not there yet: the same file only where the path resolves to it.
  EXPECT_TRUE(same_file(dir.file("sub/../x.ckpt"), x));
  EXPECT_FALSE(same_file(dir.file("y.ckpt"), x));
  write_text(dir.file("y.ckpt"), "model");  // equal bytes, another file
  EXPECT_FALSE(same_file(dir.file("y.ckpt"), x));
  // The commands' check: export --model x.ckpt --out ./x.ckpt is refused, naming both.
  const std::string e = mgtest::error_of<std::invalid_argument>([&] {
    require_other_file("export", "--out", dir.file("./x.ckpt"), x, "the model being exported");
  });
  EXPECT_NE(e.find("export: --out"), std::string::npos) << e;
  EXPECT_NE(e.find("is the model being exported"), std::string::npos) << e;
  EXPECT_EQ(read_file(x, "x"), "model");
}

// ---- best.ckpt is only replaced by a better model, for the same words ----

TEST(BestModel, AFreshFinetuneRefusesAModelOfAnotherVocabulary) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("finetune_vocab_a"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("finetune_vocab_run"));
  cfg.epochs = 1;
  mgtest::run_collecting(cfg, corpus);
  const std::string best = cfg.save + "/best.ckpt";
  const std::string before = read_file(best, "best");
  // Another corpus with the same number of words in another order: same shapes, other meaning.
  const std::string other = mgtest::temp_dir("finetune_vocab_b");
  for (const char* split : {"train", "valid", "test"}) {
    std::string text = read_file(corpus.dir + "/ptb." + split + ".txt", "split");
    // Swap two words everywhere: the vocabulary (in order of first appearance) changes order.
    const std::string a = corpus.vocab.word(1), b = corpus.vocab.word(2);
    std::string swapped;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      for (std::string w; words >> w;) swapped += (w == a ? b : w == b ? a : w) + " ";
      swapped += "\n";
    }
    write_text(other + "/ptb." + split + ".txt", swapped);
  }
  const Corpus corpus_b = load_corpus(other);
  ASSERT_EQ(corpus_b.vocab.size(), corpus.vocab.size());
  ASSERT_NE(corpus_b.vocab.word(1), corpus.vocab.word(1));
  TrainConfig ft = cfg;
  ft.data = corpus_b.dir;
  const std::string e = mgtest::error_of([&] { train_lm(ft, corpus_b, {}, true); });
  EXPECT_NE(e.find("another vocabulary"), std::string::npos) << e;
  EXPECT_EQ(read_file(best, "best"), before);  // untouched
}

TEST(BestModel, AFinetuneRefusesAnotherHeadAndKeepsAFinetuneAlreadyThere) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("finetune_twice"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("finetune_twice_run"));
  cfg.epochs = 1, cfg.model.head = HeadKind::Softmax;
  mgtest::run_collecting(cfg, corpus);
  const std::string best = cfg.save + "/best.ckpt", state = cfg.save + "/finetune.ckpt";
  const std::string trained = read_file(best, "best");
  // Sigsoftmax's weights have softmax's shapes: without the check they would load, be finetuned
  // as another head and be saved over the trained model.
  TrainConfig other_head = cfg;
  other_head.model.head = HeadKind::Sigsoftmax;
  EXPECT_HAS(mgtest::error_of<std::exception>([&] { train_lm(other_head, corpus, {}, true); }),
             "holds a model made with --head softmax; the flags say --head sigsoftmax");
  EXPECT_EQ(read_file(best, "best"), trained);
  EXPECT_FALSE(fs::exists(state));
  // A finetune's progress is continued with --resume, never started over.
  cfg.max_steps = 2;
  train_lm(cfg, corpus, {}, true);
  const std::string progress = read_file(state, "finetune state");
  EXPECT_HAS(mgtest::error_of<std::exception>([&] { train_lm(cfg, corpus, {}, true); }),
             "already holds a finetune (" + state +
                 ", under way or finished; best.ckpt holds its best model): continue it with "
                 "--resume");
  EXPECT_EQ(read_file(state, "finetune state"), progress);
}

TEST(BestModel, AResumedRunKeepsABetterModelItDidNotMake) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("best_on_disk"));
  // A long run makes a good model ...
  TrainConfig good = mgtest::small_config(corpus.dir, mgtest::temp_dir("best_on_disk_good"));
  good.epochs = 6;
  mgtest::run_collecting(good, corpus);
  // ... a short one a worse model, and its state to resume from.
  TrainConfig run = mgtest::small_config(corpus.dir, mgtest::temp_dir("best_on_disk_run"));
  run.epochs = 1;
  mgtest::run_collecting(run, corpus);
  const double own_best = recorded_val_loss(run.save + "/best.ckpt");
  // The good model lands in the short run's directory (as a finetune's would).
  fs::copy_file(good.save + "/best.ckpt", run.save + "/best.ckpt",
                fs::copy_options::overwrite_existing);
  const std::string planted = read_file(run.save + "/best.ckpt", "best");
  const double planted_loss = recorded_val_loss(run.save + "/best.ckpt");
  ASSERT_LT(planted_loss, own_best);
  // One more epoch: better than the run's own best, not better than the planted model.
  run.resume = true, run.epochs = 2;
  TrainResult r;
  mgtest::run_collecting(run, corpus, &r);
  const LearningCurves curves =
      parse_metrics(read_file(run.save + "/metrics.jsonl", "metrics"), "metrics.jsonl");
  ASSERT_EQ(curves.val.size(), 2u);
  const double epoch2 = std::log(curves.val.back().y);
  ASSERT_LT(epoch2, own_best) << "the second epoch should improve on the first";
  ASSERT_GT(epoch2, planted_loss) << "the test needs the planted model to stay better";
  EXPECT_EQ(read_file(run.save + "/best.ckpt", "best"), planted);
  EXPECT_DOUBLE_EQ(r.best_val_loss, planted_loss);  // the run reports what the file holds
  const std::string metrics = read_file(run.save + "/metrics.jsonl", "metrics");
  EXPECT_NE(metrics.find("\"epoch\":2"), std::string::npos);
  EXPECT_EQ(metrics.find("\"best\":true", metrics.find("\"kind\":\"epoch\",\"epoch\":2")),
            std::string::npos)
      << "epoch 2 must not claim a saved best";
}

// A budget stop (--max-minutes, --max-steps) saves the state before it validates, so that --resume
// continues bit for bit; the state then knows nothing of that validation. A resumed run's summary
// used to be the best of its own validations since the resume: after `--max-minutes 1e-9` and
// three --resume on PTB, "best valid ppl 19894.46" while best.ckpt held 2329.81. It is what
// best.ckpt holds, as the run measures it.
TEST(BestModel, EveryResumedRunReportsTheModelBestCkptHolds) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("best_reported"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("best_reported_run"));
  const std::string best = cfg.save + "/best.ckpt";
  for (const int64_t steps : {1, 2, 3, 4}) {
    cfg.resume = steps > 1, cfg.max_steps = steps;
    cfg.lr = steps == 3 ? 40 : 5;  // the third step is far too large: a worse model
    TrainResult r;
    mgtest::run_collecting(cfg, corpus, &r);
    const double held = recorded_val_loss(best);
    if (steps == 3) {
      ASSERT_GT(r.final_val_loss, held) << "the test needs a validation worse than best.ckpt's";
    }
    EXPECT_DOUBLE_EQ(r.best_val_loss, held) << "after step " << steps;
    EXPECT_EQ(train_summary(r, best).at(0),
              strf("best valid ppl %.2f after %lld steps (reached --max-steps %lld)",
                   std::exp(held), static_cast<long long>(steps), static_cast<long long>(steps)));
  }
}

// ---- metrics.jsonl: no symlinks, whole lines, one history per file; plot reads a crash's file
// ----

TEST(MetricsFile, ASymlinkAtItsNameIsRefusedAndItsTargetUntouched) {
  const mgtest::TempDir dir;
  write_text(dir.file("victim.txt"), "keep me\n");
  fs::create_symlink(dir.file("victim.txt"), dir.file("metrics.jsonl"));
  const std::string e = mgtest::error_of([&] { MetricsWriter w(dir.file("metrics.jsonl")); });
  EXPECT_NE(e.find("symlink"), std::string::npos) << e;
  EXPECT_NE(mgtest::error_of([&] { drop_records_after(dir.file("metrics.jsonl"), 0); }), "");
  // train refuses it before any work
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("metrics_symlink"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, dir.str());
  const std::string t = mgtest::error_of<std::invalid_argument>([&] { train_lm(cfg, corpus, {}); });
  EXPECT_NE(t.find("symlink"), std::string::npos) << t;
  EXPECT_EQ(read_file(dir.file("victim.txt"), "victim"), "keep me\n");
  EXPECT_FALSE(fs::exists(dir.file("checkpoint.ckpt")));
}

TEST(MetricsFile, AFullDiskLeavesWholeLinesOnly) {
  const mgtest::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  MetricsWriter w(path);
  IntervalMetrics m;
  m.epoch = 1, m.step = 10, m.tokens = 100, m.loss = 5, m.lr = 20;
  w.write(m);
  const std::string before = read_file(path, "metrics");
  // The file may grow by 20 more bytes only: the next line (~150 bytes) gets part-way, then the
  // disk is "full" (EFBIG with SIGXFSZ ignored, as ENOSPC would be).
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = before.size() + 20;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  m.step = 20;
  const std::string e = mgtest::error_of([&] { w.write(m); });
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(e.find("cannot write metrics file"), std::string::npos) << e;
  EXPECT_EQ(read_file(path, "metrics"), before);  // the part that got out was cut back off
  w.write(m);  // and the file goes on with whole lines once there is room
  EXPECT_EQ(read_file(path, "metrics").substr(0, before.size()), before);
}

TEST(MetricsFile, AFreshRunSetsAnEarlierRunsRecordsAside) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("metrics_aside"));
  const std::string save = mgtest::temp_dir("metrics_aside_run");
  fs::create_directories(save);
  // A run killed before its first checkpoint left records and nothing else.
  const std::string old_records = "{\"kind\":\"interval\",\"epoch\":1,\"step\":999,\"tokens\":5}\n";
  write_text(save + "/metrics.jsonl", old_records);
  TrainConfig cfg = mgtest::small_config(corpus.dir, save);
  cfg.epochs = 1;
  mgtest::run_collecting(cfg, corpus);
  EXPECT_EQ(read_file(save + "/metrics.jsonl.1", "aside"), old_records);
  const std::string fresh = read_file(save + "/metrics.jsonl", "metrics");
  EXPECT_EQ(fresh.find("\"step\":999"), std::string::npos) << "one history per file";
  EXPECT_NE(fresh.find("\"kind\":\"epoch\""), std::string::npos);
}

TEST(MetricsFile, PlotSkipsATornLastLineButNotABrokenOne) {
  const mgtest::TempDir dir;
  const std::string good =
      "{\"kind\":\"interval\",\"epoch\":1,\"step\":10,\"tokens\":100,\"loss\":5,\"ppl\":148}\n"
      "{\"kind\":\"epoch\",\"epoch\":1,\"step\":20,\"tokens\":200,\"val_loss\":4.9,"
      "\"val_ppl\":134}\n";
  write_text(dir.file("metrics.jsonl"), good + "{\"kind\":\"interval\",\"epo");  // a crash's end
  EXPECT_EQ(mgtest::error_of([&] {
              plot_learning_curves(dir.file("metrics.jsonl"), dir.file("curves.svg"), "t");
            }),
            "");
  EXPECT_TRUE(fs::exists(dir.file("curves.svg")));
  write_text(dir.file("metrics.jsonl"), "{\"kind\":\"interval\",\"epo\n" + good);  // not a crash
  EXPECT_NE(mgtest::error_of([&] {
              plot_learning_curves(dir.file("metrics.jsonl"), dir.file("curves.svg"), "t");
            }),
            "");
}

// ---- No targets, no score ----

TEST(EmptyInputs, NoTargetsIsAnErrorNotPerplexityOne) {
  const std::string e = mgtest::error_of<std::invalid_argument>(
      [] { require_eval_targets(5, 10, "the test split of data/x"); });
  EXPECT_NE(e.find("the test split of data/x has no targets at batch size 10"), std::string::npos)
      << e;
  EXPECT_EQ(mgtest::error_of<std::invalid_argument>([] { require_eval_targets(20, 10, "x"); }), "");
  ModelConfig c;
  c.ntoken = 5, c.emsize = 4, c.nhid = 6, c.nhidlast = 4, c.nlayers = 1, c.head = HeadKind::Softmax;
  RNNModel model(c, 1);
  const std::vector<int64_t> three = {1, 2, 3};
  EXPECT_NE(mgtest::error_of<std::invalid_argument>([&] {
              evaluate(model, batchify(three, 3), 5);
            }).find("no targets"),
            std::string::npos);
  EXPECT_NE(mgtest::error_of<std::invalid_argument>([&] {
              dynamic_evaluate(model, {1, 2, 3, 4, 1, 2, 3, 4}, {1}, DynevalConfig{});
            }).find("no targets"),
            std::string::npos);
  RankOptions ro;
  ro.batch_size = 3;
  EXPECT_NE(mgtest::error_of<std::invalid_argument>([&] {
              model_rank(model, three, ro);
            }).find("no targets"),
            std::string::npos);
}

TEST(EmptyInputs, TrainingRefusesAnEmptyTestSplitBeforeTrainingWhenItWouldScoreIt) {
  const std::string data = mgtest::write_synthetic_corpus("empty_test_split");
  write_text(data + "/ptb.test.txt", "a b\n");  // 3 tokens: no targets in 10 columns
  const Corpus corpus = load_corpus(data);
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("empty_test_split_run"));
  cfg.test_at_end = true, cfg.test_batch_size = 10;
  const std::string e = mgtest::error_of<std::invalid_argument>([&] { train_lm(cfg, corpus, {}); });
  EXPECT_NE(e.find("the test split of"), std::string::npos) << e;
  EXPECT_NE(e.find("--test-at-end false"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(cfg.save + "/checkpoint.ckpt"));
}

// ---- A crafted field of the state file is named in the error ----

TEST(StateFile, EachCraftedFieldIsNamedWithTheFile) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("crafted_state"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("crafted_state_run"));
  cfg.max_steps = 5;
  mgtest::run_collecting(cfg, corpus);
  const std::string state = cfg.save + "/checkpoint.ckpt";
  const Checkpoint good = load_checkpoint(state);
  struct Case {
    std::string field, value, expect;
  };
  for (const Case& c : std::vector<Case>{{"step", "abc", "an integer"},
                                         {"step", "12x", "an integer"},
                                         {"epoch", "-3", "an integer in [1,"},
                                         {"best_val", "nan", "a number (or inf)"},
                                         {"elapsed_s", "inf", "a finite number"},
                                         {"val_history", "4.5 x", "finite numbers"},
                                         {"dropout_gen", "1 -2", "two unsigned integers"},
                                         {"bptt_gen", "1", "two unsigned integers"},
                                         {"optimizer_kind", "sgdx", "sgd, asgd or adam"},
                                         {"optimizer_steps", "1e3", "an integer"}}) {
    Checkpoint ck = good;
    ck.strings[c.field] = c.value;
    save_checkpoint(state, ck.tensors, ck.strings);  // a valid CRC: the file is "intact"
    TrainConfig resume = cfg;
    resume.resume = true, resume.max_steps = 6;
    const std::string e = mgtest::error_of([&] { train_lm(resume, corpus, {}); });
    EXPECT_NE(e.find("state file " + state + ": field '" + c.field + "' is '" + c.value + "'"),
              std::string::npos)
        << c.field << "=" << c.value << ": " << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << e;
  }
  // A hidden state of another shape is the file's fault, said as such (not the LSTM's).
  Checkpoint ck = good;
  for (auto& [name, t] : ck.tensors)
    if (name == "hidden.0.h") t = Tensor::zeros({3, t.size(1)});
  save_checkpoint(state, ck.tensors, ck.strings);
  TrainConfig resume = cfg;
  resume.resume = true, resume.max_steps = 6;
  const std::string e = mgtest::error_of([&] { train_lm(resume, corpus, {}); });
  EXPECT_NE(e.find("field 'hidden.0.h'"), std::string::npos) << e;
  EXPECT_NE(e.find("--batch_size 4"), std::string::npos) << e;
  // And the good file still resumes.
  save_checkpoint(state, good.tensors, good.strings);
  TrainConfig ok = cfg;
  ok.resume = true, ok.max_steps = 6;
  EXPECT_EQ(mgtest::error_of([&] { train_lm(ok, corpus, {}); }), "");
}

TEST(MetricsFile, AResumeEndsAnUnterminatedLastRecordBeforeAppending) {
  const mgtest::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  const std::string record = "{\"kind\":\"interval\",\"epoch\":1,\"step\":10,\"tokens\":100}";
  write_text(path, record);  // whole, but its newline never got out
  drop_records_after(path, 1000);
  EXPECT_EQ(read_file(path, "metrics"), record + "\n");
  MetricsWriter w(path);  // the next record starts on a line of its own
  IntervalMetrics m;
  m.step = 20;
  w.write(m);
  const std::string text = read_file(path, "metrics");
  EXPECT_EQ(text.substr(0, record.size() + 1), record + "\n");
  EXPECT_EQ(text.back(), '\n');
}
