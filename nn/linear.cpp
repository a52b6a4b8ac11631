#include "nn/linear.h"

#include <cmath>

#include "autograd/ops.h"

namespace mg {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const Tensor y = matmul(x, weight, false, true);
  return bias.defined() ? add(y, bias) : y;
}

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, Generator& gen) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_features));
  weight = register_parameter("weight",
                              Tensor::uniform({out_features, in_features}, -bound, bound, gen));
  if (with_bias)
    bias = register_parameter("bias", Tensor::uniform({out_features}, -bound, bound, gen));
}

Tensor Linear::forward(const Tensor& x) const {
  return linear(x, weight, bias);
}

}  // namespace mg
