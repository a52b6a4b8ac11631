#include "tensor/kernels_cuda.h"

#include "tensor/shape.h"

namespace mg {

CudaSplit cuda_split(const Shape& shape, int dim) {
  const DimSplit s = split_at(shape, dim);
  CudaSplit c;
  c.outer = s.outer, c.n = s.n, c.inner = s.inner;
  return c;
}

Tensor cuda_map_unary(UnaryOp fn, const Tensor& x_in, float scalar) {
  const Tensor x = contiguous_data(x_in);
  Tensor out = Tensor::empty(x.shape(), Device::CUDA);
  cuda_unary(fn, x.data_ptr(), out.data_ptr(), x.numel(), scalar);
  return out;
}

Tensor cuda_map_binary(const std::string& op, BinaryOp fn, const Tensor& a_in,
                       const Tensor& b_in) {
  check_same_device(op, {a_in, b_in});
  if (a_in.shape() == b_in.shape()) {
    const Tensor a = contiguous_data(a_in), b = contiguous_data(b_in);
    Tensor out = Tensor::empty(a.shape(), Device::CUDA);
    cuda_binary(fn, a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel());
    return out;
  }
  // Broadcasting: read a and b through the output's dims, with stride 0 where they were expanded
  // (the same strides as broadcast_binary in autograd/ops_binary.cpp).
  const Shape out_shape = broadcast_shapes(op, a_in.shape(), b_in.shape());
  Tensor out = Tensor::empty(out_shape, Device::CUDA);
  const int rank = static_cast<int>(out_shape.size());
  auto expanded = [&](const Tensor& t) {
    CudaLayout l = cuda_layout(out);
    const CudaLayout src = cuda_layout(t);
    l.offset = src.offset;
    for (int d = 0; d < rank; ++d) {
      const int dt = d - (rank - t.dim());
      l.strides[d] = dt >= 0 && t.shape()[dt] != 1 ? src.strides[dt] : 0;
    }
    return l;
  };
  cuda_broadcast_binary(fn, a_in.impl().storage->data, expanded(a_in), b_in.impl().storage->data,
                        expanded(b_in), out.data_ptr(), cuda_layout(out));
  return out;
}

DeviceIndices::DeviceIndices(const std::vector<int64_t>& host)
    : n_(static_cast<int64_t>(host.size())) {
  const size_t bytes = std::max<size_t>(1, host.size()) * sizeof(int64_t);
  data_ = static_cast<int64_t*>(cuda_allocate_bytes(bytes));
  try {
    cuda_copy_to_device(data_, host.data(), host.size() * sizeof(int64_t));
  } catch (...) {
    cuda_release_bytes(data_, bytes);
    throw;
  }
}

DeviceIndices::~DeviceIndices() {
  cuda_release_bytes(data_, std::max<int64_t>(1, n_) * sizeof(int64_t));
}

}  // namespace mg
