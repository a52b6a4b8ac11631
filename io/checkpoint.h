// The checkpoint file: named tensors (parameters, optimizer state) and named strings (config,
// epoch, optimizer name, RNG state as text, ...) in one binary file, written atomically.
//
// Layout (all integers little-endian; the format is ours, so we keep it small and fully checked):
//   header, 28 bytes:
//     "MOSGRADCKPT\0"      12 bytes  magic: recognise the file, reject anything else
//     version              u32       kCheckpointVersion; bumped when the payload layout changes
//     payload_length       u64       bytes after the header: detects a truncated file
//     crc32                u32       CRC-32 (io/crc32.h) of the payload: detects corruption
//   payload:
//     tensor_count u32, then per tensor:
//       name_length u32, name bytes, rank u32, rank x dim u64, numel x float32
//     string_count u32, then per string:
//       key_length u32, key bytes, value_length u64, value bytes
//
// Writing is atomic (io/atomic_file.h): a crash, a full disk or Ctrl-C in the middle of a save
// leaves the previous checkpoint at `path` intact; at worst a temporary remains beside it, which
// the next save removes and load never reads.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "io/named_tensors.h"
#include "tensor/tensor.h"

namespace mg {

constexpr uint32_t kCheckpointVersion = 1;

// What load_checkpoint returns.
struct Checkpoint {
  std::string path;      // the file it was read from (for error messages)
  NamedTensors tensors;  // in the order they were saved; fresh contiguous CPU leaves
  std::map<std::string, std::string> strings;

  bool has_tensor(const std::string& name) const;
  bool has_string(const std::string& key) const { return strings.count(key) > 0; }
  // Lookups that throw std::runtime_error naming the file and the missing entry.
  const Tensor& tensor(const std::string& name) const;
  const std::string& string(const std::string& key) const;
};

// Writes the checkpoint atomically (see above). Tensors may be any shape (rank 0 included) and
// strided views, on the CPU or the GPU (written from a host copy); names must be unique and
// non-empty. Throws std::invalid_argument for bad input (empty or duplicate name, undefined tensor)
// before touching the disk, std::runtime_error naming the file when writing fails (directory
// missing, disk full, ...).
void save_checkpoint(const std::string& path, const NamedTensors& tensors,
                     const std::map<std::string, std::string>& strings);

// Reads and fully verifies a checkpoint. Throws std::runtime_error naming the file and the problem:
// missing, not a mosgrad checkpoint (wrong magic), unsupported version, truncated (expected N
// bytes, found M), checksum mismatch (corrupt), malformed payload.
Checkpoint load_checkpoint(const std::string& path);
// Whether `bytes` begin with a checkpoint's magic: for readers of other formats, to say what a
// file is when it is a checkpoint given in the wrong place.
bool is_checkpoint(const std::string& bytes);

// The same checks on bytes already in memory (`path` names them in errors): what load_checkpoint
// runs on the file's contents, and what the fuzz target (tests/fuzz/) feeds with arbitrary bytes.
Checkpoint parse_checkpoint(const std::string& bytes, const std::string& path);

}  // namespace mg
