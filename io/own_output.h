// An output the user names (export's and import's --out FILE, graph's --out, the fixed files in
// rank's and bottleneck-demo's --out DIR) may already be there. mosgrad replaces only a file it
// wrote there before, of the kind the command writes; anything else (a user's notes, a run's
// checkpoint, a directory, a symlink) is refused before any work, so an output flag never loses a
// file mosgrad did not write.
#pragma once

#include <functional>
#include <string>

namespace mg {

// Returns when nothing is at `path`, or when a regular file is there that `ours(path)` recognises
// (an exception from `ours` counts as "not ours"). Otherwise throws std::invalid_argument
// "<command>: <flag> <path> is there and is not <kind>; ..." (kind: "a safetensors file written
// by mosgrad export", ...).
void require_own_output(const std::string& command, const std::string& flag,
                        const std::string& path, const std::string& kind,
                        const std::function<bool(const std::string& path)>& ours);

// For text outputs: the file's first line is `first_line` (a CSV's header, a DOT graph's opening).
bool first_line_is(const std::string& path, const std::string& first_line);

}  // namespace mg
