#include "nn/dropout.h"

#include "autograd/ops.h"

namespace mg {

Tensor dropout(const Tensor& x, float p, Generator& gen, bool training) {
  if (!training || p == 0.0f) return x;
  return mul(x, dropout_mask(x.shape(), p, gen, x.device()));
}

Tensor locked_dropout(const Tensor& x, float p, Generator& gen, bool training) {
  if (!training || p == 0.0f) return x;
  check_rank("locked_dropout", x, 3, "x [T,B,H]");
  return mul(x, dropout_mask({1, x.size(1), x.size(2)}, p, gen, x.device()));
}

Tensor embedding_dropout(const Tensor& weight, float p, Generator& gen, bool training) {
  if (!training || p == 0.0f) return weight;
  check_rank("embedding_dropout", weight, 2, "weight [V,E]");
  return mul(weight, dropout_mask({weight.size(0), 1}, p, gen, weight.device()));
}

Tensor weight_drop(const Tensor& weight, float p, Generator& gen, bool training) {
  return dropout(weight, p, gen, training);
}

}  // namespace mg
