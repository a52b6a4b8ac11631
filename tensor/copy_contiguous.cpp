// copy_contiguous (tensor/tensor.h): any view copied into fresh row-major memory. The general case
// walks the view's strides; a transposed matrix, the common view that walk reads worst, is copied
// in tiles (transpose_rows, with AVX2 where the CPU has it).
#include <algorithm>

#if defined(__GNUC__) && defined(__x86_64__)
#include "tensor/transpose8.h"
#endif

#include "cuda/backend.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"

namespace mg {

namespace {

constexpr int64_t kTransposeTile = 32;

// dst[i, j] = src[j * ld + i] for rows i in [i0, i1) of dst [.., C], in kTransposeTile squares.
// Sizes by value and restrict pointers: through a lambda's by-reference captures GCC reloaded them
// after every store, and the copy ran 6x slower.
void transpose_rows_scalar(const float* __restrict src, int64_t ld, int64_t C, int64_t i0,
                           int64_t i1, float* __restrict dst) {
  for (int64_t ib = i0; ib < i1; ib += kTransposeTile) {
    const int64_t ie = std::min(i1, ib + kTransposeTile);
    for (int64_t jb = 0; jb < C; jb += kTransposeTile) {
      const int64_t je = std::min(C, jb + kTransposeTile);
      for (int64_t i = ib; i < ie; ++i)
        for (int64_t j = jb; j < je; ++j) dst[i * C + j] = src[j * ld + i];
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define MG_HAVE_AVX2_TRANSPOSE 1
// The same with AVX2: whole 8 x 8 blocks are loaded as 8 rows of the source, transposed in
// registers (transpose8, shared with the GEMM's packing) and stored as 8 rows of dst; the ragged
// edges take the scalar loop. The scalar form is one load and one store per float, and the column
// it reads touches a new line per element: 1% of a small-mos training step for d W alone.
__attribute__((target("avx2"))) void transpose_rows_avx2(const float* __restrict src, int64_t ld,
                                                         int64_t C, int64_t i0, int64_t i1,
                                                         float* __restrict dst) {
  const int64_t i8 = i0 + (i1 - i0) / 8 * 8, C8 = C / 8 * 8;
  for (int64_t ib = i0; ib < i8; ib += kTransposeTile) {
    const int64_t ie = std::min(i8, ib + kTransposeTile);
    for (int64_t jb = 0; jb < C8; jb += kTransposeTile) {
      const int64_t je = std::min(C8, jb + kTransposeTile);
      for (int64_t i = ib; i < ie; i += 8)
        for (int64_t j = jb; j < je; j += 8) {
          __m256 r[8];
          for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src + (j + k) * ld + i);
          transpose8(r);
          for (int k = 0; k < 8; ++k) _mm256_storeu_ps(dst + (i + k) * C + j, r[k]);
        }
    }
  }
  for (int64_t i = i0; i < i8; ++i)  // the columns past the last whole 8
    for (int64_t j = C8; j < C; ++j) dst[i * C + j] = src[j * ld + i];
  transpose_rows_scalar(src, ld, C, i8, i1, dst);  // the rows past the last whole 8
}
#endif

}  // namespace

void transpose_rows(const float* src, int64_t ld, int64_t C, int64_t i0, int64_t i1, float* dst) {
#ifdef MG_HAVE_AVX2_TRANSPOSE
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return transpose_rows_avx2(src, ld, C, i0, i1, dst);
#endif
  transpose_rows_scalar(src, ld, C, i0, i1, dst);
}

Tensor copy_contiguous(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape(), t.device());
  const int rank = t.dim();
  const int64_t n = out.numel();
  if (n == 0) return out;
  if (t.is_cuda()) {
    cuda_copy_strided(t.impl().storage->data, cuda_layout(t), out.data_ptr(), cuda_layout(out));
    return out;
  }
  const float* src = t.impl().storage->data;
  float* dst = out.data();
  if (rank == 2 && t.strides()[0] == 1 && t.shape()[0] > 1) {
    // A transposed matrix (the view's rows are the storage's columns). Row by row, each output row
    // would read a whole column of the source, one cache line per element; tiles read and write
    // whole lines instead (the head's d W: 0.6M-2M floats).
    const int64_t R = t.shape()[0], C = t.shape()[1];
    parallel_for((R + kTransposeTile - 1) / kTransposeTile, 4, [&](int64_t b0, int64_t b1) {
      transpose_rows(src + t.impl().offset, t.strides()[1], C, b0 * kTransposeTile,
                     std::min(R, b1 * kTransposeTile), dst);
    });
    return out;
  }
  // Walk the output in row-major order; the innermost dim is copied with its own stride.
  const int64_t inner = rank ? t.shape()[rank - 1] : 1;
  const int64_t inner_stride = rank ? t.strides()[rank - 1] : 1;
  const int64_t rows = n / inner;
  parallel_for(rows, 64, [&](int64_t begin, int64_t end) {
    // Local copies of the captured sizes: the compiler may keep locals in registers across the
    // stores to dst, but not values it reaches through references.
    const int64_t in = inner, step = inner_stride;
    for (int64_t r = begin; r < end; ++r) {
      int64_t pos = t.impl().offset, rem = r;
      for (int d = rank - 2; d >= 0; --d) {
        pos += (rem % t.shape()[d]) * t.strides()[d];
        rem /= t.shape()[d];
      }
      const float* from = src + pos;
      float* to = dst + r * in;
      if (step == 1)
        std::copy(from, from + in, to);
      else
        for (int64_t i = 0; i < in; ++i) to[i] = from[i * step];
    }
  });
  return out;
}

}  // namespace mg
