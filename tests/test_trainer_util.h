// Shared by the tests of lm/ and above, on both devices: a small synthetic corpus, a small MoS
// config with every dropout on, a run that records each step's loss, and where PTB is.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lm/train.h"

namespace mgtest {

// A fresh directory under testing::TempDir() named after `name` and the process.
std::string temp_dir(const std::string& name);
// A corpus with structure a small LSTM can learn: sentences from a tiny grammar, deterministic.
std::string write_synthetic_corpus(const std::string& name);
// A small MoS model with every dropout switched on, so exact resume must restore the RNG streams
// too.
mg::TrainConfig small_config(const std::string& data, const std::string& save);
// Trains and returns the loss of every step (and the result, when asked).
std::vector<double> run_collecting(const mg::TrainConfig& cfg, const mg::Corpus& corpus,
                                   mg::TrainResult* result = nullptr);

// A tiny MoS (or `head`) model, V words, E = 6, LSTM [10, 8], K = 2, no dropout, its initial
// weights multiplied by `scale` (at the init's U(±0.1) every distribution is nearly uniform; a
// scale of 3-20 gives the peaked, context-dependent ones of a trained model).
std::shared_ptr<mg::RNNModel> scaled_tiny_model(int64_t V, float scale,
                                                mg::HeadKind head = mg::HeadKind::MoS);

// PTB's directory as the trainer finds it (mg::resolve_data_dir: MOSGRAD_DATA, else the usual
// places), and whether its three files are there.
std::string ptb_dir();
bool has_ptb(const std::string& dir);

}  // namespace mgtest

// In a test body: skips the test, naming where it looked, when PTB is not at `dir`.
#define MG_SKIP_WITHOUT_PTB(dir)                                                                \
  do {                                                                                          \
    const std::string mg_ptb_ = (dir);                                                          \
    if (!mgtest::has_ptb(mg_ptb_))                                                              \
      GTEST_SKIP() << "PTB not found at " << mg_ptb_ << " (set MOSGRAD_DATA or run make data)"; \
  } while (0)
