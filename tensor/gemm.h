// Single-precision matrix multiply, no external BLAS:
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C
// op(A) = A (row-major [M,K], leading dim lda) or A^T when trans_a (A stored [K,M]); same for B.
// Each C element is accumulated over k in a fixed order: the result does not depend on the number
// of threads. beta == 0 overwrites C without reading it (NaNs there do not propagate).
// Implementation: packed, cache-blocked, with AVX-512 / AVX2 / scalar micro-kernels chosen at run
// time (tensor/gemm_kernels.h, which also lets tests force one).
#pragma once

#include <cstdint>
#include <memory>

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

// op(B) [K,N] packed once and used by many products: the LSTM multiplies the same W_hh by a new
// h_{t-1} at every time step, and packing it (which under bf16 also means rounding it) each time
// costs as much as a small product. The packing is the current path's and precision's (on the
// reference path a plain copy of op(B) that gemm_reference reads, so a caller packs whichever path
// runs), so make it after choosing them and use it while they hold (gemm_packed_b checks).
class PackedB {
 public:
  PackedB() = default;
  PackedB(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb);
  int64_t rows() const { return K_; }  // K
  int64_t cols() const { return N_; }  // N
  // Columns per packed micro-panel (the kernel's nr): a slab for gemm_packed_b_cols starts on a
  // multiple of it.
  int64_t panel_cols() const;
  // Rows of the kernel's register tile (8 AVX-512, 6 AVX2): a caller cutting A into row tiles
  // keeps them multiples of this, or the kernel runs a sliver tile (2 of 8 rows: 1/3 the speed).
  int64_t tile_rows() const;

 private:
  friend void gemm_packed_b_cols(int64_t, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                 const PackedB&, float, float*, int64_t);
  friend void gemm_packed_b(int64_t, int64_t, int64_t, float, const float*, int64_t, const PackedB&,
                            float, float*, int64_t);
  int kernel_ = 0;  // the GemmKernel it was packed for (-1: the reference path's plain copy)
  int64_t K_ = 0, N_ = 0, kc_blk_ = 0, block_floats_ = 0;
  std::shared_ptr<float> data_;
};

// C[M,N] = alpha * A[M,K] * B + beta * C, A row-major with leading dimension lda: the same bits as
// mg::gemm(false, trans_b, ...) on the B that was packed. One thread when called from a parallel
// region (as the LSTM's team does), else split by rows.
void gemm_packed_b(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                   const PackedB& B, float beta, float* C, int64_t ldc);
// The same for a slab of B's columns: C[M,N] = alpha * A[M,K] * B[:, j0:j0+N] + beta * C, where j0
// is a multiple of B.panel_cols() (N need not be). Same bits as the matching columns of
// gemm_packed_b: the head computes its logits a cache-sized slab of the vocabulary at a time.
void gemm_packed_b_cols(int64_t M, int64_t j0, int64_t N, int64_t K, float alpha, const float* A,
                        int64_t lda, const PackedB& B, float beta, float* C, int64_t ldc);

// The number format of the operands of mg::gemm, for the whole process (--precision fp32|bf16):
//  * kFp32 (the default): FP32 operands, FP32 accumulation; every result is as before, bit for bit.
//  * kBf16: A and B are rounded to bfloat16 (nearest, ties to even) as they are packed, multiplied
//    exactly and accumulated in FP32 (tensor/gemm_avx512_bf16.cpp); C and everything outside the
//    GEMM stay FP32. About 1.7x the FP32 kernel's multiply-adds per second, for a relative error of
//    up to ~2^-8 per product (see tensor/bf16.h); ML training is known to tolerate it.
// The reference path (GemmPath::kReference) is FP32 whatever this says.
enum class GemmPrecision { kFp32, kBf16 };
// The bf16 kernel this CPU runs ("avx512_bf16"), or nullptr when it has none (then kBf16 cannot
// be set). AMX tiles would come first where present; no machine we test on has them, so there is
// no AMX kernel yet.
const char* gemm_bf16_kernel_name();
// Whether that kernel multiplies faster than the FP32 one on this CPU: on AMD, whose VDPBF16PS
// does twice the FP32 FMA's multiply-adds per cycle (Zen 5: GEMMs 1.8-2.0x, training 1.3-1.7x
// faster, bench/RESULTS.md); not on Intel, where AVX512_BF16 ran at about half
// the FP32 kernel's rate (Emerald Rapids: 1024^3 on one thread 72.7 against 134.0
// GFLOP/s; small-mos trained at 0.38x) and bf16's fast path is AMX. `reproduce`'s "auto"
// precision asks this; `--precision bf16` still runs, and train says it is slower.
bool gemm_bf16_faster_than_fp32();
// Returns the previous precision. Throws std::runtime_error, naming what the CPU lacks, for kBf16
// on a CPU without a bf16 kernel: never a silent FP32 run.
GemmPrecision set_gemm_precision(GemmPrecision precision);
GemmPrecision gemm_precision();

// Sets the precision for as long as it lives (a training run, a test), then restores it.
class GemmPrecisionScope {
 public:
  explicit GemmPrecisionScope(GemmPrecision precision) : previous_(set_gemm_precision(precision)) {}
  ~GemmPrecisionScope() { set_gemm_precision(previous_); }
  GemmPrecisionScope(const GemmPrecisionScope&) = delete;
  GemmPrecisionScope& operator=(const GemmPrecisionScope&) = delete;

 private:
  GemmPrecision previous_;
};

}  // namespace mg
