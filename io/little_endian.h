// Little-endian bytes whatever the host's byte order: the order of both binary formats mosgrad
// reads and writes (its checkpoint and safetensors). Header-only; every function is a few lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace mg {

inline bool host_is_little_endian() {
  const uint32_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

inline void put_le32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void put_le64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// The unsigned integer in the `bytes` (at most 8) bytes at p.
inline uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint32_t get_le32(const unsigned char* p) {
  return static_cast<uint32_t>(get_le(p, 4));
}
inline uint64_t get_le64(const unsigned char* p) {
  return get_le(p, 8);
}

// n float32 values as little-endian bytes, handed to sink(const void* bytes, size_t count). On a
// little-endian host that is one call with the floats themselves; otherwise chunks of about 1 MiB,
// so a big tensor needs no second full copy.
template <typename Sink>
void write_le_floats(const float* data, size_t n, Sink&& sink) {
  if (host_is_little_endian()) {
    sink(data, n * sizeof(float));
    return;
  }
  std::string chunk;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &data[i], 4);
    put_le32(chunk, bits);
    if (chunk.size() >= (1u << 20) || i + 1 == n) {
      sink(chunk.data(), chunk.size());
      chunk.clear();
    }
  }
}

// n float32 values from the little-endian bytes at src (4n bytes) into dst.
inline void read_le_floats(const unsigned char* src, size_t n, float* dst) {
  if (host_is_little_endian()) {
    if (n > 0) std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = get_le32(src + 4 * i);
    std::memcpy(dst + i, &bits, 4);
  }
}

}  // namespace mg
