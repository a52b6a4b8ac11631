#include "tests/fuzz/model_seeds.h"

#include <string>
#include <vector>

#include "lm/model_io.h"
#include "lm/train_state.h"

namespace mgfuzz {

mg::TrainConfig fuzz_state_config() {
  mg::TrainConfig c = mg::preset_config("tiny");
  c.model.ntoken = 5, c.model.emsize = 3, c.model.nhid = 4, c.model.nhidlast = 3;
  c.model.nlayers = 2, c.model.n_experts = 2, c.model.head = mg::HeadKind::MoS, c.model.tied = true;
  c.batch_size = 2;
  return c;
}

mg::Corpus fuzz_state_corpus() {
  mg::Corpus corpus;
  corpus.dir = "fuzz";
  for (const char* w : {"<eos>", "the", "cat", "<unk>", "sat"}) corpus.vocab.add(w);
  return corpus;
}

namespace {

void write_state_seeds(const std::filesystem::path& dir) {
  using namespace mg;
  std::filesystem::create_directories(dir);
  const Corpus corpus = fuzz_state_corpus();
  struct Seed {
    const char* name;
    const char* optimizer;
    OptimizerKind kind;
    int64_t epoch, step;
    std::vector<double> history;
  };
  const std::vector<Seed> seeds = {{"sgd_start", "sgd", OptimizerKind::SGD, 1, 0, {}},
                                   {"sgd_mid_epoch", "sgd", OptimizerKind::SGD, 3, 57, {5.1, 4.9}},
                                   {"asgd", "sgd", OptimizerKind::ASGD, 9, 800, {5, 4.8, 4.81}},
                                   {"adam", "adam", OptimizerKind::Adam, 2, 30, {5.2}}};
  for (const Seed& s : seeds) {
    TrainConfig cfg = fuzz_state_config();
    cfg.optimizer = s.optimizer;
    RNNModel model(cfg.model, 3);
    Progress progress;
    progress.opt = std::make_unique<Optimizer>(s.kind, model.named_parameters(), cfg.wdecay);
    TrainState& st = progress.st;
    st.optimizer = s.kind, st.epoch = s.epoch, st.step = s.step, st.tokens = s.step * 20;
    st.val_history = s.history;
    if (!s.history.empty()) st.best_val = s.history.back();
    progress.hidden = model.init_hidden(cfg.batch_size);
    progress.bptt_gen = Generator(11);
    save_state((dir / (std::string(s.name) + ".ckpt")).string(), cfg, model, progress,
               corpus.vocab);
  }
}

}  // namespace

void write_model_seeds(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  using namespace mg;
  Vocab vocab;
  for (const char* w : {"<eos>", "the", "cat", "<unk>", "sat"}) vocab.add(w);
  struct Seed {
    const char* name;
    HeadKind head;
    bool tied;
    int64_t layers, experts;
  };
  const std::vector<Seed> seeds = {{"softmax_tied", HeadKind::Softmax, true, 1, 1},
                                   {"sigsoftmax_untied", HeadKind::Sigsoftmax, false, 2, 1},
                                   {"mos", HeadKind::MoS, true, 2, 2},
                                   {"moc_untied", HeadKind::MoC, false, 1, 3}};
  fs::create_directories(root / "checkpoint");
  fs::create_directories(root / "safetensors");
  for (const Seed& s : seeds) {
    ModelConfig c;
    c.ntoken = vocab.size(), c.emsize = 3, c.nhid = 4, c.nhidlast = 3, c.nlayers = s.layers;
    c.head = s.head, c.tied = s.tied, c.n_experts = s.experts;
    RNNModel model(c, 7);
    save_model((root / "checkpoint" / (std::string(s.name) + ".ckpt")).string(), model, vocab,
               {{"val_loss", "1.5"}});
    export_safetensors((root / "safetensors" / (std::string(s.name) + ".safetensors")).string(),
                       model, vocab);
  }
  write_state_seeds(root / "train_state");
}

}  // namespace mgfuzz
