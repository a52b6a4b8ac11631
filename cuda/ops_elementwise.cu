// Elementwise kernels: the GPU side of tensor/kernels.h (map_unary_on, map_binary_on) and of
// ops_binary.cpp's broadcast_binary, running the formulas of math/formulas.h (the very functions
// the CPU's loops call), and tensor.cpp's strided copy.
//
// Every kernel here is one thread per output element (a grid-stride loop, so any n fits in the
// grid): each output depends on one or two inputs only, so there is nothing to share between
// threads, and the result is the same whatever the launch shape.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda/backend.h"
#include "cuda/check.h"
#include "math/formulas.h"

namespace mg {

namespace {

constexpr int kThreads = 256;  // threads per block

// Blocks for a grid-stride loop over n items: one item per thread up to 2^16 blocks (16M items),
// beyond that each thread takes several.
unsigned blocks_for(int64_t n) {
  return std::min<unsigned>(grid_for(n, kThreads), 1u << 16);
}

// The grid-stride loop: i runs over [0, n), 64-bit so that n > 2^31 works.
#define MG_GRID_STRIDE(i, n)                                                             \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// ---- the formulas: math/formulas.h, the same functions the CPU's loops call ----

template <UnaryOp F>
__device__ __forceinline__ float apply_unary(float v, float s) {
  return Unary<F>{s}(v);
}
template <BinaryOp F>
__device__ __forceinline__ float apply_binary(float a, float b) {
  return Binary<F>{}(a, b);
}

// Row-major element i of `shape`'s shape, located in two layouts of that rank: *o0 and *o1 receive
// the offsets. The loop is unrolled over kCudaMaxDims so the layouts stay in kernel-parameter space
// instead of being copied to local memory.
__device__ __forceinline__ void locate2(int64_t i, const CudaLayout& shape, const CudaLayout& l0,
                                        int64_t* o0, const CudaLayout& l1, int64_t* o1) {
  int64_t a = l0.offset, b = l1.offset;
#pragma unroll
  for (int d = kCudaMaxDims - 1; d >= 0; --d) {
    if (d < shape.rank) {
      const int64_t size = shape.shape[d];
      const int64_t k = i % size;  // coordinate along dim d
      i /= size;
      a += k * l0.strides[d];
      b += k * l1.strides[d];
    }
  }
  *o0 = a;
  *o1 = b;
}

// The same in three layouts (broadcast_binary: a, b and out), the shape being l2's.
__device__ __forceinline__ void locate3(int64_t i, const CudaLayout& l0, int64_t* o0,
                                        const CudaLayout& l1, int64_t* o1, const CudaLayout& l2,
                                        int64_t* o2) {
  int64_t a = l0.offset, b = l1.offset, c = l2.offset;
#pragma unroll
  for (int d = kCudaMaxDims - 1; d >= 0; --d) {
    if (d < l2.rank) {
      const int64_t size = l2.shape[d];
      const int64_t k = i % size;  // coordinate along dim d
      i /= size;
      a += k * l0.strides[d];
      b += k * l1.strides[d];
      c += k * l2.strides[d];
    }
  }
  *o0 = a;
  *o1 = b;
  *o2 = c;
}

// Number of elements of a layout's shape (1 for rank 0, a scalar).
int64_t numel_of(const CudaLayout& l, const char* what) {
  if (l.rank < 0 || l.rank > kCudaMaxDims)
    throw std::invalid_argument(std::string(what) + ": rank " + std::to_string(l.rank) +
                                " is outside [0, " + std::to_string(kCudaMaxDims) + "]");
  int64_t n = 1;
  for (int d = 0; d < l.rank; ++d) n *= l.shape[d];
  return n;
}

// ---- kernels ----

// Tensor::full / zeros: out [n] = value.
__global__ void fill_kernel(float* out, int64_t n, float value) {
  MG_GRID_STRIDE(i, n) out[i] = value;
}

// map_unary with one of ops_unary.cpp's functions: y [n] = f(x [n]). x may equal y (in place).
template <UnaryOp F>
__global__ void unary_kernel(const float* x, float* y, int64_t n, float s) {
  MG_GRID_STRIDE(i, n) y[i] = apply_unary<F>(x[i], s);
}

// map_binary: out [n] = f(a [n], b [n]), same shapes, no broadcasting. out may equal a or b.
template <BinaryOp F>
__global__ void binary_kernel(const float* a, const float* b, float* out, int64_t n) {
  MG_GRID_STRIDE(i, n) out[i] = apply_binary<F>(a[i], b[i]);
}

// ops_binary.cpp broadcast_binary: output element i (row-major over out's shape) reads a and b
// through their layouts, whose strides are 0 along broadcast dims.
template <BinaryOp F>
__global__ void broadcast_binary_kernel(const float* a, CudaLayout la, const float* b,
                                        CudaLayout lb, float* out, CudaLayout lo, int64_t n) {
  MG_GRID_STRIDE(i, n) {
    int64_t oa, ob, oo;
    locate3(i, la, &oa, lb, &ob, lo, &oo);
    out[oo] = apply_binary<F>(a[oa], b[ob]);
  }
}

// tensor.cpp copy_contiguous / narrow's backward / cat: dst viewed through ld = src viewed through
// ls, element i taken row-major over the (shared) shape.
__global__ void copy_strided_kernel(const float* src, CudaLayout ls, float* dst, CudaLayout ld,
                                    int64_t n) {
  MG_GRID_STRIDE(i, n) {
    int64_t os, od;
    locate2(i, ls, ls, &os, ld, &od);
    dst[od] = src[os];
  }
}

// Gradient accumulation into a leaf: a [n] += b [n].
__global__ void accumulate_kernel(float* a, const float* b, int64_t n) {
  MG_GRID_STRIDE(i, n) a[i] += b[i];
}

// Exchanges a [n] and b [n] element by element (the two buffers must not overlap).
__global__ void swap_kernel(float* a, float* b, int64_t n) {
  MG_GRID_STRIDE(i, n) {
    const float t = a[i];
    a[i] = b[i];
    b[i] = t;
  }
}

#undef MG_GRID_STRIDE

// One launch per op, so each kernel is compiled for one formula with no branch on the op.
template <UnaryOp F>
void launch_unary(const char* name, const float* x, float* y, int64_t n, float s) {
  unary_kernel<F><<<blocks_for(n), kThreads>>>(x, y, n, s);
  CUDA_CHECK_LAUNCH(name);
}

template <BinaryOp F>
void launch_binary(const char* name, const float* a, const float* b, float* out, int64_t n) {
  binary_kernel<F><<<blocks_for(n), kThreads>>>(a, b, out, n);
  CUDA_CHECK_LAUNCH(name);
}

template <BinaryOp F>
void launch_broadcast(const char* name, const float* a, const CudaLayout& la, const float* b,
                      const CudaLayout& lb, float* out, const CudaLayout& lo, int64_t n) {
  broadcast_binary_kernel<F><<<blocks_for(n), kThreads>>>(a, la, b, lb, out, lo, n);
  CUDA_CHECK_LAUNCH(name);
}

}  // namespace

void cuda_fill(float* out, int64_t n, float value) {
  if (n <= 0) return;
  fill_kernel<<<blocks_for(n), kThreads>>>(out, n, value);
  CUDA_CHECK_LAUNCH("fill_kernel");
}

void cuda_unary(UnaryOp fn, const float* x, float* y, int64_t n, float scalar) {
  if (n <= 0) return;
  switch (fn) {
    case UnaryOp::Tanh:
      return launch_unary<UnaryOp::Tanh>("unary_kernel<Tanh>", x, y, n, scalar);
    case UnaryOp::Sigmoid:
      return launch_unary<UnaryOp::Sigmoid>("unary_kernel<Sigmoid>", x, y, n, scalar);
    case UnaryOp::LogSigmoid:
      return launch_unary<UnaryOp::LogSigmoid>("unary_kernel<LogSigmoid>", x, y, n, scalar);
    case UnaryOp::Exp:
      return launch_unary<UnaryOp::Exp>("unary_kernel<Exp>", x, y, n, scalar);
    case UnaryOp::Log:
      return launch_unary<UnaryOp::Log>("unary_kernel<Log>", x, y, n, scalar);
    case UnaryOp::Relu:
      return launch_unary<UnaryOp::Relu>("unary_kernel<Relu>", x, y, n, scalar);
    case UnaryOp::Square:
      return launch_unary<UnaryOp::Square>("unary_kernel<Square>", x, y, n, scalar);
    case UnaryOp::AddScalar:
      return launch_unary<UnaryOp::AddScalar>("unary_kernel<AddScalar>", x, y, n, scalar);
    case UnaryOp::MulScalar:
      return launch_unary<UnaryOp::MulScalar>("unary_kernel<MulScalar>", x, y, n, scalar);
    case UnaryOp::Neg:
      return launch_unary<UnaryOp::Neg>("unary_kernel<Neg>", x, y, n, scalar);
  }
  throw std::invalid_argument("cuda_unary: unknown UnaryOp " +
                              std::to_string(static_cast<int>(fn)));
}

void cuda_binary(BinaryOp fn, const float* a, const float* b, float* out, int64_t n) {
  if (n <= 0) return;
  switch (fn) {
    case BinaryOp::Add:
      return launch_binary<BinaryOp::Add>("binary_kernel<Add>", a, b, out, n);
    case BinaryOp::Sub:
      return launch_binary<BinaryOp::Sub>("binary_kernel<Sub>", a, b, out, n);
    case BinaryOp::Mul:
      return launch_binary<BinaryOp::Mul>("binary_kernel<Mul>", a, b, out, n);
    case BinaryOp::Div:
      return launch_binary<BinaryOp::Div>("binary_kernel<Div>", a, b, out, n);
    case BinaryOp::TanhGrad:
      return launch_binary<BinaryOp::TanhGrad>("binary_kernel<TanhGrad>", a, b, out, n);
    case BinaryOp::SigmoidGrad:
      return launch_binary<BinaryOp::SigmoidGrad>("binary_kernel<SigmoidGrad>", a, b, out, n);
    case BinaryOp::LogSigmoidGrad:
      return launch_binary<BinaryOp::LogSigmoidGrad>("binary_kernel<LogSigmoidGrad>", a, b, out,
                                                       n);
    case BinaryOp::ReluGrad:
      return launch_binary<BinaryOp::ReluGrad>("binary_kernel<ReluGrad>", a, b, out, n);
    case BinaryOp::SquareGrad:
      return launch_binary<BinaryOp::SquareGrad>("binary_kernel<SquareGrad>", a, b, out, n);
  }
  throw std::invalid_argument("cuda_binary: unknown BinaryOp " +
                              std::to_string(static_cast<int>(fn)));
}

void cuda_broadcast_binary(BinaryOp fn, const float* a, CudaLayout a_layout, const float* b,
                           CudaLayout b_layout, float* out, CudaLayout out_layout) {
  const int64_t n = numel_of(out_layout, "cuda_broadcast_binary");
  if (a_layout.rank != out_layout.rank || b_layout.rank != out_layout.rank)
    throw std::invalid_argument("cuda_broadcast_binary: input ranks " +
                                std::to_string(a_layout.rank) + " and " +
                                std::to_string(b_layout.rank) + " differ from the output's " +
                                std::to_string(out_layout.rank));
  if (n <= 0) return;
  const CudaLayout &la = a_layout, &lb = b_layout, &lo = out_layout;
  switch (fn) {
    case BinaryOp::Add:
      return launch_broadcast<BinaryOp::Add>("broadcast_binary_kernel<Add>", a, la, b, lb, out,
                                               lo, n);
    case BinaryOp::Sub:
      return launch_broadcast<BinaryOp::Sub>("broadcast_binary_kernel<Sub>", a, la, b, lb, out,
                                               lo, n);
    case BinaryOp::Mul:
      return launch_broadcast<BinaryOp::Mul>("broadcast_binary_kernel<Mul>", a, la, b, lb, out,
                                               lo, n);
    case BinaryOp::Div:
      return launch_broadcast<BinaryOp::Div>("broadcast_binary_kernel<Div>", a, la, b, lb, out,
                                               lo, n);
    case BinaryOp::TanhGrad:
      return launch_broadcast<BinaryOp::TanhGrad>("broadcast_binary_kernel<TanhGrad>", a, la, b,
                                                    lb, out, lo, n);
    case BinaryOp::SigmoidGrad:
      return launch_broadcast<BinaryOp::SigmoidGrad>("broadcast_binary_kernel<SigmoidGrad>", a,
                                                       la, b, lb, out, lo, n);
    case BinaryOp::LogSigmoidGrad:
      return launch_broadcast<BinaryOp::LogSigmoidGrad>("broadcast_binary_kernel<LogSigmoidGrad>",
                                                          a, la, b, lb, out, lo, n);
    case BinaryOp::ReluGrad:
      return launch_broadcast<BinaryOp::ReluGrad>("broadcast_binary_kernel<ReluGrad>", a, la, b,
                                                    lb, out, lo, n);
    case BinaryOp::SquareGrad:
      return launch_broadcast<BinaryOp::SquareGrad>("broadcast_binary_kernel<SquareGrad>", a, la,
                                                      b, lb, out, lo, n);
  }
  throw std::invalid_argument("cuda_broadcast_binary: unknown BinaryOp " +
                              std::to_string(static_cast<int>(fn)));
}

void cuda_copy_strided(const float* src, CudaLayout src_layout, float* dst, CudaLayout dst_layout) {
  const int64_t n = numel_of(src_layout, "cuda_copy_strided");
  if (dst_layout.rank != src_layout.rank)
    throw std::invalid_argument(
        "cuda_copy_strided: source rank " + std::to_string(src_layout.rank) +
        " differs from the destination's " + std::to_string(dst_layout.rank));
  if (n <= 0) return;
  copy_strided_kernel<<<blocks_for(n), kThreads>>>(src, src_layout, dst, dst_layout, n);
  CUDA_CHECK_LAUNCH("copy_strided_kernel");
}

void cuda_accumulate(float* a, const float* b, int64_t n) {
  if (n <= 0) return;
  accumulate_kernel<<<blocks_for(n), kThreads>>>(a, b, n);
  CUDA_CHECK_LAUNCH("accumulate_kernel");
}

void cuda_swap(float* a, float* b, int64_t n) {
  if (n <= 0) return;
  swap_kernel<<<blocks_for(n), kThreads>>>(a, b, n);
  CUDA_CHECK_LAUNCH("swap_kernel");
}

}  // namespace mg
