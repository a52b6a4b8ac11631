// The checkpoint file: named tensors (parameters, optimizer state) and named strings (config,
// epoch, optimizer name, RNG state as text, ...) in one binary file, written atomically.
//
// Layout (all integers little-endian; the format is ours, so we keep it small and fully checked):
//   header, 28 bytes:
//     "MOSGRADCKPT\0"      12 bytes  magic: recognise the file, reject anything else
//     version              u32       kCheckpointVersion; bumped when the payload layout changes
//     payload_length       u64       bytes after the header: detects a truncated file
//     crc32                u32       CRC-32 (zlib's, = Python zlib.crc32) of the payload: detects corruption
//   payload:
//     tensor_count u32, then per tensor:
//       name_length u32, name bytes, rank u32, rank x dim u64, numel x float32
//     string_count u32, then per string:
//       key_length u32, key bytes, value_length u64, value bytes
//
// Writing goes to path + ".tmp" in the same directory, is flushed and fsync'ed, then renamed over
// `path` (rename is atomic within a filesystem). So a crash, a full disk or Ctrl-C in the middle of
// a save leaves the previous checkpoint at `path` intact; at worst a stray .tmp remains, which the
// next save overwrites and load never reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace mg {

constexpr uint32_t kCheckpointVersion = 1;

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// What load_checkpoint returns.
struct Checkpoint {
  std::string path;             // the file it was read from (for error messages)
  NamedTensors tensors;         // in the order they were saved; fresh contiguous CPU leaves
  std::map<std::string, std::string> strings;

  bool has_tensor(const std::string& name) const;
  bool has_string(const std::string& key) const { return strings.count(key) > 0; }
  // Lookups that throw std::runtime_error naming the file and the missing entry.
  const Tensor& tensor(const std::string& name) const;
  const std::string& string(const std::string& key) const;
};

// Writes the checkpoint atomically (see above). Tensors may be any shape (rank 0 included) and
// strided views; names must be unique and non-empty. Throws std::invalid_argument for bad input
// (duplicate name, undefined or non-CPU tensor) before touching the disk, std::runtime_error naming
// the file when writing fails (directory missing, disk full, ...).
void save_checkpoint(const std::string& path, const NamedTensors& tensors,
                     const std::map<std::string, std::string>& strings);

// Reads and fully verifies a checkpoint. Throws std::runtime_error naming the file and the problem:
// missing, not a mosgrad checkpoint (wrong magic), unsupported version, truncated (expected N
// bytes, found M), checksum mismatch (corrupt), malformed payload.
Checkpoint load_checkpoint(const std::string& path);

// CRC-32 (IEEE 802.3 polynomial, the one of zlib/PNG/gzip). Chain calls by passing the previous
// result as `crc`; crc32("123456789") == 0xCBF43926.
uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);

// The atomic-write mechanism, shared with io/safetensors.cpp: write, optionally seek back to patch
// a header, then commit(). Destroying it without commit() (an exception was thrown) deletes the
// temp file, so `path` never sees partial content.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);  // creates path + ".tmp"; throws when it cannot
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t n);  // throws naming the file (disk full, ...)
  void seek(uint64_t offset);              // absolute position, to patch bytes written earlier
  // Flush, fsync, close, rename over `path`, fsync the directory (so the rename itself survives a
  // power cut). After this the writer is finished.
  void commit();

  const std::string& tmp_path() const { return tmp_path_; }

 private:
  [[noreturn]] void fail(const std::string& what);
  std::string path_, tmp_path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mg
