// CRC-32, the checksum of the checkpoint format (io/checkpoint.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mg {

// CRC-32 (IEEE 802.3 polynomial, the one of zlib/PNG/gzip; = Python's zlib.crc32). Chain calls by
// passing the previous result as `crc`; crc32("123456789") == 0xCBF43926.
uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);

}  // namespace mg
