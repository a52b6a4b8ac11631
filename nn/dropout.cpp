#include "nn/dropout.h"

#include "autograd/ops.h"
#include "cuda/backend.h"
#include "math/formulas.h"
#include "nn/embedding.h"
#include "tensor/kernels.h"
#include "tensor/not_implemented.h"

namespace mg {

namespace {
thread_local const ColumnGroup* t_column_group = nullptr;

// The mask of `shape` from positions [first, first + numel) of the Philox stream `seed`.
Tensor mask_at(const Shape& shape, float p, uint64_t seed, uint64_t first, Device device) {
  if (!(p >= 0.0f && p < 1.0f))
    throw std::invalid_argument("dropout_mask: p must be in [0, 1), got " + std::to_string(p));
  Tensor mask = Tensor::empty(shape, device);
  const int64_t n = mask.numel();
  if (device == Device::CUDA) {  // the same positions of the same Philox stream: the same mask
    cuda_dropout_mask(seed, first, n, p, mask.data_ptr());
    return mask;
  }
  const float keep_scale = dropout_keep_scale(p);  // math/formulas.h, as on the GPU
  float* m = mask.data();
  // Each chunk draws its own positions [first + b, first + e) of the stream, so the mask does not
  // depend on how the work is split.
  parallel_for(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
    philox_uniforms(seed, first + static_cast<uint64_t>(b), e - b, m + b);
    const float drop_p = p, keep = keep_scale;  // locals: see tensor/kernels.h
    float* mb = m;
    for (int64_t i = b; i < e; ++i) mb[i] = dropout_mask_entry(mb[i], drop_p, keep);
  });
  return mask;
}

// A column group's part of the whole batch's locked mask [1,total,H]: the positions of columns
// [first, first + B) of a draw that reserves all `total` columns, as the whole batch's draw would.
Tensor locked_mask_of_group(const ColumnGroup& group, int64_t B, int64_t H, float p, Generator& gen,
                            Device device) {
  if (group.first < 0 || B < 1 || group.first + B > group.total)
    throw std::invalid_argument("locked_dropout: columns [" + std::to_string(group.first) + ", " +
                                std::to_string(group.first + B) + ") are not in a batch of " +
                                std::to_string(group.total) + " columns");
  const uint64_t first = gen.advance(static_cast<uint64_t>(group.total * H));
  return mask_at({1, B, H}, p, gen.seed, first + static_cast<uint64_t>(group.first * H), device);
}
}  // namespace

ColumnGroupScope::ColumnGroupScope(ColumnGroup group) : group_(group), previous_(t_column_group) {
  t_column_group = &group_;
}
ColumnGroupScope::~ColumnGroupScope() {
  t_column_group = previous_;
}

Tensor dropout_mask(const Shape& shape, float p, Generator& gen, Device device) {
  const int64_t n = numel_of(shape);
  return mask_at(shape, p, gen.seed, gen.advance(static_cast<uint64_t>(n)), device);
}

Tensor dropout(const Tensor& x, float p, Generator& gen, bool training) {
  if (!training || p == 0.0f) return x;
  return mul(x, dropout_mask(x.shape(), p, gen, x.device()));
}

Tensor locked_dropout(const Tensor& x, float p, Generator& gen, bool training) {
  if (!training || p == 0.0f) return x;
  check_rank("locked_dropout", x, 3, "x [T,B,H]");
  if (t_column_group)  // --grad-groups: this forward sees some of the batch's columns
    return mul(x, locked_mask_of_group(*t_column_group, x.size(1), x.size(2), p, gen, x.device()));
  // TASK 5.1: one mask for all T steps (shape [1,B,H]), broadcast over time
  return mul(x, dropout_mask({1, x.size(1), x.size(2)}, p, gen, x.device()));
  // END TASK 5.1
}

namespace {
// Embedding dropout's mask: one per row of weight [V,E] -> [V,1].
Tensor row_mask(const Tensor& weight, float p, Generator& gen) {
  check_rank("embedding_dropout", weight, 2, "weight [V,E]");
  // TASK 5.2: one keep-or-drop per word (row of weight [V,E]): a [V,1] mask
  return dropout_mask({weight.size(0), 1}, p, gen, weight.device());
  // END TASK 5.2
}
}  // namespace

Tensor embedding_dropout(const Tensor& weight, float p, Generator& gen, bool training) {
  if (!training || p == 0.0f) return weight;
  return mul(weight, row_mask(weight, p, gen));
}

Tensor embedding_dropout_lookup(const Tensor& weight, float p, Generator& gen, bool training,
                                const std::vector<int64_t>& ids, int64_t T, int64_t B) {
  if (!training || p == 0.0f) return embedding_lookup(weight, ids, T, B);
  const Tensor mask = row_mask(weight, p, gen);
  return embedding_lookup(weight, ids, T, B, &mask);
}

Tensor weight_drop(const Tensor& weight, float p, Generator& gen, bool training) {
  return dropout(weight, p, gen, training);
}

}  // namespace mg
