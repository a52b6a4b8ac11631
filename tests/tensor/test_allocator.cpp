// The caching allocator behind every CPU tensor (tensor/allocator.h): alignment, reuse of freed
// buffers, and the accounting that bench_train's peak_tensor_mb reads.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tensor/allocator.h"

using namespace mg;

namespace {
uintptr_t address(const float* p) {
  return reinterpret_cast<uintptr_t>(p);
}
}  // namespace

TEST(Allocator, BuffersAreCacheLineAligned) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{17}, size_t{1000}, size_t{100000}}) {
    float* p = allocate_floats(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_EQ(address(p) % 64, 0u) << n << " floats";
    release_floats(p, n);
  }
}

// A released buffer goes back to its size bucket and is handed out again for a request of that
// bucket: a training step then finds every buffer it needs without asking the system.
TEST(Allocator, FreedBuffersAreReusedAndCounted) {
  // The cache is the process's, shared with every test in run_tests: this relies on a free list
  // handing back the buffer released last, and on the cache being under its limit
  // (MOSGRAD_CACHE_MB, 4 GiB by default), as it is for the suite.
  const size_t n = 300000;
  float* p = allocate_floats(n);
  const AllocatorStats held = allocator_stats();
  release_floats(p, n);
  const AllocatorStats released = allocator_stats();
  EXPECT_LT(released.live_bytes, held.live_bytes);
  EXPECT_GT(released.cached_bytes, held.cached_bytes);
  float* q = allocate_floats(n - 7);  // the same bucket
  const AllocatorStats again = allocator_stats();
  EXPECT_EQ(q, p);
  EXPECT_EQ(again.hits, released.hits + 1);
  EXPECT_EQ(again.live_bytes, held.live_bytes);
  EXPECT_GE(again.peak_live_bytes, again.live_bytes);
  release_floats(q, n - 7);
}

// A trainer lowers the cache's limit to what the machine can spare (lm/memory_estimate.h): what
// was cached beyond it goes back to the system at once, later releases stay under it, and the
// limit never rises above the default.
TEST(Allocator, ALoweredLimitGivesTheCacheBackAndHoldsIt) {
  const int64_t before = cache_limit_bytes();
  std::vector<float*> held;
  const size_t n = 1 << 20;  // 4 MiB each
  for (int i = 0; i < 8; ++i) held.push_back(allocate_floats(n + static_cast<size_t>(i) * n / 4));
  for (int i = 0; i < 8; ++i) release_floats(held[i], n + static_cast<size_t>(i) * n / 4);
  ASSERT_GE(allocator_stats().cached_bytes, int64_t{32} << 20);
  set_cache_limit_bytes(int64_t{8} << 20);
  EXPECT_LE(allocator_stats().cached_bytes, int64_t{8} << 20);
  EXPECT_EQ(cache_limit_bytes(), int64_t{8} << 20);
  float* p = allocate_floats(3 * n);
  release_floats(p, 3 * n);  // 12 MiB: over the limit, so not kept
  EXPECT_LE(allocator_stats().cached_bytes, int64_t{8} << 20);
  set_cache_limit_bytes(INT64_MAX);
  EXPECT_GE(cache_limit_bytes(), before);
  EXPECT_LE(cache_limit_bytes(), std::getenv("MOSGRAD_CACHE_MB") ? INT64_MAX : int64_t{4} << 30)
      << "never above MOSGRAD_CACHE_MB or 4 GiB";
  set_cache_limit_bytes(before);
}
