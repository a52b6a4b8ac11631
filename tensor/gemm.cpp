// The GEMM driver: cache blocking, packing, threading and the choice of micro-kernel (see
// tensor/gemm_kernels.h for the algorithm and the packed layouts). This file holds everything that
// does not depend on the instruction set, plus the portable scalar kernel; the vector kernels live
// in gemm_avx512.cpp and gemm_avx2.cpp and are only called after a run-time CPU check.
//
// Determinism: each C element is computed by exactly one thread, as one accumulator per kc block
// summed over k in increasing order, and the kc blocking depends on K alone. So the split between
// threads (which changes with their number) never changes a single bit of the result.
#include "tensor/gemm.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <new>
#include <stdexcept>
#include <string>

#include "tensor/allocator.h"
#include "tensor/gemm_kernels.h"
#include "tensor/parallel.h"

namespace mg {

void gemm_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                    int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const float a = trans_a ? A[k * lda + i] : A[i * lda + k];
        const float b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        acc += static_cast<double>(a) * b;
      }
      C[i * ldc + j] = static_cast<float>(alpha * acc + (beta == 0 ? 0.0 : beta * C[i * ldc + j]));
    }
}

namespace gemm_detail {

void pack_a_generic(int mr, bool trans, const float* A, int64_t lda, int64_t m, int64_t kc,
                    float* Ap) {
  for (int64_t p0 = 0; p0 < m; p0 += mr) {
    const int64_t rows = std::min<int64_t>(mr, m - p0);
    float* dst = Ap + (p0 / mr) * mr * kc;
    if (!trans) {
      // Row-major A: read each row sequentially, scatter into the k-interleaved panel.
      for (int64_t i = 0; i < rows; ++i) {
        const float* src = A + (p0 + i) * lda;
        for (int64_t k = 0; k < kc; ++k) dst[k * mr + i] = src[k];
      }
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t i = rows; i < mr; ++i) dst[k * mr + i] = 0.0f;
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = A + k * lda + p0;
        for (int64_t i = 0; i < rows; ++i) dst[k * mr + i] = src[i];
        for (int64_t i = rows; i < mr; ++i) dst[k * mr + i] = 0.0f;
      }
    }
  }
}

void pack_b_generic(int nr, int vl, bool trans, const float* B, int64_t ldb, int64_t kc, int64_t n,
                    float* Bp) {
  for (int64_t q0 = 0; q0 < n; q0 += nr) {
    const int64_t cols = std::min<int64_t>(nr, n - q0);
    const int64_t w = cols == nr ? nr : (cols + vl - 1) / vl * vl;
    float* dst = Bp + (q0 / nr) * nr * kc;
    if (!trans) {
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = B + k * ldb + q0;
        for (int64_t j = 0; j < cols; ++j) dst[k * w + j] = src[j];
        for (int64_t j = cols; j < w; ++j) dst[k * w + j] = 0.0f;
      }
    } else {
      for (int64_t j = 0; j < cols; ++j) {
        const float* src = B + (q0 + j) * ldb;
        for (int64_t k = 0; k < kc; ++k) dst[k * w + j] = src[k];
      }
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = cols; j < w; ++j) dst[k * w + j] = 0.0f;
    }
  }
}

namespace {

// ---- Portable scalar kernel: a 4 x 8 tile. Plain C++ the compiler may vectorize for whatever
// -march it is given; it is the fallback for CPUs without AVX2 and the baseline in the tests.
// 4 x 8 accumulators fit the 16 SSE2 registers with room for B; a 4 x 16 tile spilled and ran
// 5x slower on the SSE2 baseline.
constexpr int kScalarMr = 4, kScalarNr = 8;

// W is the packed width of the B micro-panel: kScalarNr for full panels, 0 for the (runtime) width
// of an edge panel, so the common case has constant trip counts.
template <int W>
void scalar_micro(int64_t kc, const float* a, const float* b, int64_t w, int64_t bs, int rows,
                  int cols, float alpha, float beta, float* c, int64_t ldc) {
  const int64_t width = W ? W : w;
  float acc[kScalarMr][kScalarNr] = {};
  for (int64_t k = 0; k < kc; ++k, a += kScalarMr, b += bs)
    for (int i = 0; i < kScalarMr; ++i)
      for (int64_t j = 0; j < width; ++j) acc[i][j] += a[i] * b[j];
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      float& out = c[i * ldc + j];
      out = beta == 0 ? alpha * acc[i][j] : alpha * acc[i][j] + beta * out;
    }
}

void scalar_macro(int64_t m, int64_t n, int64_t kc, const float* Ap, const float* Bp,
                  int64_t ldb_direct, float alpha, float beta, float* C, int64_t ldc) {
  for (int64_t jr = 0; jr < n; jr += kScalarNr) {
    const int cols = static_cast<int>(std::min<int64_t>(kScalarNr, n - jr));
    // Packed: panel jr/nr starts at (jr/nr)*nr*kc = jr*kc, rows `cols` apart.
    const float* b = ldb_direct ? Bp + jr : Bp + jr * kc;
    const int64_t bs = ldb_direct ? ldb_direct : cols;
    for (int64_t ir = 0; ir < m; ir += kScalarMr) {
      const int rows = static_cast<int>(std::min<int64_t>(kScalarMr, m - ir));
      const float* a = Ap + ir * kc;
      float* c = C + ir * ldc + jr;
      if (cols == kScalarNr)
        scalar_micro<kScalarNr>(kc, a, b, kScalarNr, bs, rows, cols, alpha, beta, c, ldc);
      else
        scalar_micro<0>(kc, a, b, cols, bs, rows, cols, alpha, beta, c, ldc);
    }
  }
}

const Arch kScalarArch = {"scalar",
                          kScalarMr,
                          kScalarNr,
                          1,
                          /*mc=*/128,
                          /*kc=*/256,
                          /*nc=*/4096,
                          [](bool t, const float* A, int64_t lda, int64_t m, int64_t kc,
                             float* Ap) { pack_a_generic(kScalarMr, t, A, lda, m, kc, Ap); },
                          [](bool t, const float* B, int64_t ldb, int64_t kc, int64_t n,
                             float* Bp) { pack_b_generic(kScalarNr, 1, t, B, ldb, kc, n, Bp); },
                          scalar_macro};

// ---- Scratch memory: 64-byte aligned (full zmm lines), one A and one B buffer per thread, kept
// between calls because the LSTM issues thousands of small products per step.
class Scratch {
 public:
  ~Scratch() { release(); }
  float* get(size_t n) {
    if (n > cap_) {
      release();
      p_ = static_cast<float*>(::operator new(n * sizeof(float), std::align_val_t(64)));
      cap_ = n;
    }
    return p_;
  }

 private:
  void release() {
    if (p_) ::operator delete(p_, std::align_val_t(64));
    p_ = nullptr;
    cap_ = 0;
  }
  float* p_ = nullptr;
  size_t cap_ = 0;
};
thread_local Scratch tl_a, tl_b;

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
inline int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

struct Problem {
  bool ta, tb;
  int64_t M, N, K;
  float alpha;
  const float* A;
  int64_t lda;
  const float* B;
  int64_t ldb;
  float beta;
  float* C;
  int64_t ldc;
  // op(A)[i, k] and op(B)[k, j] as pointers, whatever the storage order.
  const float* a_at(int64_t i, int64_t k) const { return ta ? A + k * lda + i : A + i * lda + k; }
  const float* b_at(int64_t k, int64_t j) const { return tb ? B + j * ldb + k : B + k * ldb + j; }
};

// Below this many multiply-adds one core finishes before a second one would have woken up.
constexpr double kParallelMinWork = 96.0 * 96.0 * 96.0;

void scale_c(const Problem& p) {
  parallel_for(p.M, std::max<int64_t>(1, 16384 / p.N), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* c = p.C + i * p.ldc;
      if (p.beta == 0)
        std::fill(c, c + p.N, 0.0f);
      else if (p.beta != 1)
        for (int64_t j = 0; j < p.N; ++j) c[j] *= p.beta;
    }
  });
}

// The rows of a row-major B that the kc block starting at k = pc reads (columns j0:j0+n): what
// the block after the current one packs, for the kernel to prefetch. None when B is stored
// transposed (then the block is kc-wide strips of n rows, not one range) or pc is past K.
Upcoming next_b_block(const Problem& p, int64_t pc, int64_t kc_blk, int64_t j0, int64_t n) {
  Upcoming up;
  if (p.tb || pc >= p.K) return up;
  const int64_t rows = std::min(kc_blk, p.K - pc);
  up.begin = reinterpret_cast<const char*>(p.b_at(pc, j0));
  up.bytes = static_cast<int64_t>(sizeof(float)) * ((rows - 1) * p.ldb + n);
  return up;
}

// One thread's share of the product, C[i0:i1, j0:j1], computed with the whole Goto loop nest and
// the thread's own packed buffers. Threads never share a packed panel, so they never wait for one
// another inside a call: on a machine shared with other jobs, a barrier per kc block cost more
// (a descheduled thread stalls its partner for a whole time slice) than packing B twice does.
void run_block(const Arch& g, const Problem& p, int64_t kc_blk, int64_t i0, int64_t i1, int64_t j0,
               int64_t j1) {
  const int64_t m_all = i1 - i0, n_all = j1 - j0;
  if (m_all <= 0 || n_all <= 0) return;
  // Equal mc blocks, so that the last one is not a sliver.
  const int64_t mc = round_up(ceil_div(m_all, ceil_div(m_all, g.mc)), g.mr);
  float* Ap = tl_a.get(static_cast<size_t>(mc * kc_blk));
  // A row-major A is not packed as a block when C is narrow (macro_a_direct): each packed A
  // element would serve only N columns. The FP32 kernel reads A's rows in place (the head's
  // d ctx = dz W, N = 200: packing its 140 MB dz was 11% of the product; a transposed-B Linear,
  // 128 x 1000 @ 1000 x 200: 333 -> 428 GFLOP/s); the bf16 kernel, which must round and pair
  // them, packs one 8-row micro-panel at a time right before its use.
  const bool direct_a = g.macro_a_direct && !p.ta && p.N <= g.a_direct_max_n;
  if (m_all <= mc) {
    // A single A block (at most mc rows): each B micro-panel is used by this block only, at most
    // mc/mr times. A row-major B is then read in place, rows ldb apart, rather than copied: the
    // copy does not pay for itself (20 x 400 x 1600, the LSTM step, ran at 65-70% of peak with
    // packing and 85-90% without; 128 x 200 x 10000 gained 5%). A transposed B is packed one
    // micro-panel at a time, right before its use, so it goes from packing to the kernel
    // through L1/L2 and there is no nc panel at all.
    const bool direct = !p.tb && g.b_in_place;
    // With B read in place, A is packed as a block (the kernel reads one of the two packed). With
    // A not, B is packed whole (n_all <= a_direct_max_n columns) for each A micro-panel to run
    // against, and the kernel is told which rows of B the next kc block packs, to prefetch them
    // while it computes (from memory, that packing was 11% of the bf16 d ctx = dz W).
    const bool a_in_place = direct_a && !direct;
    const int64_t b_cols = a_in_place ? round_up(n_all, g.nr) : g.nr;
    float* Bp = tl_b.get(static_cast<size_t>(b_cols * kc_blk));
    for (int64_t pc = 0; pc < p.K; pc += kc_blk) {
      const int64_t kc = std::min(kc_blk, p.K - pc);
      const float beta = pc == 0 ? p.beta : 1.0f;
      if (a_in_place) {
        g.pack_b(p.tb, p.b_at(pc, j0), p.ldb, kc, n_all, Bp);
        g.macro_a_direct(m_all, n_all, kc, p.a_at(i0, pc), p.lda, Bp, p.alpha, beta,
                         p.C + i0 * p.ldc + j0, p.ldc, next_b_block(p, pc + kc, kc_blk, j0, n_all));
        continue;
      }
      g.pack_a(p.ta, p.a_at(i0, pc), p.lda, m_all, kc, Ap);
      int64_t j = j0;
      if (direct) {
        const int64_t full = (n_all / g.nr) * g.nr;  // whole micro-panels, read in place
        if (full > 0)
          g.macro(m_all, full, kc, Ap, p.b_at(pc, j), p.ldb, p.alpha, beta, p.C + i0 * p.ldc + j,
                  p.ldc);
        j += full;
      }
      for (; j < j1; j += g.nr) {
        const int64_t n = std::min<int64_t>(g.nr, j1 - j);
        g.pack_b(p.tb, p.b_at(pc, j), p.ldb, kc, n, Bp);
        g.macro(m_all, n, kc, Ap, Bp, 0, p.alpha, beta, p.C + i0 * p.ldc + j, p.ldc);
      }
    }
    return;
  }
  // The general case (Goto & van de Geijn, BLIS): a kc x nc panel of B packed once per (jc, pc)
  // and kept in L3 while every mc x kc block of A is packed (into L2, or read in place: direct_a)
  // and multiplied with it.
  const int64_t nc_max = round_up(ceil_div(n_all, ceil_div(n_all, g.nc)), g.nr);
  float* Bp = tl_b.get(static_cast<size_t>(nc_max * kc_blk));
  for (int64_t jc = j0; jc < j1; jc += nc_max) {
    const int64_t nc = std::min(nc_max, j1 - jc);
    for (int64_t pc = 0; pc < p.K; pc += kc_blk) {
      const int64_t kc = std::min(kc_blk, p.K - pc);
      const float beta = pc == 0 ? p.beta : 1.0f;
      g.pack_b(p.tb, p.b_at(pc, jc), p.ldb, kc, nc, Bp);
      for (int64_t ic = i0; ic < i1; ic += mc) {
        const int64_t m = std::min(mc, i1 - ic);
        if (direct_a) {
          g.macro_a_direct(m, nc, kc, p.a_at(ic, pc), p.lda, Bp, p.alpha, beta,
                           p.C + ic * p.ldc + jc, p.ldc, Upcoming());
          continue;
        }
        g.pack_a(p.ta, p.a_at(ic, pc), p.lda, m, kc, Ap);
        g.macro(m, nc, kc, Ap, Bp, 0, p.alpha, beta, p.C + ic * p.ldc + jc, p.ldc);
      }
    }
  }
}

// Thread t of T takes a slab of C: a range of rows when M >= N, else a range of columns (e.g. the
// head's [d W^T; d b], M = E+1 = 201 rows by V = 10000 columns), cut on register-tile boundaries.
// Splitting the longer side keeps the duplicated work small: each thread packs all of the other
// operand's panels, a cost proportional to T / max(M, N) of the multiply. k is never split (no
// reduction across threads), and the kc blocking depends on K alone, so the result does not depend
// on T.
void run_slab(const Arch& g, const Problem& p, int64_t kc_blk, bool by_rows, int t, int T) {
  if (by_rows) {
    const int64_t units = ceil_div(p.M, g.mr);
    run_block(g, p, kc_blk, std::min(p.M, units * t / T * g.mr),
              std::min(p.M, units * (t + 1) / T * g.mr), 0, p.N);
  } else {
    const int64_t units = ceil_div(p.N, g.nr);
    run_block(g, p, kc_blk, 0, p.M, std::min(p.N, units * t / T * g.nr),
              std::min(p.N, units * (t + 1) / T * g.nr));
  }
}

void run(const Arch& g, const Problem& p) {
  if (p.M <= 0 || p.N <= 0) return;
  if (p.K <= 0 || p.alpha == 0) return scale_c(p);
  // Equal kc blocks (K = 600 gives 2 x 300, not 512 + 88): no short, inefficient last block.
  const int64_t kc_blk = ceil_div(p.K, ceil_div(p.K, g.kc));
  const bool by_rows = p.M >= p.N;
  int T = num_threads();
#ifdef _OPENMP
  if (omp_in_parallel()) T = 1;
#endif
  if (static_cast<double>(p.M) * p.N * p.K < kParallelMinWork) T = 1;
  T = static_cast<int>(std::min<int64_t>(T, by_rows ? ceil_div(p.M, g.mr) : ceil_div(p.N, g.nr)));
  if (T <= 1) return run_slab(g, p, kc_blk, by_rows, 0, 1);
#ifdef _OPENMP
#pragma omp parallel num_threads(T)
  // The team may be smaller than asked for (OMP_THREAD_LIMIT, dynamic adjustment).
  run_slab(g, p, kc_blk, by_rows, omp_get_thread_num(), omp_get_num_threads());
#else
  run_slab(g, p, kc_blk, by_rows, 0, 1);
#endif
}

bool cpu_has(GemmKernel kind) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  switch (kind) {
    case GemmKernel::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
    case GemmKernel::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case GemmKernel::kAvx512Bf16:
      return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
    default:
      return true;
  }
#else
  return kind == GemmKernel::kScalar || kind == GemmKernel::kAuto;
#endif
}

const Arch& arch_of(GemmKernel kind) {
  switch (kind) {
    case GemmKernel::kAvx512:
      return arch_avx512();
    case GemmKernel::kAvx2:
      return arch_avx2();
    case GemmKernel::kAvx512Bf16:
      return arch_avx512_bf16();
    default:
      return kScalarArch;
  }
}

}  // namespace
}  // namespace gemm_detail

const char* gemm_kernel_name(GemmKernel kind) {
  switch (kind) {
    case GemmKernel::kAuto:
      return "auto";
    case GemmKernel::kScalar:
      return "scalar";
    case GemmKernel::kAvx2:
      return "avx2";
    case GemmKernel::kAvx512:
      return "avx512";
    case GemmKernel::kAvx512Bf16:
      return "avx512_bf16";
  }
  return "?";
}

bool gemm_kernel_supported(GemmKernel kind) {
  // Asked once per family: gemm() under bf16 goes through here for every product.
  static const bool supported[] = {
      gemm_detail::cpu_has(GemmKernel::kAuto), gemm_detail::cpu_has(GemmKernel::kScalar),
      gemm_detail::cpu_has(GemmKernel::kAvx2), gemm_detail::cpu_has(GemmKernel::kAvx512),
      gemm_detail::cpu_has(GemmKernel::kAvx512Bf16)};
  return supported[static_cast<int>(kind)];
}

GemmKernel gemm_default_kernel() {
  static const GemmKernel best = gemm_detail::cpu_has(GemmKernel::kAvx512) ? GemmKernel::kAvx512
                                 : gemm_detail::cpu_has(GemmKernel::kAvx2) ? GemmKernel::kAvx2
                                                                           : GemmKernel::kScalar;
  return best;
}

bool gemm_with_kernel(GemmKernel kind, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                      float beta, float* C, int64_t ldc) {
  if (kind == GemmKernel::kAuto)
    kind = gemm_default_kernel();  // cached: no CPU query per call
  else if (!gemm_kernel_supported(kind))
    return false;
  const gemm_detail::Problem p{trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc};
  gemm_detail::run(gemm_detail::arch_of(kind), p);
  return true;
}

namespace {
std::atomic<GemmPath> g_gemm_path{GemmPath::kFast};  // atomic: GEMMs read it from every thread
std::atomic<GemmPrecision> g_gemm_precision{GemmPrecision::kFp32};
}  // namespace

const char* gemm_bf16_kernel_name() {
  return gemm_kernel_supported(GemmKernel::kAvx512Bf16) ? "avx512_bf16" : nullptr;
}

GemmPrecision set_gemm_precision(GemmPrecision precision) {
  if (precision == GemmPrecision::kBf16 && !gemm_bf16_kernel_name())
    throw std::runtime_error(
        "bf16 precision needs a CPU with AVX512_BF16 (AMD Zen 4 or later, Intel Cooper Lake or "
        "Sapphire Rapids and later); this one has none: use --precision fp32");
  return g_gemm_precision.exchange(precision);
}
GemmPrecision gemm_precision() {
  return g_gemm_precision.load(std::memory_order_relaxed);
}

GemmPath set_gemm_path(GemmPath path) {
  return g_gemm_path.exchange(path);
}
GemmPath gemm_path() {
  return g_gemm_path.load(std::memory_order_relaxed);
}

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (gemm_path() == GemmPath::kReference)
    return gemm_reference(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  const GemmKernel kind =
      gemm_precision() == GemmPrecision::kBf16 ? GemmKernel::kAvx512Bf16 : GemmKernel::kAuto;
  gemm_with_kernel(kind, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace mg

namespace mg {

PackedB::PackedB(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb) : K_(K), N_(N) {
  using namespace gemm_detail;
  const GemmKernel kind =
      gemm_precision() == GemmPrecision::kBf16 ? GemmKernel::kAvx512Bf16 : gemm_default_kernel();
  kernel_ = static_cast<int>(kind);
  if (K <= 0 || N <= 0) return;
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
  return gemm_detail::arch_of(static_cast<GemmKernel>(kernel_)).nr;
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
    throw std::invalid_argument("gemm_packed_b_cols: columns [" + std::to_string(j0) + ", " +
                                std::to_string(j0 + N) + ") with K = " + std::to_string(K) +
                                " of a B packed as " + std::to_string(B.K_) + "x" +
                                std::to_string(B.N_) +
                                " (the first column must start a packed panel)");
  const GemmKernel now =
      gemm_precision() == GemmPrecision::kBf16 ? GemmKernel::kAvx512Bf16 : gemm_default_kernel();
  if (static_cast<int>(now) != B.kernel_ || gemm_path() == GemmPath::kReference)
    throw std::logic_error("gemm_packed_b: B was packed for another GEMM precision or path");
  const Problem p{false, false, M, N, K, alpha, A, lda, nullptr, 0, beta, C, ldc};
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0) return scale_c(p);
  const Arch& g = arch_of(now);
  const int64_t blocks = ceil_div(K, B.kc_blk_);
  // Micro-panel q of k block b starts q*nr*ceil(kc/k_per_slot) slots in (the constructor).
  auto panel = [&](int64_t b, int64_t kc) {
    return B.data_.get() + b * B.block_floats_ + j0 * ceil_div(kc, g.k_per_slot);
  };
  auto rows = [&](int64_t i0, int64_t i1) {  // C[i0:i1, :], as run_block does it
    const int64_t m_all = i1 - i0;
    if (m_all <= 0) return;
    if (g.macro_a_direct && (m_all <= g.mr || N <= g.a_direct_max_n)) {
      // A read in place, as run_block does for narrow products: the fused head's forward asks
      // for one micro-panel of rows by a 768-column slab (packing the same 8 x E rows again for
      // every slab cost it 2%), the fused LSTM for 20 rows by one gate's 200 columns per thread
      // (the same h_{t-1} packed for each of the four gates: 4% of the LSTM).
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t pc = b * B.kc_blk_, kc = std::min(B.kc_blk_, K - pc);
        g.macro_a_direct(m_all, N, kc, A + i0 * lda + pc, lda, panel(b, kc), alpha,
                         b == 0 ? beta : 1.0f, C + i0 * ldc, ldc, Upcoming{});
      }
      return;
    }
    const int64_t mc = round_up(ceil_div(m_all, ceil_div(m_all, g.mc)), g.mr);
    float* Ap = tl_a.get(static_cast<size_t>(mc * B.kc_blk_));
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
  const int64_t units = ceil_div(M, g.mr);
#ifdef _OPENMP
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
