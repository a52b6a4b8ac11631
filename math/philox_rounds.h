// Philox4x32-10 (Salmon et al. 2011), written once for both devices: tensor/philox.cpp runs it on
// the CPU and cuda/philox.cu on the GPU, so the two draw the same numbers bit for bit. It sits in
// math/, the lowest layer, because both sides include it; without nvcc it is plain C++.
#pragma once

#include <cstdint>

#include "math/host_device.h"

namespace mg {

// The round constants of the Random123 reference implementation: multipliers, and the Weyl
// sequence that bumps the key each round.
constexpr uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxWeyl0 = 0x9E3779B9u, kPhiloxWeyl1 = 0xBB67AE85u;
constexpr int kPhiloxRounds = 10;

// Ten rounds on a 128-bit counter ctr[0..3] with a 64-bit key, in place.
MG_HOST_DEVICE inline void philox4x32_rounds(uint32_t ctr[4], uint64_t key64) {
  uint32_t k0 = static_cast<uint32_t>(key64), k1 = static_cast<uint32_t>(key64 >> 32);
  for (int round = 0; round < kPhiloxRounds; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxMul0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxMul1) * ctr[2];
    const uint32_t c1 = ctr[1], c3 = ctr[3];
    ctr[0] = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    ctr[1] = static_cast<uint32_t>(p1);
    ctr[2] = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    ctr[3] = static_cast<uint32_t>(p0);
    k0 += kPhiloxWeyl0;
    k1 += kPhiloxWeyl1;
  }
}

// 24 random bits -> an exactly representable float in [0, 1).
MG_HOST_DEVICE inline float philox_to_uniform(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

}  // namespace mg
