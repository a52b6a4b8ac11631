// The test harness of the GEMM tests (tests/tensor/test_gemm*.cpp): a problem with NaN-padded
// operands and sentinel-padded C, the float64 reference with its error bound, the kernel families
// this CPU can run.
//
// Tolerance: with K products summed in float32, |error| <= gamma_K * sum_k |a_ik b_kj| where
// gamma_K ~ K * eps (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1); we allow
// (K + 4) eps times |alpha| sum |a b| + |beta c|, computed per element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensor/gemm.h"
#include "tensor/gemm_kernels.h"
#include "tensor/parallel.h"

namespace gemmtest {

using mg::GemmKernel;

inline const float kNaN = std::numeric_limits<float>::quiet_NaN();
inline const float kSentinel = 12345.0f;  // C padding: must survive untouched

struct Case {
  bool ta = false, tb = false;
  int64_t M = 1, N = 1, K = 1;
  float alpha = 1.0f, beta = 0.0f;
  int64_t pad_a = 0, pad_b = 0, pad_c = 0;  // extra columns of storage: ld = cols + pad
  bool nan_c = false;                       // C starts as NaN (only meaningful with beta == 0)
  std::string str() const {
    return std::string(ta ? "T" : "N") + (tb ? "T" : "N") + " M=" + std::to_string(M) +
           " N=" + std::to_string(N) + " K=" + std::to_string(K) +
           " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
           " pads=" + std::to_string(pad_a) + "," + std::to_string(pad_b) + "," +
           std::to_string(pad_c);
  }
};

// A stored matrix: rows x cols with leading dimension ld; the padding columns hold NaN so that a
// kernel reading past its operand poisons the result.
struct Stored {
  int64_t rows = 0, cols = 0, ld = 0;
  std::vector<float> v;
  Stored() = default;
  Stored(int64_t r, int64_t c, int64_t pad, std::mt19937& rng) : rows(r), cols(c), ld(c + pad) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    v.assign(static_cast<size_t>(std::max<int64_t>(1, rows * ld)), kNaN);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) v[i * ld + j] = u(rng);
  }
};

struct Problem {
  Stored A, B;
  std::vector<float> C0;  // initial C (with sentinel padding)
  int64_t ldc;
  Problem(const Case& c, uint32_t seed) : ldc(c.N + c.pad_c) {
    std::mt19937 rng(seed);
    A = Stored(c.ta ? c.K : c.M, c.ta ? c.M : c.K, c.pad_a, rng);
    B = Stored(c.tb ? c.N : c.K, c.tb ? c.K : c.N, c.pad_b, rng);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    C0.assign(static_cast<size_t>(std::max<int64_t>(1, c.M * ldc)), kSentinel);
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) C0[i * ldc + j] = c.nan_c ? kNaN : u(rng);
  }
  std::vector<float> compute(GemmKernel kind, const Case& c) const {
    std::vector<float> C = C0;
    EXPECT_TRUE(mg::gemm_with_kernel(kind, c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.v.data(), A.ld,
                                     B.v.data(), B.ld, c.beta, C.data(), ldc));
    return C;
  }
};

// The float64 reference of a problem and each element's error bound (above), computed once and
// checked against any number of results: the reference loops are most of what a test of many
// kernels and thread counts would otherwise spend its time on.
struct Reference {
  std::vector<float> want;  // [M, ldc]
  std::vector<double> tol;  // [M, N]
  Reference(const Problem& r, const Case& c) : want(r.C0), tol(static_cast<size_t>(c.M * c.N)) {
    mg::gemm_reference(c.ta, c.tb, c.M, c.N, c.K, c.alpha, r.A.v.data(), r.A.ld, r.B.v.data(),
                       r.B.ld, c.beta, want.data(), r.ldc);
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) {
        double abs_sum = 0;  // sum_k |a_ik b_kj|
        for (int64_t k = 0; k < c.K; ++k) {
          const float a = c.ta ? r.A.v[k * r.A.ld + i] : r.A.v[i * r.A.ld + k];
          const float b = c.tb ? r.B.v[j * r.B.ld + k] : r.B.v[k * r.B.ld + j];
          abs_sum += std::fabs(static_cast<double>(a) * b);
        }
        const double c0 = c.beta == 0 ? 0.0 : std::fabs(c.beta * r.C0[i * r.ldc + j]);
        tol[i * c.N + j] = (c.K + 4) * FLT_EPSILON * (std::fabs(c.alpha) * abs_sum + c0) + 1e-30;
      }
  }
};

// Checks `got` against the reference, element by element with its bound, and that the padding of
// C is untouched.
inline void expect_matches(const Reference& ref, const Problem& r, const Case& c,
                           const std::vector<float>& got, const std::string& what) {
  int failures = 0;
  for (int64_t i = 0; i < c.M && failures < 5; ++i)
    for (int64_t j = 0; j < c.N && failures < 5; ++j) {
      const double tol = ref.tol[i * c.N + j];
      const float g = got[i * r.ldc + j], w = ref.want[i * r.ldc + j];
      if (!(std::fabs(static_cast<double>(g) - w) <= tol)) {
        ADD_FAILURE() << what << " " << c.str() << ": C[" << i << "," << j << "] = " << g
                      << ", reference " << w << ", tolerance " << tol;
        ++failures;
      }
    }
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = c.N; j < r.ldc; ++j)
      if (got[i * r.ldc + j] != kSentinel) {
        ADD_FAILURE() << what << " " << c.str() << ": wrote C padding at [" << i << "," << j << "]";
        return;
      }
}

inline void expect_matches_reference(const Problem& r, const Case& c, const std::vector<float>& got,
                                     const std::string& what) {
  expect_matches(Reference(r, c), r, c, got, what);
}

// Restores the thread count and the B-in-place mode when a test ends, also through an ASSERT.
struct GemmSettingsGuard {
  const int threads = mg::num_threads();
  const mg::BInPlace mode = mg::set_b_in_place(mg::BInPlace::kAuto);
  ~GemmSettingsGuard() {
    mg::set_b_in_place(mode);
    mg::set_num_threads(threads);
  }
};

inline std::vector<GemmKernel> kernels() {
  std::vector<GemmKernel> out;
  for (GemmKernel k : {GemmKernel::kScalar, GemmKernel::kAvx2, GemmKernel::kAvx512})
    if (mg::gemm_kernel_supported(k)) out.push_back(k);
  return out;
}

inline void check_all_kernels(const Case& c, uint32_t seed) {
  const Problem r(c, seed);
  const Reference ref(r, c);
  for (GemmKernel k : kernels())
    expect_matches(ref, r, c, r.compute(k, c), mg::gemm_kernel_name(k));
}

// The problem r of case c (A not transposed) with the same op(A) stored transposed, [K, M]: the
// GEMM then always packs A, where r's A may be read in place. *packed: the case to run it with.
inline Problem with_a_transposed(const Problem& r, const Case& c, Case* packed) {
  Problem rt = r;
  std::mt19937 unused(1);
  rt.A = Stored(c.K, c.M, 0, unused);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t kk = 0; kk < c.K; ++kk) rt.A.v[kk * c.M + i] = r.A.v[i * r.A.ld + kk];
  *packed = c;
  packed->ta = true, packed->pad_a = 0;
  return rt;
}

}  // namespace gemmtest
