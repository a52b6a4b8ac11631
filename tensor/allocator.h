// A caching allocator for tensor storage. A training step allocates the same few hundred buffers
// every time (activations, gradients); asking the OS for fresh zeroed pages each step cost ~25% of
// a step in page faults and memset. Freed buffers are kept in size buckets and handed out again.
// Memory is not zero-initialised: Tensor::zeros fills explicitly.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mg {

// 64-byte aligned (one cache line, one AVX-512 vector). n may be 0. Out of memory, after returning
// the cache to the system, is a std::runtime_error naming the size.
float* allocate_floats(size_t n);
// Never throws (it runs in destructors).
void release_floats(float* p, size_t n) noexcept;

struct AllocatorStats {
  int64_t cached_bytes = 0;  // held in the cache, ready for reuse
  int64_t live_bytes = 0;    // handed out and not yet released
  int64_t peak_live_bytes = 0;
  int64_t hits = 0, misses = 0;
};
AllocatorStats allocator_stats();

// The cache keeps freed buffers up to a limit: MOSGRAD_CACHE_MB, else 4 GiB. Variable-length BPTT
// fills it with buffers of each segment length (a run's RSS can reach 3-4 times its live tensors'
// peak), so a trainer lowers it to what the machine can spare beside its run; never above the
// default. Buffers cached beyond a lowered limit go back to the system at once.
void set_cache_limit_bytes(int64_t bytes);
int64_t cache_limit_bytes();

}  // namespace mg
