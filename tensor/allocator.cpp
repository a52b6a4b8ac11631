#include "tensor/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace mg {

namespace {

// Bucket sizes: small requests round up to 16 floats; larger ones to one of 8 steps per power of
// two (at most 12.5% waste), so the slightly different sizes of variable-length BPTT segments share
// buckets.
size_t bucket_of(size_t n) {
  if (n <= 1024) return (n + 15) & ~size_t{15};
  int msb = 63 - __builtin_clzll(n);
  const size_t step = size_t{1} << (msb - 3);
  return (n + step - 1) / step * step;
}

// Cached bytes beyond this are returned to the system: MOSGRAD_CACHE_MB, else 4 GiB, lowered by
// set_cache_limit_bytes.
int64_t default_cache_limit_bytes() {
  const char* env = std::getenv("MOSGRAD_CACHE_MB");
  return (env ? std::atoll(env) : 4096) * int64_t{1} << 20;
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<float*>> free_lists;
  AllocatorStats stats;
  int64_t limit = default_cache_limit_bytes();
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: tensors may be freed during static destruction
  return *c;
}

}  // namespace

namespace {
// Returns every cached buffer to the system: what an allocation that fails does before it tries
// once more.
void return_cache_to_system() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [size, list] : c.free_lists)
    for (float* p : list) std::free(p);
  c.free_lists.clear();
  c.stats.cached_bytes = 0;
}
}  // namespace

float* allocate_floats(size_t n) {
  const size_t b = bucket_of(n);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.stats.live_bytes += static_cast<int64_t>(b * sizeof(float));
    c.stats.peak_live_bytes = std::max(c.stats.peak_live_bytes, c.stats.live_bytes);
    auto it = c.free_lists.find(b);
    if (it != c.free_lists.end() && !it->second.empty()) {
      float* p = it->second.back();
      it->second.pop_back();
      c.stats.cached_bytes -= static_cast<int64_t>(b * sizeof(float));
      ++c.stats.hits;
      return p;
    }
    ++c.stats.misses;
  }
  void* p = std::aligned_alloc(64, std::max<size_t>(64, (b * sizeof(float) + 63) & ~size_t{63}));
  if (!p) {
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      c.stats.live_bytes -= static_cast<int64_t>(b * sizeof(float));
    }
    return_cache_to_system();  // give the cache back and try once more before giving up
    p = std::aligned_alloc(64, std::max<size_t>(64, (b * sizeof(float) + 63) & ~size_t{63}));
    if (!p)
      throw std::runtime_error(
          "out of memory: a tensor of " + std::to_string(b * sizeof(float) / 1048576.0) +
          " MiB could not be allocated (" +
          std::to_string(allocator_stats().live_bytes / 1048576.0) + " MiB held by live tensors)");
    std::lock_guard<std::mutex> lock(c.mutex);
    c.stats.live_bytes += static_cast<int64_t>(b * sizeof(float));
  }
  return static_cast<float*>(p);
}

// Called from Storage's destructor: it must not throw, so a full free list (push_back failing to
// grow) returns the block to the system instead.
void release_floats(float* p, size_t n) noexcept {
  if (!p) return;
  const size_t b = bucket_of(n);
  const int64_t bytes = static_cast<int64_t>(b * sizeof(float));
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.stats.live_bytes -= bytes;
    if (c.stats.cached_bytes + bytes <= c.limit) {
      try {
        c.free_lists[b].push_back(p);
        c.stats.cached_bytes += bytes;
        return;
      } catch (...) {
      }
    }
  }
  std::free(p);
}

void set_cache_limit_bytes(int64_t bytes) {
  Cache& c = cache();
  std::vector<float*> freed;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.limit = std::min(default_cache_limit_bytes(), std::max<int64_t>(0, bytes));
    // Over the new limit: the largest buckets go first (the rarest sizes of variable BPTT).
    while (c.stats.cached_bytes > c.limit) {
      auto largest = c.free_lists.end();
      for (auto it = c.free_lists.begin(); it != c.free_lists.end(); ++it)
        if (!it->second.empty() && (largest == c.free_lists.end() || it->first > largest->first))
          largest = it;
      if (largest == c.free_lists.end()) break;
      freed.push_back(largest->second.back());
      largest->second.pop_back();
      c.stats.cached_bytes -= static_cast<int64_t>(largest->first * sizeof(float));
    }
  }
  for (float* p : freed) std::free(p);
}

int64_t cache_limit_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.limit;
}

AllocatorStats allocator_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

}  // namespace mg
