// Single-precision matrix multiply, no external BLAS:
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C
// op(A) = A (row-major [M,K], leading dim lda) or A^T when trans_a (A stored [K,M]); same for B.
// Each C element is accumulated over k in a fixed order: the result does not depend on the number
// of threads. beta == 0 overwrites C without reading it (NaNs there do not propagate).
// Implementation: packed, cache-blocked, with AVX-512 / AVX2 / scalar micro-kernels chosen at run
// time (tensor/gemm_kernels.h, which also lets tests force one).
#pragma once

#include <cstdint>

namespace mg {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// The textbook triple loop (double accumulation): the reference the fast path is tested against.
void gemm_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                    int64_t ldc);

// Which of the two mg::gemm runs, for the whole process: the packed one (the default) or
// gemm_reference, on one thread and tens to hundreds of times slower, but three loops to read and
// step through (`mosgrad --gemm reference`). Set it before work starts, not while GEMMs run.
enum class GemmPath { kFast, kReference };
GemmPath set_gemm_path(GemmPath path);  // returns the previous one
GemmPath gemm_path();

// Sets the path for as long as it lives (a training run, a test), then restores the previous one.
class GemmPathScope {
 public:
  explicit GemmPathScope(GemmPath path) : previous_(set_gemm_path(path)) {}
  ~GemmPathScope() { set_gemm_path(previous_); }
  GemmPathScope(const GemmPathScope&) = delete;
  GemmPathScope& operator=(const GemmPathScope&) = delete;

 private:
  GemmPath previous_;
};

}  // namespace mg
