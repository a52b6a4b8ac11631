#include "nn/embedding.h"

#include "autograd/ops.h"

namespace mg {

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Generator& gen, float init_range) {
  weight = register_parameter("weight",
                              Tensor::uniform({num_embeddings, dim}, -init_range, init_range, gen));
}

Tensor embedding_lookup(const Tensor& table, const std::vector<int64_t>& ids, int64_t T, int64_t B,
                        const Tensor* row_scale) {
  if (static_cast<int64_t>(ids.size()) != T * B)
    throw ShapeError("embedding: " + std::to_string(ids.size()) +
                     " token ids for T=" + std::to_string(T) + ", B=" + std::to_string(B));
  const Tensor rows = row_scale ? index_select_scaled(table, ids, *row_scale)  // [T*B,E]
                                : index_select(table, ids);
  return reshape(rows, {T, B, table.size(1)});
}

}  // namespace mg
