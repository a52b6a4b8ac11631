// The binary crash reproducers of the checkpoint, safetensors and train_state targets
// (tests/fuzz/crashes/README.md). Like the model seeds (model_seeds.h), they are binary and follow
// the formats, so they are built by code from those seeds, never committed: each is a seed with one
// field changed (through the checkpoint or safetensors API where it is a string), a size patched
// where the layout puts it, or the file cut at a named place. tests/fuzz/test_fuzz_replay.cpp
// writes them into a temporary folder beside the committed text reproducers, `make fuzz-seeds`
// into build/fuzz/crash_reproducers/ for the fuzzers.
#pragma once

#include <filesystem>

namespace mgfuzz {

// Writes root/<target>/<name> for every binary reproducer, built from the model seeds that
// write_model_seeds (model_seeds.h) wrote under `seeds`.
void write_crash_reproducers(const std::filesystem::path& seeds, const std::filesystem::path& root);

}  // namespace mgfuzz
