#include "tests/test_trainer_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

using namespace mg;
namespace fs = std::filesystem;

namespace mgtest {

std::shared_ptr<RNNModel> scaled_tiny_model(int64_t V, float scale, HeadKind head) {
  ModelConfig c;
  c.ntoken = V, c.emsize = 6, c.nhid = 10, c.nhidlast = 8, c.nlayers = 2, c.n_experts = 2;
  c.head = head, c.tied = false;
  c.dropout = c.dropouth = c.dropouti = c.dropoute = c.dropoutl = c.wdrop = 0;
  auto m = std::make_shared<RNNModel>(c, 5);
  for (auto& [name, p] : m->named_parameters())
    for (float *x = p.data(), *end = x + p.numel(); x != end; ++x) *x *= scale;
  return m;
}

namespace {
// Every directory temp_dir made, removed when the test program exits (they used to pile up in
// /tmp).
std::vector<fs::path>& made_dirs() {
  static auto* dirs = new std::vector<fs::path>();
  return *dirs;
}
void remove_made_dirs() {
  std::error_code ec;
  for (const fs::path& dir : made_dirs()) fs::remove_all(dir, ec);
}
}  // namespace

std::string temp_dir(const std::string& name) {
  const fs::path dir =
      fs::path(testing::TempDir()) / ("mosgrad_trainer_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  static const bool registered = std::atexit(remove_made_dirs) == 0;
  (void)registered;
  made_dirs().push_back(dir);
  return dir.string();
}

// A corpus with structure a small LSTM can learn: sentences from a tiny grammar, deterministic.
std::string write_synthetic_corpus(const std::string& name) {
  const std::string dir = temp_dir(name + "_data");
  const char* subjects[] = {"the cat", "a dog", "the old man", "my friend", "the bank"};
  const char* verbs[] = {"sees", "likes", "sells", "buys", "finds"};
  const char* objects[] = {"the fish", "a house", "N shares", "the <unk>", "a car"};
  Generator gen(5);
  auto sentence = [&]() {
    auto pick = [&](int n) {
      return static_cast<int>(philox_uniform(gen.seed, gen.advance(1)) * n) % n;
    };
    return std::string(subjects[pick(5)]) + " " + verbs[pick(5)] + " " + objects[pick(5)] + "\n";
  };
  for (const auto& [file, lines] : std::vector<std::pair<std::string, int>>{
           {"ptb.train.txt", 600}, {"ptb.valid.txt", 80}, {"ptb.test.txt", 80}}) {
    std::ofstream out(dir + "/" + file);
    for (int i = 0; i < lines; ++i) out << sentence();
  }
  return dir;
}

// A small MoS model with every dropout switched on, so exact resume must restore the RNG streams
// too.
TrainConfig small_config(const std::string& data, const std::string& save) {
  TrainConfig c = preset_config("tiny");
  c.data = data, c.save = save;
  c.model.emsize = 8, c.model.nhid = 12, c.model.nhidlast = 10, c.model.nlayers = 2,
  c.model.n_experts = 2;
  c.model.head = HeadKind::MoS;
  c.model.dropout = 0.2f, c.model.dropouth = 0.1f, c.model.dropouti = 0.1f, c.model.dropoute = 0.1f;
  c.model.dropoutl = 0.1f, c.model.wdrop = 0.2f;
  c.alpha = 2, c.beta = 1, c.wdecay = 1e-6f;
  c.batch_size = 4, c.bptt = 10, c.eval_batch_size = 4, c.lr = 5, c.epochs = 3, c.nonmono = 1;
  c.log_interval = 1000, c.test_at_end = false;
  return c;
}

std::vector<double> run_collecting(const TrainConfig& cfg, const Corpus& corpus,
                                   TrainResult* result) {
  std::vector<double> losses;
  TrainHooks hooks;
  hooks.on_step = [&](int64_t, double loss) { losses.push_back(loss); };
  const TrainResult r = train_lm(cfg, corpus, hooks);
  if (result) *result = r;
  return losses;
}

std::string ptb_dir() {
  return resolve_data_dir();
}

bool has_ptb(const std::string& dir) {
  for (const char* split : {"train", "valid", "test"})
    if (!fs::exists(fs::path(dir) / (std::string("ptb.") + split + ".txt"))) return false;
  return true;
}

}  // namespace mgtest
