// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011, "Parallel random numbers: as
// easy as 1, 2, 3"). The i-th number of a draw depends only on (seed, offset + i), never on which
// thread computed it or in which order — so CPU and CUDA, 1 thread or 16, draw the same dropout
// masks.
#pragma once

#include <array>
#include <cstdint>

namespace mg {

// One Philox block: 4 random 32-bit words from a 128-bit counter and a 64-bit key.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, uint64_t key);

// The uniform float in [0, 1) at position `index` of the stream `seed`.
float philox_uniform(uint64_t seed, uint64_t index);

// A standard normal number from the uniforms at positions index and index + 1 (Box-Muller), in
// double: Tensor::normal and the variable BPTT length both draw theirs here.
double philox_normal(uint64_t seed, uint64_t index);

// out[i] = philox_uniform(seed, first + i) for i in [0, n), bit for bit, but eight Philox blocks at
// a time in SIMD lanes (weight drop draws ~800k numbers per step; one at a time that was 6% of it).
void philox_uniforms(uint64_t seed, uint64_t first, int64_t n, float* out);

// A stream of random numbers: just (seed, offset). Every draw of n numbers uses positions
// [offset, offset + n) and advances offset, so the whole state is two integers — trivial to
// checkpoint and restore exactly.
struct Generator {
  uint64_t seed = 0;
  uint64_t offset = 0;

  explicit Generator(uint64_t seed_ = 0) : seed(seed_) {}

  // Reserves n positions and returns the first.
  uint64_t advance(uint64_t n) {
    const uint64_t first = offset;
    offset += n;
    return first;
  }
};

}  // namespace mg
