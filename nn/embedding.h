// Embedding: a [V,E] table whose rows are looked up by token id.
#pragma once

#include "nn/module.h"
#include "tensor/philox.h"

namespace mg {

class Embedding : public Module {
 public:
  // AWD-LSTM's init: U(-0.1, 0.1).
  Embedding(int64_t num_embeddings, int64_t dim, Generator& gen, float init_range = 0.1f);
  Tensor weight;  // [V,E]
};

// The lookup, on the weight or on a dropped-out copy of it (embedding_dropout; that is why the
// model calls this rather than a forward of the module): ids are T*B token ids, row-major [T,B] ->
// [T,B,E]
// row_scale [V,1] (optional): each looked-up row times its scale (index_select_scaled; embedding
// dropout's mask, see embedding_dropout_lookup).
Tensor embedding_lookup(const Tensor& table /*[V,E]*/, const std::vector<int64_t>& ids, int64_t T,
                        int64_t B, const Tensor* row_scale = nullptr);

}  // namespace mg
