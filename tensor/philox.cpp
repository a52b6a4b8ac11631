#include "tensor/philox.h"

#include <cmath>

#include "math/philox_rounds.h"

namespace mg {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, uint64_t key64) {
  philox4x32_rounds(ctr.data(), key64);  // math/philox_rounds.h: the one definition of the rounds
  return ctr;
}

float philox_uniform(uint64_t seed, uint64_t index) {
  // Four numbers per block: block = index / 4, word = index % 4.
  const uint64_t block = index >> 2;
  const auto words =
      philox4x32({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u}, seed);
  return philox_to_uniform(words[index & 3]);
}

namespace {

// Eight 32-bit words, each in a 64-bit lane so that the 32 x 32 -> 64-bit products of a round are
// one vector multiply (GCC/Clang vector extension: AVX-512 here, narrower vectors elsewhere).
typedef uint64_t Lanes __attribute__((vector_size(64)));
constexpr int kLanes = 8;

// The same rounds as philox4x32_rounds, for blocks first_block .. first_block + 7 at once;
// words[w][l] is word w of block first_block + l.
void philox4x32_lanes(uint64_t first_block, uint64_t key64, uint32_t words[4][kLanes]) {
  Lanes c0, c1, c2 = {}, c3 = {};
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t block = first_block + static_cast<uint64_t>(l);
    c0[l] = static_cast<uint32_t>(block), c1[l] = static_cast<uint32_t>(block >> 32);
  }
  const Lanes low32 = Lanes{} + 0xffffffffu;
  uint32_t k0 = static_cast<uint32_t>(key64), k1 = static_cast<uint32_t>(key64 >> 32);
  for (int round = 0; round < kPhiloxRounds; ++round) {
    const Lanes p0 = c0 * uint64_t{kPhiloxMul0}, p1 = c2 * uint64_t{kPhiloxMul1};
    c0 = (p1 >> 32) ^ c1 ^ uint64_t { k0 };
    c2 = (p0 >> 32) ^ c3 ^ uint64_t { k1 };
    c1 = p1 & low32;
    c3 = p0 & low32;
    k0 += kPhiloxWeyl0;
    k1 += kPhiloxWeyl1;
  }
  for (int l = 0; l < kLanes; ++l) {
    words[0][l] = static_cast<uint32_t>(c0[l]), words[1][l] = static_cast<uint32_t>(c1[l]);
    words[2][l] = static_cast<uint32_t>(c2[l]), words[3][l] = static_cast<uint32_t>(c3[l]);
  }
}

}  // namespace

double philox_normal(uint64_t seed, uint64_t index) {
  // Box-Muller; 1 - u keeps the log argument in (0, 1].
  const double u1 = 1.0 - philox_uniform(seed, index);
  const double u2 = philox_uniform(seed, index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

void philox_uniforms(uint64_t seed, uint64_t first, int64_t n, float* out) {
  if (n <= 0) return;
  const uint64_t end = first + static_cast<uint64_t>(n);
  uint64_t pos = first;
  // Positions up to the next multiple of 32 (a group of 8 blocks) one at a time...
  for (; pos < end && (pos & 31) != 0; ++pos) out[pos - first] = philox_uniform(seed, pos);
  // ...then whole groups in lanes...
  uint32_t words[4][kLanes];
  for (; pos + 32 <= end; pos += 32) {
    philox4x32_lanes(pos >> 2, seed, words);
    float* o = out + (pos - first);
    for (int l = 0; l < kLanes; ++l)
      for (int w = 0; w < 4; ++w) o[l * 4 + w] = philox_to_uniform(words[w][l]);
  }
  // ...and the tail one at a time.
  for (; pos < end; ++pos) out[pos - first] = philox_uniform(seed, pos);
}

}  // namespace mg
