// mg::PackedB (tensor/gemm.h): op(B) packed once in the GEMM's kc blocks and micro-panels, then
// multiplied by many A (gemm_packed_b), or a slab of its columns at a time (gemm_packed_b_cols).
// The fused head packs W^T once per forward and computes its logits a cache-sized slab of the
// vocabulary at a time; the fused LSTM packs W_hh once per sequence. The loop nest and the
// kernels are the driver's (tensor/gemm.cpp, tensor/gemm_kernels.h); only A is packed per call.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "tensor/allocator.h"
#include "tensor/gemm.h"
#include "tensor/gemm_kernels.h"
#include "tensor/parallel.h"  // num_threads, parallel_for and <omp.h>

namespace mg {

namespace {

// What PackedB::kernel_ holds on the reference path: no kernel, op(B) kept as a plain copy.
constexpr int kReferenceCopy = -1;

// The packing the current path and precision call for: a GemmKernel, or kReferenceCopy.
int current_packing() {
  if (gemm_path() == GemmPath::kReference) return kReferenceCopy;
  return static_cast<int>(gemm_precision() == GemmPrecision::kBf16 ? GemmKernel::kAvx512Bf16
                                                                   : gemm_default_kernel());
}

}  // namespace

PackedB::PackedB(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb) : K_(K), N_(N) {
  using namespace gemm_detail;
  kernel_ = current_packing();
  if (K <= 0 || N <= 0) return;
  if (kernel_ == kReferenceCopy) {
    // op(B) row-major [K,N], for gemm_reference to read: the reference path's products stay the
    // textbook loop, and the callers need not know which path runs.
    kc_blk_ = K, block_floats_ = K * N;
    const size_t n = static_cast<size_t>(K * N);
    float* p = allocate_floats(n);
    data_.reset(p, [n](float* q) { release_floats(q, n); });
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) p[k * N + j] = trans_b ? B[j * ldb + k] : B[k * ldb + j];
    return;
  }
  const GemmKernel kind = static_cast<GemmKernel>(kernel_);
  const Arch& g = arch_of(kind);
  // The kc blocks of gemm() for this K, each packed as gemm() packs an nc panel starting at
  // column 0 (micro-panel q at q*nr*kc): a slab of columns that starts on a micro-panel boundary
  // is then a pointer into it.
  kc_blk_ = ceil_div(K, ceil_div(K, g.kc));
  block_floats_ = round_up(N, g.nr) * kc_blk_;
  const int64_t blocks = ceil_div(K, kc_blk_);
  // From the tensor allocator's cache: the head packs its 8 MB W^T every forward, and fresh pages
  // (page faults, zeroing) cost more than the packing.
  const size_t n = static_cast<size_t>(blocks * block_floats_);
  float* p = allocate_floats(n);
  data_.reset(p, [n](float* q) { release_floats(q, n); });
  // Slabs of whole micro-panels on the threads (the head's W^T is 10,000 columns; packed on one
  // thread, the other waited 1.5% of a bf16 small-mos step).
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t pc = b * kc_blk_, kc = std::min(kc_blk_, K - pc);
    const int64_t slots = ceil_div(kc, g.k_per_slot);  // per packed row of a micro-panel
    parallel_for(ceil_div(N, g.nr), 16, [&](int64_t q0, int64_t q1) {
      const int64_t j0 = q0 * g.nr, j1 = std::min(N, q1 * g.nr);
      g.pack_b(trans_b, trans_b ? B + j0 * ldb + pc : B + pc * ldb + j0, ldb, kc, j1 - j0,
               p + b * block_floats_ + j0 * slots);
    });
  }
}

int64_t PackedB::panel_cols() const {
  if (kernel_ == kReferenceCopy) return 1;
  return gemm_detail::arch_of(static_cast<GemmKernel>(kernel_)).nr;
}

int64_t PackedB::tile_rows() const {
  if (kernel_ == kReferenceCopy) return 1;
  return gemm_detail::arch_of(static_cast<GemmKernel>(kernel_)).mr;
}

void gemm_packed_b(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                   const PackedB& B, float beta, float* C, int64_t ldc) {
  if (N != B.N_ || K != B.K_)
    throw std::invalid_argument("gemm_packed_b: the product is " + std::to_string(K) + "x" +
                                std::to_string(N) + " but B was packed as " + std::to_string(B.K_) +
                                "x" + std::to_string(B.N_));
  gemm_packed_b_cols(M, 0, N, K, alpha, A, lda, B, beta, C, ldc);
}

void gemm_packed_b_cols(int64_t M, int64_t j0, int64_t N, int64_t K, float alpha, const float* A,
                        int64_t lda, const PackedB& B, float beta, float* C, int64_t ldc) {
  using namespace gemm_detail;
  if (K != B.K_ || j0 < 0 || N < 0 || j0 + N > B.N_ || (B.N_ > 0 && j0 % B.panel_cols() != 0))
    throw std::invalid_argument(
        "gemm_packed_b_cols: columns [" + std::to_string(j0) + ", " + std::to_string(j0 + N) +
        ") with K = " + std::to_string(K) + " of a B packed as " + std::to_string(B.K_) + "x" +
        std::to_string(B.N_) + " (the first column must start a packed panel)");
  if (current_packing() != B.kernel_)
    throw std::logic_error("gemm_packed_b: B was packed for another GEMM precision or path");
  if (B.kernel_ == kReferenceCopy)  // as mg::gemm on the reference path, from the plain copy
    return gemm_reference(false, false, M, N, K, alpha, A, lda, B.data_.get() + j0, B.N_, beta, C,
                          ldc);
  const GemmKernel now = static_cast<GemmKernel>(B.kernel_);
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0) return scale_c(M, N, beta, C, ldc);
  const Arch& g = arch_of(now);
  const int64_t blocks = ceil_div(K, B.kc_blk_);
  // Micro-panel q of k block b starts q*nr*ceil(kc/k_per_slot) slots in (the constructor).
  auto panel = [&](int64_t b, int64_t kc) {
    return B.data_.get() + b * B.block_floats_ + j0 * ceil_div(kc, g.k_per_slot);
  };
  auto rows = [&](int64_t i0, int64_t i1) {  // C[i0:i1, :], as run_block does it
    const int64_t m_all = i1 - i0;
    if (m_all <= 0) return;
    if (g.macro_a_direct && (m_all <= 2 * g.mr || N <= g.a_direct_max_n)) {
      // A read in place, as run_block does for narrow products: the fused head's forward asks
      // for a tile of at most two micro-panels of rows (8 rows on AVX-512, 12 on AVX2) by a
      // 768-column slab (packing the same rows again for every slab cost it 2%, and 2.5% of
      // mos-paper's step on AVX2 while its 12-row tile was packed), the fused LSTM for 20 rows
      // by one gate's 200 columns per thread (the same h_{t-1} packed for each of the four
      // gates: 4% of the LSTM). (On AVX-512 the head's tile is 8 rows and the LSTM's columns
      // per thread are at most 512, so no caller there changed path when 2 mr replaced mr.)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t pc = b * B.kc_blk_, kc = std::min(B.kc_blk_, K - pc);
        g.macro_a_direct(m_all, N, kc, A + i0 * lda + pc, lda, panel(b, kc), alpha,
                         b == 0 ? beta : 1.0f, C + i0 * ldc, ldc, Upcoming{});
      }
      return;
    }
    const int64_t mc = round_up(ceil_div(m_all, ceil_div(m_all, g.mc)), g.mr);
    float* Ap = thread_scratch_a(static_cast<size_t>(mc * B.kc_blk_));
    for (int64_t ic = i0; ic < i1; ic += mc) {
      const int64_t m = std::min(mc, i1 - ic);
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t pc = b * B.kc_blk_, kc = std::min(B.kc_blk_, K - pc);
        g.pack_a(false, A + ic * lda + pc, lda, m, kc, Ap);
        g.macro(m, N, kc, Ap, panel(b, kc), 0, alpha, b == 0 ? beta : 1.0f, C + ic * ldc, ldc);
      }
    }
  };
  int T = num_threads();
#ifdef _OPENMP
  if (omp_in_parallel()) T = 1;
#endif
  if (static_cast<double>(M) * N * K < kParallelMinWork) T = 1;
  T = static_cast<int>(std::min<int64_t>(T, ceil_div(M, g.mr)));
  if (T <= 1) return rows(0, M);
#ifdef _OPENMP
  const int64_t units = ceil_div(M, g.mr);
#pragma omp parallel num_threads(T)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    rows(std::min(M, units * t / n * g.mr), std::min(M, units * (t + 1) / n * g.mr));
  }
#else
  rows(0, M);
#endif
}

}  // namespace mg
