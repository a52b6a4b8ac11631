// The linear (fully connected) map y = x W^T + b, the PyTorch convention (W is [out, in]). The
// model's layers that use it (the MoS prior and latent, nn/heads.cpp) own their W and b as named
// parameters and call this; PyTorch's default init for them is W, b ~ U(-1/sqrt(in), 1/sqrt(in)).
#pragma once

#include "tensor/tensor.h"

namespace mg {

// x [N,in] W [out,in] b [out] or undefined -> [N,out]
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace mg
