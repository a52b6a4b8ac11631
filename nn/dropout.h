// The dropout family of AWD-LSTM (Merity et al. 2017, §4). All are inverted dropout (survivors
// scaled by 1/(1-p)), draw their masks from an explicit Generator (deterministic and resumable),
// and are the identity when `training` is false or p == 0.
#pragma once

#include <vector>

#include "tensor/philox.h"
#include "tensor/tensor.h"

namespace mg {

// A mask of 0 and 1/(1-p) (inverted dropout: expected value 1), drawn from `gen`. Apply it with
// mul(x, mask); a mask of shape [1,B,H] on x [T,B,H] is locked (variational) dropout.
// On the GPU (device CUDA) the mask is bit for bit the CPU's.
Tensor dropout_mask(const Shape& shape, float p, Generator& gen, Device device = Device::CPU);

// Standard dropout: an independent mask per element. x any shape.
Tensor dropout(const Tensor& x, float p, Generator& gen, bool training);

// Locked (variational) dropout (Gal & Ghahramani 2016): one mask per sequence, shared over time.
// x [T,B,H]: the mask is [1,B,H], broadcast over T.
Tensor locked_dropout(const Tensor& x, float p, Generator& gen, bool training);

// A batch of B columns trained in column groups (--grad-groups, lm/column_groups.h): a group's
// forward sees only columns [first, first + B_group) of `total`. While a ColumnGroupScope is alive
// on this thread, locked dropout draws that group's part of the whole batch's mask (it reserves
// the positions of all `total` columns, then uses the group's): the same mask, column for column,
// as the whole batch's forward. Embedding dropout and weight drop are whole-batch masks already,
// the same for every group.
struct ColumnGroup {
  int64_t first = 0;  // the group's first column
  int64_t total = 0;  // the batch's columns
};
class ColumnGroupScope {
 public:
  explicit ColumnGroupScope(ColumnGroup group);
  ~ColumnGroupScope();
  ColumnGroupScope(const ColumnGroupScope&) = delete;
  ColumnGroupScope& operator=(const ColumnGroupScope&) = delete;

 private:
  ColumnGroup group_;
  const ColumnGroup* previous_;
};

// Embedding dropout (AWD-LSTM's embedded_dropout): drops whole word types — rows of the embedding
// matrix — for the entire batch, scaling the kept rows. weight [V,E] -> [V,E]
Tensor embedding_dropout(const Tensor& weight, float p, Generator& gen, bool training);

// embedding_lookup(embedding_dropout(weight, ...), ids, T, B) -> [T,B,E], the same numbers and the
// same random draws, but only the T*B looked-up rows are scaled, forward and backward, instead of
// all V rows of the table (index_select_scaled): what RNNModel::forward calls. The two-step form
// stays as the reference the tests compare it with.
Tensor embedding_dropout_lookup(const Tensor& weight /*[V,E]*/, float p, Generator& gen,
                                bool training, const std::vector<int64_t>& ids, int64_t T,
                                int64_t B);

// Weight drop / DropConnect (Wan et al. 2013) on the hidden-to-hidden matrix: one mask over the
// whole matrix per forward pass, shared by every time step. weight [4H,H] -> [4H,H]
Tensor weight_drop(const Tensor& weight, float p, Generator& gen, bool training);

}  // namespace mg
