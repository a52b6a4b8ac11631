// Which code computes a model: the fast paths or the plain reference ones that each fast path is
// tested against. One value for the four choices, built once per command from its flags
// (lm/train_config.h compute_paths, which checks them against the device and the CPU) and applied
// in one place (ComputePathsScope), so that nothing deeper reads a flag.
#pragma once

#include "tensor/gemm.h"

namespace mg {

struct ComputePaths {
  bool fused_lstm = true;  // false: the step-by-step LSTM built from ops (nn/lstm.cpp)
  bool fused_head = true;  // false: the loss as nll_loss(head log_prob(h)), not the fused one
  GemmPath gemm = GemmPath::kFast;                 // kReference: the textbook triple loop (CPU)
  GemmPrecision precision = GemmPrecision::kFp32;  // kBf16: bf16 operands, FP32 sums (CPU)
};

class RNNModel;

// Applies paths: the GEMM's path and precision (process-wide, tensor/gemm.h) for this object's
// lifetime, restored when it ends, and, given a model, the model's own (RNNModel::paths: its LSTM
// and head), which stay with the model.
class ComputePathsScope {
 public:
  explicit ComputePathsScope(const ComputePaths& paths, RNNModel* model = nullptr);

 private:
  GemmPathScope gemm_;
  GemmPrecisionScope precision_;
};

}  // namespace mg
