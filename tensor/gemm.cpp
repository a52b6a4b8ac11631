// A first cache-blocked GEMM. B is packed into contiguous [kc, nc] panels (transposing on the fly
// when trans_b), so the inner loop C[i, j0:j1] += a_ik * Bpanel[k, j0:j1] is a contiguous
// multiply-add that the compiler vectorizes. Work is split over rows of C (or columns when M is
// small, as in the per-time-step LSTM product), never over k, so results are thread-count independent.
#include "tensor/gemm.h"

#include <algorithm>
#include <vector>

#include "tensor/parallel.h"

namespace mg {

namespace {
constexpr int64_t kKc = 256;  // rows of the B panel: kKc * kNc floats = 512 KiB, sized for L2
constexpr int64_t kNc = 512;
}  // namespace

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

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  // C = beta * C first (beta == 0 overwrites, so NaNs in an uninitialised C do not leak through).
  parallel_for(M, std::max<int64_t>(1, 16384 / N), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* c = C + i * ldc;
      if (beta == 0) std::fill(c, c + N, 0.0f);
      else if (beta != 1) for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
  });
  if (K == 0 || alpha == 0) return;
  std::vector<float> panel(static_cast<size_t>(kKc * kNc));
  for (int64_t j0 = 0; j0 < N; j0 += kNc) {
    const int64_t nc = std::min(kNc, N - j0);
    for (int64_t k0 = 0; k0 < K; k0 += kKc) {
      const int64_t kc = std::min(kKc, K - k0);
      // Pack B[k0:k0+kc, j0:j0+nc] row-major with leading dim nc.
      parallel_for(kc, 16, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k)
          for (int64_t j = 0; j < nc; ++j)
            panel[k * nc + j] = trans_b ? B[(j0 + j) * ldb + (k0 + k)] : B[(k0 + k) * ldb + (j0 + j)];
      });
      const float* P = panel.data();
      auto rows = [&](int64_t i0, int64_t i1, int64_t c0, int64_t c1) {
        for (int64_t i = i0; i < i1; ++i) {
          float* c = C + i * ldc + j0;
          for (int64_t k = 0; k < kc; ++k) {
            const float a = alpha * (trans_a ? A[(k0 + k) * lda + i] : A[i * lda + k0 + k]);
            const float* p = P + k * nc;
            for (int64_t j = c0; j < c1; ++j) c[j] += a * p[j];
          }
        }
      };
      if (M >= 4 * num_threads()) {
        parallel_for(M, 4, [&](int64_t b, int64_t e) { rows(b, e, 0, nc); });
      } else {
        parallel_for(nc, 64, [&](int64_t b, int64_t e) { rows(0, M, b, e); });
      }
    }
  }
}

}  // namespace mg
