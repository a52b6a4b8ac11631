// The GEMM driver: cache blocking, packing, threading and the choice of micro-kernel (see
// tensor/gemm_kernels.h for the algorithm and the packed layouts), and gemm_reference. The kernel
// families live beside it: the portable scalar kernel and packing in gemm_scalar.cpp, the vector
// kernels in gemm_avx512.cpp, gemm_avx512_bf16.cpp and gemm_avx2.cpp (called only after a run-time
// CPU check). A B packed once for many products (mg::PackedB) is gemm_packed_b.cpp.
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

namespace {

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
    // mc/mr times. On AMD CPUs a row-major B is then read in place, rows ldb apart, rather than
    // copied: there the copy did not pay for itself (20 x 400 x 1600, the LSTM step, ran at
    // 65-70% of peak with packing and 85-90% without); on Intel it does (b_read_in_place,
    // gemm_kernels.h). Otherwise B is packed one micro-panel at a time, right before its use, so
    // it goes from packing to the kernel through L1/L2 and there is no nc panel at all.
    const bool direct = !p.tb && g.b_in_place && b_read_in_place();
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
  if (p.K <= 0 || p.alpha == 0) return scale_c(p.M, p.N, p.beta, p.C, p.ldc);
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

}  // namespace

const Arch& arch_of(GemmKernel kind) {
  switch (kind) {
    case GemmKernel::kAvx512:
      return arch_avx512();
    case GemmKernel::kAvx2:
      return arch_avx2();
    case GemmKernel::kAvx512Bf16:
      return arch_avx512_bf16();
    default:
      return arch_scalar();
  }
}

float* thread_scratch_a(size_t floats) {
  return tl_a.get(floats);
}

void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  parallel_for(M, std::max<int64_t>(1, 16384 / N), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* c = C + i * ldc;
      if (beta == 0)
        std::fill(c, c + N, 0.0f);
      else if (beta != 1)
        for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
  });
}

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
std::atomic<BInPlace> g_b_in_place{BInPlace::kAuto};

bool cpu_is_amd() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  return __builtin_cpu_is("amd");
#else
  return false;
#endif
}
}  // namespace

BInPlace set_b_in_place(BInPlace mode) {
  return g_b_in_place.exchange(mode);
}
bool b_read_in_place() {
  static const bool amd = cpu_is_amd();
  const BInPlace mode = g_b_in_place.load(std::memory_order_relaxed);
  return mode == BInPlace::kAlways || (mode == BInPlace::kAuto && amd);
}

const char* gemm_bf16_kernel_name() {
  return gemm_kernel_supported(GemmKernel::kAvx512Bf16) ? "avx512_bf16" : nullptr;
}

bool gemm_bf16_faster_than_fp32() {
  static const bool amd = cpu_is_amd();
  return gemm_bf16_kernel_name() && amd;
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
