// Finite-difference gradient checking: the test every op's backward must pass.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mg {

struct GradcheckOptions {
  double eps = 5e-3;   // central difference step; float32 needs a larger step than float64 would
  double atol = 2e-3;  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 2e-2;
  uint64_t seed = 1234;  // for the random projection of the output
};

struct GradcheckResult {
  bool ok = true;
  std::string
      message;  // "" when ok; else name, input, shape, first bad index, both values, max diff
  double max_abs_diff = 0;
};

// Checks d(sum(fn(inputs) * R))/d(input) for every input with requires_grad, where R is a fixed
// random tensor (so every output element's gradient is exercised with a different weight), against
// central differences (f(x + eps) - f(x - eps)) / 2eps with the loss accumulated in double.
// Inputs must be contiguous leaves; they are perturbed in place and restored.
GradcheckResult gradcheck(const std::string& name,
                          const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace mg
