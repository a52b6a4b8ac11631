// The fuzz targets: each feeds arbitrary bytes to one reader of untrusted input and checks that it
// either succeeds (and what it returns is consistent) or throws a clear error. An error that is
// not std::runtime_error / std::invalid_argument (std::bad_alloc, std::out_of_range from a bare
// stoll, ...), a crash, a sanitizer report or a broken invariant is a finding. The model-file
// targets (checkpoint, safetensors, train_state) must also refuse a claim before allocating for it:
// no call may hold more than 256 MB of tensors at once (an input is at most 64 KB), and every
// tensor returned holds the values its shape says.
//
// The same functions run two ways:
//   make fuzz   libFuzzer + ASan/UBSan (clang, tests/fuzz/main.cpp), each target for FUZZ_SECONDS
//   make test   tests/fuzz/test_fuzz_replay.cpp replays the committed seed corpus and every crash
//               reproducer (tests/fuzz/corpus/<target>/, tests/fuzz/crashes/<target>/)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mgfuzz {

// A mosgrad checkpoint: parse_checkpoint, then model_from_checkpoint when it parses. The target
// rewrites the header's CRC-32 to match the payload first, so the fuzzer gets past the checksum
// to the payload parser and the model loader (the checksum itself has its own unit tests).
void checkpoint(const uint8_t* data, size_t size);
// A safetensors file: parse_safetensors, then model_from_safetensors when it parses.
void safetensors(const uint8_t* data, size_t size);
// A corpus: the bytes up to the first 0xFF are the training text (vocabulary grows), the rest the
// validation text (unknown words become <unk>); every id must index the vocabulary.
void corpus(const uint8_t* data, size_t size);
// A command line: words separated by NUL bytes; the first byte picks the subcommand (train,
// finetune, eval, dyneval, generate, export, import, rank, bottleneck-demo, pointer, gradcheck),
// the rest are its flags, parsed by parse_command (cli/commands.h). What train and finetune accept
// keeps the model's size computable and every dropout rate in [0, 1) as the float it is stored in.
void flags(const uint8_t* data, size_t size);
// A metrics.jsonl file, as `mosgrad plot` reads it (parse_metrics): every point it returns is
// finite and positive, and the tokens of each curve increase; a torn last line (no newline, not
// JSON) reads as if it were not there.
void metrics(const uint8_t* data, size_t size);
// A training state (with its CRC rewritten, as for checkpoint) resumed into the run of
// model_seeds.h's fuzz_state_config: every field checked, so a restored state is in range.
void train_state(const uint8_t* data, size_t size);

// Runs f; std::runtime_error and std::invalid_argument (the clear errors) are swallowed, anything
// else propagates to libFuzzer or the replay test.
void expect_clear_error(const std::function<void()>& f);

struct Target {
  const char* name;  // the folder under tests/fuzz/corpus and tests/fuzz/crashes
  void (*run)(const uint8_t*, size_t);
};
const std::vector<Target>& targets();

}  // namespace mgfuzz
