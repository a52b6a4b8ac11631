// Which code computes a model: the fast paths or the plain reference ones that each fast path is
// tested against. One value for the four choices, built once per command from its flags
// (lm/train_config.h compute_paths, which checks them against the device and the CPU) and applied
// in one place (ComputePathsScope, nn/rnn_model.h), so that nothing deeper reads a flag. The LSTM's
// and the head's choices go to the model (RNNModel::paths). The GEMM's path and precision become
// tensor/gemm.h's setting for the scope's lifetime, as PyTorch's float32 matmul precision is a
// setting of the process: every product reads it inside tensor/, the packed ones the fused layers
// make included (PackedB), so no layer in nn/ asks which GEMM runs.
#pragma once

#include "tensor/gemm.h"

namespace mg {

struct ComputePaths {
  bool fused_lstm = true;  // false: the step-by-step LSTM built from ops (nn/lstm.cpp)
  bool fused_head = true;  // false: the loss as nll_loss(head log_prob(h)), not the fused one
  GemmPath gemm = GemmPath::kFast;                 // kReference: the textbook triple loop (CPU)
  GemmPrecision precision = GemmPrecision::kFp32;  // kBf16: bf16 operands, FP32 sums (CPU)
};

}  // namespace mg
