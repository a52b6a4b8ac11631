// Inverted-dropout masks (Srivastava et al. 2014): keep with probability 1-p and scale by 1/(1-p)
// so the expected activation is unchanged and evaluation needs no rescaling.
#include "autograd/kernels.h"
#include "autograd/ops.h"

namespace mg {

Tensor dropout_mask(const Shape& shape, float p, Generator& gen) {
  if (!(p >= 0.0f && p < 1.0f))
    throw std::invalid_argument("dropout_mask: p must be in [0, 1), got " + std::to_string(p));
  Tensor mask = Tensor::empty(shape);
  const int64_t n = mask.numel();
  const uint64_t first = gen.advance(static_cast<uint64_t>(n));
  const float keep_scale = 1.0f / (1.0f - p);
  float* m = mask.data();
  const uint64_t seed = gen.seed;
  // One Philox block gives 4 numbers: walk whole blocks (position first + i uses word (first+i) % 4
  // of block (first+i) / 4) instead of recomputing a block per number.
  const uint64_t first_block = first >> 2, last_block = (first + static_cast<uint64_t>(n) + 3) >> 2;
  parallel_for(static_cast<int64_t>(last_block - first_block), kElementwiseGrain / 4, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const uint64_t block = first_block + static_cast<uint64_t>(k);
      const auto words = philox4x32({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u}, seed);
      for (int w = 0; w < 4; ++w) {
        const int64_t i = static_cast<int64_t>(block * 4 + w - first);
        if (i < 0 || i >= n) continue;
        const float u = static_cast<float>(words[w] >> 8) * (1.0f / 16777216.0f);
        m[i] = u >= p ? keep_scale : 0.0f;
      }
    }
  });
  return mask;
}

}  // namespace mg
