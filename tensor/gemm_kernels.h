// Internals of the GEMM in tensor/gemm.cpp, shared by the per-ISA kernel files and the tests.
//
// The algorithm is the one of Goto & van de Geijn, "Anatomy of High-Performance Matrix
// Multiplication" (ACM TOMS 34(3), 2008), in the loop structure of BLIS (Van Zee & van de Geijn,
// "BLIS: A Framework for Rapidly Instantiating BLAS Functionality", ACM TOMS 41(3), 2015):
//
//   for jc in N step nc          B panel  op(B)[pc:pc+kc, jc:jc+nc] packed once, lives in L3
//     for pc in K step kc
//       for ic in M step mc      A block  op(A)[ic:ic+mc, pc:pc+kc] packed, lives in L2
//         for jr in nc step nr   B micro-panel kc x nr, stays in L1 across the ir loop
//           for ir in mc step mr micro-kernel: an mr x nr tile of C held in registers
//
// Only the micro-kernel and the packing routines depend on the instruction set; they are picked
// at run time (__builtin_cpu_supports), never from -march, so one binary runs everywhere.
// Threads split C into slabs (rows, or columns when N > M) and each runs the loop nest above on
// its slab with its own buffers; k is never split, so results are bitwise thread-independent.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mg {

// Which micro-kernel family runs. kAuto is the best one the CPU supports.
// kAvx512Bf16 is the bf16 family (--precision bf16): operands rounded to bfloat16 when packed,
// FP32 accumulation; kAuto never picks it (it changes the numbers), gemm() does under
// GemmPrecision::kBf16.
enum class GemmKernel { kAuto, kScalar, kAvx2, kAvx512, kAvx512Bf16 };

const char* gemm_kernel_name(GemmKernel kind);
bool gemm_kernel_supported(GemmKernel kind);  // kAuto and kScalar always are
GemmKernel gemm_default_kernel();             // what kAuto resolves to on this CPU

// Whether a single A block (at most mc rows per thread) reads a row-major B in place, rows ldb
// apart, instead of packing it (gemm.cpp's run_block). The products and their order are the same
// either way, so are the bits; only the speed differs, and by CPU maker. kAuto reads in place on
// AMD CPUs only: on Zen 4 and 5 it is faster (the LSTM step's 20 x 400 x 1600 most of all); on
// an Intel Xeon (Emerald Rapids) packing was faster on every shape tried, the head's d W among
// them (docs/performance.md, What differs by CPU). Tests force each mode to compare them. Set it
// before GEMMs run.
enum class BInPlace { kAuto, kAlways, kNever };
BInPlace set_b_in_place(BInPlace mode);  // returns the previous one
bool b_read_in_place();                  // what the current mode means on this CPU

// mg::gemm with a forced kernel family (tests and benchmarks compare them). Returns false, and
// leaves C alone, when the CPU cannot run that family.
bool gemm_with_kernel(GemmKernel kind, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                      float beta, float* C, int64_t ldc);

namespace gemm_detail {

// A byte range [begin, begin + bytes) a kernel may prefetch into L2; bytes == 0: none.
struct Upcoming {
  const char* begin = nullptr;
  int64_t bytes = 0;
};

// One kernel family: its register tile, its cache blocks and the three routines the driver calls.
//
// Packed layouts (both zero-padded, so the micro-kernel never branches on edges inside the k loop):
//  * A block, m x kc: ceil(m/mr) micro-panels of mr rows, panel p at Ap + p*mr*kc, element (i,k) at
//    [k*mr + i]. Rows past m are zero.
//  * B panel, kc x n: ceil(n/nr) micro-panels, panel q at Bp + q*nr*kc. Full panels are nr wide;
//    the last is w = n - q*nr rounded up to vl (the vector length), element (k,j) at [k*w + j],
//    columns past n zero. Packing only as wide as needed keeps the edge tile cheap.
struct Arch {
  const char* name;
  int mr, nr, vl;
  int64_t mc, kc, nc;
  // op(A)[0:m, 0:kc] -> Ap, where op(A)(i,k) = trans ? A[k*lda + i] : A[i*lda + k].
  void (*pack_a)(bool trans, const float* A, int64_t lda, int64_t m, int64_t kc, float* Ap);
  // op(B)[0:kc, 0:n] -> Bp, where op(B)(k,j) = trans ? B[j*ldb + k] : B[k*ldb + j].
  void (*pack_b)(bool trans, const float* B, int64_t ldb, int64_t kc, int64_t n, float* Bp);
  // C[0:m, 0:n] = alpha * Ap*Bp + beta * C (beta == 0: C is written, never read). Ap, Bp packed as
  // above with the same kc; n may be any part of a packed panel that starts on a micro-panel.
  // ldb_direct != 0: Bp is not packed but a row-major matrix with that leading dimension, read in
  // place (n must then be a multiple of nr): when each B element is used by only a few rows of A,
  // copying it costs more than the strided reads.
  void (*macro)(int64_t m, int64_t n, int64_t kc, const float* Ap, const float* Bp,
                int64_t ldb_direct, float alpha, float beta, float* C, int64_t ldc);
  // Whether macro can read a row-major B in place (ldb_direct). The bf16 family cannot: its
  // operands must be rounded and paired along k, which is packing.
  bool b_in_place = true;
  // How many k one packed slot holds: 1 (a float), 2 for bf16 (a pair). Micro-panel q of a packed
  // kc-deep B panel starts q*nr*ceil(kc/k_per_slot) slots in, which lets mg::PackedB pack slabs of
  // columns on several threads.
  int k_per_slot = 1;
  // Optional (nullptr: not available): macro with A not packed by the driver, rows lda apart (the
  // kernel reads them in place, or packs a micro-panel at a time), B packed.
  // `upcoming` is memory the driver reads right after this call (the next kc block of B, to be
  // packed): the kernel may prefetch it, a little at a time while it computes.
  void (*macro_a_direct)(int64_t m, int64_t n, int64_t kc, const float* A, int64_t lda,
                         const float* Bp, float alpha, float beta, float* C, int64_t ldc,
                         const Upcoming& upcoming) = nullptr;
  // Products with at most this many columns use macro_a_direct when A is row-major: each A
  // element then serves so few columns that packing A as a block costs more than it saves.
  int64_t a_direct_max_n = 0;
};

// The portable family, for any CPU (gemm_scalar.cpp).
const Arch& arch_scalar();
// Defined in gemm_avx512.cpp / gemm_avx2.cpp. They only describe the kernels: calling the routines
// on a CPU without the instructions faults, so the caller checks __builtin_cpu_supports first.
const Arch& arch_avx512();
const Arch& arch_avx2();
const Arch& arch_avx512_bf16();  // gemm_avx512_bf16.cpp: packed layouts of bf16 pairs, see there

// Portable packing (gemm_scalar.cpp), used by the scalar and AVX2 families (and for the edges of
// the AVX-512 one).
void pack_a_generic(int mr, bool trans, const float* A, int64_t lda, int64_t m, int64_t kc,
                    float* Ap);
void pack_b_generic(int nr, int vl, bool trans, const float* B, int64_t ldb, int64_t kc, int64_t n,
                    float* Bp);

// ---- The driver's pieces that mg::PackedB (gemm_packed_b.cpp) shares; defined in gemm.cpp.

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
inline int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}
// Below this many multiply-adds one core finishes before a second one would have woken up.
constexpr double kParallelMinWork = 96.0 * 96.0 * 96.0;

const Arch& arch_of(GemmKernel kind);  // kAuto and kScalar: the portable scalar family
// This thread's packed-A buffer, at least `floats` long, 64-byte aligned, kept between calls.
float* thread_scratch_a(size_t floats);
// C[0:M, 0:N] *= beta (beta == 0: C is written, never read): a product with K = 0 or alpha = 0.
void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc);

}  // namespace gemm_detail
}  // namespace mg
