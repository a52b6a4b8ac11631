// What a damaged or hostile file and a diverging run must not do: load NaN weights, unknown
// tensors, out-of-range settings or a vocabulary that does not fit; or train on from a non-finite
// gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "io/checkpoint.h"
#include "io/read_file.h"
#include "lm/metrics.h"
#include "lm/model_io.h"
#include "lm/train.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;

namespace {

ModelConfig small_model() {
  ModelConfig c;
  c.ntoken = 5, c.emsize = 4, c.nhid = 6, c.nhidlast = 4, c.nlayers = 1, c.head = HeadKind::Softmax,
  c.tied = true;
  return c;
}

Vocab five_words() {
  Vocab v;
  for (const char* w : {"<eos>", "a", "b", "c", "d"}) v.add(w);
  return v;
}

// Saves a good model, then rewrites its file with `change` applied to the tensors and strings.
template <typename Change>
std::string damaged_model(const mgtest::TempDir& dir, Change change) {
  const std::string path = dir.file("model.ckpt");
  RNNModel model(small_model(), 1);
  save_model(path, model, five_words());
  Checkpoint ck = load_checkpoint(path);
  change(ck);
  save_checkpoint(path, ck.tensors, ck.strings);
  return path;
}

std::string load_error(const std::string& path) {
  return mgtest::error_of([&] { load_model(path); });
}

}  // namespace

TEST(Reliability, LoadingRefusesWhatWouldScoreNonsense) {
  const mgtest::TempDir dir;
  EXPECT_EQ(load_error(damaged_model(dir, [](Checkpoint&) {})), "");  // the undamaged file loads
  std::string e = load_error(damaged_model(dir, [](Checkpoint& ck) {
    for (auto& [name, t] : ck.tensors)
      if (name == "model.decoder.bias")
        t = Tensor::full(t.shape(), std::numeric_limits<float>::quiet_NaN());
  }));
  EXPECT_HAS(e, "parameter 'decoder.bias' holds nan at element 0");
  e = load_error(damaged_model(dir, [](Checkpoint& ck) {
    ck.tensors.emplace_back("model.extra.weight", Tensor::ones({2}));
  }));
  EXPECT_HAS(e, "tensor 'model.extra.weight' is not a parameter of this model");
  e = load_error(damaged_model(dir, [](Checkpoint& ck) { ck.strings["model.dropout"] = "1.5"; }));
  EXPECT_HAS(e, "model.dropout = 1.500000 is outside [0, 1)");
  e = load_error(damaged_model(
      dir, [](Checkpoint& ck) { ck.strings["model.emsize"] = "9223372036854775807"; }));
  EXPECT_HAS(e, "model.emsize = 9223372036854775807 is outside [1, 1048576]");
  e = load_error(damaged_model(dir, [](Checkpoint& ck) { ck.strings["model.emsize"] = "4xyz"; }));
  EXPECT_HAS(e, "model config: emsize = '4xyz' is not an integer");  // not read as 4
  e = load_error(damaged_model(dir, [](Checkpoint& ck) { ck.strings["model.tied"] = "yes"; }));
  EXPECT_HAS(e, "model config: tied = 'yes' is not 0 or 1");
  e = load_error(damaged_model(dir, [](Checkpoint& ck) { ck.strings["vocab"] = "<eos>\na\nb\n"; }));
  EXPECT_HAS(e, "the stored vocabulary has 3 words but the model has ntoken = 5");
  // Five lines, one word twice: named as such, not as four words against ntoken 5.
  e = load_error(
      damaged_model(dir, [](Checkpoint& ck) { ck.strings["vocab"] = "<eos>\na\nb\na\nc\n"; }));
  EXPECT_HAS(e, "the stored vocabulary lists the word 'a' twice (words 2 and 4)");
  // Words no corpus can hold (a carriage return, a space, a NUL byte, an empty line, a terminal
  // escape, bytes that are not UTF-8) make a model that no corpus could ever match: refused, the
  // word shown with its control characters and stray bytes escaped.
  const std::vector<std::pair<std::string, std::string>> unholdable = {
      {"<eos>\na\r\nb\nc\nd\n", "word 2, \"a\\r\", is no word a corpus can hold"},
      {"<eos>\na\nb c\nc\nd\n", "word 3, 'b c', is no word a corpus can hold"},
      {std::string("<eos>\na\nb\0x\nc\nd\n", 16), "word 3, \"b\\u0000x\", is no word"},
      {"<eos>\na\n\nc\nd\n", "word 3, '', is no word a corpus can hold"},
      {"<eos>\na\n\x1b[31mb\nc\nd\n", "word 3, \"\\u001b[31mb\", is no word"},
      {"<eos>\na\nb\xff\nc\nd\n",
       "word 3, 'b\\xff', is no word a corpus can hold (it is "
       "empty, or has whitespace, a control character or bytes "
       "that are not UTF-8 in it)"}};
  for (const auto& [vocab, message] : unholdable) {
    e = load_error(damaged_model(dir, [&](Checkpoint& ck) { ck.strings["vocab"] = vocab; }));
    EXPECT_HAS(e, message);
  }
  // A config far larger than the weights stored: refused before a model of that size is allocated
  // (2^20 x 2^20 floats would be 4 TB).
  e = load_error(damaged_model(dir, [](Checkpoint& ck) {
    ck.strings["model.ntoken"] = "1048576", ck.strings["model.emsize"] = "1048576";
  }));
  EXPECT_HAS(e, "its config describes a model of");
  EXPECT_HAS(e, "but it holds only 185 parameter values");
}

// The count the loaders check a file against, computed from the config alone, must be the built
// model's, for every head, tied or not, one layer or three.
TEST(Reliability, ParameterCountFromTheConfigIsTheBuiltModels) {
  for (HeadKind head :
       {HeadKind::Softmax, HeadKind::Sigsoftmax, HeadKind::MoS, HeadKind::MoSig, HeadKind::MoC})
    for (bool tied : {true, false})
      for (int64_t layers : {1, 3}) {
        ModelConfig c = small_model();
        c.head = head, c.tied = tied, c.nlayers = layers, c.n_experts = 3, c.nhidlast = 5;
        EXPECT_EQ(c.parameter_count(), RNNModel(c, 1).parameter_count()) << c.summary();
      }
}

TEST(Reliability, ANonFiniteGradientStopsTrainingBeforeTheUpdate) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("diverge"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("diverge"));
  // The first update makes the weights inf (and NaN where a gradient was 0), so the second step's
  // gradient is NaN. (A merely huge lr gives a finite absurd loss first, which has its own check.)
  cfg.lr = std::numeric_limits<float>::infinity(), cfg.clip = 0;
  try {
    train_lm(cfg, corpus);
    FAIL() << "a diverging run trained on";
  } catch (const std::runtime_error& e) {
    EXPECT_HAS(std::string(e.what()), "training diverged: the gradient norm is");
  }
  EXPECT_FALSE(std::filesystem::exists(cfg.save + "/best.ckpt"));  // nothing non-finite was kept
}

TEST(Reliability, OutOfMemoryIsAClearErrorNotAnAbort) {
  try {
    // 4 EiB: more than any address space holds. (4 TiB, tried first, was granted lazily on a
    // 128 GiB machine that overcommits memory, so the test must not depend on the machine.)
    Tensor::empty({int64_t{1} << 60});
    FAIL() << "a 4 EiB tensor was allocated";
  } catch (const std::runtime_error& e) {
    EXPECT_HAS(std::string(e.what()), "out of memory: a tensor of 4398046511104");
  }
  EXPECT_EQ(Tensor::ones({3}).to_vector(),
            std::vector<float>(3, 1.0f));  // and the allocator still works
}

TEST(Reliability, TheTrainStateRecordsTheCorpusVocabularySize) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("ntoken"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("ntoken"));
  cfg.max_steps = 2;
  train_lm(cfg, corpus);
  EXPECT_EQ(load_checkpoint(cfg.save + "/checkpoint.ckpt").string("model.ntoken"),
            std::to_string(corpus.vocab.size()));
}

// A run killed between two checkpoints has written records past the checkpoint's step; resuming
// must not write those steps a second time.
TEST(Reliability, ResumeDoesNotRepeatStepsInTheMetricsFile) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("metrics_resume"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("metrics_resume"));
  cfg.log_interval = 2, cfg.max_steps = 6, cfg.epochs = 1;
  train_lm(cfg, corpus);
  {  // what the killed run wrote after its last checkpoint, and a line torn by the kill
    std::ofstream out(cfg.save + "/metrics.jsonl", std::ios::app);
    out << "{\"kind\":\"interval\",\"epoch\":1,\"step\":8,\"loss\":1}\n{\"kind\":\"inter";
  }
  cfg.resume = true, cfg.max_steps = 10;
  train_lm(cfg, corpus);
  std::istringstream lines(read_file(cfg.save + "/metrics.jsonl", "metrics"));
  std::vector<int64_t> steps;
  for (std::string line; std::getline(lines, line);) {
    ASSERT_EQ(line.find("\"inter\n"), std::string::npos);
    const size_t at = line.find("\"step\":");
    if (line.find("\"kind\":\"interval\"") != std::string::npos && at != std::string::npos)
      steps.push_back(std::stoll(line.substr(at + 7)));
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 4, 6, 8, 10}));
}

TEST(Reliability, AStopRecordsItsValidationInTheMetricsFile) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("stop_record"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("stop_record"));
  cfg.max_steps = 3;
  const TrainResult r = train_lm(cfg, corpus);
  const std::string text = read_file(cfg.save + "/metrics.jsonl", "metrics");
  EXPECT_HAS(text, "\"kind\":\"epoch\",\"epoch\":1,\"step\":3");
  EXPECT_HAS(text, "\"at_stop\":true");
  EXPECT_TRUE(std::isfinite(r.final_val_loss));
}

// Every line mosgrad writes goes out whole, so a line that does not parse and is not an
// unterminated last one (a kill's torn write) was put there by someone: a resume refuses it,
// naming the line, and leaves the file as it was, instead of dropping it with the records after
// the checkpoint.
TEST(MetricsFile, AResumeRefusesALineMosgradDidNotWriteAndChangesNothing) {
  const mgtest::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  const std::string r10 = "{\"kind\":\"interval\",\"epoch\":1,\"step\":10,\"tokens\":100}\n",
                    r20 = "{\"kind\":\"interval\",\"epoch\":1,\"step\":20,\"tokens\":200}\n";
  for (const std::string& text : {r10 + "{garbage line\n" + r20, r10 + r20 + "my note\n"}) {
    mgtest::write_bytes(path, text);
    const size_t bad_line = text.find("garbage") != std::string::npos ? 2 : 3;
    const std::string e = mgtest::error_of([&] { drop_records_after(path, 15); });
    EXPECT_NE(e.find(path + ":" + std::to_string(bad_line) + ": not a metrics record"),
              std::string::npos)
        << e;
    EXPECT_EQ(read_file(path, "metrics"), text);
  }
  // A torn last line (no newline) is still dropped, with the records past the checkpoint; a blank
  // line is no record and stays.
  mgtest::write_bytes(path, r10 + "\n" + r20 + "{\"kind\":\"inter");
  drop_records_after(path, 15);
  EXPECT_EQ(read_file(path, "metrics"), r10 + "\n");
}
