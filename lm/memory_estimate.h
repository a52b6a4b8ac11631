// How much memory a training run needs, estimated from its flags before anything is allocated, and
// how much this process may use: a run that cannot fit is refused with the figures and the flags
// to lower, instead of being killed by the kernel's out-of-memory killer hours later (or at once,
// with no message at all).
//
// The estimate (bytes; P parameters, N = B x T_max tokens of the longest segment, T_max = bptt +
// max_seq_len_delta with variable BPTT, K components, V words):
//   weights 4P, gradients 4P, optimizer state (ASGD's average 4P, which NT-ASGD may switch to;
//   Adam's two moments 8P), weight drop's dropped W_hh per layer and its gradient,
//   one step's activations: per token the embedding, each LSTM layer's gates and states, the
//   head's latent (saved for backward, and their gradients), and the head's logits: R = N*K rows
//   of V kept for backward (where backward makes their gradient in place) when they fit the fused
//   head's cap, else two streamed chunks,
//   plus a fixed allowance for the program, the corpus and the threads' stacks.
// It is checked against peak RSS on presets by tests/lm/test_memory_estimate.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "lm/train_config.h"

namespace mg {

struct MemoryEstimate {
  int64_t parameters = 0;   // P
  int64_t weights = 0;      // bytes: weights, gradients and weight drop's copies
  int64_t optimizer = 0;    // bytes: the optimizer's state
  int64_t activations = 0;  // bytes: one step's activations but the head's logits
  int64_t logits = 0;       // bytes: the head's logits (and their gradient) in one step
  int64_t fixed = 0;        // bytes: the program, the corpus, the threads
  int64_t total() const { return weights + optimizer + activations + logits + fixed; }
};

// The estimate for `cfg` on a vocabulary of `ntoken` words.
MemoryEstimate estimate_training_memory(const TrainConfig& cfg, int64_t ntoken);

// Bytes this process may still allocate: MemAvailable (/proc/meminfo), or less when a cgroup
// limit (v2 memory.max, v1 memory.limit_in_bytes) leaves less; -1 when neither can be read.
int64_t memory_available_bytes();

// Throws std::invalid_argument when the estimate exceeds `available` (bytes; < 0: unknown, no
// check), saying what the run needs, term by term, what the machine has, and the flags to lower.
void check_training_memory(const TrainConfig& cfg, int64_t ntoken, int64_t available);

// What train and finetune do before they allocate: check_training_memory against
// memory_available_bytes(), then lower the tensor cache's limit (tensor/allocator.h) to half of
// what the estimate leaves, so that buffers cached for reuse cannot take the machine's last memory.
void fit_training_memory(const TrainConfig& cfg, int64_t ntoken);

}  // namespace mg
