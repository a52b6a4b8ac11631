// Sampling text from a trained model: feed a prompt, then draw each next word from
// softmax(log p / temperature) with a seeded counter-based RNG (same seed, same text).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lm/corpus.h"
#include "nn/rnn_model.h"

namespace mg {

struct GenerateConfig {
  int64_t words = 100;       // how many words to sample
  float temperature = 1.0f;  // < 1: more conservative, > 1: more random; must be > 0
  uint64_t seed = 1;
  std::string
      prompt;  // whitespace-separated words; unknown words become <unk>; empty: start at <eos>
};

// Returns the sampled words (the prompt not included). <eos> is returned as the word "<eos>".
// With `on_word`, each word goes to it as soon as it is drawn instead (a long text is shown as it
// comes, and is not held in memory), and the list returned is empty.
std::vector<std::string> generate(RNNModel& model, const Vocab& vocab, const GenerateConfig& cfg,
                                  const std::function<void(const std::string&)>& on_word = {});

}  // namespace mg
