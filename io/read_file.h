// Reading a whole file into memory: the one way mosgrad reads its checkpoints, safetensors files,
// corpora and metrics files.
#pragma once

#include <string>

namespace mg {

// The bytes of the regular file at `path` (through symlinks), in one read of its size (much faster
// than a byte iterator for a few hundred MB) and to its end. Throws std::runtime_error naming the
// file by its role, `what` ("checkpoint", "corpus file", ...):
//   "<what> <path> does not exist<missing_hint>", "... is a directory, not a file",
//   "... is a FIFO (named pipe), not a regular file: mosgrad reads only regular files" (a device,
//   a socket: io/regular_file.h; never waited on), "... cannot be opened: <why>",
//   "<what> <path>: read error: <why>".
std::string read_file(const std::string& path, const std::string& what,
                      const std::string& missing_hint = "");

}  // namespace mg
