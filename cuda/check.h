// Error checking for the .cu files: every CUDA and cuBLAS call goes through one of these, so a
// failure throws a std::runtime_error naming the call, file and line instead of being ignored.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace mg {

inline void cuda_check(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error in ") + what + " (" + file + ":" +
                             std::to_string(line) + "): " + cudaGetErrorString(status));
}

inline void cublas_check(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error ") +
                             std::to_string(static_cast<int>(status)) + " in " + what + " (" +
                             file + ":" + std::to_string(line) + ")");
}

// Grid size for n work items in blocks of `threads`, at least one block.
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

}  // namespace mg

#define CUDA_CHECK(call) ::mg::cuda_check((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) ::mg::cublas_check((call), #call, __FILE__, __LINE__)
// After every kernel launch: a bad launch configuration surfaces here, named after the kernel.
#define CUDA_CHECK_LAUNCH(name) ::mg::cuda_check(cudaGetLastError(), name, __FILE__, __LINE__)
