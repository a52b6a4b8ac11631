// bfloat16: the top 16 bits of an IEEE float (1 sign, 8 exponent, 7 fraction bits), so it has
// float's range with 8 significant bits (unit roundoff u = 2^-9 ≈ 1.95e-3). --precision bf16 rounds
// the operands of the large GEMMs to it (tensor/gemm_avx512_bf16.cpp); everything else stays FP32.
//
// This is the scalar mirror of the hardware conversion (VCVTNEPS2BF16 / VCVTNE2PS2BF16,
// AVX512_BF16), checked against it bit for bit in tests/tensor/test_gemm_bf16.cpp:
//  * round to nearest, ties to even, whatever MXCSR says;
//  * denormal inputs become a zero of the same sign (the instruction treats them as zero);
//  * NaN stays NaN (quietened), ±Inf stays ±Inf, and a float above bf16's largest finite value
//    rounds to Inf, as round-to-nearest must.
#pragma once

#include <cstdint>
#include <cstring>

namespace mg {

inline uint16_t bf16_from_float(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0)
    return static_cast<uint16_t>((bits >> 16) & 0x8000u);  // ±0, denormals
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN
  // Adding 0x7fff plus the lowest kept bit rounds half-way cases to the even neighbour.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float float_from_bf16(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// x rounded to the nearest bf16, returned as a float (exact: every bf16 is a float).
inline float round_to_bf16(float x) {
  return float_from_bf16(bf16_from_float(x));
}

}  // namespace mg
