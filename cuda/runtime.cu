// The device itself: detection, the caching allocator (mirrors tensor/allocator.cpp), host<->device
// copies and the cuBLAS GEMM behind matmul (mirrors tensor/gemm.cpp's contract).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda/backend.h"
#include "cuda/check.h"

namespace mg {

bool cuda_is_available(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why) *why = std::string("no usable CUDA driver or GPU: ") + cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky error so later queries start clean
    return false;
  }
  if (count == 0) {
    if (why) *why = "the CUDA driver found no GPU";
    return false;
  }
  return true;
}

bool cuda_is_built_in() { return true; }

std::string cuda_device_description() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char mem[64];
  std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + mem + ")";
}

// ---- the caching allocator ----
// cudaMalloc and cudaFree synchronise the whole device and cost tens of microseconds: a training
// step that allocated its few hundred buffers fresh would spend more time there than computing.
// As on the CPU, freed blocks wait in size buckets (8 per power of two, <= 12.5% waste) for the
// next request of that bucket. Only cudaMalloc: never managed memory.
namespace {

size_t bucket_of(size_t bytes) {
  if (bytes <= 4096) return std::max<size_t>(256, (bytes + 255) & ~size_t{255});
  const int msb = 63 - __builtin_clzll(bytes);
  const size_t step = size_t{1} << (msb - 3);
  return (bytes + step - 1) / step * step;
}

struct DeviceCache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_lists;
  int64_t cached = 0, live = 0, peak = 0;
};

DeviceCache& device_cache() {
  static DeviceCache* c =
      new DeviceCache();  // never destroyed: tensors may die during static destruction
  return *c;
}

void free_cached_blocks(DeviceCache& c) {
  for (auto& [size, list] : c.free_lists)
    for (void* p : list) cudaFree(p);
  c.free_lists.clear();
  c.cached = 0;
}

}  // namespace

// At exit the cached blocks go back to the driver (tools like compute-sanitizer's leak check would
// otherwise report the cache as leaked). Registered at the first allocation, after the runtime
// started (cuda_is_available() or Tensor::to ran first), so it runs before the runtime's teardown.
void release_cache_at_exit() {
  DeviceCache& c = device_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  free_cached_blocks(c);
}

void* cuda_allocate_bytes(size_t bytes) {
  const size_t b = bucket_of(bytes);
  DeviceCache& c = device_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  static const bool registered = [] { return std::atexit(release_cache_at_exit) == 0; }();
  (void)registered;
  auto it = c.free_lists.find(b);
  void* p = nullptr;
  if (it != c.free_lists.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    c.cached -= static_cast<int64_t>(b);
  } else {
    cudaError_t status = cudaMalloc(&p, b);
    if (status ==
        cudaErrorMemoryAllocation) {  // give the cache back to the driver and try once more
      cudaGetLastError();
      free_cached_blocks(c);
      status = cudaMalloc(&p, b);
    }
    if (status != cudaSuccess) {
      cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    "out of GPU memory: a tensor of %.1f MiB did not fit (%.1f MiB free of %.1f "
                    "MiB, %.1f MiB "
                    "held by mosgrad's live tensors): %s",
                    b / 1048576.0, free_bytes / 1048576.0, total_bytes / 1048576.0,
                    c.live / 1048576.0, cudaGetErrorString(status));
      throw std::runtime_error(buf);
    }
  }
  c.live += static_cast<int64_t>(b);
  c.peak = std::max(c.peak, c.live);
  return p;
}

void cuda_release_bytes(void* p, size_t bytes) {
  if (!p) return;
  const size_t b = bucket_of(bytes);
  DeviceCache& c = device_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.live -= static_cast<int64_t>(b);
  try {
    c.free_lists[b].push_back(
        p);  // kernels still queued on the stream may use p: reuse is in stream order
    c.cached += static_cast<int64_t>(b);
  } catch (...) {  // called from destructors: never throw; cudaFree waits for the queued kernels
    cudaFree(p);
  }
}

int64_t cuda_peak_live_bytes() {
  DeviceCache& c = device_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.peak;
}

// ---- copies ----
// Asynchronous: from pageable memory the driver stages the bytes before returning, so host_src may
// change right after, but the host does not wait for the GPU's queue (a token-id upload per op
// would otherwise stall the pipeline at every step).
void cuda_copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, 0));
}

void cuda_copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}

void cuda_copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0));
}

void cuda_synchronize() {
  CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- cuBLAS ----
namespace {

bool g_tf32 = false;

cublasHandle_t g_handle = nullptr;

cublasHandle_t blas() {
  if (!g_handle) {
    CUBLAS_CHECK(cublasCreate(&g_handle));
    std::atexit([] {
      cublasDestroy(g_handle);
    });  // its workspace back to the driver before the runtime goes
  }
  cublasHandle_t handle = g_handle;
  // Pedantic FP32 unless --tf32: the default math mode may still pick reduced-precision paths when
  // NVIDIA_TF32_OVERRIDE is set in the environment.
  static bool mode_tf32 = !g_tf32;
  if (mode_tf32 != g_tf32) {
    CUBLAS_CHECK(
        cublasSetMathMode(handle, g_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
    mode_tf32 = g_tf32;
  }
  return handle;
}

}  // namespace

void cuda_set_tf32(bool on) {
  g_tf32 = on;
}

// ---- GEMM timing for the benchmark ----
namespace {

struct GemmTimer {
  bool on = false;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> pending;
  double seconds = 0;

  // Adds up finished pairs; called every few thousand GEMMs so the list stays short.
  void fold() {
    for (auto& [start, stop] : pending) {
      CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      seconds += ms / 1e3;
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
    }
    pending.clear();
  }
};

GemmTimer& gemm_timer() {
  static GemmTimer t;
  return t;
}

// Brackets one GEMM with events when timing is on.
struct GemmTiming {
  cudaEvent_t stop = nullptr;
  GemmTiming() {
    GemmTimer& t = gemm_timer();
    if (!t.on) return;
    cudaEvent_t start;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    CUDA_CHECK(cudaEventRecord(start, 0));
    t.pending.emplace_back(start, stop);
  }
  ~GemmTiming() {  // never throws: an error here would surface at the next CUDA call anyway
    if (!stop) return;
    cudaEventRecord(stop, 0);
    try {
      if (gemm_timer().pending.size() >= 4096) gemm_timer().fold();
    } catch (...) {
    }
  }
};

}  // namespace

double cuda_gemm_timing(bool on) {
  GemmTimer& t = gemm_timer();
  if (on) {
    t.fold();
    t.seconds = 0;
    t.on = true;
    return 0;
  }
  t.fold();
  t.on = false;
  return t.seconds;
}

// cuBLAS is column-major. A row-major [M,N] matrix with leading dimension ld is, read column-major,
// its transpose [N,M] with the same ld. So row-major C = op(A) op(B) is column-major
// C^T = op(B)^T op(A)^T: swap the operands (and M with N), keep each one's transpose flag.
void cuda_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
               int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // C = beta C; cuBLAS still wants leading dimensions that fit an empty operand
    ldb = std::max<int64_t>(ldb, trans_b ? 1 : N);
    lda = std::max<int64_t>(lda, trans_a ? M : 1);
  }
  const GemmTiming timing;
  CUBLAS_CHECK(cublasSgemm(
      blas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &alpha, B,
      static_cast<int>(ldb), A, static_cast<int>(lda), &beta, C, static_cast<int>(ldc)));
}

void cuda_gemm_batched(bool trans_a, bool trans_b, int64_t G, int64_t M, int64_t N, int64_t K,
                       float alpha, const float* A, int64_t lda, int64_t stride_a, const float* B,
                       int64_t ldb, int64_t stride_b, float beta, float* C, int64_t ldc,
                       int64_t stride_c) {
  if (G == 0 || M == 0 || N == 0) return;
  if (K == 0) {
    ldb = std::max<int64_t>(ldb, trans_b ? 1 : N);
    lda = std::max<int64_t>(lda, trans_a ? M : 1);
  }
  const GemmTiming timing;
  CUBLAS_CHECK(cublasSgemmStridedBatched(
      blas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &alpha, B,
      static_cast<int>(ldb), stride_b, A, static_cast<int>(lda), stride_a, &beta, C,
      static_cast<int>(ldc), stride_c, static_cast<int>(G)));
}

}  // namespace mg
