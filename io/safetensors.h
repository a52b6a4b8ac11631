// The safetensors format (Hugging Face), so mosgrad weights open in PyTorch and vice versa:
//   >>> from safetensors.torch import load_file; load_file("model.safetensors")
// or, without the package, tools/check_safetensors.py.
//
// Layout (https://github.com/huggingface/safetensors):
//   u64 little-endian N                       the header length
//   N bytes of JSON                           {"__metadata__": {"key": "value", ...},
//                                              "name": {"dtype": "F32", "shape": [d0, ...],
//                                                       "data_offsets": [begin, end]}, ...}
//                                             padded with spaces so the data starts 8-byte aligned
//   the data                                  raw little-endian numbers; [begin, end) is relative
//   to
//                                             the start of this section, which tensors cover
//                                             exactly, without holes or overlap
// We write the same bytes as the reference implementation: compact JSON, "__metadata__" first
// (omitted when there is none), tensor entries in the given order with keys dtype, shape,
// data_offsets, tensor data contiguous in that same order. mosgrad tensors are float32, so F32 is
// the only dtype written or read.
#pragma once

#include <map>
#include <string>

#include "io/named_tensors.h"
#include "tensor/tensor.h"

namespace mg {

struct SafetensorsFile {
  NamedTensors tensors;  // in file order (by data offset); contiguous CPU leaves
  std::map<std::string, std::string> metadata;  // "__metadata__"; values are strings by the spec
};

// Writes atomically (a temporary in the same directory, then rename; see io/atomic_file.h).
// Tensors: any shape (rank 0 included), strided views and GPU tensors allowed (written from a host
// copy), names unique and not "__metadata__".
// Throws std::invalid_argument for bad input before touching the disk, std::runtime_error naming
// the file when writing fails.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads and validates a file. Throws std::runtime_error naming the file for: missing, truncated,
// header length larger than the file, bad JSON, a dtype other than F32, a shape that does not match
// its byte range, offsets out of range / overlapping / leaving holes, duplicate names.
SafetensorsFile load_safetensors(const std::string& path);

// The same checks on bytes already in memory (`path` names them in errors); the fuzz target's
// entry.
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& path);

}  // namespace mg
