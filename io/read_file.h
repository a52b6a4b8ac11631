// Reading a whole file into memory: the one way mosgrad reads its checkpoints, safetensors files,
// corpora and metrics files.
#pragma once

#include <string>

namespace mg {

// The bytes of the file at `path`, in one read when its size is known (much faster than a byte
// iterator for a few hundred MB) and streamed when it is not (a pipe). Throws std::runtime_error
// naming the file by its role, `what` ("checkpoint", "corpus file", ...):
//   "<what> <path> does not exist<missing_hint>", "... is a directory, not a file",
//   "... cannot be opened (permissions?)", "<what> <path>: read error".
std::string read_file(const std::string& path, const std::string& what,
                      const std::string& missing_hint = "");

}  // namespace mg
