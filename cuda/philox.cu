// Counter-based random numbers on the GPU: the same Philox4x32-10 as tensor/philox.cpp, and the
// dropout mask of nn/dropout.cpp. The number at position i of stream `seed` depends only
// on (seed, i), so the GPU draws bit for bit the numbers the CPU draws, and a run can move between
// devices (or restore a checkpoint on the other one) without changing its random stream.
#include <cstdint>

#include "cuda/backend.h"
#include "cuda/check.h"
#include "math/formulas.h"
#include "math/philox_rounds.h"

namespace mg {

namespace {

constexpr int kThreads = 256;

// The four words of Philox block `block` (positions 4*block .. 4*block + 3) of stream `seed`.
__host__ __device__ inline void philox_block(uint64_t seed, uint64_t block, uint32_t words[4]) {
  words[0] = static_cast<uint32_t>(block);
  words[1] = static_cast<uint32_t>(block >> 32);
  words[2] = 0u;
  words[3] = 0u;
  philox4x32_rounds(words, seed);  // math/philox_rounds.h, shared with the CPU
}

// Philox block t of the draw [first, end): the positions of block (first >> 2) + t that lie in the
// draw, written to out[pos - first] as the dropout mask: keep_scale / 0 as uniform >= p.
// The first and last blocks may be partly outside the draw when first or end is not a multiple
// of 4.
// __host__ too, so that it can be checked against the CPU on the host.
__host__ __device__ inline void fill_mask_block(uint64_t seed, uint64_t first, uint64_t end,
                                                uint64_t t, float p, float keep_scale, float* out) {
  const uint64_t block = (first >> 2) + t;
  uint32_t words[4];
  philox_block(seed, block, words);
  for (int w = 0; w < 4; ++w) {
    const uint64_t pos = (block << 2) + static_cast<uint64_t>(w);
    if (pos < first || pos >= end) continue;
    const float u = philox_to_uniform(words[w]);
    out[pos - first] = dropout_mask_entry(u, p, keep_scale);  // math/formulas.h
  }
}

// Number of Philox blocks that positions [first, end) touch (end > first).
__host__ __device__ inline uint64_t block_count(uint64_t first, uint64_t end) {
  return ((end - 1) >> 2) - (first >> 2) + 1;
}

// nn/dropout.cpp dropout_mask (its uniforms are tensor/philox.cpp philox_uniforms): out [n] at
// i = keep_scale / 0 as uniform(first + i) >= p. One thread per Philox block: a block
// gives four consecutive positions, so each is computed once (the CPU's one-at-a-time
// philox_uniform would compute every block four times).
__global__ void dropout_mask_kernel(uint64_t seed, uint64_t first, int64_t n, float p,
                                    float keep_scale, float* out) {
  const uint64_t end = first + static_cast<uint64_t>(n);  // one past the last position
  const uint64_t blocks = block_count(first, end);
  for (uint64_t t = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < blocks;
       t += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    fill_mask_block(seed, first, end, t, p, keep_scale, out);
}

// Launch over the Philox blocks that positions [first, first + n) touch.
void launch_dropout_mask(uint64_t seed, uint64_t first, int64_t n, float p, float keep_scale,
                         float* out) {
  const uint64_t blocks = block_count(first, first + static_cast<uint64_t>(n));
  const uint64_t grid = (blocks + kThreads - 1) / kThreads;
  dropout_mask_kernel<<<static_cast<unsigned>(grid < 65535 ? grid : 65535), kThreads>>>(
      seed, first, n, p, keep_scale, out);
  CUDA_CHECK_LAUNCH("dropout_mask_kernel");
}

}  // namespace

void cuda_dropout_mask(uint64_t seed, uint64_t first, int64_t n, float p, float* mask) {
  if (n <= 0) return;
  // On the host, with nn/dropout.cpp's function (the caller checks p in [0, 1)).
  const float keep_scale = dropout_keep_scale(p);
  launch_dropout_mask(seed, first, n, p, keep_scale, mask);
}

}  // namespace mg
