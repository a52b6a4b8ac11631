// A command's result is a number or an error: eval, dyneval, pointer and rank fail (an exception,
// exit status 1 from the program) when their perplexity or spectrum is NaN or Inf, naming the
// likely cause, the flag and its value or the model, instead of printing "ppl nan" and exiting 0.
// The trainer's summary lines (lm/train_summary.h) obey the same rule.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "cli/commands.h"
#include "lm/corpus.h"
#include "lm/dyneval.h"
#include "lm/model_io.h"
#include "lm/train_summary.h"
#include "tests/pattern.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;

namespace {

// A synthetic corpus and a model file for its words: the tiny model with its initial weights
// times `scale` (3: peaked like a trained model; 1e30: finite weights whose outputs overflow).
struct ModelOnCorpus {
  std::string data, model;
};
ModelOnCorpus model_on_corpus(const std::string& name, float scale) {
  ModelOnCorpus m;
  m.data = mgtest::write_synthetic_corpus(name);
  const Corpus corpus = load_corpus(m.data);
  m.model = mgtest::temp_dir(name + "_model") + "/model.ckpt";
  save_model(m.model, *mgtest::scaled_tiny_model(corpus.vocab.size(), scale), corpus.vocab);
  return m;
}

// Runs `mosgrad <words>` as the program does (cli/mosgrad.cpp prints what run throws and exits 1)
// and returns the message of the std::runtime_error it throws ("" when it returns).
std::string error_of_command(std::vector<std::string> words) {
  words.insert(words.begin(), "mosgrad");
  return mgtest::error_of<std::exception>([&] {
    CommandLine c = parse_command(words);
    find_command(words[1]).run(c);
  });
}

}  // namespace

TEST(FiniteResults, EvalOfAModelWhoseOutputsOverflowFailsNamingTheModel) {
  const ModelOnCorpus m = model_on_corpus("finite_eval", 1e30f);
  const std::string e =
      error_of_command({"eval", "--model", m.model, "--data", m.data, "--split", "valid"});
  EXPECT_HAS(e, "eval: the valid perplexity is not finite");
  EXPECT_HAS(e, "--model " + m.model);
}

// Where dyneval stopped: the target its error names, and the number of targets.
std::pair<long, long> stopped_at(const std::string& e) {
  const std::vector<std::string> m = mgtest::Pattern("at target ([0-9]+) of ([0-9]+)").search(e);
  if (m.empty()) return {-1, -1};
  return {std::stol(m[1]), std::stol(m[2])};
}

// On PTB, --lr 1e6, --epsilon 1e-12 and --lr 1000 printed "ppl inf", "ppl inf" and "ppl nan",
// exit status 0, after the whole text.
TEST(FiniteResults, DynevalWhoseStepsDivergeFailsNamingTheFlagAsSoonAsItCannotBeFinite) {
  const ModelOnCorpus m = model_on_corpus("finite_dyneval", 3);
  const std::vector<std::string> base = {"dyneval", "--model", m.model, "--data",
                                         m.data,    "--split", "valid"};
  for (const auto& [value, named] : std::vector<std::pair<std::string, std::string>>{
           {"1e6", "likely cause --lr 1e+06 (default 0.002)"},
           {"1000", "likely cause --lr 1000 (default 0.002)"}}) {
    std::vector<std::string> words = base;
    words.insert(words.end(), {"--lr", value});
    const std::string e = error_of_command(words);
    EXPECT_HAS(e, "adaptation step");
    EXPECT_HAS(e, "the perplexity cannot be finite: the steps diverged; " + named);
    // It stops where the result is known, not after the whole text.
    const auto [target, targets] = stopped_at(e);
    EXPECT_GT(target, 0) << e;
    EXPECT_LT(target, targets / 2) << e;
  }
  // ε: on PTB the decoder rows of rare words get tiny statistics MS, and ε = 1e-12 no longer
  // bounds their steps η·∇/(MS+ε). The same here, every MS made as tiny, through the library (what
  // the command and reproduce call).
  const Corpus corpus = load_corpus(m.data);
  DynevalConfig cfg;
  LoadedModel lm = load_model(m.model);
  DynevalStats stats = gradient_statistics(*lm.model, corpus.train, cfg);
  for (auto& ms : stats.ms)
    for (float& x : ms) x = 1e-11f;
  EXPECT_TRUE(std::isfinite(dynamic_evaluate(*lm.model, stats, corpus.valid, cfg).loss));
  cfg.epsilon = 1e-12f;
  lm = load_model(m.model);
  const std::string e =
      mgtest::error_of([&] { dynamic_evaluate(*lm.model, stats, corpus.valid, cfg); });
  EXPECT_HAS(e, "likely cause --epsilon 1e-12 (default 0.001)");
  EXPECT_LT(stopped_at(e).first, stopped_at(e).second / 2) << e;
  // The defaults give a finite result on the same model.
  EXPECT_EQ(error_of_command(base), "");
}

TEST(FiniteResults, DynevalOfAModelWhoseOutputsOverflowBlamesTheModelNotTheSteps) {
  const ModelOnCorpus m = model_on_corpus("finite_dyneval_model", 1e30f);
  const std::string e =
      error_of_command({"dyneval", "--model", m.model, "--data", m.data, "--split", "valid"});
  EXPECT_HAS(e, "before any adaptation step");
  EXPECT_HAS(e, "the model itself");
}

TEST(FiniteResults, PointerRefusesLambdasmOneAndFailsNamingTheModel) {
  const ModelOnCorpus m = model_on_corpus("finite_pointer", 3);
  // λ = 1: the cache alone, which gives a word it has not seen within --window probability 0:
  // refused before any work.
  const std::string e = error_of_command({"pointer", "--model", m.model, "--data", m.data,
                                          "--split", "valid", "--lambdasm", "1", "--window", "2"});
  EXPECT_HAS(e, "--lambdasm must be in [0, 1), got 1");
  EXPECT_EQ(error_of_command({"pointer", "--model", m.model, "--data", m.data, "--split", "valid",
                              "--lambdasm", "0.5", "--window", "2"}),
            "");
  const ModelOnCorpus bad = model_on_corpus("finite_pointer_model", 1e30f);
  for (const char* grid : {"false", "true"}) {  // --grid scores valid first, then the split
    const std::string b = error_of_command(
        {"pointer", "--model", bad.model, "--data", bad.data, "--split", "test", "--grid", grid});
    EXPECT_HAS(b, std::string("pointer: the model's own ") + (grid[0] == 't' ? "valid" : "test") +
                      " perplexity is not finite");
    EXPECT_HAS(b, "--model " + bad.model);
  }
}

TEST(FiniteResults, RankOfAModelWhoseOutputsOverflowFailsAndWritesNothing) {
  const ModelOnCorpus m = model_on_corpus("finite_rank", 1e30f);
  const std::string out = mgtest::temp_dir("finite_rank_out") + "/rank";
  // N <= V: A whole; N > V: A folded in by blocks (V is about 25 here).
  for (const char* contexts : {"10", "60"}) {
    const std::string e = error_of_command(
        {"rank", "--model", m.model, "--data", m.data, "--contexts", contexts, "--out", out});
    EXPECT_HAS(e, "rank: the model's log-probability of word 0 in context 0 is");
    EXPECT_HAS(e, "not finite: its weights are finite but its outputs overflow");
    EXPECT_FALSE(std::filesystem::exists(out + "/spectrum.csv"));
  }
}

// The lines train and finetune end with: what best.ckpt holds, or an error naming it.
TEST(FiniteResults, TheTrainersSummaryIsFiniteOrAnErrorNamingTheFile) {
  const mgtest::TempDir dir;
  const std::string best = dir.file("best.ckpt");
  TrainResult r;
  r.steps = 7;
  ASSERT_EQ(train_summary(r, best),
            std::vector<std::string>{"7 steps, no epoch finished yet, so no validation"});
  r.best_val_loss = std::log(123.456), r.stopped = true, r.stop_reason = "reached --max-steps 7";
  ASSERT_EQ(
      train_summary(r, best),
      std::vector<std::string>{"best valid ppl 123.46 after 7 steps (reached --max-steps 7)"});
  r.tested = true, r.test_loss = std::log(150.0);
  EXPECT_EQ(train_summary(r, best).back(), "test ppl 150.00");
  // A test score that is not finite is not "no test".
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), 800.0}) {
    r.test_loss = bad;
    const std::string e = mgtest::error_of([&] { train_summary(r, best); });
    EXPECT_HAS(e, "the test perplexity of " + best + " is not finite");
  }
  r.tested = false;
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), 800.0}) {
    r.best_val_loss = bad;
    EXPECT_HAS(mgtest::error_of([&] { train_summary(r, best); }),
               "the validation perplexity of " + best + " is not finite");
  }
  // No score, but a best.ckpt: a model the run could not score (it would say "no validation").
  mgtest::write_bytes(best, "model");
  r.best_val_loss = std::numeric_limits<double>::infinity();
  EXPECT_HAS(mgtest::error_of([&] { train_summary(r, best); }),
             "the validation perplexity of " + best + " is not finite");
}
