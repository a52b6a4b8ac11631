// The model seeds of the checkpoint and safetensors fuzz targets: four small but complete models
// (every head, tied and untied, one and two layers) saved in both formats; and four training
// states of the train_state target (SGD at the start, mid-epoch with a validation history, ASGD,
// Adam). They are binary and follow the formats, so they are generated, never committed:
// tests/fuzz/test_fuzz_replay.cpp writes them into a temporary folder, `make fuzz-seeds` into
// build/fuzz/model_seeds/ for the fuzzers.
#pragma once

#include <filesystem>

#include "lm/corpus.h"
#include "lm/train_config.h"

namespace mgfuzz {

// Writes root/checkpoint/<name>.ckpt, root/safetensors/<name>.safetensors and
// root/train_state/<name>.ckpt.
void write_model_seeds(const std::filesystem::path& root);

// The run the train_state seeds belong to (and the target resumes): a 5-word vocabulary and a
// 2-layer MoS model small enough to restore thousands of times a second.
mg::TrainConfig fuzz_state_config();
mg::Corpus fuzz_state_corpus();

}  // namespace mgfuzz
