// Linear (fully connected) layer: y = x W^T + b, the PyTorch convention (W is [out, in]).
#pragma once

#include "nn/module.h"
#include "tensor/philox.h"

namespace mg {

class Linear : public Module {
 public:
  // PyTorch's default init: W, b ~ U(-1/sqrt(in), 1/sqrt(in)).
  Linear(int64_t in_features, int64_t out_features, bool bias, Generator& gen);
  Tensor forward(const Tensor& x) const;  // x [N,in] -> [N,out]

  Tensor weight;  // [out,in]
  Tensor bias;    // [out], undefined without bias
};

// x [N,in] W [out,in] b [out] or undefined -> [N,out]
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace mg
