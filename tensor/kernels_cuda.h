// The GPU side of tensor/kernels.h: the same helpers for tensors on the CUDA device, built on
// cuda/backend.h. An op checks its inputs' device, then calls these instead of its CPU loop.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/backend.h"
#include "tensor/tensor.h"

namespace mg {

// The [outer, n, inner] split of kernels.h, in the kernels' type.
CudaSplit cuda_split(const Shape& shape, int dim);

// out = fn(x, scalar) elementwise; a fresh contiguous tensor on the GPU.
Tensor cuda_map_unary(UnaryOp fn, const Tensor& x, float scalar = 0.0f);
// out = fn(a, b) with numpy broadcasting (op names the caller in shape errors).
Tensor cuda_map_binary(const std::string& op, BinaryOp fn, const Tensor& a, const Tensor& b);

// Token ids or targets copied to the GPU once per op (and freed with the op's graph).
class DeviceIndices {
 public:
  explicit DeviceIndices(const std::vector<int64_t>& host);
  ~DeviceIndices();
  DeviceIndices(const DeviceIndices&) = delete;
  DeviceIndices& operator=(const DeviceIndices&) = delete;
  const int64_t* get() const { return data_; }

 private:
  int64_t* data_ = nullptr;
  int64_t n_ = 0;
};

}  // namespace mg
