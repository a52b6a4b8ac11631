#include "tests/fuzz/model_seeds.h"

#include <string>
#include <vector>

#include "lm/model_io.h"

namespace mgfuzz {

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
}

}  // namespace mgfuzz
