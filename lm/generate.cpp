#include "lm/generate.h"

#include <cmath>
#include <sstream>

#include "autograd/node.h"
#include "autograd/ops.h"

namespace mg {

std::vector<std::string> generate(RNNModel& model, const Vocab& vocab, const GenerateConfig& cfg,
                                  const std::function<void(const std::string&)>& on_word) {
  if (!(cfg.temperature > 0)) throw std::invalid_argument("generate: --temperature must be > 0");
  if (vocab.size() != model.config.ntoken)
    throw std::invalid_argument("generate: the vocabulary has " + std::to_string(vocab.size()) +
                                " words but the model " + std::to_string(model.config.ntoken));
  model.eval();
  NoGradGuard no_grad;
  std::vector<int64_t> prompt;
  std::istringstream in(cfg.prompt);
  for (std::string w; in >> w;) {
    const int64_t id = vocab.find(w);
    prompt.push_back(id >= 0 ? id : vocab.unk());
    if (prompt.back() < 0)
      throw std::invalid_argument("generate: '" + w + "' is not in the vocabulary");
  }
  if (prompt.empty()) prompt.push_back(vocab.eos() >= 0 ? vocab.eos() : 0);

  Hidden hidden = model.init_hidden(1);
  // Read the prompt in one pass; the last position's distribution gives the first sampled word.
  ModelOutput out = model.forward(prompt, static_cast<int64_t>(prompt.size()), 1, hidden);
  Generator gen(cfg.seed);
  std::vector<std::string> words;
  const int64_t V = model.config.ntoken;
  for (int64_t n = 0; n < cfg.words; ++n) {
    const int64_t rows = out.log_prob.size(0);
    const Tensor last =
        narrow(out.log_prob, 0, rows - 1, 1).cpu();  // [1,V], from the GPU if it is there
    const float* logp = last.data();
    // Sample from p^(1/T) by inverse CDF over the renormalised weights.
    double max_l = -INFINITY;
    for (int64_t v = 0; v < V; ++v) max_l = std::max(max_l, static_cast<double>(logp[v]));
    std::vector<double> w(static_cast<size_t>(V));
    double total = 0;
    for (int64_t v = 0; v < V; ++v) total += w[v] = std::exp((logp[v] - max_l) / cfg.temperature);
    const double u = philox_uniform(gen.seed, gen.advance(1)) * total;
    int64_t next = V - 1;
    double acc = 0;
    for (int64_t v = 0; v < V; ++v)
      if ((acc += w[v]) > u) {
        next = v;
        break;
      }
    if (on_word)
      on_word(vocab.word(next));
    else
      words.push_back(vocab.word(next));
    out = model.forward({next}, 1, 1, out.hidden);
  }
  return words;
}

}  // namespace mg
