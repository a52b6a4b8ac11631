// Row lookup (embedding) and per-row element lookup (reading target log-probs). Their backward is a
// scatter-add, done column-parallel so each output element is summed in index order by one thread.
#include <cstring>

#include "autograd/kernels.h"
#include "autograd/ops.h"

namespace mg {

namespace {
void check_indices(const std::string& op, const std::vector<int64_t>& index, int64_t limit, const Shape& shape) {
  for (size_t i = 0; i < index.size(); ++i)
    if (index[i] < 0 || index[i] >= limit)
      throw ShapeError(op + ": index " + std::to_string(index[i]) + " at position " + std::to_string(i) +
                       " is out of range [0, " + std::to_string(limit) + ") for " + shape_str(shape));
}
}  // namespace

Tensor index_select(const Tensor& table_in, const std::vector<int64_t>& index) {
  check_rank("index_select", table_in, 2, "table");
  check_indices("index_select", index, table_in.size(0), table_in.shape());
  const Tensor table = contiguous_data(table_in);
  const int64_t n = static_cast<int64_t>(index.size()), C = table.size(1);
  Tensor out = Tensor::empty({n, C});
  parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::memcpy(out.data() + i * C, table.data() + index[i] * C, sizeof(float) * C);
  });
  const Shape shape = table.shape();
  return record("index_select", out, {table_in}, [shape, index](const Tensor& g_in) {
    const Tensor g = contiguous_data(g_in);
    Tensor grad = Tensor::zeros(shape);
    const int64_t C = shape[1];
    parallel_for(C, 32, [&](int64_t c0, int64_t c1) {
      for (size_t i = 0; i < index.size(); ++i) {
        float* dst = grad.data() + index[i] * C;
        const float* src = g.data() + static_cast<int64_t>(i) * C;
        for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
      }
    });
    return std::vector<Tensor>{grad};
  });
}

Tensor gather_rows(const Tensor& x_in, const std::vector<int64_t>& index) {
  check_rank("gather_rows", x_in, 2);
  if (static_cast<int64_t>(index.size()) != x_in.size(0))
    throw ShapeError("gather_rows: " + std::to_string(index.size()) + " indices for " + shape_str(x_in.shape()));
  check_indices("gather_rows", index, x_in.size(1), x_in.shape());
  const Tensor x = contiguous_data(x_in);
  const int64_t N = x.size(0), C = x.size(1);
  Tensor out = Tensor::empty({N});
  for (int64_t i = 0; i < N; ++i) out.data()[i] = x.data()[i * C + index[i]];
  const Shape shape = x.shape();
  return record("gather_rows", out, {x_in}, [shape, index](const Tensor& g_in) {
    const Tensor g = contiguous_data(g_in);
    Tensor grad = Tensor::zeros(shape);
    for (int64_t i = 0; i < shape[0]; ++i) grad.data()[i * shape[1] + index[i]] = g.data()[i];
    return std::vector<Tensor>{grad};
  });
}

}  // namespace mg
