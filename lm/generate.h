// Sampling text from a trained model: feed a prompt, then draw each next word from
// softmax(log p / temperature) with a seeded counter-based RNG (same seed, same text).
#pragma once

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
std::vector<std::string> generate(RNNModel& model, const Vocab& vocab, const GenerateConfig& cfg);

}  // namespace mg
