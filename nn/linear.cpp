#include "nn/linear.h"

#include "autograd/ops.h"

namespace mg {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const Tensor y = matmul(x, weight, false, true);
  return bias.defined() ? add(y, bias) : y;
}

}  // namespace mg
