// Row lookup (embedding) and per-row element lookup (reading target log-probs). Their backward is a
// scatter-add, done column-parallel so each output element is summed in index order by one thread.
#include <algorithm>
#include <cstring>
#include <memory>

#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace mg {

namespace {
void check_indices(const std::string& op, const std::vector<int64_t>& index, int64_t limit,
                   const Shape& shape) {
  for (size_t i = 0; i < index.size(); ++i)
    if (index[i] < 0 || index[i] >= limit)
      throw ShapeError(op + ": index " + std::to_string(index[i]) + " at position " +
                       std::to_string(i) + " is out of range [0, " + std::to_string(limit) +
                       ") for " + shape_str(shape));
}

// The GPU path of index_select. Backward without atomics: the positions are sorted by row on the
// host (stable, so each row still adds its contributions in index order, like the CPU), and one
// GPU block owns each distinct row (cuda/ops_index.cu).
Tensor index_select_cuda(const Tensor& table_in, const Tensor& table,
                         const std::vector<int64_t>& index) {
  const int64_t n = static_cast<int64_t>(index.size()), C = table.size(1);
  Tensor out = Tensor::empty({n, C}, Device::CUDA);
  auto ids = std::make_shared<DeviceIndices>(index);
  cuda_index_select(table.data_ptr(), C, ids->get(), n, out.data_ptr());
  const Shape shape = table.shape();
  return record("index_select", out, {table_in}, [shape, index, ids](const Tensor& g_in) {
    const Tensor g = contiguous_data(g_in);
    std::vector<int64_t> order(index.size()), starts;
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return index[a] < index[b]; });
    for (size_t k = 0; k < order.size(); ++k)
      if (k == 0 || index[order[k]] != index[order[k - 1]])
        starts.push_back(static_cast<int64_t>(k));
    const int64_t U = static_cast<int64_t>(starts.size());
    starts.push_back(static_cast<int64_t>(order.size()));
    const DeviceIndices d_order(order), d_starts(starts);
    Tensor grad = Tensor::zeros(shape, Device::CUDA);
    cuda_index_add(g.data_ptr(), shape[1], ids->get(), d_order.get(), d_starts.get(), U,
                   grad.data_ptr());
    return std::vector<Tensor>{grad};
  });
}

// The backward of a row lookup: a [R,C] gradient (shape) with row i of g [n,C] added to row
// index[i]. Column-parallel, so each output element is summed in index order by one thread.
Tensor scatter_add_rows(const Tensor& g, const std::vector<int64_t>& index, const Shape& shape) {
  Tensor grad = Tensor::zeros(shape);
  const int64_t C = shape[1];
  parallel_for(C, 32, [&](int64_t c0, int64_t c1) {
    for (size_t i = 0; i < index.size(); ++i) {
      float* dst = grad.data() + index[i] * C;
      const float* src = g.data() + static_cast<int64_t>(i) * C;
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  });
  return grad;
}

}  // namespace

Tensor index_select(const Tensor& table_in, const std::vector<int64_t>& index) {
  check_rank("index_select", table_in, 2, "table");
  check_indices("index_select", index, table_in.size(0), table_in.shape());
  const Tensor table = contiguous_data(table_in);
  const int64_t n = static_cast<int64_t>(index.size()), C = table.size(1);
  if (table.is_cuda()) return index_select_cuda(table_in, table, index);
  Tensor out = Tensor::empty({n, C});
  parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      std::memcpy(out.data() + i * C, table.data() + index[i] * C, sizeof(float) * C);
  });
  const Shape shape = table.shape();
  return record("index_select", out, {table_in}, [shape, index](const Tensor& g) {
    return std::vector<Tensor>{scatter_add_rows(contiguous_data(g), index, shape)};
  });
}

Tensor index_select_scaled(const Tensor& table_in, const std::vector<int64_t>& index,
                           const Tensor& row_scale_in) {
  check_rank("index_select_scaled", table_in, 2, "table");
  check_indices("index_select_scaled", index, table_in.size(0), table_in.shape());
  if (row_scale_in.shape() != Shape{table_in.size(0), 1})
    throw ShapeError("index_select_scaled: row_scale " + shape_str(row_scale_in.shape()) +
                     " must be [" + std::to_string(table_in.size(0)) + ",1], one per table row");
  check_same_device("index_select_scaled", {table_in, row_scale_in});
  if (table_in.is_cuda()) return index_select(mul(table_in, row_scale_in), index);  // the two ops
  const Tensor table = contiguous_data(table_in), scale = contiguous_data(row_scale_in).detach();
  const int64_t n = static_cast<int64_t>(index.size()), C = table.size(1);
  Tensor out = Tensor::empty({n, C});
  parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* src = table.data() + index[i] * C;
      const float s = scale.data()[index[i]];
      float* dst = out.data() + i * C;
      for (int64_t c = 0; c < C; ++c) dst[c] = src[c] * s;  // mul's product, then the copy
    }
  });
  const Shape shape = table.shape();
  return record("index_select_scaled", out, {table_in}, [shape, index, scale](const Tensor& g) {
    Tensor grad = scatter_add_rows(contiguous_data(g), index, shape);  // index_select's backward
    std::vector<int64_t> rows(index);  // then mul's, on the rows that are not zero, each once
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    const int64_t C = shape[1];
    parallel_for(static_cast<int64_t>(rows.size()), 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* dst = grad.data() + rows[r] * C;
        const float s = scale.data()[rows[r]];
        for (int64_t c = 0; c < C; ++c) dst[c] *= s;
      }
    });
    return std::vector<Tensor>{grad};
  });
}

Tensor gather_rows(const Tensor& x_in, const std::vector<int64_t>& index) {
  check_rank("gather_rows", x_in, 2);
  if (static_cast<int64_t>(index.size()) != x_in.size(0))
    throw ShapeError("gather_rows: " + std::to_string(index.size()) + " indices for " +
                     shape_str(x_in.shape()));
  check_indices("gather_rows", index, x_in.size(1), x_in.shape());
  const Tensor x = contiguous_data(x_in);
  const int64_t N = x.size(0), C = x.size(1);
  if (x.is_cuda()) {
    auto ids = std::make_shared<DeviceIndices>(index);
    Tensor out = Tensor::empty({N}, Device::CUDA);
    cuda_gather_rows(x.data_ptr(), N, C, ids->get(), out.data_ptr());
    const Shape shape = x.shape();
    return record("gather_rows", out, {x_in}, [shape, ids](const Tensor& g_in) {
      const Tensor g = contiguous_data(g_in);
      Tensor grad = Tensor::zeros(shape, Device::CUDA);
      cuda_scatter_rows(g.data_ptr(), 1.0f, shape[0], shape[1], ids->get(), grad.data_ptr());
      return std::vector<Tensor>{grad};
    });
  }
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
