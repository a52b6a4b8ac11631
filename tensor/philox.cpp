#include "tensor/philox.h"

namespace mg {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, uint64_t key64) {
  // Constants from the Random123 reference implementation.
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t k0 = static_cast<uint32_t>(key64), k1 = static_cast<uint32_t>(key64 >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * ctr[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ k0, lo1, hi0 ^ ctr[3] ^ k1, lo0};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return ctr;
}

float philox_uniform(uint64_t seed, uint64_t index) {
  // Four numbers per block: block = index / 4, word = index % 4.
  const uint64_t block = index >> 2;
  const auto words = philox4x32(
      {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u}, seed);
  // 24 random bits -> exactly representable float in [0, 1).
  return static_cast<float>(words[index & 3] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace mg
