// The model seeds of the checkpoint and safetensors fuzz targets: four small but complete models
// (every head, tied and untied, one and two layers) saved in both formats. They are binary and
// follow the formats, so they are generated, never committed: tests/test_fuzz_replay.cpp writes
// them into a temporary folder, `make fuzz-seeds` into build/fuzz/model_seeds/ for the fuzzers.
#pragma once

#include <filesystem>

namespace mgfuzz {

// Writes root/checkpoint/<name>.ckpt and root/safetensors/<name>.safetensors.
void write_model_seeds(const std::filesystem::path& root);

}  // namespace mgfuzz
