// What a function needs to be compiled for both devices: MG_HOST_DEVICE marks it __host__
// __device__ under nvcc and is empty for the plain C++ compiler, and the float <-> bits casts use
// the GPU's intrinsics there and memcpy here (the one well-defined type pun in C++17).
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define MG_HOST_DEVICE __host__ __device__
#else
#define MG_HOST_DEVICE
#endif

namespace mg {

MG_HOST_DEVICE inline float float_from_bits(uint32_t b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
#endif
}

MG_HOST_DEVICE inline uint32_t bits_of_float(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
#endif
}

}  // namespace mg
